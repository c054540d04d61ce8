// Hermes 2 Pro / Hermes 3 tool calling (chat_builder.h).
#include "chat_builder.h"

namespace cutline::model::detail {

// Hermes 2 Pro / Hermes 3 with tools, as their `tool_use` template writes it, quirks included:
// the parameter lines of a description follow each other without a newline, the object around
// each tool is left open, and a run of tool results ends with <|im_end|> and no newline.
void render_hermes_tools(std::span<const ChatMessage> messages, const ChatRenderOptions& o,
                         Builder& b) {
  if (!o.bos_token.empty()) b.special(o.bos_token);
  b.special("<|im_start|>");
  std::string text =
      "system\nYou are a function calling AI model. You are provided with function signatures "
      "within <tools></tools> XML tags. You may call one or more functions to assist with the "
      "user query. Don't make assumptions about what values to plug into functions. Here are the "
      "available tools: <tools> ";
  for (size_t t = 0; t < o.tool_signatures.size(); ++t) {
    const ChatToolSignature& tool = o.tool_signatures[t];
    text += "{\"type\": \"function\", \"function\": {\"name\": \"" + tool.name +
            "\", \"description\": \"" + tool.name + "(";
    for (size_t i = 0; i < tool.params.size(); ++i) {
      if (i > 0) text += ", ";
      text += tool.params[i].name + ": " + tool.params[i].python_type;
    }
    text += ")";
    if (tool.has_return) text += " -> " + tool.return_type;
    text += " - " + tool.description + "\n\n";
    for (size_t i = 0; i < tool.params.size(); ++i) {
      if (i == 0) text += "    Args:\n";
      const ChatToolSignature::Param& p = tool.params[i];
      text += "        " + p.name + "(" + p.python_type + "): " + p.description;
    }
    if (tool.has_return && !tool.return_description.empty())
      text += "\n    Returns:\n        " + tool.return_description;
    text += "\", \"parameters\": " + tool.parameters_json + "}";
    if (t + 1 < o.tool_signatures.size()) text += "\n";
  }
  text +=
      " </tools>Use the following pydantic model json schema for each tool call you will make: "
      "{\"properties\": {\"name\": {\"title\": \"Name\", \"type\": \"string\"}, "
      "\"arguments\": {\"title\": \"Arguments\", \"type\": \"object\"}}, \"required\": "
      "[\"name\", \"arguments\"], \"title\": \"FunctionCall\", \"type\": \"object\"}}\nFor "
      "each function call return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags as follows:\n<tool_call>\n{\"name\": <function-name>, "
      "\"arguments\": <args-dict>}\n</tool_call>";
  b.text(text);
  b.special("<|im_end|>");
  b.text("\n");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool last = i + 1 == messages.size();
    if (m.role == "tool") {
      if (i > 0 && messages[i - 1].role != "tool") {
        b.special("<|im_start|>");
        b.text("tool\n");
      }
      b.text("<tool_response>\n" + m.content +
             (last ? "\n</tool_response>" : "\n</tool_response>\n"));
      if (last || messages[i + 1].role != "tool") b.special("<|im_end|>");
      continue;
    }
    b.special("<|im_start|>");
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      b.text("assistant" + tool_calls_text(m.tool_calls, true));  // the content is left out
    } else {
      b.text(m.role + "\n" + m.content);
    }
    b.special("<|im_end|>");
    b.text("\n");
  }
  if (o.add_generation_prompt) {
    b.special("<|im_start|>");
    b.text("assistant\n");
  }
}

}  // namespace cutline::model::detail
