#include "cutline/proto/wire/completion_assembler.h"

#include <simdjson.h>

#include <algorithm>
#include <cassert>

namespace cutline::proto {
namespace {

using simdjson::SUCCESS;
namespace dom = simdjson::dom;

Status malformed(std::string_view what) {
  return make_error(ErrorKind::kUpstream, "upstream chunk: " + std::string(what));
}

// Appends the string at `key` of `obj` when it is a string; true when it was.
bool append_string(const dom::object& obj, std::string_view key, std::string& out) {
  std::string_view s;
  if (obj.at_key(key).get_string().get(s) != SUCCESS) return false;
  out.append(s);
  return true;
}

// Sets `out` from the string at `key` when `out` is still empty and the value is a string.
void set_once(const dom::object& obj, std::string_view key, std::string& out) {
  std::string_view s;
  if (out.empty() && obj.at_key(key).get_string().get(s) == SUCCESS) out.assign(s);
}

// Each choice's index ("index" absent: 0), checked before anything is merged, so that a
// malformed chunk changes nothing.
Status choice_indexes(const dom::array& choices, std::vector<int64_t>& indexes) {
  indexes.clear();
  for (dom::element c : choices) {
    dom::object co;
    if (c.get_object().get(co) != SUCCESS) return malformed("choices[] must be objects");
    int64_t index = 0;
    dom::element value;
    if (co.at_key("index").get(value) == SUCCESS && value.get_int64().get(index) != SUCCESS) {
      return malformed("choices[].index must be an integer");
    }
    if (index < 0) return malformed("choices[].index must not be negative");
    indexes.push_back(index);
  }
  return {};
}

// A delta's tool_calls into the choice's calls, by their index (position when absent).
void merge_tool_calls(const dom::array& calls, AssembledChoice& out) {
  int64_t position = 0;
  for (dom::element call : calls) {
    dom::object tc;
    if (call.get_object().get(tc) != SUCCESS) continue;
    int64_t tc_index = position++;
    int64_t given = 0;
    if (tc.at_key("index").get_int64().get(given) == SUCCESS) tc_index = given;
    auto it = std::find_if(out.tool_calls.begin(), out.tool_calls.end(),
                           [&](const AssembledToolCall& t) { return t.index == tc_index; });
    if (it == out.tool_calls.end()) {
      AssembledToolCall fresh;
      fresh.index = tc_index;
      it = std::lower_bound(out.tool_calls.begin(), out.tool_calls.end(), tc_index,
                            [](const AssembledToolCall& t, int64_t i) { return t.index < i; });
      it = out.tool_calls.insert(it, std::move(fresh));
    }
    set_once(tc, "id", it->id);
    set_once(tc, "type", it->type);
    dom::object fn;
    if (tc.at_key("function").get_object().get(fn) == SUCCESS) {
      set_once(fn, "name", it->name);
      append_string(fn, "arguments", it->arguments);
    }
  }
}

// One choice of a chunk into what is assembled for its index.
void merge_choice(const dom::object& co, AssembledChoice& out) {
  std::string_view finish;
  if (co.at_key("finish_reason").get_string().get(finish) == SUCCESS) {
    out.finish_reason.assign(finish);
  }
  // Completions: "text".
  if (append_string(co, "text", out.content)) out.has_content = true;
  dom::object delta;
  if (co.at_key("delta").get_object().get(delta) == SUCCESS ||
      // Some servers send whole messages in the last chunk.
      co.at_key("message").get_object().get(delta) == SUCCESS) {
    set_once(delta, "role", out.role);
    if (append_string(delta, "content", out.content)) out.has_content = true;
    append_string(delta, "reasoning_content", out.reasoning_content);
    if (append_string(delta, "refusal", out.refusal)) out.has_refusal = true;
    dom::object fc;
    if (delta.at_key("function_call").get_object().get(fc) == SUCCESS) {
      out.has_function_call = true;
      set_once(fc, "name", out.function_call_name);
      append_string(fc, "arguments", out.function_call_arguments);
    }
    dom::array calls;
    if (delta.at_key("tool_calls").get_array().get(calls) == SUCCESS) merge_tool_calls(calls, out);
  } else {
    return;  // neither delta nor message: nothing more in this choice
  }
  dom::object logprobs;
  dom::array items;
  if (co.at_key("logprobs").get_object().get(logprobs) == SUCCESS &&
      logprobs.at_key("content").get_array().get(items) == SUCCESS) {
    for (dom::element item : items) {
      if (!out.logprobs_items.empty()) out.logprobs_items.push_back(',');
      out.logprobs_items.append(simdjson::minify(item));
    }
  }
}

}  // namespace

CompletionAssembler::CompletionAssembler() = default;
CompletionAssembler::~CompletionAssembler() = default;

AssembledChoice& CompletionAssembler::choice(int64_t index) {
  auto it = std::lower_bound(choices_.begin(), choices_.end(), index,
                             [](const AssembledChoice& c, int64_t i) { return c.index < i; });
  if (it != choices_.end() && it->index == index) return *it;
  AssembledChoice fresh;
  fresh.index = index;
  return *choices_.insert(it, std::move(fresh));
}

Status CompletionAssembler::add(std::string_view chunk_json) {
  dom::element doc;
  // One parser per thread, its buffers kept from chunk to chunk and answer to answer: nothing
  // of a parsed chunk outlives add().
  thread_local dom::parser parser;
  if (parser.parse(chunk_json.data(), chunk_json.size()).get(doc) != SUCCESS) {
    return malformed("not valid JSON");
  }
  dom::object obj;
  if (doc.get_object().get(obj) != SUCCESS) return malformed("not a JSON object");
  dom::array choices;
  const auto choices_error = obj.at_key("choices").get_array().get(choices);
  if (choices_error == simdjson::NO_SUCH_FIELD) return {};  // e.g. an error or usage-only chunk
  if (choices_error != SUCCESS) {
    dom::element value;  // "choices": null is a chunk without choices too
    if (obj.at_key("choices").get(value) == SUCCESS && value.is_null()) return {};
    return malformed("choices must be an array");
  }
  thread_local std::vector<int64_t> indexes;
  if (Status st = choice_indexes(choices, indexes); !st.ok()) return st;
  size_t position = 0;
  for (dom::element c : choices) {
    merge_choice(c.get_object().value_unsafe(), choice(indexes[position++]));
  }
  return {};
}

Status CompletionAssembler::add(const ParsedChunk& chunk) {
  assert(chunk.choices_plain);  // a plain choice's index is not negative
  for (const ChunkChoice& c : chunk.choices) {
    AssembledChoice& out = choice(c.index);
    if (c.has_finish_reason) out.finish_reason.assign(c.finish_reason);
    if (c.has_content) {
      out.content.append(c.content);
      out.has_content = true;
    }
    if (out.role.empty()) out.role.assign(c.role);
  }
  return {};
}

}  // namespace cutline::proto
