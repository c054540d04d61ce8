#pragma once
// ToolCallParser: reads Hermes-style tool calls out of a model's text as it streams, the way
// Qwen2.5 and Qwen3 write them:
//
//   Let me check.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
//
// Text outside the blocks is content and passes through at once, except a tail that could be the
// start of "<tool_call>" (held until the next text says). A block is held back whole until its
// "</tool_call>" (one inside a JSON string of the arguments does not close it); then it becomes a
// call {id, name, arguments} when its JSON is an object with a string "name" and an "arguments"
// object (its JSON text, minified, is the OpenAI arguments string), or, malformed, its whole text
// goes out as content, nothing lost. A block still open when the output ends is content too.
// White space right before, between and after calls is dropped.
//
// Who calls it: CompletionWriter (streaming: per text event; non-streaming: over the whole text).
// Not thread-safe; one per response.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace cutline::server {

struct ParsedToolCall {
  int64_t index = 0;  // position among the response's calls (OpenAI's tool_calls[].index)
  std::string id;     // "call_..."
  std::string name;
  std::string arguments;  // a JSON object's text
};

class ToolCallParser {
 public:
  // `forced_prefix`: text the prompt already opened the answer with (ToolRequest::forced_prefix),
  // read before the model's own text. `parallel` false keeps only the first call (later blocks
  // are dropped). `make_id` gives each call its id.
  ToolCallParser(std::string forced_prefix, bool parallel, std::function<std::string()> make_id);

  // Feeds model text: appends what is now known to be content to `content` and the calls that
  // closed to `calls`.
  void push(std::string_view text, std::string& content, std::vector<ParsedToolCall>& calls);
  // The output ended: whatever is held (a partial "<tool_call>", an unclosed block) is content.
  void finish(std::string& content);

  // How many calls were returned so far.
  int64_t call_count() const { return next_index_; }

 private:
  void close_block(std::string_view block, std::string& content,
                   std::vector<ParsedToolCall>& calls);

  bool in_block_ = false;
  bool after_call_ = false;  // a block closed: whitespace before the next text is dropped
  std::string held_;         // text not yet decided (a block, or a possible "<tool_call>" start)
  std::string block_space_;  // the white space before the open block (content if it fails)
  bool parallel_ = true;
  std::function<std::string()> make_id_;
  int64_t next_index_ = 0;
};

// Call ids as OpenAI's look: "call_" and 24 random letters and digits (seeded per response).
std::function<std::string()> random_tool_call_ids();

// Parses one block's inside ({"name": ..., "arguments": {...}}); false when malformed.
bool parse_tool_call_json(std::string_view json, std::string& name, std::string& arguments);

}  // namespace cutline::server
