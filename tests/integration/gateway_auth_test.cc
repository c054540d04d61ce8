// Tenants: bearer API keys map to tenants (the policy holds only SHA-256 digests); a missing or
// wrong key gets 401 with a stop record, the right one is served, labeled with its tenant in the
// access log and metrics, and the gateway's key is not forwarded upstream; another tenant's model
// is answered as a model that does not exist.

#include <gtest/gtest.h>

#include <regex>

#include "gateway_harness.h"

namespace cutline::test {
namespace {

// printf %s sk-alice-example | sha256sum
constexpr const char* kAliceDigest =
    "d48fce52832c460238fb82e9f6c57be593ad27ea6ddb5e15d74d1fb4245a76cd";
// printf %s sk-bob-example | sha256sum
constexpr const char* kBobDigest =
    "9760aba61e770a3b93a0662169442fe51e88c935d1a213ea1f97874ab7116062";

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

// Two tenants, alice with models of her own: what bob is told about one of them is exactly what
// he is told about a model that does not exist (404 model_not_found, the same body and stop
// record but for the name), so he cannot learn that alice's rule names it. The access log keeps
// why: no rule matched.
class TwoTenantsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    env = new GatewayEnv;
    ASSERT_TRUE(env->start([](uint16_t fake_port, const std::string& log) {
      return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
             "access_log: " +
             log + "\nupstreams:\n  - name: fake\n    url: http://127.0.0.1:" +
             std::to_string(fake_port) +
             "\n    models: [\"fake\", \"alice-*\", \"other-*\", \"chat-only-*\"]\n"
             "tenants:\n"
             "  - name: alice\n    api_keys: [\"sha256:" +
             kAliceDigest +
             "\"]\n"
             "  - name: bob\n    api_keys: [\"sha256:" +
             kBobDigest +
             "\"]\n"
             "policies:\n"
             "  - name: alice-models\n    match: {tenants: [alice], models: [\"alice-*\"]}\n"
             "  - name: shared\n    match: {models: [fake]}\n"
             "  - name: alice-chat\n    match: {tenants: [alice], models: [\"chat-only-*\"], "
             "routes: [/v1/chat/completions]}\n";
    })) << env->error;
  }
  static void TearDownTestSuite() {
    env->stop();
    delete env;
  }
  static proto::HttpResponse post(const std::string& key, const std::string& model) {
    proto::HttpHeaders h{{"Content-Type", "application/json"},
                         {"X-Fake-Script", "tokens=2"},
                         {"Authorization", "Bearer " + key}};
    auto r = proto::http_fetch(
        env->url("/v1/chat/completions"), "POST", h,
        R"({"model":")" + model + R"(","messages":[{"role":"user","content":"hi"}]})", 5000);
    EXPECT_TRUE(r.ok());
    return r.ok() ? std::move(r).value() : proto::HttpResponse{};
  }
  // The answer with what differs between any two requests (id, timing) and the model's name
  // taken out.
  static std::string shape(const proto::HttpResponse& r, const std::string& model) {
    std::string text = std::to_string(r.status) + "\n" +
                       std::string(r.headers.get("Cutline-Stop").value_or("")) + "\n" + r.body;
    text = std::regex_replace(text, std::regex(R"("request_id":"[^"]*")"), "ID");
    text = std::regex_replace(text, std::regex(R"(request_id=[^;]*)"), "ID");
    text = std::regex_replace(text, std::regex(R"("duration_ms":[0-9.e+-]+)"), "DURATION");
    text = std::regex_replace(text, std::regex(R"(duration_ms=[^;]*)"), "DURATION");
    for (size_t at; (at = text.find(model)) != std::string::npos;)
      text.replace(at, model.size(), "M");
    return text;
  }
  static GatewayEnv* env;
};
GatewayEnv* TwoTenantsTest::env = nullptr;

TEST_F(TwoTenantsTest, AnotherTenantsModelIsAnsweredAsAnUnknownModel) {
  auto own = post("sk-alice-example", "alice-secret");
  EXPECT_EQ(own.status, 200) << own.body;

  auto others = post("sk-bob-example", "alice-secret");    // alice's rule names it
  auto unnamed = post("sk-bob-example", "other-model");    // served, but no rule names it
  auto unknown = post("sk-bob-example", "no-such-model");  // no upstream serves it
  EXPECT_EQ(others.status, 404) << others.body;
  EXPECT_NE(others.body.find(R"("type":"invalid_request_error")"), std::string::npos)
      << others.body;
  EXPECT_NE(others.body.find(R"("code":"model_not_found")"), std::string::npos) << others.body;
  EXPECT_NE(others.body.find(R"("param":"model")"), std::string::npos) << others.body;
  EXPECT_NE(
      others.body.find("The model `alice-secret` does not exist or you do not have access to it."),
      std::string::npos)
      << others.body;
  EXPECT_EQ(others.body.find("alice-models"), std::string::npos) << others.body;
  EXPECT_EQ(others.body.find("tenant"), std::string::npos) << others.body;
  EXPECT_EQ(shape(others, "alice-secret"), shape(unknown, "no-such-model"));
  EXPECT_EQ(shape(unnamed, "other-model"), shape(unknown, "no-such-model"));

  // Internally the refusal says why.
  std::string line;
  ASSERT_TRUE(wait_for([&] {
    const std::string log = read_file(env->log_path);
    for (size_t begin = 0, end; begin < log.size(); begin = end + 1) {
      end = log.find('\n', begin);
      if (end == std::string::npos) end = log.size();
      line = log.substr(begin, end - begin);
      if (line.find(R"("tenant":"bob","model":"alice-secret")") != std::string::npos) return true;
    }
    return false;
  })) << read_file(env->log_path);
  EXPECT_NE(line.find(R"("tenant":"bob")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("status":404)"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("cause":"policy_denied")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("origin":"policy")"), std::string::npos) << line;
  EXPECT_NE(line.find("no policy matches this request"), std::string::npos) << line;
  // Counted as a refusal of the policy, not as an admission problem (no alert about capacity).
  auto m = proto::http_fetch(env->admin_url("/metrics"));
  ASSERT_TRUE(m.ok());
  const size_t stops = m->body.find(R"(cutline_stops_total{cause="policy_denied")");
  ASSERT_NE(stops, std::string::npos) << m->body;
  const std::string series = m->body.substr(stops, m->body.find('\n', stops) - stops);
  EXPECT_NE(series.find(R"(origin="policy")"), std::string::npos) << series;
  EXPECT_EQ(m->body.find(R"(cutline_stops_total{cause="admission_rejected")"), std::string::npos)
      << m->body;
}

// A model the tenant may use on chat, asked for on completions: the tenant knows the model, so
// the refusal says what it is (403, the route is not allowed). Another tenant asking the same is
// still told the model is unknown.
TEST_F(TwoTenantsTest, AModelServedOnAnotherRouteIsA403ForItsOwnTenantOnly) {
  const auto completion = [](const std::string& key, const std::string& model) {
    proto::HttpHeaders h{{"Content-Type", "application/json"},
                         {"X-Fake-Script", "tokens=2"},
                         {"Authorization", "Bearer " + key}};
    auto r = proto::http_fetch(env->url("/v1/completions"), "POST", h,
                               R"({"model":")" + model + R"(","prompt":"hi"})", 5000);
    EXPECT_TRUE(r.ok());
    return r.ok() ? std::move(r).value() : proto::HttpResponse{};
  };
  EXPECT_EQ(post("sk-alice-example", "chat-only-1").status, 200);
  auto own = completion("sk-alice-example", "chat-only-1");
  EXPECT_EQ(own.status, 403) << own.body;
  EXPECT_NE(own.body.find(R"("type":"permission_error")"), std::string::npos) << own.body;
  EXPECT_NE(own.body.find("is not served on /v1/completions"), std::string::npos) << own.body;
  EXPECT_NE(own.body.find(R"("cause":"policy_denied")"), std::string::npos) << own.body;
  EXPECT_EQ(own.body.find("alice-chat"), std::string::npos) << own.body;  // no rule named

  auto others = completion("sk-bob-example", "chat-only-1");
  auto unknown = completion("sk-bob-example", "no-such-model");
  EXPECT_EQ(others.status, 404) << others.body;
  EXPECT_EQ(shape(others, "chat-only-1"), shape(unknown, "no-such-model"));
}

}  // namespace
}  // namespace cutline::test
