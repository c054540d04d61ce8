#include "cutline/server/completion_request.h"

#include <optional>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "cutline/server/logprobs_request.h"
#include "cutline/server/prompt_encoding.h"
#include "cutline/server/tool_request.h"

namespace cutline::server {

namespace {

Error fail(RequestErrorDetail& detail, ErrorKind kind, std::string param, std::string message,
           std::string code = "") {
  detail.param = std::move(param);
  detail.code = std::move(code);
  return make_error(kind, std::move(message));
}

// `chat_template_kwargs` (vLLM's and llama.cpp server's extension): the template parameters a
// request may set. `enable_thinking` is the one a template here reads (Qwen3); other keys are
// accepted and unused, as the reference Jinja templates ignore variables they do not read.
Result<std::optional<bool>> enable_thinking_of(std::string_view body, RequestErrorDetail& detail) {
  if (body.find("\"chat_template_kwargs\"") == std::string_view::npos) return std::optional<bool>();
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(body);
  auto doc = parser.iterate(padded);
  simdjson::ondemand::object kwargs;
  auto field = doc.find_field_unordered("chat_template_kwargs");
  if (field.error() == simdjson::NO_SUCH_FIELD) return std::optional<bool>();
  if (field.get_object().get(kwargs) != simdjson::SUCCESS)
    return fail(detail, ErrorKind::kBadRequest, "chat_template_kwargs",
                "chat_template_kwargs must be an object");
  auto flag = kwargs.find_field_unordered("enable_thinking");
  if (flag.error() == simdjson::NO_SUCH_FIELD) return std::optional<bool>();
  bool value = false;
  if (flag.get_bool().get(value) != simdjson::SUCCESS)
    return fail(detail, ErrorKind::kBadRequest, "chat_template_kwargs.enable_thinking",
                "chat_template_kwargs.enable_thinking must be true or false");
  return std::optional<bool>(value);
}

// The tool fields: the render options (tools, a forced call's opening) and how the writer reads
// the output. A template without tool syntax refuses tools unless tool_choice is "none".
Status apply_tools(const proto::ParsedRequest& r, const ToolRequest& tools,
                   model::ChatTemplateKind kind, model::ChatRenderOptions& render,
                   ToolCallOptions* out, RequestErrorDetail& detail) {
  if (tools.choice == ToolChoice::kNone || tools.tools.empty()) return {};
  if (!model::supports_tools(kind))
    return fail(detail, ErrorKind::kUnsupported, "tools",
                "model '" + r.model + "' has no tool calling: its chat template (" +
                    std::string(model::to_string(kind)) +
                    ") has no tool syntax; tools need a Qwen2.5, Qwen3 or Hermes template "
                    "(--chat-template qwen2.5, qwen3 or hermes)");
  render.tools = tools.tools;
  render.tool_signatures = tools.signatures;
  render.generation_prefix = tools.forced_prefix();
  if (out != nullptr) {
    out->parse = true;
    out->forced_prefix = render.generation_prefix;
    out->parallel = tools.parallel_tool_calls;
  }
  return {};
}

Result<std::vector<int32_t>> chat_tokens(const proto::ParsedRequest& r, const ModelTextInfo& m,
                                         ToolCallOptions* tool_calls, RequestErrorDetail& detail) {
  auto rendered = render_chat_request(r, m.chat_template, tool_calls, detail,
                                      model::bos_token_text(*m.tokenizer));
  if (!rendered.ok()) return std::move(rendered).error();
  return model::encode_chat(*m.tokenizer, *rendered);
}

Result<std::vector<int32_t>> prompt_tokens(const proto::ParsedRequest& r, const ModelTextInfo& m,
                                           ToolCallOptions* tool_calls,
                                           RequestErrorDetail& detail) {
  const model::Tokenizer& tok = *m.tokenizer;
  if (r.endpoint == proto::Endpoint::kChatCompletions) return chat_tokens(r, m, tool_calls, detail);
  std::string param;
  auto encoding = prompt_encoding_of(r.body, m.parse_special, param);
  if (!encoding.ok())
    return fail(detail, encoding.error().kind, std::move(param), encoding.error().message);
  switch (r.prompt_kind) {
    case proto::PromptKind::kString:
      return encode_prompt(tok, r.prompt_text(0), *encoding);
    case proto::PromptKind::kStrings:
      if (r.prompts.size() != 1)
        return fail(detail, ErrorKind::kUnsupported, "prompt",
                    "a list of " + std::to_string(r.prompts.size()) +
                        " prompts is not supported; send one prompt per request");
      return encode_prompt(tok, r.prompt_text(0), *encoding);
    case proto::PromptKind::kTokens: {
      std::vector<int32_t> ids;
      ids.reserve(r.prompt_tokens.size());
      for (int64_t id : r.prompt_tokens) {
        if (id < 0 || id >= tok.vocab_size())
          return fail(detail, ErrorKind::kBadRequest, "prompt",
                      "prompt token id " + std::to_string(id) + " is out of range [0, " +
                          std::to_string(tok.vocab_size()) + ")");
        ids.push_back(static_cast<int32_t>(id));
      }
      return ids;
    }
    case proto::PromptKind::kTokenBatches:
      return fail(detail, ErrorKind::kUnsupported, "prompt",
                  "batches of token prompts are not supported; send one prompt per request");
    case proto::PromptKind::kAbsent:
      break;
  }
  return fail(detail, ErrorKind::kBadRequest, "prompt", "prompt is required");
}

// vLLM's `ignore_eos` extension (benchmarks and tests that need answers of a fixed length).
// proto's ParsedRequest does not carry it, so it is looked up in the already validated body.
bool ignore_eos_requested(std::string_view body) {
  if (body.find("\"ignore_eos\"") == std::string_view::npos) return false;
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(body);
  auto doc = parser.iterate(padded);
  bool value = false;
  if (doc.find_field_unordered("ignore_eos").get_bool().get(value) != simdjson::SUCCESS)
    return false;
  return value;
}

}  // namespace

Result<model::RenderedChat> render_chat_request(const proto::ParsedRequest& r,
                                                model::ChatTemplateKind kind,
                                                ToolCallOptions* tool_calls,
                                                RequestErrorDetail& detail,
                                                std::string_view bos_token) {
  auto thinking = enable_thinking_of(r.body, detail);
  if (!thinking.ok()) return std::move(thinking).error();
  if (thinking->has_value()) kind = model::with_thinking(kind, **thinking);
  std::string param;
  auto tools = parse_tool_request(r.body, r.messages.size(), param);
  if (!tools.ok()) return fail(detail, tools.error().kind, param, tools.error().message);
  model::ChatRenderOptions render;
  render.bos_token = bos_token;
  if (auto s = apply_tools(r, *tools, kind, render, tool_calls, detail); !s)
    return std::move(s).error();
  std::vector<model::ChatMessage> messages;
  messages.reserve(r.messages.size());
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const auto& msg = r.messages[i];
    if (msg.has_non_text_parts)
      return fail(detail, ErrorKind::kUnsupported, "messages",
                  "messages[" + std::to_string(i) +
                      "] has non-text content parts; this model "
                      "takes text only");
    messages.push_back(model::ChatMessage{r.message_role(i), r.message_text(i),
                                          std::move(tools->message_tool_calls[i])});
  }
  auto rendered = model::render_chat(kind, messages, render);
  if (!rendered.ok())
    return fail(detail, ErrorKind::kBadRequest, "messages", rendered.error().message);
  return rendered;
}

Result<std::vector<int32_t>> chat_prompt_tokens(std::span<const model::ChatMessage> messages,
                                                const ModelTextInfo& m, std::string_view param,
                                                RequestErrorDetail& detail) {
  auto rendered = model::render_chat(m.chat_template, messages, true);
  if (!rendered.ok())
    return fail(detail, ErrorKind::kBadRequest, std::string(param), rendered.error().message);
  return model::encode_chat(*m.tokenizer, *rendered);
}

Result<engine::AddRequest> add_request_for_prompt(std::vector<int32_t> prompt,
                                                  const ModelTextInfo& m, std::string request_id,
                                                  std::string_view param,
                                                  RequestErrorDetail& detail) {
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt == 0)
    return fail(detail, ErrorKind::kBadRequest, std::string(param), "the prompt is empty");
  if (m.context_length > 0 && n_prompt >= m.context_length)
    return fail(detail, ErrorKind::kBadRequest, std::string(param),
                "This model's maximum context length (context_length) is " +
                    std::to_string(m.context_length) + " tokens, but the prompt has " +
                    std::to_string(n_prompt) + " tokens",
                "context_length_exceeded");
  engine::AddRequest add;
  add.request_id = std::move(request_id);
  add.prompt = std::move(prompt);
  return add;
}

Result<engine::AddRequest> build_add_request(const proto::ParsedRequest& r, const ModelTextInfo& m,
                                             std::string request_id, RequestErrorDetail& detail,
                                             ToolCallOptions* tool_calls) {
  if (r.n != 1)
    return fail(detail, ErrorKind::kUnsupported, "n",
                "n = " + std::to_string(r.n) + " is not supported; only n = 1");
  if (r.has_tools && r.endpoint != proto::Endpoint::kChatCompletions)
    return fail(detail, ErrorKind::kUnsupported, "tools",
                "tools are supported on /v1/chat/completions only");

  auto tokens = prompt_tokens(r, m, tool_calls, detail);
  if (!tokens.ok()) return std::move(tokens).error();
  const char* prompt_param =
      r.endpoint == proto::Endpoint::kChatCompletions ? "messages" : "prompt";
  auto built = add_request_for_prompt(std::move(tokens).value(), m, std::move(request_id),
                                      prompt_param, detail);
  if (!built.ok()) return built;
  engine::AddRequest add = std::move(built).value();
  auto& s = add.sampling;
  if (r.temperature) s.temperature = static_cast<float>(*r.temperature);
  if (r.top_p) s.top_p = static_cast<float>(*r.top_p);
  if (r.top_k) s.top_k = static_cast<int32_t>(*r.top_k);
  if (r.min_p) s.min_p = static_cast<float>(*r.min_p);
  if (r.presence_penalty) s.presence_penalty = static_cast<float>(*r.presence_penalty);
  if (r.frequency_penalty) s.frequency_penalty = static_cast<float>(*r.frequency_penalty);
  if (r.repetition_penalty) s.repetition_penalty = static_cast<float>(*r.repetition_penalty);
  if (r.seed) s.seed = static_cast<uint64_t>(*r.seed);
  auto logprobs = requested_logprobs(r, detail);
  if (!logprobs.ok()) return std::move(logprobs).error();
  s.logprobs = *logprobs;
  if (std::string err = engine::validate(s); !err.empty())
    return fail(detail, ErrorKind::kBadRequest, "", err);
  add.stop.stop_strings = r.stop;
  add.stop.max_tokens = r.requested_max_tokens();
  add.stop.ignore_eos = ignore_eos_requested(r.body);
  return add;
}

}  // namespace cutline::server
