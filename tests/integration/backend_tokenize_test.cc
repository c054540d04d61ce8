// cutline-backend's tokenizer endpoints and special-token parsing, end to end: POST /tokenize and
// /detokenize on the real binary (tiny=builtin: byte-level BPE with <|begin_of_text|>,
// <|im_start|>, <|im_end|> control tokens and a ChatML template), and /v1/completions counting
// the prompt's tokens the same way.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend_harness.h"

namespace cutline::test {
namespace {

// The "tokens" array of a /tokenize answer (plain ids).
std::vector<int64_t> token_ids(const std::string& json) {
  std::vector<int64_t> out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) return out;
  simdjson::dom::array tokens;
  if (doc["tokens"].get_array().get(tokens) != simdjson::SUCCESS) return out;
  for (auto t : tokens) {
    int64_t id = 0;
    if (t.get_int64().get(id) == simdjson::SUCCESS) out.push_back(id);
  }
  return out;
}

std::string string_field(const std::string& json, const char* pointer) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view s;
  if (parser.parse(json).get(doc) != simdjson::SUCCESS) return "<not json>";
  if (doc.at_pointer(pointer).get_string().get(s) != simdjson::SUCCESS) return "<absent>";
  return std::string(s);
}

std::string ids_json(const std::vector<int64_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s + "]";
}

class BackendTokenize : public ::testing::Test {
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
Backend* BackendTokenize::backend_ = nullptr;

const char* kChatText = R"(<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n)";

TEST_F(BackendTokenize, SpecialTokenTextIsTheTokenAndRoundTrips) {
  auto parsed = backend_->post("/tokenize", std::string(R"({"model":"tiny","prompt":")") +
                                                kChatText + R"(","add_special_tokens":false})");
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->status, 200) << parsed->body;
  const std::vector<int64_t> ids = token_ids(parsed->body);
  ASSERT_FALSE(ids.empty()) << parsed->body;
  EXPECT_EQ(json_number(parsed->body, "/count"), static_cast<double>(ids.size()));
  EXPECT_EQ(json_number(parsed->body, "/max_model_len"), 2048);

  auto plain =
      backend_->post("/tokenize", std::string(R"({"model":"tiny","prompt":")") + kChatText +
                                      R"(","add_special_tokens":false,)"
                                      R"("parse_special":false})");
  ASSERT_TRUE(plain.ok());
  ASSERT_EQ(plain->status, 200) << plain->body;
  const std::vector<int64_t> plain_ids = token_ids(plain->body);
  // Three markers of 12 characters each are three tokens, not a dozen text tokens.
  EXPECT_GE(plain_ids.size(), ids.size() + 9) << parsed->body << "\n" << plain->body;
  EXPECT_EQ(std::count(ids.begin(), ids.end(), ids.front()), 2) << "<|im_start|> is one token";

  // The pieces name the markers, and detokenize gives the text back.
  auto pieces = backend_->post("/tokenize", std::string(R"({"prompt":")") + kChatText +
                                                R"(","add_special_tokens":false,)"
                                                R"("with_pieces":true})");
  ASSERT_TRUE(pieces.ok());
  EXPECT_EQ(string_field(pieces->body, "/tokens/0/piece"), "<|im_start|>") << pieces->body;
  EXPECT_EQ(json_number(pieces->body, "/tokens/0/id"), static_cast<double>(ids[0]));
  auto text = backend_->post("/detokenize", R"({"model":"tiny","tokens":)" + ids_json(ids) + "}");
  ASSERT_TRUE(text.ok());
  ASSERT_EQ(text->status, 200) << text->body;
  EXPECT_EQ(string_field(text->body, "/prompt"),
            "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
}

TEST_F(BackendTokenize, MessagesAreRenderedWithTheChatTemplate) {
  auto chat = backend_->post(
      "/tokenize", R"({"model":"tiny","messages":[{"role":"user","content":"Hi there"}]})");
  auto raw = backend_->post("/tokenize", std::string(R"({"model":"tiny","prompt":")") + kChatText +
                                             R"(","add_special_tokens":false})");
  ASSERT_TRUE(chat.ok() && raw.ok());
  ASSERT_EQ(chat->status, 200) << chat->body;
  EXPECT_EQ(token_ids(chat->body), token_ids(raw->body));
}

TEST_F(BackendTokenize, CompletionsParseSpecialTokensUnlessTurnedOff) {
  auto tokenized = backend_->post("/tokenize", std::string(R"({"prompt":")") + kChatText + "\"}");
  ASSERT_TRUE(tokenized.ok());
  const double with_bos = json_number(tokenized->body, "/count");
  auto usage_of = [&](const std::string& extra) {
    auto r = backend_->post("/v1/completions", std::string(R"({"model":"tiny","prompt":")") +
                                                   kChatText + R"(","max_tokens":1)" + extra + "}");
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
    return json_number(r->body, "/usage/prompt_tokens");
  };
  EXPECT_EQ(usage_of(""), with_bos);
  EXPECT_EQ(usage_of(R"(,"add_special_tokens":false)"), with_bos - 1);
  EXPECT_GE(usage_of(R"(,"parse_special":false)"), with_bos + 9);
}

TEST_F(BackendTokenize, BadInputIsAnOpenAiStyle400) {
  struct Case {
    const char* path;
    const char* body;
    const char* param;
  };
  for (Case c : {Case{"/tokenize", R"({"model":"tiny","prompt":5})", "prompt"},
                 Case{"/tokenize", R"({"model":"tiny"})", "prompt"},
                 Case{"/tokenize", R"({"prompt":"a","messages":[]})", "messages"},
                 Case{"/tokenize", R"({"messages":[{"role":"robot","content":"x"}]})", "messages"},
                 Case{"/tokenize", R"({"prompt":"a","with_pieces":"yes"})", "with_pieces"},
                 Case{"/tokenize", R"({"prompt":"a","parse_special":1})", "parse_special"},
                 Case{"/detokenize", R"({"tokens":[1,-4]})", "tokens"},
                 Case{"/detokenize", R"({"tokens":[99999999]})", "tokens"},
                 Case{"/detokenize", R"({"tokens":"12"})", "tokens"},
                 Case{"/v1/completions", R"({"model":"tiny","prompt":"a","parse_special":"no"})",
                      "parse_special"}}) {
    auto r = backend_->post(c.path, c.body);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 400) << c.body << " -> " << r->body;
    EXPECT_EQ(string_field(r->body, "/error/param"), c.param) << c.body << " -> " << r->body;
    EXPECT_EQ(string_field(r->body, "/error/type"), "invalid_request_error") << r->body;
  }
  auto not_json = backend_->post("/tokenize", "{\"prompt\":");
  ASSERT_TRUE(not_json.ok());
  EXPECT_EQ(not_json->status, 400);
  auto unknown = backend_->post("/tokenize", R"({"model":"nope","prompt":"a"})");
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->status, 404);
  EXPECT_NE(unknown->body.find("model_not_found"), std::string::npos) << unknown->body;
  auto get = backend_->get("/tokenize");
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->status, 400);
}

TEST(BackendNoParseSpecial, FlagKeepsSpecialTokenTextAsText) {
  Backend backend;
  ASSERT_TRUE(backend.start({"--model", "tiny=builtin", "--no-parse-special"}))
      << backend.stderr_text();
  const std::string prompt = std::string(R"({"prompt":")") + kChatText;
  auto off = backend.post("/tokenize", prompt + "\"}");
  auto on = backend.post("/tokenize", prompt + R"(","parse_special":true})");
  ASSERT_TRUE(off.ok() && on.ok());
  EXPECT_GE(json_number(off->body, "/count"), json_number(on->body, "/count") + 9)
      << off->body << "\n"
      << on->body;
}

}  // namespace
}  // namespace cutline::test
