#pragma once
// The Responses API's tool-calling fields, read into the same shapes chat completions use:
//   tools          [{"type": "function", "name", "description"?, "parameters"?, "strict"?}],
//                  printed for the chat template as chat completions' {"type": "function",
//                  "function": {"name", "description", "parameters"}} (as vLLM converts them)
//   tool_choice    "auto" | "none" | "required" | {"type": "function", "name"}
//   parallel_tool_calls
//   input items    {"type": "function_call", "call_id", "name", "arguments"} (an assistant
//                  turn's tool call; consecutive calls join one turn) and
//                  {"type": "function_call_output", "call_id", "output"} (a tool message)
//
// Who calls it: parse_responses_request (responses_request.h).

#include <string>
#include <vector>

#include <simdjson.h>

#include "cutline/base/result.h"
#include "cutline/model/chat_template.h"
#include "cutline/server/completion_request.h"
#include "cutline/server/tool_request.h"

namespace cutline::server {

// tools, tool_choice and parallel_tool_calls of the request object.
Status read_responses_tools(simdjson::dom::object request, ToolRequest& out,
                            RequestErrorDetail& detail);

// One input item of type function_call or function_call_output (`where`: "input[3]"), added to
// `messages`.
Status read_function_call_item(simdjson::dom::object item, std::string_view type,
                               const std::string& where, std::vector<model::ChatMessage>& messages,
                               RequestErrorDetail& detail);

}  // namespace cutline::server
