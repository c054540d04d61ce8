// The quick start as shipped: deploy/local/fake.yaml, its addresses moved to free ports and its
// upstream to the scripted fake, serves what today's OpenAI SDKs call — chat, completions, the
// Responses API, embeddings and the models list — under its one rule.

#include <gtest/gtest.h>

#include <string>

#include "gateway_harness.h"

namespace cutline::test {
namespace {

// `text` with every `from` replaced by `to`; fails the test when `from` is absent.
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  EXPECT_NE(text.find(from), std::string::npos) << from;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

std::string quick_start_yaml(uint16_t fake_port, const std::string& log_path) {
  std::string yaml = read_file(std::string(CUTLINE_SOURCE_DIR) + "/deploy/local/fake.yaml");
  yaml = replace_all(yaml, "address: 127.0.0.1:8080", "address: 127.0.0.1:0");
  const std::string admin = "admin:\n  address: ";
  const size_t at = yaml.find(admin);
  EXPECT_NE(at, std::string::npos) << yaml;
  if (at != std::string::npos) {
    const size_t value = at + admin.size();
    yaml.replace(value, yaml.find('\n', value) - value, "127.0.0.1:0");
  }
  yaml = replace_all(yaml, "url: http://127.0.0.1:8081",
                     "url: http://127.0.0.1:" + std::to_string(fake_port));
  return replace_all(yaml, "access_log: stdout", "access_log: " + log_path);
}

class QuickStartTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(env_.start(quick_start_yaml)) << env_.error; }
  void TearDown() override { env_.stop(); }

  proto::HttpResponse post(const std::string& path, const std::string& body) {
    proto::HttpHeaders h{{"Content-Type", "application/json"}};
    h.add("X-Fake-Script", "tokens=3");
    auto r = proto::http_fetch(env_.url(path), "POST", h, body, 10000);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r).value() : proto::HttpResponse{};
  }

  GatewayEnv env_;
};

TEST_F(QuickStartTest, ServesEveryRouteTheSdksCall) {
  auto chat = post("/v1/chat/completions",
                   R"({"model":"fake","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(chat.status, 200) << chat.body;
  EXPECT_NE(chat.body.find(R"("policy":"interactive")"), std::string::npos) << chat.body;

  auto completion = post("/v1/completions", R"({"model":"fake","prompt":"hi"})");
  EXPECT_EQ(completion.status, 200) << completion.body;

  // The Responses API, as the SDKs' client.responses.create sends it.
  auto responses = post("/v1/responses", R"({"model":"fake","input":"hi"})");
  EXPECT_EQ(responses.status, 200) << responses.body;
  EXPECT_NE(responses.body.find(R"("object":"response")"), std::string::npos) << responses.body;
  EXPECT_NE(responses.body.find(R"("policy":"interactive")"), std::string::npos) << responses.body;

  auto embeddings = post("/v1/embeddings", R"({"model":"fake","input":"hello"})");
  EXPECT_EQ(embeddings.status, 200) << embeddings.body;
  EXPECT_NE(embeddings.body.find(R"("embedding":)"), std::string::npos) << embeddings.body;
  EXPECT_NE(embeddings.body.find(R"("policy":"interactive")"), std::string::npos)
      << embeddings.body;

  auto models = proto::http_fetch(env_.url("/v1/models"));
  ASSERT_TRUE(models.ok()) << models.error().message;
  EXPECT_EQ(models->status, 200) << models->body;
}

}  // namespace
}  // namespace cutline::test
