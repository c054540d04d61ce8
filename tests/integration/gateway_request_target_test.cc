// Request-targets that try to reach a core route without its rules, over HTTP/1.1 and HTTP/2,
// against a fake upstream that routes as a lenient framework does (--lenient-routes: fragment
// dropped, escapes decoded, ";params", case and trailing blanks ignored). Every spelling either
// is refused (400 invalid_request with its stop record) or is run as the route it names, under
// its rule: the upstream never serves a completion with the client's max_tokens, and /v1/models
// is never answered unfiltered. Also: a target with invalid UTF-8 is logged escaped, and
// `cutline policy advise` still reads that log.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../unit/proto/http2_test_client.h"
#include "gateway_harness.h"

namespace cutline::test {
namespace {

using proto::testing::Http2TestClient;

GatewayEnv* env = nullptr;

// One catch-all rule (so any other path is passthrough) that clamps max_tokens
// to 4; the upstream serves "fake" only (its "fake-secret" is filtered out of /v1/models).
std::string policy_yaml(uint16_t fake_port, const std::string& log_path) {
  return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
         "access_log: " +
         log_path +
         "\nupstreams:\n  - name: fake\n    url: http://127.0.0.1:" + std::to_string(fake_port) +
         "\n    models: [\"fake\"]\n"
         "policies:\n  - name: clamp\n    match: {}\n    budget: {max_output_tokens: 4}\n";
}

const std::string kChat =
    R"({"model":"fake","messages":[{"role":"user","content":"hi"}],"max_tokens":5000})";

// The spellings of POST /v1/chat/completions a lenient router serves as chat.
const std::vector<std::string> kRefused = {
    "/V1/chat/completions",       "/v1/Chat/Completions",     "/v1/chat/completions;x=1",
    "/v1/chat/completions%20",    "/v1/chat/completions%0A",  "/v1/chat/completions%3Bx",
    "/v1/chat/x/..;/completions", "/v1;v=2/chat/completions",
};
// Spellings that are the chat route once normalised as a router would.
const std::vector<std::string> kChatRoute = {
    "/v1/chat/completions",
    "/v1/chat/completions#x",
    "/v1/chat/completions#/../x",
    "/v1/chat/%63ompletions#x",
};

struct Answer {
  int status = 0;
  std::string head;  // HTTP/1.1: status line and headers; HTTP/2: "cutline-stop" value
  std::string body;
};

// A request over HTTP/1.1 with the target as written (a raw request: no client library would
// send a fragment).
Answer request_http1(const std::string& method, const std::string& target,
                     const std::string& body) {
  RawClient c(env->port);
  c.send_all(method + " " + target +
             " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "X-Fake-Script: tokens=20\r\nConnection: close\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n" + body);
  const std::string raw = c.read_until("\x01never", 10000);  // the whole answer, to the close
  Answer a;
  if (raw.rfind("HTTP/1.1 ", 0) == 0) a.status = std::atoi(raw.c_str() + 9);
  const size_t end = raw.find("\r\n\r\n");
  a.head = raw.substr(0, end);
  if (end != std::string::npos) a.body = raw.substr(end + 4);
  return a;
}

Answer request_http2(const std::string& method, const std::string& target,
                     const std::string& body) {
  Http2TestClient client(env->port, {});
  EXPECT_TRUE(client.connected());
  const int32_t id = client.submit(
      method, target, body, {{"content-type", "application/json"}, {"x-fake-script", "tokens=20"}});
  EXPECT_GT(id, 0);
  Answer a;
  if (id <= 0 || !client.run_until([&] { return client.response(id).closed; }, 10000)) return a;
  const auto& r = client.response(id);
  a.status = r.status;
  a.head = std::string(r.headers.get("cutline-stop").value_or(""));
  a.body = r.body;
  return a;
}

std::string fake_requests() {
  auto r = proto::http_fetch(env->fake_url("/fake/requests"));
  return r.ok() ? r->body : "";
}

void reset_fake() { ASSERT_TRUE(proto::http_fetch(env->fake_url("/fake/reset"), "POST").ok()); }

class RequestTargetTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    env = new GatewayEnv;
    env->fake_args = {"--lenient-routes"};
    ASSERT_TRUE(env->start(policy_yaml)) << env->error;
  }
  static void TearDownTestSuite() {
    env->stop();
    delete env;
    env = nullptr;
  }

  // The chat answer under the rule: clamped to 4 tokens, with its stop record.
  static void expect_clamped_chat(const Answer& a, const std::string& what) {
    EXPECT_EQ(a.status, 200) << what << ": " << a.body;
    EXPECT_NE(a.body.find(R"("content":"t0 t1 t2 t3 ")"), std::string::npos) << what << a.body;
    EXPECT_NE(a.body.find(R"("effective_max_tokens":4)"), std::string::npos) << what << a.body;
  }
  static void expect_refused(const Answer& a, const std::string& what) {
    EXPECT_EQ(a.status, 400) << what << ": " << a.body;
    EXPECT_NE(a.body.find(R"("type":"invalid_request_error")"), std::string::npos)
        << what << ": " << a.body;
    EXPECT_NE(a.body.find(R"("cause":"invalid_request")"), std::string::npos) << what << a.body;
    EXPECT_NE(a.head.find("cause=invalid_request"), std::string::npos) << what << ": " << a.head;
  }
  // Nothing the upstream received carried the client's max_tokens.
  static void expect_upstream_only_clamped(const std::string& what) {
    const std::string seen = fake_requests();
    EXPECT_EQ(seen.find("5000"), std::string::npos) << what << ": " << seen;
  }
};

TEST_F(RequestTargetTest, Http1ChatVariantsAreRefusedOrRunUnderTheRule) {
  for (const std::string& target : kRefused) {
    reset_fake();
    expect_refused(request_http1("POST", target, kChat), "HTTP/1.1 " + target);
    EXPECT_EQ(fake_requests(), "[]") << target;
  }
  for (const std::string& target : kChatRoute) {
    reset_fake();
    expect_clamped_chat(request_http1("POST", target, kChat), "HTTP/1.1 " + target);
    const std::string seen = fake_requests();
    EXPECT_NE(seen.find(R"("target":"/v1/chat/completions")"), std::string::npos) << seen;
    expect_upstream_only_clamped(target);
  }
}

TEST_F(RequestTargetTest, Http2ChatVariantsAreRefusedOrRunUnderTheRule) {
  for (const std::string& target : kRefused) {
    reset_fake();
    expect_refused(request_http2("POST", target, kChat), "HTTP/2 " + target);
    EXPECT_EQ(fake_requests(), "[]") << target;
  }
  for (const std::string& target : kChatRoute) {
    reset_fake();
    expect_clamped_chat(request_http2("POST", target, kChat), "HTTP/2 " + target);
    expect_upstream_only_clamped(target);
  }
}

// "/v1/chat/completions/.." is "/v1/chat" once its dot segment is resolved: passthrough to a path
// that is no route upstream either, never the chat route.
TEST_F(RequestTargetTest, ADotSegmentLeavesTheRoute) {
  reset_fake();
  const Answer a = request_http1("POST", "/v1/chat/completions/..", kChat);
  EXPECT_EQ(a.body.find("chat.completion"), std::string::npos) << a.body;
  const std::string seen = fake_requests();
  EXPECT_NE(seen.find(R"("path":"/v1/chat","target":"/v1/chat")"), std::string::npos) << seen;
}

// GET /v1/models under any spelling is the gateway's filtered list or refused; the upstream's
// own list (with fake-secret) never reaches the client.
TEST_F(RequestTargetTest, ModelsVariantsNeverAnswerTheUnfilteredList) {
  const std::string filtered = R"({"object":"list","data":[{"id":"fake","object":"model"}]})";
  for (bool h2 : {false, true}) {
    for (const std::string target : {"/v1/models#x", "/v1/models"}) {
      const Answer a = h2 ? request_http2("GET", target, "") : request_http1("GET", target, "");
      EXPECT_EQ(a.status, 200) << target;
      EXPECT_EQ(a.body, filtered) << (h2 ? "HTTP/2 " : "HTTP/1.1 ") << target;
    }
    for (const std::string target :
         {"/V1/models", "/v1/models;x", "/v1/models%20", "/v1/MODELS/"}) {
      const Answer a = h2 ? request_http2("GET", target, "") : request_http1("GET", target, "");
      EXPECT_EQ(a.status, 400) << target << ": " << a.body;
      EXPECT_EQ(a.body.find("fake-secret"), std::string::npos) << target << ": " << a.body;
    }
  }
}

// A target with invalid UTF-8 is refused, and its access-log line stays valid JSON: the bytes are
// escaped as \xNN, and `cutline policy advise` reads the log.
TEST_F(RequestTargetTest, InvalidUtf8InTheTargetIsLoggedEscapedAndTheLogStaysReadable) {
  expect_clamped_chat(request_http1("POST", "/v1/chat/completions", kChat), "before");
  RawClient c(env->port);
  c.send_all("GET /v1/\xff\xfe\x80models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  const std::string raw = c.read_until("\x01never", 10000);
  EXPECT_EQ(raw.rfind("HTTP/1.1 400", 0), 0u) << raw;
  ASSERT_TRUE(wait_for([] {
    return read_file(env->log_path).find(R"("path":"/v1/\\xff\\xfe\\x80models")") !=
           std::string::npos;
  })) << read_file(env->log_path);
  const std::string log = read_file(env->log_path);
  EXPECT_EQ(std::count_if(log.begin(), log.end(), [](char ch) { return ch & 0x80; }), 0)
      << "a raw byte over 0x7f in the access log";

  const std::string out = env->dir + "/advise.out", err = env->dir + "/advise.err";
  const int rc = run_to_exit({CUTLINE_BIN, "policy", "advise", env->log_path}, out, err);
  EXPECT_EQ(rc, 0) << read_file(out) << read_file(err);
  EXPECT_EQ(read_file(err).find("line "), std::string::npos) << read_file(err);
  EXPECT_NE(read_file(out).find("requests read"), std::string::npos) << read_file(out);
}

}  // namespace
}  // namespace cutline::test
