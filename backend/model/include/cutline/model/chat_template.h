#pragma once
// Chat templates: turn OpenAI-style {role, content} messages into the prompt a model was trained
// on. The common templates are recognized from the GGUF `tokenizer.chat_template` Jinja source by
// their marker strings (no Jinja engine) and rendered by hand, byte for byte as the models'
// reference templates render them:
//
//   kChatMl   <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n  (Qwen, SmolLM)
//   kLlama3   <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>
//   kLlama2   <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s>
//   kMistral  <s>[INST] {user} [/INST]{assistant}</s>  (system prepended to the first user turn)
//   kGemma    <bos><start_of_turn>user\n{content}<end_of_turn>\n<start_of_turn>model\n
//   kPhi3     <|user|>\n{content}<|end|>\n<|assistant|>\n
//   kPhi4     <|im_start|>user<|im_sep|>{content}<|im_end|> ... <|im_start|>assistant<|im_sep|>
//   kPhi4Mini <|user|>{content}<|end|><|assistant|>  (Phi-4-mini: no newlines)
//   kQwen3    ChatML; an assistant turn's <think>...</think> is dropped before the last user
//             message and kept (normalized) after it
//   kQwen3NoThink  kQwen3 with thinking off: the generation prompt ends "<think>\n\n</think>\n\n"
//   kQwen25   ChatML with Qwen2.5's default system prompt ("You are Qwen, created by Alibaba
//             Cloud. You are a helpful assistant.") when the conversation has none
//
// Tool calling (Hermes style, as Qwen2.5 and Qwen3 were trained): kQwen25, kQwen3 and
// kQwen3NoThink render `tools` into the system turn (<tools>...</tools>), an assistant turn's
// tool calls as <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>, and `tool` messages
// as <tool_response> blocks in a user turn. The other templates have no tool syntax: tools,
// tool calls and tool messages are kBadRequest there (supports_tools() says which).
//
// The rendered prompt is a list of pieces: special-token text (<|im_start|>) apart from plain
// text (message contents), so that encode_chat() turns only the template's own markers into
// control tokens — a user who types "<|im_start|>" gets those characters, not the token.
//
// Who calls it: the backend server for /v1/chat/completions; `--chat-template NAME` overrides.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/model/tokenizer.h"

namespace cutline::model {

enum class ChatTemplateKind {
  kChatMl,
  kLlama3,
  kLlama2,
  kMistral,
  kGemma,
  kPhi3,
  kPhi4,
  kPhi4Mini,
  kQwen3,
  kQwen3NoThink,
  kQwen25,
  // Hermes 2 Pro / Hermes 3: ChatML, and with tools the GGUF's `tool_use` template (a system turn
  // listing each tool's signature, <tool_call> blocks, a `tool` turn of <tool_response> blocks).
  kHermes,
};

// "chatml", "llama3", "llama2", "mistral", "gemma", "phi3", "phi4", "phi4-mini", "qwen3",
// "qwen3-no-think", "qwen2.5", "hermes".
std::string_view to_string(ChatTemplateKind kind);
// Parses a name as to_string() writes it (also "qwen" -> chatml, "llama-3" -> llama3,
// "phi-3" -> phi3); nullopt for an unknown name.
std::optional<ChatTemplateKind> chat_template_from_name(std::string_view name);

// Qwen3's `enable_thinking` template parameter (a request's chat_template_kwargs): kQwen3 with
// thinking off is kQwen3NoThink and back. Templates without the switch are returned unchanged, as
// a Jinja template ignores a variable it does not use.
ChatTemplateKind with_thinking(ChatTemplateKind kind, bool enable_thinking);

// Whether the template renders tools, tool calls and tool results (Qwen2.5, Qwen3, Hermes).
bool supports_tools(ChatTemplateKind kind);

struct DetectedChatTemplate {
  ChatTemplateKind kind = ChatTemplateKind::kChatMl;
  // Non-empty when the source was empty or unrecognized and ChatML was assumed; the caller logs
  // it (e.g. "unrecognized chat template; falling back to chatml").
  std::string warning;
};
// Detects the template from `tokenizer.chat_template` (empty when the file has none).
DetectedChatTemplate detect_chat_template(std::string_view jinja_source);
// The kind a GGUF's `tokenizer.chat_template.tool_use` (the template for requests with tools)
// makes of a model whose default template is `base`: kHermes for Hermes' tool-use template over
// ChatML, otherwise `base` unchanged.
ChatTemplateKind with_tool_use_template(ChatTemplateKind base, std::string_view jinja_source);

// One call in an assistant message's tool_calls.
struct ChatToolCall {
  std::string name;
  // The arguments as the reference template prints them: the JSON object through Jinja's
  // `tojson` as Hugging Face defines it (keys in order, ", " and ": " separators, non-ASCII
  // kept).
  std::string arguments;
};

struct ChatMessage {
  // "system" | "user" | "assistant", and "tool" where supports_tools() (others are kBadRequest)
  std::string role;
  std::string content;                        // empty for a null content
  std::vector<ChatToolCall> tool_calls = {};  // assistant messages only
};

// A function tool as Hermes' tool-use template describes it in its system turn: a Python-style
// signature built from the JSON schema of its parameters.
struct ChatToolSignature {
  struct Param {
    std::string name;
    std::string python_type;  // "str", "int", "list[...]", "dict[str, ...]", "Union[...]", "Any"
    std::string description;  // trimmed; empty when absent
  };
  std::string name;
  std::string description;
  std::vector<Param> params;  // the schema's `properties`, in order
  // `parameters` as `tojson` prints it, or "{}" when it has no properties.
  std::string parameters_json;
  bool has_return = false;  // the tool has a `return` schema (not an OpenAI field; Hermes reads it)
  std::string return_type;
  std::string return_description;
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;
  // The request's tool definitions, each as `tojson` prints it; empty renders no tool section.
  std::vector<std::string> tools;
  // The same tools as signatures (kHermes), in the same order.
  std::vector<ChatToolSignature> tool_signatures;
  // The text of the model's BOS token, for templates that write `bos_token` (kHermes with tools);
  // empty when the model has none.
  std::string bos_token;
  // Text appended after the generation prompt as if the model had written it (the opening of a
  // forced tool call); plain text, so "<tool_call>" becomes its token where the vocabulary has
  // it as a user-defined token.
  std::string generation_prefix;
};

struct ChatPiece {
  bool special = false;  // text of one special token, e.g. "<|im_start|>"
  std::string text;
};

struct RenderedChat {
  std::vector<ChatPiece> pieces;
  // The whole prompt as one string (what the reference Jinja template would output).
  std::string text() const;
};

// Renders `messages` (then the assistant header when add_generation_prompt). kBadRequest for an
// unknown role, or a role order the template cannot express (kLlama2/kMistral/kGemma need
// user/assistant alternation after an optional leading system message).
Result<RenderedChat> render_chat(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                 bool add_generation_prompt);
// The same with tools; kBadRequest for tools, tool calls or tool messages on a template without
// tool support.
Result<RenderedChat> render_chat(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                 const ChatRenderOptions& options);

// What a template's `bos_token` is for this tokenizer: its BOS token's text, "" without one.
std::string bos_token_text(const Tokenizer& tokenizer);

// Tokens of a rendered chat: special pieces become their token (via special_token_id; a special
// the vocabulary lacks is encoded as plain text), plain pieces are encoded without BOS.
std::vector<int32_t> encode_chat(const Tokenizer& tokenizer, const RenderedChat& chat);

}  // namespace cutline::model
