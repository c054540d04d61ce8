#pragma once
// What the chat template renderers share across files (chat_template.cc and the families kept in
// their own files): the builder of a RenderedChat, and those families' entry points.

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cutline/model/chat_template.h"

namespace cutline::model::detail {

// Appends the pieces of a rendered chat: a special token's text as its own piece, plain text
// merged into the plain piece before it.
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

// Each call as <tool_call>\n{"name": "...", "arguments": {...}}\n</tool_call>; `newline_first`
// puts "\n" before the first one too (Hermes-style templates: Qwen2.5, Qwen3, Hermes).
std::string tool_calls_text(const std::vector<ChatToolCall>& calls, bool newline_first);

// Hermes 2 Pro / Hermes 3 with tools (chat_template_hermes.cc).
void render_hermes_tools(std::span<const ChatMessage> messages, const ChatRenderOptions& o,
                         Builder& b);

}  // namespace cutline::model::detail
