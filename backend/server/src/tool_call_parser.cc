#include "cutline/server/tool_call_parser.h"

#include <random>
#include <utility>

#include <simdjson.h>

namespace cutline::server {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// How many bytes at the end of `s` must wait: white space, then a proper prefix of "<tool_call>",
// either of which may turn out to come right before a block.
size_t undecided_tail(std::string_view s) {
  size_t keep = 0;
  for (size_t k = std::min(s.size(), kOpen.size() - 1); k > 0; --k) {
    if (s.ends_with(kOpen.substr(0, k))) {
      keep = k;
      break;
    }
  }
  while (keep < s.size() && is_space(s[s.size() - keep - 1])) ++keep;
  return keep;
}

// Whether `json` stops inside a string or an open object/array: then a "</tool_call>" after it
// was part of the arguments' text, and the block goes on to the next one.
bool unfinished_json(std::string_view json) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : json) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return in_string || depth > 0;
}

}  // namespace

std::function<std::string()> random_tool_call_ids() {
  return [rng = std::mt19937_64(std::random_device{}())]() mutable {
    constexpr std::string_view kAlphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) id.push_back(kAlphabet[rng() % kAlphabet.size()]);
    return id;
  };
}

bool parse_tool_call_json(std::string_view json, std::string& name, std::string& arguments) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  simdjson::dom::object call;
  if (parser.parse(padded).get_object().get(call) != simdjson::SUCCESS) return false;
  std::string_view n;
  if (call["name"].get_string().get(n) != simdjson::SUCCESS || n.empty()) return false;
  simdjson::dom::object args;
  if (call["arguments"].get_object().get(args) != simdjson::SUCCESS) return false;
  name = n;
  arguments = simdjson::minify(args);
  return true;
}

ToolCallParser::ToolCallParser(std::string forced_prefix, bool parallel,
                               std::function<std::string()> make_id)
    : parallel_(parallel), make_id_(std::move(make_id)) {
  if (!forced_prefix.empty()) {
    std::string ignored;
    std::vector<ParsedToolCall> none;
    push(forced_prefix, ignored, none);
  }
}

void ToolCallParser::push(std::string_view text, std::string& content,
                          std::vector<ParsedToolCall>& calls) {
  held_.append(text);
  for (;;) {
    if (in_block_) {
      size_t close = held_.find(kClose);
      while (close != std::string::npos &&
             unfinished_json(std::string_view(held_).substr(0, close)))
        close = held_.find(kClose, close + 1);
      if (close == std::string::npos) return;
      const std::string block = held_.substr(0, close);
      held_.erase(0, close + kClose.size());
      in_block_ = false;
      close_block(block, content, calls);
      continue;
    }
    if (after_call_) {
      size_t n = 0;
      while (n < held_.size() && is_space(held_[n])) ++n;
      held_.erase(0, n);
      if (held_.empty()) return;
    }
    const size_t open = held_.find(kOpen);
    if (open != std::string::npos) {
      // White space right before a block waits: dropped before a call, kept before text.
      size_t end = open;
      while (end > 0 && is_space(held_[end - 1])) --end;
      content.append(held_, 0, end);
      block_space_.assign(held_, end, open - end);
      held_.erase(0, open + kOpen.size());
      in_block_ = true;
      continue;
    }
    const size_t keep = undecided_tail(held_);
    if (keep < held_.size()) after_call_ = false;
    content.append(held_, 0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return;
  }
}

void ToolCallParser::close_block(std::string_view block, std::string& content,
                                 std::vector<ParsedToolCall>& calls) {
  ParsedToolCall call;
  if (!parse_tool_call_json(block, call.name, call.arguments)) {
    content.append(block_space_).append(kOpen).append(block).append(kClose);
    block_space_.clear();
    after_call_ = false;
    return;
  }
  block_space_.clear();
  after_call_ = true;
  if (!parallel_ && next_index_ > 0) return;
  call.index = next_index_++;
  call.id = make_id_();
  calls.push_back(std::move(call));
}

void ToolCallParser::finish(std::string& content) {
  if (in_block_) {
    content.append(block_space_).append(kOpen);
    block_space_.clear();
    in_block_ = false;
  }
  if (!after_call_ || held_.find_first_not_of(" \n\r\t") != std::string::npos)
    content.append(held_);
  held_.clear();
}

}  // namespace cutline::server
