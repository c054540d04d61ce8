// Tenants: bearer API keys map to tenants (the policy holds only SHA-256 digests); a missing or
// wrong key gets 401 with a stop record, the right one is served, labeled with its tenant in the
// access log and metrics, and the gateway's key is not forwarded upstream.

#include <gtest/gtest.h>

#include "gateway_harness.h"

namespace cutline::test {
namespace {

// printf %s sk-alice-example | sha256sum
constexpr const char* kAliceDigest =
    "d48fce52832c460238fb82e9f6c57be593ad27ea6ddb5e15d74d1fb4245a76cd";

class GatewayAuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    env = new GatewayEnv;
    ASSERT_TRUE(env->start([](uint16_t fake_port, const std::string& log) {
      return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
             "access_log: " +
             log +
             "\n"
             "upstreams:\n  - name: fake\n    url: http://127.0.0.1:" +
             std::to_string(fake_port) +
             "\n    models: [\"fake\"]\n"
             "tenants:\n  - name: alice\n    api_keys: [\"sha256:" +
             kAliceDigest +
             "\"]\n"
             "policies:\n  - name: default\n    match: {}\n";
    })) << env->error;
  }
  static void TearDownTestSuite() {
    env->stop();
    delete env;
  }
  static proto::HttpResponse post(const std::string& auth) {
    proto::HttpHeaders h{{"Content-Type", "application/json"}, {"X-Fake-Script", "tokens=2"}};
    if (!auth.empty()) h.add("Authorization", auth);
    auto r =
        proto::http_fetch(env->url("/v1/chat/completions"), "POST", h,
                          R"({"model":"fake","messages":[{"role":"user","content":"hi"}]})", 5000);
    EXPECT_TRUE(r.ok());
    return r.ok() ? std::move(r).value() : proto::HttpResponse{};
  }
  static GatewayEnv* env;
};
GatewayEnv* GatewayAuthTest::env = nullptr;

TEST_F(GatewayAuthTest, MissingOrWrongKeyIs401WithAStopRecord) {
  for (const std::string auth : {"", "Bearer sk-wrong", "Basic abc"}) {
    auto r = post(auth);
    EXPECT_EQ(r.status, 401) << auth << ": " << r.body;
    EXPECT_NE(r.body.find("authentication_error"), std::string::npos) << r.body;
    EXPECT_NE(r.headers.get("Cutline-Stop").value_or("").find("admission_rejected"),
              std::string::npos);
  }
  // Passthrough paths are protected too.
  auto models = proto::http_fetch(env->url("/v1/models"));
  ASSERT_TRUE(models.ok());
  EXPECT_EQ(models->status, 401);
}

TEST_F(GatewayAuthTest, RightKeyIsServedAsItsTenantAndNotForwarded) {
  auto r = post("Bearer sk-alice-example");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("\"cause\":\"eos\""), std::string::npos);
  EXPECT_TRUE(wait_for(
      [] { return read_file(env->log_path).find("\"tenant\":\"alice\"") != std::string::npos; }));
  auto m = proto::http_fetch(env->admin_url("/metrics"));
  ASSERT_TRUE(m.ok());
  EXPECT_NE(m->body.find("tenant=\"alice\""), std::string::npos);
  auto seen = proto::http_fetch(env->fake_url("/fake/requests"));
  ASSERT_TRUE(seen.ok());
  EXPECT_NE(seen->body.find("\"authorization\":\"\""), std::string::npos) << seen->body;
  EXPECT_EQ(seen->body.find("sk-alice-example"), std::string::npos);
  // The key never reaches the access log either.
  EXPECT_EQ(read_file(env->log_path).find("sk-alice-example"), std::string::npos);
}

}  // namespace
}  // namespace cutline::test
