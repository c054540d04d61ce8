#include "cutline/model/chat_template.h"

#include <cctype>

#include "cutline/model/special_tokens.h"

namespace cutline::model {

namespace {

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
};

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

class Builder {
 public:
  void special(std::string_view text) { chat_.pieces.push_back({true, std::string(text)}); }
  void text(std::string_view text) {
    if (text.empty()) return;
    if (!chat_.pieces.empty() && !chat_.pieces.back().special) {
      chat_.pieces.back().text.append(text);
    } else {
      chat_.pieces.push_back({false, std::string(text)});
    }
  }
  RenderedChat take() { return std::move(chat_); }

 private:
  RenderedChat chat_;
};

Status check_roles(std::span<const ChatMessage> messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r != "system" && r != "user" && r != "assistant") {
      return make_error(ErrorKind::kBadRequest, "message " + std::to_string(i) + " has role '" + r +
                                                    "', expected system, user or assistant");
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

// Qwen3: ChatML, with the reasoning in assistant turns handled as its template does.
void render_qwen3(std::span<const ChatMessage> messages, bool gen, bool thinking, Builder& b) {
  // The last user message (as the template's ns.last_query_index: the last index without one).
  size_t last_query = messages.empty() ? 0 : messages.size() - 1;
  for (size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role == "user") {
      last_query = i;
      break;
    }
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    std::string_view content = m.content;
    b.special("<|im_start|>");
    if (m.role != "assistant") {
      b.text(m.role + "\n" + m.content);
    } else {
      std::string_view reasoning;
      if (size_t end = content.find("</think>"); end != std::string_view::npos) {
        reasoning = strip_newlines(content.substr(0, end), false, true);
        if (size_t open = reasoning.rfind("<think>"); open != std::string_view::npos)
          reasoning = reasoning.substr(open + 7);
        reasoning = strip_newlines(reasoning, true, false);
        content = strip_newlines(content.substr(content.rfind("</think>") + 8), true, false);
      }
      if (i > last_query && (i + 1 == messages.size() || !reasoning.empty())) {
        b.text("assistant\n<think>\n" + std::string(strip_newlines(reasoning, true, true)) +
               "\n</think>\n\n" + std::string(strip_newlines(content, true, false)));
      } else {
        b.text("assistant\n" + std::string(content));
      }
    }
    b.special("<|im_end|>");
    b.text("\n");
  }
  if (gen) {
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

std::string RenderedChat::text() const {
  std::string out;
  for (const ChatPiece& p : pieces) out.append(p.text);
  return out;
}

Result<RenderedChat> render_chat(ChatTemplateKind kind, std::span<const ChatMessage> messages,
                                 bool add_generation_prompt) {
  if (auto s = check_roles(messages); !s) return std::move(s).error();
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
      render_qwen3(messages, add_generation_prompt, kind == ChatTemplateKind::kQwen3, b);
      break;
  }
  return b.take();
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
