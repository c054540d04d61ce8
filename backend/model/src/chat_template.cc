#include "cutline/model/chat_template.h"

#include <cctype>

#include "chat_builder.h"
#include "cutline/model/special_tokens.h"

namespace cutline::model {

namespace {

using detail::Builder;
using detail::render_hermes_tools;
using detail::tool_calls_text;

struct NamedKind {
  std::string_view name;
  ChatTemplateKind kind;
};
constexpr NamedKind kNames[] = {
    {"chatml", ChatTemplateKind::kChatMl},
    {"llama3", ChatTemplateKind::kLlama3},
    {"llama2", ChatTemplateKind::kLlama2},
    {"mistral", ChatTemplateKind::kMistral},
    {"gemma", ChatTemplateKind::kGemma},
    {"phi3", ChatTemplateKind::kPhi3},
    {"qwen", ChatTemplateKind::kChatMl},
    {"qwen2", ChatTemplateKind::kChatMl},
    {"llama-3", ChatTemplateKind::kLlama3},
    {"llama-2", ChatTemplateKind::kLlama2},
    {"phi-3", ChatTemplateKind::kPhi3},
    {"phi4", ChatTemplateKind::kPhi4},
    {"phi4-mini", ChatTemplateKind::kPhi4Mini},
    {"phi-4", ChatTemplateKind::kPhi4},
    {"phi-4-mini", ChatTemplateKind::kPhi4Mini},
    {"qwen3", ChatTemplateKind::kQwen3},
    {"qwen3-no-think", ChatTemplateKind::kQwen3NoThink},
    {"qwen2.5", ChatTemplateKind::kQwen25},
    {"qwen-2.5", ChatTemplateKind::kQwen25},
    {"hermes", ChatTemplateKind::kHermes},
};

constexpr std::string_view kQwen25DefaultSystem =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

Status check_roles(ChatTemplateKind kind, std::span<const ChatMessage> messages) {
  const bool tools = supports_tools(kind);
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r == "tool" && !tools) {
      return make_error(ErrorKind::kBadRequest,
                        "message " + std::to_string(i) + " has role 'tool', but chat template " +
                            std::string(to_string(kind)) + " has no tool calling");
    }
    if (!messages[i].tool_calls.empty() && (!tools || r != "assistant")) {
      return make_error(ErrorKind::kBadRequest,
                        "message " + std::to_string(i) + " has tool_calls, which chat template " +
                            std::string(to_string(kind)) + " cannot render" +
                            (tools ? " outside an assistant message" : ""));
    }
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      return make_error(ErrorKind::kBadRequest,
                        "message " + std::to_string(i) + " has role '" + r +
                            "', expected system, " +
                            (tools ? "user, assistant or tool" : "user or assistant"));
    }
  }
  return {};
}

// For templates without a system role: an optional leading system message, then strict
// user/assistant alternation starting with user.
Status check_alternation(ChatTemplateKind kind, std::span<const ChatMessage> messages) {
  size_t start = (!messages.empty() && messages[0].role == "system") ? 1 : 0;
  for (size_t i = start; i < messages.size(); ++i) {
    const char* want = (i - start) % 2 == 0 ? "user" : "assistant";
    if (messages[i].role != want) {
      return make_error(ErrorKind::kBadRequest,
                        "chat template " + std::string(to_string(kind)) +
                            " needs user and assistant messages to alternate after an optional "
                            "system message, starting with user (message " +
                            std::to_string(i) + " is " + messages[i].role + ")");
    }
  }
  return {};
}

void render_chatml(std::span<const ChatMessage> messages, bool gen, Builder& b) {
  for (const ChatMessage& m : messages) {
    b.special("<|im_start|>");
    b.text(m.role + "\n" + m.content);
    b.special("<|im_end|>");
    b.text("\n");
  }
  if (gen) {
    b.special("<|im_start|>");
    b.text("assistant\n");
  }
}

void render_llama3(std::span<const ChatMessage> messages, bool gen, Builder& b) {
  b.special("<|begin_of_text|>");
  for (const ChatMessage& m : messages) {
    b.special("<|start_header_id|>");
    b.text(m.role);
    b.special("<|end_header_id|>");
    b.text("\n\n" + trim(m.content));
    b.special("<|eot_id|>");
  }
  if (gen) {
    b.special("<|start_header_id|>");
    b.text("assistant");
    b.special("<|end_header_id|>");
    b.text("\n\n");
  }
}

// Llama 2 chat: the system prompt sits inside the first [INST] between <<SYS>> markers.
void render_llama2(std::span<const ChatMessage> messages, Builder& b) {
  size_t start = 0;
  std::string system;
  bool has_system = !messages.empty() && messages[0].role == "system";
  if (has_system) {
    system = messages[0].content;
    start = 1;
  }
  for (size_t i = start; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    std::string content = m.content;
    if (i == start && has_system) {
      content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content;
    }
    if (m.role == "user") {
      b.special("<s>");
      b.text("[INST] " + trim(content) + " [/INST]");
    } else {
      b.text(" " + trim(content) + " ");
      b.special("</s>");
    }
  }
}

// Mistral Instruct: no system role; a system message is prepended to the first user turn.
void render_mistral(std::span<const ChatMessage> messages, Builder& b) {
  b.special("<s>");
  size_t start = 0;
  std::string system;
  if (!messages.empty() && messages[0].role == "system") {
    system = messages[0].content + "\n\n";
    start = 1;
  }
  for (size_t i = start; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      b.text("[INST] " + (i == start ? system : std::string()) + m.content + " [/INST]");
    } else {
      b.text(m.content);
      b.special("</s>");
    }
  }
}

// Gemma: roles user and model; a system message is prepended to the first user turn.
void render_gemma(std::span<const ChatMessage> messages, bool gen, Builder& b) {
  b.special("<bos>");
  size_t start = 0;
  std::string system;
  if (!messages.empty() && messages[0].role == "system") {
    system = trim(messages[0].content) + "\n\n";
    start = 1;
  }
  for (size_t i = start; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    b.special("<start_of_turn>");
    b.text((m.role == "assistant" ? std::string("model") : m.role) + "\n" +
           (i == start ? system : std::string()) + trim(m.content));
    b.special("<end_of_turn>");
    b.text("\n");
  }
  if (gen) {
    b.special("<start_of_turn>");
    b.text("model\n");
  }
}

void render_phi3(std::span<const ChatMessage> messages, bool gen, Builder& b) {
  for (const ChatMessage& m : messages) {
    b.special("<|" + m.role + "|>");
    b.text("\n" + m.content);
    b.special("<|end|>");
    b.text("\n");
  }
  if (gen) {
    b.special("<|assistant|>");
    b.text("\n");
  }
}

std::string_view strip_newlines(std::string_view s, bool left, bool right) {
  while (left && !s.empty() && s.front() == '\n') s.remove_prefix(1);
  while (right && !s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// The system turn that lists the tools (Qwen2.5 and Qwen3 word it the same; Qwen2.5 always has a
// system text, Qwen3 only the client's).
void render_tools_system(std::string_view system, const std::vector<std::string>& tools,
                         Builder& b) {
  std::string text = "system\n" + std::string(system) +
                     "# Tools\n\nYou may call one or more functions to assist with the user "
                     "query.\n\nYou are provided with function signatures within <tools></tools> "
                     "XML tags:\n<tools>";
  for (const std::string& tool : tools) text += "\n" + tool;
  text +=
      "\n</tools>\n\nFor each function call, return a json object with function name and "
      "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
      "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
  b.special("<|im_start|>");
  b.text(text);
  b.special("<|im_end|>");
  b.text("\n");
}

// A run of tool messages is one user turn of <tool_response> blocks.
void render_tool_message(std::span<const ChatMessage> messages, size_t i, Builder& b) {
  if (i == 0 || messages[i - 1].role != "tool") {
    b.special("<|im_start|>");
    b.text("user");
  }
  b.text("\n<tool_response>\n" + messages[i].content + "\n</tool_response>");
  if (i + 1 == messages.size() || messages[i + 1].role != "tool") {
    b.special("<|im_end|>");
    b.text("\n");
  }
}

// Qwen2.5: ChatML with a default system prompt, Hermes-style tools.
void render_qwen25(std::span<const ChatMessage> messages, const ChatRenderOptions& o, Builder& b) {
  const bool has_system = !messages.empty() && messages[0].role == "system";
  const std::string_view system = has_system ? messages[0].content : kQwen25DefaultSystem;
  if (!o.tools.empty()) {
    render_tools_system(std::string(system) + "\n\n", o.tools, b);
  } else {
    b.special("<|im_start|>");
    b.text("system\n" + std::string(system));
    b.special("<|im_end|>");
    b.text("\n");
  }
  for (size_t i = has_system ? 1 : 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      render_tool_message(messages, i, b);
      continue;
    }
    b.special("<|im_start|>");
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      b.text("assistant" + (m.content.empty() ? std::string() : "\n" + m.content) +
             tool_calls_text(m.tool_calls, true));
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

bool is_tool_response_text(std::string_view s) {
  return s.starts_with("<tool_response>") && s.ends_with("</tool_response>");
}

// Qwen3's assistant turn: the reasoning in <think>...</think> is dropped before the last user
// query and kept (normalized) after it; tool calls follow the content.
std::string qwen3_assistant_text(const ChatMessage& m, bool after_last_query, bool last) {
  std::string_view content = m.content;
  std::string_view reasoning;
  if (size_t end = content.find("</think>"); end != std::string_view::npos) {
    reasoning = strip_newlines(content.substr(0, end), false, true);
    if (size_t open = reasoning.rfind("<think>"); open != std::string_view::npos)
      reasoning = reasoning.substr(open + 7);
    reasoning = strip_newlines(reasoning, true, false);
    content = strip_newlines(content.substr(content.rfind("</think>") + 8), true, false);
  }
  std::string out;
  if (after_last_query && (last || !reasoning.empty())) {
    out = "assistant\n<think>\n" + std::string(strip_newlines(reasoning, true, true)) +
          "\n</think>\n\n" + std::string(strip_newlines(content, true, false));
  } else {
    out = "assistant\n" + std::string(content);
  }
  return out + tool_calls_text(m.tool_calls, !content.empty());
}

// Qwen3: ChatML, with the reasoning in assistant turns handled as its template does.
void render_qwen3(std::span<const ChatMessage> messages, const ChatRenderOptions& o, bool thinking,
                  Builder& b) {
  // The template's ns.last_query_index: the last user message that is not a wrapped tool
  // response, else the last index.
  size_t last_query = messages.empty() ? 0 : messages.size() - 1;
  for (size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role == "user" && !is_tool_response_text(messages[i].content)) {
      last_query = i;
      break;
    }
  }
  const bool has_system = !messages.empty() && messages[0].role == "system";
  if (!o.tools.empty())
    render_tools_system(has_system ? messages[0].content + "\n\n" : std::string(), o.tools, b);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (i == 0 && has_system && !o.tools.empty()) continue;
    if (m.role == "tool") {
      render_tool_message(messages, i, b);
      continue;
    }
    b.special("<|im_start|>");
    if (m.role != "assistant") {
      b.text(m.role + "\n" + m.content);
    } else {
      b.text(qwen3_assistant_text(m, i > last_query, i + 1 == messages.size()));
    }
    b.special("<|im_end|>");
    b.text("\n");
  }
  if (o.add_generation_prompt) {
    b.special("<|im_start|>");
    b.text(thinking ? "assistant\n" : "assistant\n<think>\n\n</think>\n\n");
  }
}

// Phi-4 (14B): ChatML's markers with <|im_sep|> after the role and no newlines.
void render_phi4(std::span<const ChatMessage> messages, bool gen, Builder& b) {
  for (const ChatMessage& m : messages) {
    b.special("<|im_start|>");
    b.text(m.role);
    b.special("<|im_sep|>");
    b.text(m.content);
    b.special("<|im_end|>");
  }
  if (gen) {
    b.special("<|im_start|>");
    b.text("assistant");
    b.special("<|im_sep|>");
  }
}

// Phi-4-mini: Phi-3's role markers without the newlines.
void render_phi4_mini(std::span<const ChatMessage> messages, bool gen, Builder& b) {
  for (const ChatMessage& m : messages) {
    b.special("<|" + m.role + "|>");
    b.text(m.content);
    b.special("<|end|>");
  }
  if (gen) b.special("<|assistant|>");
}

}  // namespace

namespace detail {

std::string tool_calls_text(const std::vector<ChatToolCall>& calls, bool newline_first) {
  std::string out;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i > 0 || newline_first) out += "\n";
    out += "<tool_call>\n{\"name\": \"" + calls[i].name +
           "\", \"arguments\": " + calls[i].arguments + "}\n</tool_call>";
  }
  return out;
}

}  // namespace detail

std::string_view to_string(ChatTemplateKind kind) {
  for (const NamedKind& n : kNames) {
    if (n.kind == kind) return n.name;
  }
  return "chatml";
}

std::optional<ChatTemplateKind> chat_template_from_name(std::string_view name) {
  std::string lower;
  for (char c : name)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (const NamedKind& n : kNames) {
    if (n.name == lower) return n.kind;
  }
  return std::nullopt;
}

bool supports_tools(ChatTemplateKind kind) {
  return kind == ChatTemplateKind::kQwen25 || kind == ChatTemplateKind::kQwen3 ||
         kind == ChatTemplateKind::kQwen3NoThink || kind == ChatTemplateKind::kHermes;
}

ChatTemplateKind with_thinking(ChatTemplateKind kind, bool enable_thinking) {
  if (kind == ChatTemplateKind::kQwen3 || kind == ChatTemplateKind::kQwen3NoThink)
    return enable_thinking ? ChatTemplateKind::kQwen3 : ChatTemplateKind::kQwen3NoThink;
  return kind;
}

DetectedChatTemplate detect_chat_template(std::string_view src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (src.empty()) {
    return {ChatTemplateKind::kChatMl, "the model has no chat template; using chatml"};
  }
  if (has("<|start_header_id|>")) return {ChatTemplateKind::kLlama3, {}};
  if (has("<|im_sep|>")) return {ChatTemplateKind::kPhi4, {}};
  if (has("<|im_start|>") && has("</think>")) return {ChatTemplateKind::kQwen3, {}};
  if (has("<|im_start|>") && has("You are a function calling AI model"))
    return {ChatTemplateKind::kHermes, {}};
  if (has("<|im_start|>") && has("You are Qwen, created by Alibaba Cloud"))
    return {ChatTemplateKind::kQwen25, {}};
  if (has("<|im_start|>")) return {ChatTemplateKind::kChatMl, {}};
  if (has("<start_of_turn>")) return {ChatTemplateKind::kGemma, {}};
  if (has("<|assistant|>") && has("<|end|>")) {
    // Phi-3 writes a newline after each role marker; Phi-4-mini appends the content directly.
    const bool newline = has("|>\\n") || has("|>' + '\\n'") || has("|>\n");
    return {newline ? ChatTemplateKind::kPhi3 : ChatTemplateKind::kPhi4Mini, {}};
  }
  if (has("[INST]")) {
    return {has("<<SYS>>") ? ChatTemplateKind::kLlama2 : ChatTemplateKind::kMistral, {}};
  }
  return {ChatTemplateKind::kChatMl,
          "unrecognized chat template; falling back to chatml (override with --chat-template)"};
}

ChatTemplateKind with_tool_use_template(ChatTemplateKind base, std::string_view jinja_source) {
  if (base != ChatTemplateKind::kChatMl && base != ChatTemplateKind::kHermes) return base;
  return detect_chat_template(jinja_source).kind == ChatTemplateKind::kHermes
             ? ChatTemplateKind::kHermes
             : base;
}

std::string RenderedChat::text() const {
  std::string out;
  for (const ChatPiece& p : pieces) out.append(p.text);
  return out;
}

Result<RenderedChat> render_chat(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                 bool add_generation_prompt) {
  ChatRenderOptions options;
  options.add_generation_prompt = add_generation_prompt;
  return render_chat(kind, messages, options);
}

Result<RenderedChat> render_chat(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                 const ChatRenderOptions& options) {
  if (auto s = check_roles(kind, messages); !s) return std::move(s).error();
  if (!options.tools.empty() && !supports_tools(kind))
    return make_error(ErrorKind::kBadRequest,
                      "chat template " + std::string(to_string(kind)) + " has no tool calling");
  const bool add_generation_prompt = options.add_generation_prompt;
  Builder b;
  switch (kind) {
    case ChatTemplateKind::kChatMl:
      render_chatml(messages, add_generation_prompt, b);
      break;
    case ChatTemplateKind::kLlama3:
      render_llama3(messages, add_generation_prompt, b);
      break;
    case ChatTemplateKind::kLlama2:
      if (auto s = check_alternation(kind, messages); !s) return std::move(s).error();
      render_llama2(messages, b);
      break;
    case ChatTemplateKind::kMistral:
      if (auto s = check_alternation(kind, messages); !s) return std::move(s).error();
      render_mistral(messages, b);
      break;
    case ChatTemplateKind::kGemma:
      if (auto s = check_alternation(kind, messages); !s) return std::move(s).error();
      render_gemma(messages, add_generation_prompt, b);
      break;
    case ChatTemplateKind::kPhi3:
      render_phi3(messages, add_generation_prompt, b);
      break;
    case ChatTemplateKind::kPhi4:
      render_phi4(messages, add_generation_prompt, b);
      break;
    case ChatTemplateKind::kPhi4Mini:
      render_phi4_mini(messages, add_generation_prompt, b);
      break;
    case ChatTemplateKind::kQwen3:
    case ChatTemplateKind::kQwen3NoThink:
      render_qwen3(messages, options, kind == ChatTemplateKind::kQwen3, b);
      break;
    case ChatTemplateKind::kQwen25:
      render_qwen25(messages, options, b);
      break;
    case ChatTemplateKind::kHermes:
      // Without tools the model's default template applies: ChatML.
      if (options.tools.empty()) {
        render_chatml(messages, add_generation_prompt, b);
      } else {
        render_hermes_tools(messages, options, b);
      }
      break;
  }
  if (add_generation_prompt) b.text(options.generation_prefix);
  return b.take();
}

std::string bos_token_text(const Tokenizer& tokenizer) {
  const int32_t bos = tokenizer.bos_id();
  for (const SpecialToken& t : tokenizer.special_tokens()) {
    if (bos >= 0 && t.id == bos) return std::string(t.text);
  }
  return {};
}

std::vector<int32_t> encode_chat(const Tokenizer& tokenizer, const RenderedChat& chat) {
  std::vector<int32_t> out;
  bool strip_next = false;  // the last special token takes the white space after it
  for (const ChatPiece& p : chat.pieces) {
    if (p.special) {
      int32_t id = tokenizer.special_token_id(p.text);
      if (id >= 0) {
        out.push_back(id);
        strip_next = strips_right(tokenizer, id);
        continue;
      }
    }
    std::string_view text = strip_next ? strip_leading_space(p.text) : std::string_view(p.text);
    strip_next = false;
    // Message text: user-defined tokens (<think>, <tool_call>) still count, control ones do not.
    std::vector<int32_t> ids = encode_with_special_tokens(tokenizer, text, false, false);
    out.insert(out.end(), ids.begin(), ids.end());
  }
  return out;
}

}  // namespace cutline::model
