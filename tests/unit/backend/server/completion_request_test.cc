#include "cutline/server/completion_request.h"

#include <gtest/gtest.h>

namespace cutline::server {
namespace {

// One token per byte (ids 0..255), BOS 256, EOS 257; no special tokens by text.
class ByteTokenizer : public model::Tokenizer {
 public:
  ByteTokenizer() {
    for (int i = 0; i < 256; ++i) bytes_.emplace_back(1, static_cast<char>(i));
  }
  int32_t vocab_size() const override { return 258; }
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> ids;
    if (add_bos) ids.push_back(256);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string_view token_bytes(int32_t id) const override {
    return id < 256 ? std::string_view(bytes_[static_cast<size_t>(id)]) : std::string_view();
  }
  int32_t special_token_id(std::string_view) const override { return -1; }
  int32_t bos_id() const override { return 256; }
  std::span<const int32_t> eos_ids() const override { return {&eos_, 1}; }
  bool is_control(int32_t id) const override { return id >= 256; }

 private:
  std::vector<std::string> bytes_;
  int32_t eos_ = 257;
};

class CompletionRequest : public ::testing::Test {
 protected:
  Result<engine::AddRequest> build(
      const std::string& body, proto::Endpoint endpoint, int32_t context = 2048,
      model::ChatTemplateKind chat_template = model::ChatTemplateKind::kChatMl) {
    body_ = body;
    auto parsed = proto::parse_openai_request(body_, endpoint);
    EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.error().message);
    if (!parsed.ok()) return parsed.error();
    parsed_ = std::move(parsed).value();
    ModelTextInfo info;
    info.tokenizer = &tok_;
    info.chat_template = chat_template;
    info.context_length = context;
    return build_add_request(parsed_, info, "req-1", detail_);
  }
  ByteTokenizer tok_;
  std::string body_;
  proto::ParsedRequest parsed_;
  RequestErrorDetail detail_;
};

TEST_F(CompletionRequest, CompletionPromptSamplingAndStops) {
  auto add = build(R"({"model":"m","prompt":"hi","max_tokens":5,"temperature":0.5,"top_p":0.9,)"
                   R"("top_k":40,"seed":11,"stop":["\n\n","END"]})",
                   proto::Endpoint::kCompletions);
  ASSERT_TRUE(add.ok()) << add.error().message;
  EXPECT_EQ(add->request_id, "req-1");
  EXPECT_EQ(add->prompt, (std::vector<int32_t>{256, 'h', 'i'}));
  EXPECT_FLOAT_EQ(add->sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(add->sampling.top_p, 0.9f);
  EXPECT_EQ(add->sampling.top_k, 40);
  EXPECT_EQ(add->sampling.seed, 11u);
  EXPECT_EQ(add->stop.max_tokens, 5);
  EXPECT_EQ(add->stop.stop_strings, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_FALSE(add->stop.ignore_eos);
}

TEST_F(CompletionRequest, ChatIsRenderedWithTheTemplate) {
  auto add = build(R"({"model":"m","messages":[{"role":"user","content":"yo"}]})",
                   proto::Endpoint::kChatCompletions);
  ASSERT_TRUE(add.ok()) << add.error().message;
  std::string text;
  for (int32_t id : add->prompt) text += std::string(tok_.token_bytes(id));
  EXPECT_EQ(text, "<|im_start|>user\nyo<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_FALSE(add->stop.max_tokens.has_value());
}

TEST_F(CompletionRequest, Qwen3ThinkingIsSwitchedPerRequestByChatTemplateKwargs) {
  const std::string messages = R"("messages":[{"role":"user","content":"yo"}])";
  auto prompt_of = [&](const std::string& body, model::ChatTemplateKind kind) {
    auto add = build(body, proto::Endpoint::kChatCompletions, 2048, kind);
    EXPECT_TRUE(add.ok()) << (add.ok() ? "" : add.error().message);
    std::string text;
    if (add.ok())
      for (int32_t id : add->prompt) text += std::string(tok_.token_bytes(id));
    return text;
  };
  const std::string thinking = "<|im_start|>user\nyo<|im_end|>\n<|im_start|>assistant\n";
  const std::string not_thinking = thinking + "<think>\n\n</think>\n\n";
  using K = model::ChatTemplateKind;
  EXPECT_EQ(prompt_of(R"({"model":"m",)" + messages + "}", K::kQwen3), thinking);
  EXPECT_EQ(prompt_of(R"({"model":"m",)" + messages +
                          R"(,"chat_template_kwargs":{"enable_thinking":false}})",
                      K::kQwen3),
            not_thinking);
  // A server started with thinking off turns it on for one request, and back.
  EXPECT_EQ(prompt_of(R"({"model":"m",)" + messages +
                          R"(,"chat_template_kwargs":{"enable_thinking":true}})",
                      K::kQwen3NoThink),
            thinking);
  EXPECT_EQ(prompt_of(R"({"model":"m",)" + messages + "}", K::kQwen3NoThink), not_thinking);
  // A template without the switch ignores it, and other template parameters are accepted.
  EXPECT_EQ(prompt_of(R"({"model":"m",)" + messages +
                          R"(,"chat_template_kwargs":{"enable_thinking":false,"x":1}})",
                      K::kChatMl),
            thinking);
}

TEST_F(CompletionRequest, MalformedChatTemplateKwargsAre400NamingTheField) {
  const std::string head = R"({"model":"m","messages":[{"role":"user","content":"yo"}],)";
  auto not_object =
      build(head + R"("chat_template_kwargs":true})", proto::Endpoint::kChatCompletions);
  ASSERT_FALSE(not_object.ok());
  EXPECT_EQ(not_object.error().status(), 400);
  EXPECT_EQ(detail_.param, "chat_template_kwargs");
  auto not_bool = build(head + R"("chat_template_kwargs":{"enable_thinking":"no"}})",
                        proto::Endpoint::kChatCompletions);
  ASSERT_FALSE(not_bool.ok());
  EXPECT_EQ(not_bool.error().status(), 400);
  EXPECT_EQ(detail_.param, "chat_template_kwargs.enable_thinking");
}

TEST_F(CompletionRequest, IgnoreEosExtension) {
  auto add =
      build(R"({"model":"m","prompt":"x","ignore_eos":true})", proto::Endpoint::kCompletions);
  ASSERT_TRUE(add.ok());
  EXPECT_TRUE(add->stop.ignore_eos);
}

TEST_F(CompletionRequest, PromptLongerThanContextIs400WithContextLength) {
  auto add = build(R"({"model":"m","prompt":"0123456789"})", proto::Endpoint::kCompletions, 8);
  ASSERT_FALSE(add.ok());
  EXPECT_EQ(add.error().status(), 400);
  EXPECT_NE(add.error().message.find("context_length"), std::string::npos);
  EXPECT_NE(add.error().message.find("11 tokens"), std::string::npos);
  EXPECT_EQ(detail_.code, "context_length_exceeded");
  EXPECT_EQ(detail_.param, "prompt");
}

TEST_F(CompletionRequest, RefusalsNameTheField) {
  EXPECT_FALSE(build(R"({"model":"m","prompt":"x","n":2})", proto::Endpoint::kCompletions).ok());
  EXPECT_EQ(detail_.param, "n");
  EXPECT_FALSE(build(R"({"model":"m","prompt":[1,2,999]})", proto::Endpoint::kCompletions).ok());
  EXPECT_EQ(detail_.param, "prompt");
  EXPECT_FALSE(build(R"({"model":"m","prompt":["a","b"]})", proto::Endpoint::kCompletions).ok());
  EXPECT_EQ(detail_.param, "prompt");
  auto bad_role = build(R"({"model":"m","messages":[{"role":"wizard","content":"x"}]})",
                        proto::Endpoint::kChatCompletions);
  ASSERT_FALSE(bad_role.ok());
  EXPECT_EQ(detail_.param, "messages");
}

TEST_F(CompletionRequest, TokenPromptPassesThrough) {
  auto add = build(R"({"model":"m","prompt":[5,6,7]})", proto::Endpoint::kCompletions);
  ASSERT_TRUE(add.ok());
  EXPECT_EQ(add->prompt, (std::vector<int32_t>{5, 6, 7}));
}

}  // namespace
}  // namespace cutline::server
