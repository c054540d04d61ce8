#include "cutline/server/tool_request.h"

#include <algorithm>
#include <utility>

#include <simdjson.h>

#include "cutline/server/template_json.h"

namespace cutline::server {

namespace {

using simdjson::SUCCESS;
namespace dom = simdjson::dom;

Error bad(std::string& param, std::string field, std::string message) {
  param = std::move(field);
  return make_error(ErrorKind::kBadRequest, std::move(message));
}

// A JSON schema as Hermes' tool-use template names its Python type (its json_to_python_type
// macro, as Jinja evaluates it): "str", "float", "int", "bool"; "dict", or "dict[str, T]" with
// additionalProperties; "Union[A,B]" for a list of types. Two outcomes of the macro look odd but
// are what the model was trained on: an array is "list[Union[]]" (the macro reads the schema's
// items through Jinja's `items` filter, which yields no `type`), and a schema without a type is
// "Union[]". A type name the macro does not know (e.g. "null") makes it recurse without end;
// it is "Any" here.
std::string_view python_type_name(std::string_view name) {
  if (name == "string") return "str";
  if (name == "number") return "float";
  if (name == "integer") return "int";
  if (name == "boolean") return "bool";
  if (name == "array") return "list[Union[]]";
  if (name == "object") return "dict";
  return "Any";
}

std::string python_type(dom::element spec) {
  dom::element type;
  if (!spec.is_object() || spec.at_key("type").get(type) != SUCCESS) return "Union[]";
  std::string_view name;
  if (type.get_string().get(name) == SUCCESS) {
    dom::element extra;
    if (name == "object" && spec.at_key("additionalProperties").get(extra) == SUCCESS)
      return "dict[str, " + python_type(extra) + "]";
    return std::string(python_type_name(name));
  }
  dom::array names;
  if (type.get_array().get(names) != SUCCESS) return "Any";
  std::string out = "Union[";
  for (dom::element t : names) {
    if (out.size() > 6) out += ",";
    std::string_view n;
    out += t.get_string().get(n) == SUCCESS ? python_type_name(n) : "Any";
  }
  return out + "]";
}

std::string string_or_empty(dom::element object, std::string_view key) {
  std::string_view s;
  if (object.at_key(key).get_string().get(s) != SUCCESS) return {};
  return std::string(s);
}

std::string trimmed(std::string s) {
  auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  size_t b = 0, e = s.size();
  while (b < e && space(s[b])) ++b;
  while (e > b && space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// The tool as Hermes' template describes it (chat_template.h, ChatToolSignature).
Result<model::ChatToolSignature> tool_signature(dom::element function) {
  model::ChatToolSignature sig;
  sig.name = string_or_empty(function, "name");
  sig.description = string_or_empty(function, "description");
  dom::element parameters;
  dom::object properties;
  sig.parameters_json = "{}";
  if (function.at_key("parameters").get(parameters) == SUCCESS &&
      parameters.at_key("properties").get_object().get(properties) == SUCCESS &&
      properties.size() > 0) {
    for (dom::key_value_pair field : properties) {
      sig.params.push_back({std::string(field.key), python_type(field.value),
                            trimmed(string_or_empty(field.value, "description"))});
    }
    auto json = template_tojson(simdjson::minify(parameters));
    if (!json.ok()) return std::move(json).error();
    sig.parameters_json = std::move(json).value();
  }
  dom::element ret;
  if (function.at_key("return").get(ret) == SUCCESS) {
    sig.has_return = true;
    sig.return_type = python_type(ret);
    sig.return_description = string_or_empty(ret, "description");
  }
  return sig;
}

Status read_tools(dom::object root, ToolRequest& out, std::string& param) {
  dom::element value;
  if (root.at_key("tools").get(value) != SUCCESS || value.is_null()) return {};
  dom::array tools;
  if (value.get_array().get(tools) != SUCCESS)
    return bad(param, "tools", "tools must be an array of function tools");
  size_t i = 0;
  for (dom::element tool : tools) {
    const std::string where = "tools[" + std::to_string(i++) + "]";
    std::string_view type, name;
    if (tool.at_key("type").get_string().get(type) != SUCCESS || type != "function")
      return bad(param, where + ".type",
                 where +
                     " must be {\"type\": \"function\", \"function\": {...}}; only function "
                     "tools are supported");
    if (tool.at_key("function").at_key("name").get_string().get(name) != SUCCESS || name.empty())
      return bad(param, where + ".function.name", where + ".function.name must be a string");
    auto json = template_tojson(simdjson::minify(tool));
    if (!json.ok()) return bad(param, where, where + " is " + json.error().message);
    auto signature = tool_signature(tool.at_key("function").value_unsafe());
    if (!signature.ok()) return bad(param, where, where + " is " + signature.error().message);
    out.tools.push_back(std::move(json).value());
    out.signatures.push_back(std::move(signature).value());
    out.names.emplace_back(name);
  }
  return {};
}

Status read_tool_choice(dom::object root, ToolRequest& out, std::string& param) {
  dom::element value;
  if (root.at_key("tool_choice").get(value) != SUCCESS || value.is_null()) return {};
  std::string_view s;
  if (value.get_string().get(s) == SUCCESS) {
    if (s == "auto") return {};
    if (s == "none") {
      out.choice = ToolChoice::kNone;
      return {};
    }
    if (s == "required") {
      out.choice = ToolChoice::kRequired;
      return {};
    }
    return bad(param, "tool_choice",
               "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
               "\"function\": {\"name\": ...}}, got \"" +
                   std::string(s) + "\"");
  }
  std::string_view type, name;
  if (value.at_key("type").get_string().get(type) != SUCCESS || type != "function" ||
      value.at_key("function").at_key("name").get_string().get(name) != SUCCESS)
    return bad(param, "tool_choice",
               "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
               "\"function\": {\"name\": ...}}");
  out.choice = ToolChoice::kFunction;
  out.function = name;
  return {};
}

// Arguments arrive as a JSON string (OpenAI) or, from some clients, as the object itself; the
// template prints the object (Hugging Face's templates take it parsed, as vLLM passes it).
Result<std::string> call_arguments(dom::element call) {
  dom::element args;
  if (call.at_key("function").at_key("arguments").get(args) != SUCCESS)
    return make_error(ErrorKind::kBadRequest, "is missing");
  std::string_view text;
  if (args.get_string().get(text) == SUCCESS) return template_tojson(text);
  return template_tojson(simdjson::minify(args));
}

Status read_message_calls(dom::object root, ToolRequest& out, std::string& param) {
  dom::array messages;
  if (out.message_tool_calls.empty()) return {};
  if (root.at_key("messages").get_array().get(messages) != SUCCESS) return {};
  size_t i = 0;
  for (dom::element message : messages) {
    dom::array calls;
    if (message.at_key("tool_calls").get_array().get(calls) == SUCCESS) {
      size_t j = 0;
      for (dom::element call : calls) {
        const std::string where =
            "messages[" + std::to_string(i) + "].tool_calls[" + std::to_string(j++) + "]";
        std::string_view name;
        if (call.at_key("function").at_key("name").get_string().get(name) != SUCCESS)
          return bad(param, where + ".function.name", where + ".function.name must be a string");
        auto args = call_arguments(call);
        if (!args.ok())
          return bad(param, where + ".function.arguments",
                     where + ".function.arguments " + args.error().message);
        out.message_tool_calls[i].push_back({std::string(name), std::move(args).value()});
      }
    }
    if (++i >= out.message_tool_calls.size()) break;
  }
  return {};
}

}  // namespace

Result<model::ChatToolSignature> tool_signature_of(std::string_view function_json) {
  dom::parser parser;
  simdjson::padded_string padded(function_json);
  dom::element function;
  if (parser.parse(padded).get(function) != SUCCESS || !function.is_object())
    return make_error(ErrorKind::kBadRequest, "not a JSON object");
  return tool_signature(function);
}

std::string ToolRequest::forced_prefix() const {
  switch (choice) {
    case ToolChoice::kRequired:
      return "<tool_call>\n";
    case ToolChoice::kFunction:
      return "<tool_call>\n{\"name\": \"" + function + "\", \"arguments\": ";
    case ToolChoice::kAuto:
    case ToolChoice::kNone:
      break;
  }
  return {};
}

Result<ToolRequest> parse_tool_request(std::string_view body, size_t message_count,
                                       std::string& param) {
  ToolRequest out;
  out.message_tool_calls.resize(message_count);
  if (body.find("tool") == std::string_view::npos) return out;
  dom::parser parser;
  simdjson::padded_string padded(body);
  dom::object root;
  if (parser.parse(padded).get_object().get(root) != SUCCESS)
    return bad(param, "", "the request body is not a JSON object");
  if (auto s = read_tools(root, out, param); !s) return std::move(s).error();
  if (auto s = read_tool_choice(root, out, param); !s) return std::move(s).error();
  if (auto s = read_message_calls(root, out, param); !s) return std::move(s).error();
  bool parallel = true;
  if (root.at_key("parallel_tool_calls").get_bool().get(parallel) == SUCCESS)
    out.parallel_tool_calls = parallel;
  if (out.choice == ToolChoice::kRequired && out.tools.empty())
    return bad(param, "tool_choice", "tool_choice \"required\" needs tools");
  if (out.choice == ToolChoice::kFunction &&
      std::find(out.names.begin(), out.names.end(), out.function) == out.names.end())
    return bad(param, "tool_choice",
               "tool_choice names function '" + out.function + "', which is not among the tools");
  return out;
}

}  // namespace cutline::server
