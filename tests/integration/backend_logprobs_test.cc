// logprobs / top_logprobs on the real cutline-backend (tiny=builtin): chat's
// choices[].logprobs.content and completions' column-wise logprobs, streamed and not, in OpenAI's
// shapes; the raw model distribution (unchanged by temperature); bounds refused with 400.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend_harness.h"

namespace cutline::test {
namespace {

class BackendLogprobs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    backend_ = new Backend();
    ASSERT_TRUE(backend_->start({"--model", "tiny=builtin"})) << backend_->stderr_text();
  }
  static void TearDownTestSuite() {
    delete backend_;
    backend_ = nullptr;
  }
  static Backend* backend_;
};
Backend* BackendLogprobs::backend_ = nullptr;

using simdjson::SUCCESS;
namespace dom = simdjson::dom;

// Checks one chat logprobs entry; returns its token's bytes.
std::string check_chat_entry(dom::element e, size_t top_n) {
  std::string_view token;
  EXPECT_EQ(e["token"].get_string().get(token), SUCCESS);
  double logprob = 1;
  EXPECT_EQ(e["logprob"].get_double().get(logprob), SUCCESS);
  EXPECT_LE(logprob, 0.0);
  std::string bytes;
  dom::array arr;
  EXPECT_EQ(e["bytes"].get_array().get(arr), SUCCESS);
  for (dom::element b : arr) bytes += static_cast<char>(int64_t(b));
  if (token.rfind("bytes:", 0) != 0) {
    EXPECT_EQ(bytes, token);  // valid UTF-8: its bytes
  }
  dom::array top;
  EXPECT_EQ(e["top_logprobs"].get_array().get(top), SUCCESS);
  EXPECT_EQ(top.size(), top_n);
  double prev = 0;
  bool first = true;
  for (dom::element t : top) {
    double lp = 1;
    EXPECT_EQ(t["logprob"].get_double().get(lp), SUCCESS);
    if (!first) {
      EXPECT_LE(lp, prev);  // most likely first
    }
    first = false;
    prev = lp;
    std::string_view tt;
    EXPECT_EQ(t["token"].get_string().get(tt), SUCCESS);
  }
  return bytes;
}

TEST_F(BackendLogprobs, ChatNonStreaming) {
  auto r = backend_->post("/v1/chat/completions",
                          R"({"model":"tiny","messages":[{"role":"user","content":"Hi"}],)"
                          R"("max_tokens":6,"seed":7,"logprobs":true,"top_logprobs":3})");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  dom::parser parser;
  dom::element doc = parser.parse(r->body);
  dom::array content;
  ASSERT_EQ(doc.at_pointer("/choices/0/logprobs/content").get_array().get(content), SUCCESS)
      << r->body;
  EXPECT_EQ(content.size(), 6u);  // one entry per output token
  for (dom::element e : content) check_chat_entry(e, 3);
  EXPECT_TRUE(cutline_of(r->body).has_value()) << r->body;
  EXPECT_EQ(json_number(r->body, "/usage/completion_tokens"), 6);

  // logprobs: true alone: the sampled tokens' logprobs, no alternatives.
  auto plain = backend_->post("/v1/chat/completions",
                              R"({"model":"tiny","messages":[{"role":"user","content":"Hi"}],)"
                              R"("max_tokens":6,"seed":7,"logprobs":true})");
  ASSERT_TRUE(plain.ok());
  dom::parser p2;
  dom::element d2 = p2.parse(plain->body);
  dom::array c2;
  ASSERT_EQ(d2.at_pointer("/choices/0/logprobs/content").get_array().get(c2), SUCCESS);
  for (dom::element e : c2) check_chat_entry(e, 0);
  // Asking for logprobs does not change the answer; not asking writes none.
  auto none = backend_->post("/v1/chat/completions",
                             R"({"model":"tiny","messages":[{"role":"user","content":"Hi"}],)"
                             R"("max_tokens":6,"seed":7})");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->body.find("logprobs"), std::string::npos) << none->body;
  dom::parser p3;
  dom::element d3 = p3.parse(none->body);
  EXPECT_EQ(std::string_view(doc.at_pointer("/choices/0/message/content")),
            std::string_view(d3.at_pointer("/choices/0/message/content")));
}

TEST_F(BackendLogprobs, ChatStreamingChunksCarryTheirTokens) {
  auto r = backend_->post("/v1/chat/completions",
                          R"({"model":"tiny","messages":[{"role":"user","content":"Hi"}],)"
                          R"("max_tokens":8,"seed":7,"logprobs":true,"top_logprobs":2,)"
                          R"("stream":true})");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  size_t entries = 0;
  for (const std::string& chunk : sse_payloads(r->body)) {
    dom::parser parser;
    dom::element doc = parser.parse(chunk);
    dom::array content;
    if (doc.at_pointer("/choices/0/logprobs/content").get_array().get(content) != SUCCESS) continue;
    for (dom::element e : content) {
      check_chat_entry(e, 2);
      ++entries;
    }
  }
  EXPECT_EQ(entries, 8u) << r->body;
}

TEST_F(BackendLogprobs, CompletionsColumnsStreamedAndNot) {
  auto r = backend_->post("/v1/completions",
                          R"({"model":"tiny","prompt":"Once upon a time","max_tokens":5,)"
                          R"("seed":7,"logprobs":2})");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  dom::parser parser;
  dom::element doc = parser.parse(r->body);
  dom::array tokens, token_logprobs, top, offsets;
  ASSERT_EQ(doc.at_pointer("/choices/0/logprobs/tokens").get_array().get(tokens), SUCCESS)
      << r->body;
  ASSERT_EQ(doc.at_pointer("/choices/0/logprobs/token_logprobs").get_array().get(token_logprobs),
            SUCCESS);
  ASSERT_EQ(doc.at_pointer("/choices/0/logprobs/top_logprobs").get_array().get(top), SUCCESS);
  ASSERT_EQ(doc.at_pointer("/choices/0/logprobs/text_offset").get_array().get(offsets), SUCCESS);
  EXPECT_EQ(tokens.size(), 5u);
  EXPECT_EQ(token_logprobs.size(), 5u);
  EXPECT_EQ(top.size(), 5u);
  EXPECT_EQ(offsets.size(), 5u);
  for (dom::element t : top) {
    dom::object o;
    ASSERT_EQ(t.get_object().get(o), SUCCESS);
    // Two alternatives and the sampled token when it is not one of them (fewer keys when two
    // tokens spell the same text).
    EXPECT_GE(o.size(), 1u);
    EXPECT_LE(o.size(), 3u);
  }
  int64_t prev = -1;
  for (dom::element o : offsets) {
    EXPECT_GE(int64_t(o), prev);
    prev = int64_t(o);
  }
  EXPECT_EQ(int64_t(offsets.at(0)), 0);
  EXPECT_TRUE(cutline_of(r->body).has_value()) << r->body;
  EXPECT_EQ(json_number(r->body, "/usage/completion_tokens"), 5);

  // Streamed: the chunks' columns add up to the same tokens and logprobs.
  auto s = backend_->post("/v1/completions",
                          R"({"model":"tiny","prompt":"Once upon a time","max_tokens":5,)"
                          R"("seed":7,"logprobs":2,"stream":true})");
  ASSERT_TRUE(s.ok());
  std::vector<double> streamed;
  for (const std::string& chunk : sse_payloads(s->body)) {
    dom::parser p;
    dom::element d = p.parse(chunk);
    dom::array lps;
    if (d.at_pointer("/choices/0/logprobs/token_logprobs").get_array().get(lps) != SUCCESS)
      continue;
    for (dom::element v : lps) streamed.push_back(double(v));
  }
  ASSERT_EQ(streamed.size(), 5u) << s->body;
  size_t i = 0;
  for (dom::element v : token_logprobs) EXPECT_DOUBLE_EQ(double(v), streamed[i++]);
}

// The reported distribution is the model's (raw logits): at the first position, where both runs
// see the same prompt, the alternatives do not depend on the temperature.
TEST_F(BackendLogprobs, RawModelLogprobsIndependentOfTemperature) {
  auto first_top = [&](const char* temperature) {
    auto r = backend_->post(
        "/v1/chat/completions",
        std::string(R"({"model":"tiny","messages":[{"role":"user","content":"Hi"}],)") +
            R"("max_tokens":1,"seed":7,"logprobs":true,"top_logprobs":5,"temperature":)" +
            temperature + "}");
    EXPECT_TRUE(r.ok());
    dom::parser parser;
    dom::element doc = parser.parse(r->body);
    dom::element top = doc.at_pointer("/choices/0/logprobs/content/0/top_logprobs");
    return simdjson::to_string(top);
  };
  const std::string cold = first_top("0.1");
  EXPECT_NE(cold.find("logprob"), std::string::npos) << cold;
  EXPECT_EQ(cold, first_top("1.9"));
}

// The Responses API: include ["message.output_text.logprobs"] and top_logprobs give each delta
// its tokens' logprobs and the final output_text part all of them.
TEST_F(BackendLogprobs, ResponsesDeltasAndFinalPart) {
  auto r = backend_->post("/v1/responses", R"({"model":"tiny","input":"Hi","max_output_tokens":7,)"
                                           R"("seed":7,"stream":true,"top_logprobs":2,)"
                                           R"("include":["message.output_text.logprobs"]})");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  size_t in_deltas = 0;
  std::string last;
  for (const std::string& event : sse_payloads(r->body)) {
    dom::parser parser;
    dom::element doc = parser.parse(event);
    std::string_view type;
    ASSERT_EQ(doc["type"].get_string().get(type), SUCCESS);
    if (type == "response.output_text.delta") {
      dom::array lps;
      ASSERT_EQ(doc["logprobs"].get_array().get(lps), SUCCESS) << event;
      for (dom::element e : lps) {
        check_chat_entry(e, 2);
        ++in_deltas;
      }
    }
    last = event;
  }
  EXPECT_EQ(in_deltas, 7u) << r->body;
  dom::parser parser;
  dom::element doc = parser.parse(last);
  dom::array final_lps;
  ASSERT_EQ(doc.at_pointer("/response/output/0/content/0/logprobs").get_array().get(final_lps),
            SUCCESS)
      << last;
  EXPECT_EQ(final_lps.size(), 7u);
  EXPECT_EQ(json_number(last, "/response/top_logprobs"), 2);
}

TEST_F(BackendLogprobs, BoundsAreOpenAiStyle400s) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})",
       "top_logprobs"},
      {R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":-1})",
       "top_logprobs"},
      {R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"top_logprobs":2})",
       "top_logprobs"},
      {R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"logprobs":"yes"})",
       "logprobs"},
      {R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":1.5})",
       "top_logprobs"},
  };
  for (const auto& [body, param] : cases) {
    auto r = backend_->post("/v1/chat/completions", body);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 400) << body << " -> " << r->body;
    EXPECT_NE(r->body.find("\"param\":\"" + param + "\""), std::string::npos) << r->body;
  }
  for (const char* body : {R"({"model":"tiny","prompt":"x","logprobs":21})",
                           R"({"model":"tiny","prompt":"x","logprobs":true})"}) {
    auto r = backend_->post("/v1/completions", body);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 400) << body << " -> " << r->body;
    EXPECT_NE(r->body.find("\"param\":\"logprobs\""), std::string::npos) << r->body;
  }
}

}  // namespace
}  // namespace cutline::test
