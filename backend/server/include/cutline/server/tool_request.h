#pragma once
// The tool-calling fields of a /v1/chat/completions request, read from its body: `tools`
// (function tools), `tool_choice`, `parallel_tool_calls` and the `tool_calls` of assistant
// messages. The tool definitions and the calls' arguments are kept as the chat template prints
// them (template_json.h); tool messages need nothing besides their role and content.
//
// Who calls it: build_add_request (completion_request.h), which renders the prompt with them and
// tells the CompletionWriter how to read tool calls out of the model's text (ToolCallOptions).

#include <string>
#include <string_view>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/model/chat_template.h"

namespace cutline::server {

enum class ToolChoice {
  kAuto,      // the model decides (the default)
  kNone,      // no tool calls: the prompt is rendered without the tools, the output is not parsed
  kRequired,  // at least one call: the generation starts with "<tool_call>\n"
  kFunction,  // that function: the generation starts with the call's opening and its name
};

struct ToolRequest {
  std::vector<std::string> tools;  // each definition as the template's tojson prints it
  std::vector<model::ChatToolSignature> signatures;  // the same as Hermes' template describes them
  std::vector<std::string> names;                    // their function names, in order
  ToolChoice choice = ToolChoice::kAuto;
  std::string function;  // kFunction: the function's name
  bool parallel_tool_calls = true;
  // The tool calls of messages[i] (empty for messages without), one entry per message.
  std::vector<std::vector<model::ChatToolCall>> message_tool_calls;

  // The text the generation is forced to start with (empty for kAuto and kNone).
  std::string forced_prefix() const;
};

// Reads the fields from `body` (a request the proto parser accepted) with `message_count`
// messages. kBadRequest naming the field in `param` for what the fields say wrongly (a tool that
// is not a function, an unknown tool_choice, a named function that is not among the tools,
// arguments that are not JSON).
Result<ToolRequest> parse_tool_request(std::string_view body, size_t message_count,
                                       std::string& param);

// A function tool's definition (`{"name", "description", "parameters"}`, the `function` of a chat
// tool or a Responses API tool) as Hermes' tool-use template describes it.
Result<model::ChatToolSignature> tool_signature_of(std::string_view function_json);

// What the writer does with the model's text (completion_writer.h).
struct ToolCallOptions {
  bool parse = false;         // read <tool_call> blocks out of the output
  std::string forced_prefix;  // what the prompt already opened (ToolRequest::forced_prefix)
  bool parallel = true;       // false: only the first call is returned
};

}  // namespace cutline::server
