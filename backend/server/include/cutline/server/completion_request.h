#pragma once
// Turns a parsed OpenAI request (proto/openai_request.h) into what the engine runs: prompt tokens
// (chat messages rendered with the model's chat template, or the completions prompt encoded),
// sampling parameters and stop conditions. Pure: no I/O, no engine; called by the backend server
// on a worker loop once the model's lease is held (it needs the model's tokenizer and context).
//
// Besides the OpenAI fields, `"ignore_eos": true` (vLLM's extension) is honoured, and for
// completions `"add_special_tokens"` and `"parse_special"` (prompt_encoding.h).
//
// Tool calling (chat): `tools`, `tool_choice`, `parallel_tool_calls`, assistant `tool_calls` and
// `tool` messages are rendered with the model's template where it has tool syntax
// (model::supports_tools; tool_request.h says how each field is read), and `tool_calls` (when
// given) says how the writer reads calls out of the output.
//
// Refusals are OpenAI-style client errors naming the field: n > 1, tools on /v1/completions or
// on a model whose template has no tool syntax (unless tool_choice is "none"), several prompts,
// token ids out of range, and a prompt that does not fit the context window (400, code
// "context_length_exceeded", the message says the model's context_length).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/engine/engine.h"
#include "cutline/model/chat_template.h"
#include "cutline/model/tokenizer.h"
#include "cutline/proto/wire/openai_request.h"
#include "cutline/server/tool_request.h"

namespace cutline::server {

// The request field an error is about, and an OpenAI error code (both may be empty).
struct RequestErrorDetail {
  std::string param;
  std::string code;
};

struct ModelTextInfo {
  const model::Tokenizer* tokenizer = nullptr;
  model::ChatTemplateKind chat_template = model::ChatTemplateKind::kChatMl;
  int32_t context_length = 0;
  // Special-token text in a completions prompt is parsed as the token unless the request says
  // "parse_special": false; false (--no-parse-special) makes that the default.
  bool parse_special = true;
};

Result<engine::AddRequest> build_add_request(const proto::ParsedRequest& request,
                                             const ModelTextInfo& model, std::string request_id,
                                             RequestErrorDetail& detail,
                                             ToolCallOptions* tool_calls = nullptr);

// The prompt a chat request renders to with template `kind` (before tokenization): messages,
// tools, tool calls and results, a forced call's opening, chat_template_kwargs.enable_thinking.
// `tool_calls`, when given, says how to read the output. `bos_token` is what the template's
// `bos_token` writes (model::bos_token_text).
Result<model::RenderedChat> render_chat_request(const proto::ParsedRequest& request,
                                                model::ChatTemplateKind kind,
                                                ToolCallOptions* tool_calls,
                                                RequestErrorDetail& detail,
                                                std::string_view bos_token = {});

// The pieces build_add_request is made of, for the other request shapes (the Responses API):
// chat messages rendered with the model's template and encoded (errors name `param`) ...
Result<std::vector<int32_t>> chat_prompt_tokens(std::span<const model::ChatMessage> messages,
                                                const ModelTextInfo& model, std::string_view param,
                                                RequestErrorDetail& detail);
// ... and an AddRequest around prompt tokens, refused when empty or not shorter than the context
// window (400 context_length_exceeded). Sampling and stop fields are left at their defaults.
Result<engine::AddRequest> add_request_for_prompt(std::vector<int32_t> prompt,
                                                  const ModelTextInfo& model,
                                                  std::string request_id, std::string_view param,
                                                  RequestErrorDetail& detail);

}  // namespace cutline::server
