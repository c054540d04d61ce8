#include "cutline/server/responses_tools.h"

#include <algorithm>
#include <utility>

#include "cutline/server/template_json.h"

namespace cutline::server {

namespace {

using simdjson::SUCCESS;
namespace dom = simdjson::dom;

Error refuse(RequestErrorDetail& detail, std::string param, std::string message) {
  detail.param = std::move(param);
  detail.code.clear();
  return make_error(ErrorKind::kBadRequest, std::move(message));
}

// {"type": "function", "function": {name, description?, parameters?}} as the template prints it.
Result<std::string> chat_tool_json(dom::object tool) {
  std::string json = "{\"type\":\"function\",\"function\":{";
  bool first = true;
  for (const char* key : {"name", "description", "parameters"}) {
    dom::element value;
    if (tool.at_key(key).get(value) != SUCCESS || value.is_null()) continue;
    if (!first) json += ",";
    first = false;
    json += "\"" + std::string(key) + "\":" + simdjson::minify(value);
  }
  json += "}}";
  return template_tojson(json);
}

Status read_tool_choice(dom::object request, ToolRequest& out, RequestErrorDetail& detail) {
  dom::element value;
  if (request.at_key("tool_choice").get(value) != SUCCESS || value.is_null()) return {};
  std::string_view s;
  if (value.get_string().get(s) == SUCCESS && (s == "auto" || s == "none" || s == "required")) {
    out.choice = s == "auto"   ? ToolChoice::kAuto
                 : s == "none" ? ToolChoice::kNone
                               : ToolChoice::kRequired;
    return {};
  }
  std::string_view type, name;
  if (value.at_key("type").get_string().get(type) != SUCCESS || type != "function" ||
      value.at_key("name").get_string().get(name) != SUCCESS)
    return refuse(detail, "tool_choice",
                  "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": "
                  "\"function\", \"name\": ...}");
  out.choice = ToolChoice::kFunction;
  out.function = name;
  return {};
}

}  // namespace

Status read_responses_tools(dom::object request, ToolRequest& out, RequestErrorDetail& detail) {
  dom::element value;
  if (request.at_key("tools").get(value) == SUCCESS && !value.is_null()) {
    dom::array tools;
    if (value.get_array().get(tools) != SUCCESS)
      return refuse(detail, "tools", "tools must be an array of function tools");
    size_t i = 0;
    for (dom::element tool : tools) {
      const std::string where = "tools[" + std::to_string(i++) + "]";
      std::string_view type, name;
      dom::object object;
      if (tool.get_object().get(object) != SUCCESS ||
          object.at_key("type").get_string().get(type) != SUCCESS || type != "function")
        return refuse(detail, where + ".type",
                      where +
                          " must be {\"type\": \"function\", \"name\": ...}; only function "
                          "tools are supported");
      if (object.at_key("name").get_string().get(name) != SUCCESS || name.empty())
        return refuse(detail, where + ".name", where + ".name must be a string");
      auto json = chat_tool_json(object);
      if (!json.ok()) return refuse(detail, where, where + " is " + json.error().message);
      auto signature = tool_signature_of(simdjson::minify(object));
      if (!signature.ok()) return refuse(detail, where, where + " is " + signature.error().message);
      out.tools.push_back(std::move(json).value());
      out.signatures.push_back(std::move(signature).value());
      out.names.emplace_back(name);
    }
  }
  if (auto s = read_tool_choice(request, out, detail); !s) return s;
  bool parallel = true;
  if (request.at_key("parallel_tool_calls").get_bool().get(parallel) == SUCCESS)
    out.parallel_tool_calls = parallel;
  if (out.choice == ToolChoice::kRequired && out.tools.empty())
    return refuse(detail, "tool_choice", "tool_choice \"required\" needs tools");
  if (out.choice == ToolChoice::kFunction &&
      std::find(out.names.begin(), out.names.end(), out.function) == out.names.end())
    return refuse(
        detail, "tool_choice",
        "tool_choice names function '" + out.function + "', which is not among the tools");
  return {};
}

Status read_function_call_item(dom::object item, std::string_view type, const std::string& where,
                               std::vector<model::ChatMessage>& messages,
                               RequestErrorDetail& detail) {
  if (type == "function_call_output") {
    std::string_view output;
    if (item.at_key("output").get_string().get(output) != SUCCESS)
      return refuse(detail, "input", where + ".output must be a string");
    messages.push_back({"tool", std::string(output)});
    return {};
  }
  std::string_view name, arguments;
  if (item.at_key("name").get_string().get(name) != SUCCESS)
    return refuse(detail, "input", where + ".name must be a string");
  if (item.at_key("arguments").get_string().get(arguments) != SUCCESS)
    return refuse(detail, "input", where + ".arguments must be a string");
  auto args = template_tojson(arguments);
  if (!args.ok()) return refuse(detail, "input", where + ".arguments is " + args.error().message);
  // A call joins the assistant turn before it (its text, or earlier calls).
  if (messages.empty() || messages.back().role != "assistant")
    messages.push_back({"assistant", std::string()});
  messages.back().tool_calls.push_back({std::string(name), std::move(args).value()});
  return {};
}

}  // namespace cutline::server
