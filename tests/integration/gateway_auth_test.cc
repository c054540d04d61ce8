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

// `Expect: 100-continue` is answered only once the key is known good: a client without one gets
// its 401 (with the stop record) before it uploads anything, and the connection closes; a
// client with the right key gets `100 Continue`, sends its body and is served.
TEST_F(GatewayAuthTest, NoContinueBeforeAuthentication) {
  const std::string body = R"({"model":"fake","messages":[{"role":"user","content":"hi"}]})";
  const std::string head =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nX-Fake-Script: tokens=2\r\n"
      "Expect: 100-continue\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n";
  {
    RawClient c(env->port);
    ASSERT_TRUE(c.connected());
    c.send_all(head + "Authorization: Bearer sk-wrong\r\n\r\n");
    // Nothing of the body was sent: the answer must come without it, and be the 401.
    const std::string got = c.read_until("\"cutline\"", 5000);
    EXPECT_EQ(got.rfind("HTTP/1.1 401", 0), 0u) << got;
    EXPECT_EQ(got.find("100 Continue"), std::string::npos) << got;
    EXPECT_NE(got.find("admission_rejected"), std::string::npos) << got;
    EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  }
  {
    RawClient c(env->port);
    ASSERT_TRUE(c.connected());
    c.send_all(head + "Authorization: Bearer sk-alice-example\r\n\r\n");
    const std::string interim = c.read_until("\r\n\r\n", 5000);
    ASSERT_EQ(interim.rfind("HTTP/1.1 100 Continue\r\n\r\n", 0), 0u) << interim;
    c.send_all(body);
    const std::string got = c.read_until("\"cause\":\"eos\"", 5000);
    EXPECT_NE(got.find("HTTP/1.1 200"), std::string::npos) << got;
    EXPECT_NE(got.find("\"cause\":\"eos\""), std::string::npos) << got;
  }
}

}  // namespace
}  // namespace cutline::test
