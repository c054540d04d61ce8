#include "cutline/server/logprobs_writer.h"

#include <gtest/gtest.h>

namespace cutline::server {
namespace {

// Ids 0..3: "a", "é" (2 bytes), the first byte of "é" alone, "</s>" (control).
class SmallTokenizer : public model::Tokenizer {
 public:
  int32_t vocab_size() const override { return 4; }
  std::vector<int32_t> encode(std::string_view, bool) const override { return {}; }
  std::string_view token_bytes(int32_t id) const override {
    static const std::string kPieces[] = {"a", "\xc3\xa9", "\xc3", "</s>"};
    return kPieces[id];
  }
  int32_t special_token_id(std::string_view) const override { return -1; }
  int32_t bos_id() const override { return -1; }
  std::span<const int32_t> eos_ids() const override { return {&eos_, 1}; }
  bool is_control(int32_t id) const override { return id == 3; }

 private:
  int32_t eos_ = 3;
};

TEST(LogprobsWriter, ChatItemsInOpenAiShape) {
  SmallTokenizer tok;
  std::vector<engine::TokenLogprobs> t(2);
  t[0].token = 0;
  t[0].logprob = -0.5f;
  t[0].top = {{0, -0.5f}, {1, -1.25f}};
  t[1].token = 2;
  t[1].logprob = -2.0f;
  std::string items;
  append_chat_logprobs_items(items, t, tok);
  EXPECT_EQ(chat_logprobs_object(items),
            R"({"content":[{"token":"a","logprob":-0.5,"bytes":[97],"top_logprobs":[)"
            R"({"token":"a","logprob":-0.5,"bytes":[97]},)"
            R"({"token":"é","logprob":-1.25,"bytes":[195,169]}]},)"
            R"({"token":"bytes:\\xc3","logprob":-2,"bytes":[195],"top_logprobs":[]}]})");
}

TEST(LogprobsWriter, CompletionColumnsCountTextOffsets) {
  SmallTokenizer tok;
  CompletionLogprobs columns(tok);
  std::vector<engine::TokenLogprobs> t(3);
  t[0] = {1, -1.0f, {{1, -1.0f}}};
  t[1] = {0, -0.25f, {{0, -0.25f}}};
  t[2] = {3, -3.0f, {}};
  columns.add(std::span(t).first(2));
  EXPECT_EQ(columns.object(), R"({"tokens":["é","a"],"token_logprobs":[-1,-0.25],)"
                              R"("top_logprobs":[{"é":-1},{"a":-0.25}],"text_offset":[0,2]})");
  columns.clear();  // a streamed chunk's columns; offsets continue
  columns.add(std::span(t).subspan(2));
  EXPECT_EQ(
      columns.object(),
      R"({"tokens":["</s>"],"token_logprobs":[-3],"top_logprobs":[{"</s>":-3}],"text_offset":[3]})");
}

TEST(LogprobsWriter, SplicesIntoAOneChoiceBody) {
  std::string chunk = R"({"id":"x","choices":[{"index":0,"text":"a","finish_reason":null}]})";
  ASSERT_TRUE(insert_choice_logprobs(chunk, R"({"tokens":[]})"));
  EXPECT_EQ(chunk, R"({"id":"x","choices":[{"index":0,"text":"a","finish_reason":null,)"
                   R"("logprobs":{"tokens":[]}}]})");
  append_top_level(chunk, "usage", R"({"total_tokens":1})");
  EXPECT_EQ(chunk, R"({"id":"x","choices":[{"index":0,"text":"a","finish_reason":null,)"
                   R"("logprobs":{"tokens":[]}}],"usage":{"total_tokens":1}})");
  std::string other = R"({"choices":[],"usage":{}})";
  EXPECT_FALSE(insert_choice_logprobs(other, "{}"));
}

}  // namespace
}  // namespace cutline::server
