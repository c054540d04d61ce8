// What the gateway leaves untouched (DESIGN.md "Fidelity"): finish reasons it did not cause,
// tool-call deltas, SSE events it does not know and upstream error bodies reach the client as the
// upstream sent them, with the stop record beside them (and, in a JSON error body, in it); the real
// gateway in front of the scripted fake upstream.

#include <gtest/gtest.h>

#include "cutline/proto/wire/openai_error.h"
#include "gateway_harness.h"
#include "support/ci.h"

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
         "  - name: keyed\n    url: http://127.0.0.1:" +
         std::to_string(fake_port) +
         "\n    models: [\"keyed\"]\n"
         "    api_key: env:CUTLINE_TEST_UPSTREAM_KEY\n"
         "    headers: {X-Upstream-Org: env:CUTLINE_TEST_UPSTREAM_ORG}\n"
         "policies:\n"
         "  - name: deadline\n    match: {headers: {x-policy: deadline}}\n    deadline: 200ms\n"
         "  - name: clamp\n    match: {headers: {x-policy: clamp}}\n"
         "    budget: {max_output_tokens: 4}\n"
         "  - name: forward\n    match: {headers: {x-policy: forward}}\n"
         "    forward_client_key: true\n"
         "  - name: default\n    match: {}\n";
}

class FidelityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The keyed upstream's credentials, as an operator would export them.
    setenv("CUTLINE_TEST_UPSTREAM_KEY", "sk-upstream-secret", 1);
    setenv("CUTLINE_TEST_UPSTREAM_ORG", "org-secret", 1);
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

  // What the fake upstream received, as JSON (reset first with reset_fake()).
  static std::string fake_requests() {
    auto r = proto::http_fetch(env->fake_url("/fake/requests"));
    return r.ok() ? r->body : "";
  }
  static void reset_fake() {
    auto r = proto::http_fetch(env->fake_url("/fake/reset"), "POST", {}, "", 5000);
    ASSERT_TRUE(r.ok());
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

// The upstream's error members byte for byte, and the gateway's record, the answer's only one,
// where the gateway's own error bodies carry it (error.cutline).
void expect_upstream_error_with_record(const proto::HttpResponse& r, const std::string& members) {
  SCOPED_TRACE(r.body);
  const std::string open = R"({"error":{"cutline":{"v":1,"cause":"upstream_error",)";
  ASSERT_EQ(r.body.rfind(open, 0), 0u);
  const size_t end = r.body.find(R"(},"message":)");
  ASSERT_NE(end, std::string::npos);
  EXPECT_EQ(r.body.substr(end + 2), members);
  size_t records = 0;
  for (size_t at = 0; (at = r.body.find("\"cutline\":", at)) != std::string::npos; ++at) ++records;
  EXPECT_EQ(records, 1u);
  auto parsed = proto::parse_error_body(r.body);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  ASSERT_TRUE(parsed->cutline);
  EXPECT_EQ(parsed->cutline->cause, proto::Cause::kUpstreamError);
  EXPECT_EQ(parsed->cutline->reporter, "gateway");
  EXPECT_EQ(r.headers.get("Content-Length").value_or(""), std::to_string(r.body.size()));
}

TEST_F(FidelityTest, UpstreamClientErrorsKeepTheirStatusBodyAndCode) {
  for (bool stream : {true, false}) {
    auto r =
        post(chat(stream), "status=400,type=invalid_request_error,code=context_length_exceeded");
    EXPECT_EQ(r.status, 400) << r.body;
    expect_upstream_error_with_record(
        r, R"("message":"fake upstream status 400","type":"invalid_request_error",)"
           R"("param":null,"code":"context_length_exceeded"}})");
    const std::string stop(r.headers.get("Cutline-Stop").value_or(""));
    EXPECT_NE(stop.find("cause=upstream_error"), std::string::npos) << stop;
    const std::string id(r.headers.get("Cutline-Request-Id").value_or(""));
    ASSERT_FALSE(id.empty());
    EXPECT_NE(log_line(id).find("\"status\":400"), std::string::npos) << log_line(id);
  }
  auto r = post(chat(false), "status=503,code=overloaded");
  EXPECT_EQ(r.status, 503);
  expect_upstream_error_with_record(
      r, R"("message":"fake upstream status 503","type":"server_error","param":null,)"
         R"("code":"overloaded"}})");
}

// A Cutline backend's own record in its error body gives way to the gateway's: one per answer.
TEST_F(FidelityTest, AnUpstreamsRecordInItsErrorBodyIsReplacedByTheGateways) {
  for (bool stream : {true, false}) {
    auto r = post(chat(stream), "status=503,code=overloaded,cutline=backend_oom");
    EXPECT_EQ(r.status, 503) << r.body;
    // In the backend's place, its cause kept as upstream_cause.
    EXPECT_EQ(
        r.body.rfind(R"({"error":{"message":"fake upstream status 503","type":"server_error",)"
                     R"("param":null,"code":"overloaded","cutline":{"v":1,)"
                     R"("cause":"upstream_error",)",
                     0),
        0u)
        << r.body;
    EXPECT_EQ(r.body.substr(r.body.size() - 3), "}}}") << r.body;
    EXPECT_EQ(r.body.find("\"reporter\":\"backend\""), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("\"cutline\":"), r.body.rfind("\"cutline\":")) << r.body;
    auto parsed = proto::parse_error_body(r.body);
    ASSERT_TRUE(parsed.ok() && parsed->cutline) << r.body;
    EXPECT_EQ(parsed->cutline->reporter, "gateway");
    EXPECT_EQ(parsed->cutline->upstream_cause, proto::Cause::kBackendOom);
    EXPECT_EQ(r.headers.get("Content-Length").value_or(""), std::to_string(r.body.size()));
  }
}

// A body that is not JSON goes on as sent; the record is in the header only.
TEST_F(FidelityTest, AnUpstreamErrorBodyThatIsNotJsonPassesUnchanged) {
  auto r = post(chat(false), "status=502,shape=text");
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(r.body, "upstream says no");
  EXPECT_EQ(r.headers.get("Content-Type").value_or(""), "text/plain");
  EXPECT_NE(r.headers.get("Cutline-Stop").value_or("").find("cause=upstream_error;"),
            std::string::npos);
}

// ---- the chat route's inserted limit ---------------------------------------------------------

TEST_F(FidelityTest, AnInsertedLimitIsMaxCompletionTokensAndAClientsKeyIsKept) {
  reset_fake();
  proto::HttpHeaders h{{"X-Policy", "clamp"}};
  post(chat(true), "tokens=2", h);
  post(chat(true, R"(,"max_tokens":100)"), "tokens=2", h);
  post(chat(true, R"(,"max_tokens":100,"max_completion_tokens":50)"), "tokens=2", h);
  post(R"({"model":"fake","prompt":"p","stream":true})", "tokens=2", h, "/v1/completions");
  const std::string seen = fake_requests();
  EXPECT_NE(seen.find(R"({\"max_completion_tokens\":4,\"stream_options\")"), std::string::npos)
      << seen;
  EXPECT_NE(seen.find(R"(\"max_tokens\":4})"), std::string::npos) << seen;
  EXPECT_NE(seen.find(R"(\"max_tokens\":4,\"max_completion_tokens\":4})"), std::string::npos)
      << seen;
  EXPECT_NE(seen.find(R"({\"max_tokens\":4,\"stream_options\")"), std::string::npos) << seen;
}

// ---- upstream credentials --------------------------------------------------------------------

TEST_F(FidelityTest, AnUpstreamWithItsOwnKeyGetsItAndNeverTheClients) {
  reset_fake();
  proto::HttpHeaders h{{"Authorization", "Bearer client-key"}};
  auto r = post(R"({"model":"keyed","messages":[{"role":"user","content":"hi"}],"stream":false})",
                "tokens=2,require_key=sk-upstream-secret", h);
  EXPECT_EQ(r.status, 200) << r.body;
  std::string seen = fake_requests();
  EXPECT_NE(seen.find(R"("authorization":"Bearer sk-upstream-secret")"), std::string::npos) << seen;
  EXPECT_NE(seen.find(R"("x-upstream-org":"org-secret")"), std::string::npos) << seen;
  EXPECT_EQ(seen.find("client-key"), std::string::npos) << seen;
  // An upstream without a key of its own gets no key at all, unless a rule forwards the client's.
  reset_fake();
  post(chat(false), "tokens=1", h);
  seen = fake_requests();
  EXPECT_NE(seen.find(R"("authorization":"")"), std::string::npos) << seen;
  reset_fake();
  proto::HttpHeaders fwd{{"Authorization", "Bearer client-key"}, {"X-Policy", "forward"}};
  post(chat(false), "tokens=1", fwd);
  EXPECT_NE(fake_requests().find(R"("authorization":"Bearer client-key")"), std::string::npos);
  // The secrets appear nowhere an operator or a client can read: only where they come from.
  auto policy = proto::http_fetch(env->admin_url("/v1/cutline/policy"));
  ASSERT_TRUE(policy.ok());
  EXPECT_EQ(policy->body.find("sk-upstream-secret"), std::string::npos);
  EXPECT_EQ(policy->body.find("org-secret"), std::string::npos);
  EXPECT_EQ(read_file(env->log_path).find("sk-upstream-secret"), std::string::npos);
}

// ---- request ids -----------------------------------------------------------------------------

TEST_F(FidelityTest, AClientRequestIdIsHonouredForwardedAndLoggedTraceContextPasses) {
  reset_fake();
  const std::string tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  proto::HttpHeaders h{
      {"X-Request-Id", "client-trace-7"}, {"traceparent", tp}, {"tracestate", "k=v"}};
  auto r = post(chat(false), "tokens=1", h);
  EXPECT_EQ(r.headers.get("X-Request-Id").value_or(""), "client-trace-7");
  EXPECT_NE(r.body.find(R"("request_id":"client-trace-7")"), std::string::npos) << r.body;
  EXPECT_NE(log_line("client-trace-7").find("\"cause\":\"eos\""), std::string::npos);
  const std::string seen = fake_requests();
  EXPECT_NE(seen.find(R"("x-request-id":"client-trace-7")"), std::string::npos) << seen;
  EXPECT_NE(seen.find("\"traceparent\":\"" + tp + "\""), std::string::npos) << seen;
  EXPECT_NE(seen.find(R"("tracestate":"k=v")"), std::string::npos) << seen;
  // An unusable id is replaced, never echoed; fresh ids differ.
  auto bad = post(chat(false), "tokens=1", proto::HttpHeaders{{"X-Request-Id", "a b"}});
  const std::string id(bad.headers.get("X-Request-Id").value_or(""));
  EXPECT_EQ(id.size(), 35u) << id;
  auto other = post(chat(false), "tokens=1");
  EXPECT_NE(other.headers.get("X-Request-Id").value_or(""), id);
}

TEST_F(FidelityTest, InvalidTraceContextAndAClaimedRealIpDoNotReachTheUpstream) {
  reset_fake();
  proto::HttpHeaders h{{"traceparent", "00-" + std::string(4997, 'a')},  // 5,000 bytes
                       {"tracestate", "k=v"},
                       {"X-Real-IP", "6.6.6.6"}};
  auto r = post(chat(false), "tokens=1", h);
  EXPECT_EQ(r.status, 200) << r.body;
  const std::string seen = fake_requests();
  EXPECT_EQ(seen.find("\"traceparent\""), std::string::npos) << seen;
  EXPECT_EQ(seen.find("\"tracestate\""), std::string::npos) << seen;
  EXPECT_EQ(seen.find("6.6.6.6"), std::string::npos) << seen;
  EXPECT_NE(seen.find(R"("x-real-ip":"127.0.0.1")"), std::string::npos) << seen;
}

// ---- the request-target forms of the policy-bypass report ---------------------------------------

TEST_F(FidelityTest, EverySpellingOfTheChatRouteRunsThePolicy) {
  const std::vector<std::string> spellings = {"/v1/chat/%63ompletions", "/v1/chat/completions/",
                                              "//v1/chat/completions",
                                              "/v1/x/../chat/./completions"};
  for (const std::string& target : spellings) {
    reset_fake();
    RawClient c(env->port);
    ASSERT_TRUE(c.connected());
    c.send_all(
        http_post_raw(target, chat(false), "X-Policy: clamp\r\nX-Fake-Script: tokens=9\r\n"));
    const std::string got = c.read_until("gateway_budget", 5000);
    EXPECT_NE(got.find("gateway_budget"), std::string::npos) << target << ": " << got;
    const std::string seen = fake_requests();
    EXPECT_NE(seen.find(R"("path":"/v1/chat/completions")"), std::string::npos)
        << target << ": " << seen;
  }
  auto raw = [](const std::string& request, const std::string& until) {
    RawClient c(env->port);
    c.send_all(request);
    return c.read_until(until, 5000);
  };
  const std::string body = chat(false);
  const std::string absolute =
      raw("POST http://evil.example/v1/chat/completions HTTP/1.1\r\n"
          "Host: evil.example\r\nContent-Type: application/json\r\n"
          "Content-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body,
          "\"cause\"");
  // Host and authority agree, so it is routed as origin-form under the policy; another authority
  // is refused.
  EXPECT_NE(absolute.find("HTTP/1.1 200"), std::string::npos) << absolute;
  const std::string other =
      raw("POST http://evil.example/v1/chat/completions HTTP/1.1\r\n"
          "Host: 127.0.0.1\r\nContent-Type: application/json\r\n"
          "Content-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body,
          "invalid_request");
  EXPECT_NE(other.find("HTTP/1.1 400"), std::string::npos) << other;
  EXPECT_NE(other.find("invalid_request"), std::string::npos) << other;
  const std::string star = raw("OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "invalid_request");
  EXPECT_NE(star.find("HTTP/1.1 400"), std::string::npos) << star;
  const std::string slash =
      raw("POST /v1/chat%2Fcompletions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}",
          "invalid_request");
  EXPECT_NE(slash.find("HTTP/1.1 400"), std::string::npos) << slash;
}

// ---- raw header bytes --------------------------------------------------------------------------

TEST_F(FidelityTest, RawHeaderBytesAreEscapedInErrorBodies) {
  proto::HttpHeaders h{{"Content-Type", "text/\xff\xfeplain"}};
  auto r = proto::http_fetch(env->url("/v1/chat/completions"), "POST", h, chat(false), 5000);
  ASSERT_TRUE(r.ok());
  // 415 from the gateway (or 400 from an HTTP layer that refuses such bytes): never raw bytes.
  EXPECT_TRUE(r->status == 415 || r->status == 400) << r->status;
  EXPECT_EQ(r->body.find('\xff'), std::string::npos) << r->body;
  if (r->status == 415) {
    EXPECT_NE(r->body.find("text/\\\\xff\\\\xfeplain"), std::string::npos) << r->body;
  }
}

// ---- the official openai npm client, as an agent loop uses it ----------------------------------

// Runs tests/integration/openai_npm/openai_agent.mjs with `checks`; its JSON lines in `out`.
// Needs node and `npm install --prefix tests/integration/openai_npm` (deploy/setup.sh): skipped
// without them on a developer machine, a failure when CI=true.
int run_openai_agent(const std::vector<std::string>& checks, std::string& out) {
  const std::string dir = CUTLINE_OPENAI_NPM_DIR;
  const bool ci = cutline::test::running_in_ci();
  if (read_file(dir + "/node_modules/openai/package.json").empty()) {
    if (ci) ADD_FAILURE() << "CI=true but the openai npm client is not installed in " << dir;
    return -2;
  }
  const std::string out_path = env->dir + "/agent.out", err_path = env->dir + "/agent.err";
  std::vector<std::string> argv = {"/usr/bin/env", "node", dir + "/openai_agent.mjs",
                                   env->url("/v1")};
  argv.insert(argv.end(), checks.begin(), checks.end());
  const int code = run_to_exit(argv, out_path, err_path);
  out = read_file(out_path) + read_file(err_path);
  if (code == 127) {
    if (ci) ADD_FAILURE() << "CI=true but node is not installed";
    return -2;
  }
  return code;
}

TEST_F(FidelityTest, OpenaiNpmClientParallelToolCallsAndAnUpstreamKey) {
  std::string out;
  const int code = run_openai_agent({"tools", "tools_stream", "keyed"}, out);
  if (code == -2) GTEST_SKIP() << "node or the openai npm client is missing";
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find(R"({"check":"tools","ok":true,"finish_reason":"tool_calls")"),
            std::string::npos)
      << out;
  EXPECT_NE(
      out.find(R"({"check":"tools_stream","ok":true,"finish_reason":"tool_calls","calls":2})"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find(R"({"check":"keyed","ok":true)"), std::string::npos) << out;
}

}  // namespace
}  // namespace cutline::test
