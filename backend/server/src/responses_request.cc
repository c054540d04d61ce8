#include "cutline/server/responses_request.h"

#include <cmath>
#include <utility>

#include <simdjson.h>

#include "cutline/engine/token_logprobs.h"
#include "cutline/proto/wire/openai_request.h"
#include "cutline/server/responses_tools.h"

namespace cutline::server {

namespace {

using simdjson::SUCCESS;
namespace dom = simdjson::dom;

Error refuse(RequestErrorDetail& detail, std::string param, std::string message,
             ErrorKind kind = ErrorKind::kBadRequest) {
  detail.param = std::move(param);
  detail.code.clear();
  return make_error(kind, std::move(message));
}

std::string_view type_name(dom::element e) {
  switch (e.type()) {
    case dom::element_type::ARRAY:
      return "an array";
    case dom::element_type::OBJECT:
      return "an object";
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
      return "an integer";
    case dom::element_type::DOUBLE:
      return "a number";
    case dom::element_type::STRING:
      return "a string";
    case dom::element_type::BOOL:
      return "a boolean";
    case dom::element_type::NULL_VALUE:
      return "null";
  }
  return "a value";
}

std::optional<double> number_of(dom::element e) {
  double d = 0;
  if (e.is_int64()) return static_cast<double>(int64_t(e));
  if (e.is_uint64()) return static_cast<double>(uint64_t(e));
  if (e.get_double().get(d) == SUCCESS) return d;
  return std::nullopt;
}

// One element's "content": a string, or text parts concatenated.
Status read_content(dom::element content, const std::string& where, std::string& out,
                    RequestErrorDetail& detail) {
  std::string_view text;
  if (content.get_string().get(text) == SUCCESS) {
    out.assign(text);
    return {};
  }
  dom::array parts;
  if (content.get_array().get(parts) != SUCCESS)
    return refuse(detail, "input",
                  where + ".content must be a string or an array of content parts, got " +
                      std::string(type_name(content)));
  size_t i = 0;
  for (dom::element part : parts) {
    const std::string at = where + ".content[" + std::to_string(i++) + "]";
    std::string_view type;
    if (part.at_key("type").get_string().get(type) != SUCCESS)
      return refuse(detail, "input", at + " must be an object with a string \"type\"");
    if (type != "input_text" && type != "output_text")
      return refuse(detail, "input",
                    at + " is of type \"" + std::string(type) +
                        "\"; this model takes text only (input_text, output_text)",
                    ErrorKind::kUnsupported);
    if (part.at_key("text").get_string().get(text) != SUCCESS)
      return refuse(detail, "input", at + ".text must be a string");
    out.append(text);
  }
  return {};
}

Status read_input(dom::element input, ResponsesRequest& r, RequestErrorDetail& detail) {
  std::string_view text;
  if (input.get_string().get(text) == SUCCESS) {
    r.messages.push_back({"user", std::string(text)});
    return {};
  }
  dom::array items;
  if (input.get_array().get(items) != SUCCESS)
    return refuse(
        detail, "input",
        "input must be a string or an array of messages, got " + std::string(type_name(input)));
  size_t i = 0;
  for (dom::element item : items) {
    const std::string where = "input[" + std::to_string(i++) + "]";
    dom::object obj;
    if (item.get_object().get(obj) != SUCCESS)
      return refuse(detail, "input",
                    where + " must be an object, got " + std::string(type_name(item)));
    std::string_view type = "message";
    if (dom::element t; obj.at_key("type").get(t) == SUCCESS && t.get_string().get(type) != SUCCESS)
      return refuse(detail, "input", where + ".type must be a string");
    if (type == "function_call" || type == "function_call_output") {
      if (auto st = read_function_call_item(obj, type, where, r.messages, detail); !st.ok())
        return st;
      continue;
    }
    if (type != "message")
      return refuse(
          detail, "input",
          where + " is of type \"" + std::string(type) + "\"; this backend takes messages only",
          ErrorKind::kUnsupported);
    std::string_view role;
    if (obj.at_key("role").get_string().get(role) != SUCCESS)
      return refuse(detail, "input", where + ".role must be a string");
    if (role != "user" && role != "assistant" && role != "system" && role != "developer")
      return refuse(detail, "input",
                    where + ".role must be one of user, assistant, system, developer, got \"" +
                        std::string(role) + "\"");
    dom::element content;
    if (obj.at_key("content").get(content) != SUCCESS)
      return refuse(detail, "input", where + ".content is required");
    model::ChatMessage msg{role == "developer" ? "system" : std::string(role), {}};
    if (auto st = read_content(content, where, msg.content, detail); !st.ok()) return st;
    r.messages.push_back(std::move(msg));
  }
  if (r.messages.empty()) return refuse(detail, "input", "input must not be empty");
  return {};
}

// Sampling and limits; a null value means "not given".
Status read_limits(dom::object obj, ResponsesRequest& r, RequestErrorDetail& detail) {
  dom::element e;
  if (obj.at_key("max_output_tokens").get(e) == SUCCESS && !e.is_null()) {
    int64_t n = 0;
    if (e.get_int64().get(n) != SUCCESS || n < 1 || n > proto::kMaxTokensLimit)
      return refuse(detail, "max_output_tokens",
                    "max_output_tokens must be an integer in [1, " +
                        std::to_string(proto::kMaxTokensLimit) + "]");
    r.max_output_tokens = n;
  }
  if (obj.at_key("temperature").get(e) == SUCCESS && !e.is_null()) {
    const auto t = number_of(e);
    if (!t || !std::isfinite(*t) || *t < 0 || *t > 2)
      return refuse(detail, "temperature", "temperature must be a number in [0, 2]");
    r.temperature = *t;
  }
  if (obj.at_key("top_p").get(e) == SUCCESS && !e.is_null()) {
    const auto p = number_of(e);
    if (!p || !(*p > 0 && *p <= 1))
      return refuse(detail, "top_p", "top_p must be a number in (0, 1]");
    r.top_p = *p;
  }
  if (obj.at_key("seed").get(e) == SUCCESS && !e.is_null()) {
    int64_t seed = 0;
    if (e.get_int64().get(seed) != SUCCESS)
      return refuse(detail, "seed", "seed must be an integer");
    r.seed = seed;
  }
  if (obj.at_key("stream").get(e) == SUCCESS && !e.is_null() &&
      e.get_bool().get(r.stream) != SUCCESS)
    return refuse(detail, "stream", "stream must be a boolean");
  bool include_logprobs = false;
  if (obj.at_key("include").get(e) == SUCCESS && !e.is_null()) {
    dom::array include;
    if (e.get_array().get(include) != SUCCESS)
      return refuse(detail, "include", "include must be an array of strings");
    for (dom::element v : include) {
      std::string_view s;
      if (v.get_string().get(s) != SUCCESS)
        return refuse(detail, "include", "include must be an array of strings");
      include_logprobs = include_logprobs || s == "message.output_text.logprobs";
    }
  }
  if (obj.at_key("top_logprobs").get(e) == SUCCESS && !e.is_null()) {
    int64_t n = 0;
    if (e.get_int64().get(n) != SUCCESS || n < 0 || n > engine::kMaxTopLogprobs)
      return refuse(detail, "top_logprobs",
                    "top_logprobs must be an integer in [0, " +
                        std::to_string(engine::kMaxTopLogprobs) + "]");
    r.top_logprobs = static_cast<int32_t>(n);
  } else if (include_logprobs) {
    r.top_logprobs = 0;
  }
  return {};
}

}  // namespace

Result<ResponsesRequest> parse_responses_request(std::string_view body,
                                                 RequestErrorDetail& detail) {
  dom::parser parser;
  dom::element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != SUCCESS)
    return refuse(detail, "", "the request body is not valid JSON (or not valid UTF-8)");
  dom::object obj;
  if (doc.get_object().get(obj) != SUCCESS)
    return refuse(detail, "", "the request body must be a JSON object");
  ResponsesRequest r;
  std::string_view s;
  dom::element e;
  if (obj.at_key("model").get(e) != SUCCESS) return refuse(detail, "model", "model is required");
  if (e.get_string().get(s) != SUCCESS || s.empty())
    return refuse(detail, "model", "model must be a non-empty string");
  r.model.assign(s);
  if (obj.at_key("instructions").get(e) == SUCCESS && !e.is_null()) {
    if (e.get_string().get(s) != SUCCESS)
      return refuse(detail, "instructions", "instructions must be a string");
    r.instructions.emplace(s);
    r.messages.push_back({"system", std::string(s)});
  }
  if (obj.at_key("input").get(e) != SUCCESS) return refuse(detail, "input", "input is required");
  if (auto st = read_input(e, r, detail); !st.ok()) return std::move(st).error();
  if (auto st = read_limits(obj, r, detail); !st.ok()) return std::move(st).error();
  if (auto st = read_responses_tools(obj, r.tools, detail); !st.ok()) return std::move(st).error();
  if (obj.at_key("previous_response_id").get(e) == SUCCESS && !e.is_null())
    return refuse(detail, "previous_response_id",
                  "previous_response_id is not supported: this backend does not store responses; "
                  "send the conversation in input",
                  ErrorKind::kUnsupported);
  return r;
}

Result<engine::AddRequest> build_responses_add_request(const ResponsesRequest& r,
                                                       const ModelTextInfo& model,
                                                       std::string request_id,
                                                       RequestErrorDetail& detail,
                                                       ToolCallOptions* tool_calls) {
  model::ChatRenderOptions render;
  render.bos_token = model::bos_token_text(*model.tokenizer);
  if (r.tools.choice != ToolChoice::kNone && !r.tools.tools.empty()) {
    if (!model::supports_tools(model.chat_template))
      return refuse(detail, "tools",
                    "model '" + r.model + "' has no tool calling: its chat template (" +
                        std::string(model::to_string(model.chat_template)) +
                        ") has no tool syntax; tools need a Qwen2.5, Qwen3 or Hermes template "
                        "(--chat-template qwen2.5, qwen3 or hermes)",
                    ErrorKind::kUnsupported);
    render.tools = r.tools.tools;
    render.tool_signatures = r.tools.signatures;
    render.generation_prefix = r.tools.forced_prefix();
    if (tool_calls != nullptr) {
      tool_calls->parse = true;
      tool_calls->forced_prefix = render.generation_prefix;
      tool_calls->parallel = r.tools.parallel_tool_calls;
    }
  }
  auto rendered = model::render_chat(model.chat_template, r.messages, render);
  if (!rendered.ok()) return refuse(detail, "input", rendered.error().message);
  auto add = add_request_for_prompt(model::encode_chat(*model.tokenizer, *rendered), model,
                                    std::move(request_id), "input", detail);
  if (!add.ok()) return add;
  auto& s = add->sampling;
  if (r.temperature) s.temperature = static_cast<float>(*r.temperature);
  if (r.top_p) s.top_p = static_cast<float>(*r.top_p);
  if (r.seed) s.seed = static_cast<uint64_t>(*r.seed);
  s.logprobs = r.top_logprobs;
  add->stop.max_tokens = r.max_output_tokens;
  return add;
}

}  // namespace cutline::server
