// What the gateway leaves untouched (DESIGN.md "Fidelity"): finish reasons it did not cause,
// tool-call deltas, SSE events it does not know and upstream error bodies reach the client as the
// upstream sent them, with the stop record beside them; the real gateway in front of the scripted
// fake upstream.

#include <gtest/gtest.h>

#include "gateway_harness.h"

namespace cutline::test {
namespace {

GatewayEnv* env = nullptr;

std::string policy_yaml(uint16_t fake_port, const std::string& log_path) {
  return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
         "access_log: " +
         log_path +
         "\nupstreams:\n"
         "  - name: fake\n    url: http://127.0.0.1:" +
         std::to_string(fake_port) +
         "\n    models: [\"fake\", \"fake-*\"]\n"
         "policies:\n"
         "  - name: deadline\n    match: {headers: {x-policy: deadline}}\n    deadline: 200ms\n"
         "  - name: default\n    match: {}\n";
}

class FidelityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    env = new GatewayEnv;
    ASSERT_TRUE(env->start(policy_yaml)) << env->error;
  }
  static void TearDownTestSuite() {
    env->stop();
    delete env;
    env = nullptr;
  }

  static proto::HttpResponse post(const std::string& body, const std::string& script,
                                  proto::HttpHeaders h = {},
                                  const std::string& path = "/v1/chat/completions") {
    h.add("Content-Type", "application/json");
    if (!script.empty()) h.add("X-Fake-Script", script);
    auto r = proto::http_fetch(env->url(path), "POST", h, body, 10000);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r).value() : proto::HttpResponse{};
  }

  static std::string chat(bool stream, const std::string& extra = "") {
    return std::string(R"({"model":"fake","messages":[{"role":"user","content":"hi"}],"stream":)") +
           (stream ? "true" : "false") + extra + "}";
  }

  static std::string log_line(const std::string& request_id) {
    std::string line;
    wait_for([&] {
      std::istringstream in(read_file(env->log_path));
      for (std::string l; std::getline(in, l);) {
        if (l.find("\"request_id\":\"" + request_id + "\"") != std::string::npos) {
          line = l;
          return true;
        }
      }
      return false;
    });
    return line;
  }

  static std::string metrics() {
    auto r = proto::http_fetch(env->admin_url("/metrics"));
    return r.ok() ? r->body : "";
  }
};

TEST_F(FidelityTest, StreamedParallelToolCallsKeepTheirDeltasAndFinishReason) {
  auto r = post(chat(true), "tools=2");
  ASSERT_EQ(r.status, 200) << r.body;
  bool done = false;
  const auto payloads = sse_payloads(r.body, &done);
  EXPECT_TRUE(done);
  // Every delta as the upstream sent it: two calls, each one's arguments in two pieces.
  std::string args0, args1;
  proto::ChunkParser p;
  for (const std::string& data : payloads) {
    const size_t at = data.find("\"arguments\":\"");
    if (at == std::string::npos) continue;
    const bool second = data.find("\"index\":1,") != std::string::npos &&
                        data.find("\"tool_calls\":[{\"index\":1") != std::string::npos;
    size_t end = at + 13;  // the closing quote: the first one not escaped
    while (end < data.size() && data[end] != '"') end += data[end] == '\\' ? 2 : 1;
    std::string piece = data.substr(at + 13, end - at - 13);
    (second ? args1 : args0) += piece;
  }
  EXPECT_EQ(args0, R"({\"city\":\"City 0\"})") << r.body;
  EXPECT_EQ(args1, R"({\"city\":\"City 1\"})") << r.body;
  const std::string last = last_chunk(r.body);
  ASSERT_TRUE(p.parse(last).ok()) << last;
  EXPECT_EQ(p.chunk().finish_reason(), "tool_calls") << last;
  ASSERT_TRUE(p.chunk().cutline.has_value());
  EXPECT_EQ(p.chunk().cutline->cause, proto::Cause::kEos);
}

TEST_F(FidelityTest, NonStreamedToolCallsKeepTheirFinishReason) {
  auto r = post(chat(false), "tools=2");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find(R"("finish_reason":"tool_calls")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("arguments":"{\"city\":\"City 1\"}")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("cause":"eos")"), std::string::npos) << r.body;
}

TEST_F(FidelityTest, ContentFilterIsItsOwnCauseAndPassesThrough) {
  for (bool stream : {true, false}) {
    auto r = post(chat(stream), "tokens=2,finish=content_filter");
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string body = stream ? last_chunk(r.body) : r.body;
    EXPECT_NE(body.find(R"("finish_reason":"content_filter")"), std::string::npos) << body;
    EXPECT_NE(body.find(R"("cause":"content_filter","origin":"model")"), std::string::npos) << body;
  }
  EXPECT_NE(metrics().find("cause=\"content_filter\""), std::string::npos);
}

TEST_F(FidelityTest, UnknownFinishReasonsAndEventTypesPassThroughIntact) {
  auto r = post(chat(true), "tokens=2,finish=brand_new_reason,event=vendor.progress");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("event: vendor.progress\ndata: {\"note\":\"x\"}\n\n"), std::string::npos)
      << r.body;
  const std::string last = last_chunk(r.body);
  EXPECT_NE(last.find(R"("finish_reason":"brand_new_reason")"), std::string::npos) << last;
  EXPECT_NE(last.find(R"("cause":"upstream_error")"), std::string::npos) << last;
  auto plain = post(chat(false), "tokens=2,finish=brand_new_reason,event=vendor.progress");
  EXPECT_NE(plain.body.find(R"("finish_reason":"brand_new_reason")"), std::string::npos)
      << plain.body;
}

TEST_F(FidelityTest, AGatewayCutStillLabelsTheFinishReason) {
  proto::HttpHeaders h{{"X-Policy", "deadline"}};
  auto r = post(chat(true), "tokens=200,interval_ms=10", h);
  const std::string last = last_chunk(r.body);
  EXPECT_NE(last.find(R"("finish_reason":"length")"), std::string::npos) << last;
  EXPECT_NE(last.find(R"("cause":"gateway_deadline")"), std::string::npos) << last;
}

TEST_F(FidelityTest, UpstreamClientErrorsKeepTheirStatusBodyAndCode) {
  for (bool stream : {true, false}) {
    auto r =
        post(chat(stream), "status=400,type=invalid_request_error,code=context_length_exceeded");
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(r.body,
              R"({"error":{"message":"fake upstream status 400","type":"invalid_request_error",)"
              R"("param":null,"code":"context_length_exceeded"}})");
    const std::string stop(r.headers.get("Cutline-Stop").value_or(""));
    EXPECT_NE(stop.find("cause=upstream_error"), std::string::npos) << stop;
    const std::string id(r.headers.get("Cutline-Request-Id").value_or(""));
    ASSERT_FALSE(id.empty());
    EXPECT_NE(log_line(id).find("\"status\":400"), std::string::npos) << log_line(id);
  }
  auto r = post(chat(false), "status=503,code=overloaded");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find(R"("code":"overloaded")"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace cutline::test
