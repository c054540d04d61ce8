// The routes besides chat under the same rules: /v1/responses (the Responses API, streaming and
// not, clamps and cuts ended as the API defines them), /v1/embeddings, and passthrough that
// follows a rule or is refused. The real gateway in front of the scripted fake upstream.

#include <gtest/gtest.h>

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
         "  - name: second\n    url: http://127.0.0.1:" +
         std::to_string(fake_port) +
         "\n    models: [\"fake\"]\n"
         "policies:\n"
         "  - name: clamp\n"
         "    match: {routes: [/v1/responses], headers: {x-policy: clamp}}\n"
         "    budget: {max_output_tokens: 4}\n"
         "  - name: deadline\n"
         "    match: {routes: [/v1/responses, /v1/embeddings], headers: {x-policy: deadline}}\n"
         "    deadline: 200ms\n"
         "  - name: embed\n    match: {routes: [/v1/embeddings], models: [fake]}\n"
         "  - name: responses\n    match: {routes: [/v1/responses], models: [fake]}\n"
         "  - name: models\n    match: {routes: [/v1/models]}\n"
         "  - name: everything\n    match: {headers: {x-policy: everything}}\n"
         "passthrough_operational: [/health]\n";
}

class RoutesTest : public ::testing::Test {
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

  static proto::HttpResponse post(const std::string& path, const std::string& body,
                                  const std::string& script, const std::string& policy = "") {
    proto::HttpHeaders h{{"Content-Type", "application/json"}};
    if (!script.empty()) h.add("X-Fake-Script", script);
    if (!policy.empty()) h.add("X-Policy", policy);
    auto r = proto::http_fetch(env->url(path), "POST", h, body, 10000);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r).value() : proto::HttpResponse{};
  }

  static std::string responses(bool stream, const std::string& extra = "") {
    return std::string(R"({"model":"fake","input":"hi","stream":)") + (stream ? "true" : "false") +
           extra + "}";
  }

  // The data of the last SSE event and its `event:` name.
  static std::string last_event(const std::string& body, std::string* name = nullptr) {
    proto::SseParser p;
    std::string_view in = body;
    std::string last;
    while (p.next(in) == proto::SseParser::Step::kEvent) {
      last = std::string(p.event().data);
      if (name) *name = std::string(p.event().event);
    }
    return last;
  }

  static std::string fake_requests() {
    auto r = proto::http_fetch(env->fake_url("/fake/requests"));
    return r.ok() ? r->body : "";
  }
};

TEST_F(RoutesTest, ResponsesNonStreamingGetsTheResponseObjectWithTheRecord) {
  auto r = post("/v1/responses", responses(false), "tokens=3");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find(R"("object":"response")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("status":"completed")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("text":"t0 t1 t2 ")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("cause":"eos")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("policy":"responses")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("output_tokens":3,"count_method":"usage")"), std::string::npos)
      << r.body;
  EXPECT_NE(r.headers.get("Cutline-Stop").value_or("").find("cause=eos"), std::string::npos);
}

TEST_F(RoutesTest, ResponsesStreamingPassesEveryEventAndLabelsTheLast) {
  auto r = post("/v1/responses", responses(true), "tokens=3,event=vendor.note");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("event: response.created\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("event: vendor.note\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("type":"response.output_text.delta","sequence_number":3)"),
            std::string::npos)
      << r.body;
  std::string name;
  const std::string last = last_event(r.body, &name);
  EXPECT_EQ(name, "response.completed");
  EXPECT_NE(last.find(R"("response":{"cutline":{"v":1,"cause":"eos")"), std::string::npos) << last;
  EXPECT_EQ(r.body.find("[DONE]"), std::string::npos);
}

TEST_F(RoutesTest, ResponsesClampIsMaxOutputTokensAndEndsIncomplete) {
  auto r = post("/v1/responses", responses(true), "tokens=9", "clamp");
  ASSERT_EQ(r.status, 200) << r.body;
  std::string name;
  const std::string last = last_event(r.body, &name);
  EXPECT_EQ(name, "response.incomplete") << r.body;
  EXPECT_NE(last.find(R"("incomplete_details":{"reason":"max_output_tokens"})"), std::string::npos)
      << last;
  EXPECT_NE(last.find(R"("cause":"gateway_budget")"), std::string::npos) << last;
  EXPECT_NE(last.find(R"("effective_max_tokens":4)"), std::string::npos) << last;
  const std::string seen = fake_requests();
  EXPECT_NE(seen.find(R"(\"max_output_tokens\":4,\"model\")"), std::string::npos) << seen;
}

TEST_F(RoutesTest, AGatewayCutOnResponsesIsResponseIncompleteWithTheRecord) {
  for (bool stream : {true, false}) {
    auto r = post("/v1/responses", responses(stream), "tokens=200,interval_ms=10", "deadline");
    ASSERT_EQ(r.status, 200) << r.body;
    std::string name;
    const std::string last = stream ? last_event(r.body, &name) : r.body;
    if (stream) {
      EXPECT_EQ(name, "response.incomplete") << r.body;
    }
    EXPECT_NE(last.find(R"("status":"incomplete")"), std::string::npos) << last;
    EXPECT_NE(last.find(R"("incomplete_details":null)"), std::string::npos) << last;
    EXPECT_NE(last.find(R"("cause":"gateway_deadline")"), std::string::npos) << last;
    if (!stream) {
      EXPECT_NE(last.find(R"("type":"output_text","text":"t0 )"), std::string::npos);
    }
  }
}

TEST_F(RoutesTest, BadResponsesRequestsAreInvalidRequest) {
  const std::vector<std::pair<std::string, int>> cases = {
      {R"({"model":"fake"})", 400},
      {R"({"model":"fake","input":"hi","max_output_tokens":0})", 400},
      {R"({"model":"fake","input":"hi","stream":"yes"})", 400},
      {R"({"model":"fake","input":"hi"} x)", 400},
      {R"({"model":"nope","input":"hi"})", 404},
  };
  for (const auto& [body, status] : cases) {
    auto r = post("/v1/responses", body, "");
    EXPECT_EQ(r.status, status) << body << " -> " << r.body;
    EXPECT_NE(r.headers.get("Cutline-Stop").value_or("").find("cause=invalid_request"),
              std::string::npos)
        << body;
  }
}

TEST_F(RoutesTest, EmbeddingsRunUnderTheirRuleWithARecord) {
  auto r = post("/v1/embeddings", R"({"model":"fake","input":"hello"})", "");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find(R"("embedding":[0.25,-0.5,0.125])"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("policy":"embed")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("input_tokens":3)"), std::string::npos) << r.body;
  auto bad = post("/v1/embeddings", R"({"model":"fake"})", "");
  EXPECT_EQ(bad.status, 400) << bad.body;
  auto err = post("/v1/embeddings", R"({"model":"fake","input":"x"})",
                  "status=400,code=context_length_exceeded");
  EXPECT_EQ(err.status, 400);
  EXPECT_NE(err.body.find("context_length_exceeded"), std::string::npos) << err.body;
}

// An upstream whose 200 answer is no embeddings list (here a chat completion) is an upstream
// error, not an answer relayed as valid.
TEST_F(RoutesTest, AnEmbeddingsAnswerOfTheWrongShapeIsAnUpstreamError) {
  auto r = post("/v1/embeddings", R"({"model":"fake","input":"hello"})", "shape=chat");
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_EQ(r.body.find("chat.completion"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("cause":"upstream_error")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("not an embeddings list"), std::string::npos) << r.body;
  EXPECT_NE(r.headers.get("Cutline-Stop").value_or("").find("cause=upstream_error;"),
            std::string::npos);
}

TEST_F(RoutesTest, ModelsMergeEveryUpstreamAndShowOnlyWhatTheRulesAllow) {
  auto r = proto::http_fetch(env->url("/v1/models"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
  // Listed by both upstreams, shown once; fake-secret no rule serves is not shown.
  EXPECT_EQ(r->body, R"({"object":"list","data":[{"id":"fake","object":"model"}]})");
  EXPECT_NE(r->headers.get("Cutline-Stop").value_or("").find("cause=eos"), std::string::npos);
  const std::string seen = fake_requests();
  EXPECT_NE(seen.find(R"("path":"/v1/models")"), std::string::npos) << seen;
}

// Refused by the policy by design, not for want of capacity: 403 permission_error, cause
// policy_denied (origin policy) in the body, the header, the access log and the metrics, never
// admission_rejected.
TEST_F(RoutesTest, PassthroughWithoutARuleIsRefused) {
  auto r = proto::http_fetch(env->url("/v1/files"), "GET", {}, "", 5000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 403) << r->body;
  EXPECT_NE(r->body.find("passthrough"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find(R"("type":"permission_error")"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find(R"("code":"permission_denied")"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find(R"("cause":"policy_denied","origin":"policy","truncated":true,)"
                         R"("serving_cut":false)"),
            std::string::npos)
      << r->body;
  const std::string stop(r->headers.get("Cutline-Stop").value_or(""));
  EXPECT_EQ(stop.rfind("cause=policy_denied; origin=policy;", 0), 0u) << stop;
  EXPECT_NE(stop.find("rule=passthrough;"), std::string::npos) << stop;
  EXPECT_EQ(fake_requests().find("/v1/files"), std::string::npos);

  const std::string id(r->headers.get("Cutline-Request-Id").value_or(""));
  ASSERT_FALSE(id.empty());
  std::string line;
  EXPECT_TRUE(wait_for([&] {
    const std::string log = read_file(env->log_path);
    const size_t at = log.find("\"request_id\":\"" + id + "\"");
    if (at == std::string::npos) return false;
    const size_t begin = log.rfind('\n', at);
    line = log.substr(begin == std::string::npos ? 0 : begin + 1,
                      log.find('\n', at) - (begin == std::string::npos ? 0 : begin + 1));
    return true;
  })) << read_file(env->log_path);
  EXPECT_NE(line.find(R"("cause":"policy_denied")"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("status":403)"), std::string::npos) << line;
  auto m = proto::http_fetch(env->admin_url("/metrics"));
  ASSERT_TRUE(m.ok());
  const size_t stops = m->body.find(R"(cutline_stops_total{cause="policy_denied")");
  ASSERT_NE(stops, std::string::npos) << m->body;
  const std::string series = m->body.substr(stops, m->body.find('\n', stops) - stops);
  EXPECT_NE(series.find(R"(origin="policy")"), std::string::npos) << series;
  EXPECT_EQ(m->body.find(R"(cutline_truncations_total{cause="policy_denied")"), std::string::npos);
  EXPECT_EQ(m->body.find(R"(cutline_stops_total{cause="admission_rejected")"), std::string::npos);
}

// A catch-all rule does not open the upstream's operational paths to clients: a Cutline
// backend's /v1/cutline/state (model file paths), /metrics, /healthz, /readyz get 404 in the
// OpenAI error shape with the record, and never reach the upstream, however the path is spelled;
// a path passthrough_operational lists (/health) and any other path go through.
TEST_F(RoutesTest, TheUpstreamsOperationalPathsAreNotPassedThrough) {
  const proto::HttpHeaders everything{{"X-Policy", "everything"}};
  for (const char* path : {"/v1/cutline/state", "/metrics", "/healthz", "/readyz",
                           "/v1/cutline/state/", "/v1/./cutline/state", "/metrics?format=json"}) {
    auto r = proto::http_fetch(env->url(path), "GET", everything, "", 5000);
    ASSERT_TRUE(r.ok()) << path;
    EXPECT_EQ(r->status, 404) << path << ": " << r->body;
    EXPECT_NE(r->body.find("\"error\":{"), std::string::npos) << r->body;
    EXPECT_NE(r->body.find("\"cause\":\"policy_denied\""), std::string::npos) << r->body;
    EXPECT_NE(r->headers.get("Cutline-Stop").value_or("").find("rule=passthrough_operational"),
              std::string::npos)
        << r->headers.get("Cutline-Stop").value_or("");
  }
  auto health = proto::http_fetch(env->url("/health"), "GET", everything, "", 5000);
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200) << health->body;
  EXPECT_EQ(health->headers.get("X-Fake-Echo").value_or(""), "1");
  auto files = proto::http_fetch(env->url("/v1/files"), "GET", everything, "", 5000);
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->status, 200) << files->body;
  const std::string seen = fake_requests();
  EXPECT_NE(seen.find(R"("path":"/health")"), std::string::npos) << seen;
  for (const char* path : {"/v1/cutline", "/metrics", "/healthz", "/readyz"}) {
    EXPECT_EQ(seen.find(std::string(R"("path":")") + path), std::string::npos) << seen;
  }
}

TEST_F(RoutesTest, OpenaiNpmClientResponsesApi) {
  const std::string dir = CUTLINE_OPENAI_NPM_DIR;
  const bool ci = cutline::test::running_in_ci();
  if (read_file(dir + "/node_modules/openai/package.json").empty()) {
    if (ci) FAIL() << "CI=true but the openai npm client is not installed in " << dir;
    GTEST_SKIP() << "run `npm install --prefix " << dir << "` first";
  }
  const std::string out_path = env->dir + "/agent.out", err_path = env->dir + "/agent.err";
  const int code = run_to_exit({"/usr/bin/env", "node", dir + "/openai_agent.mjs", env->url("/v1"),
                                "responses", "responses_stream", "responses_cut"},
                               out_path, err_path);
  const std::string out = read_file(out_path) + read_file(err_path);
  if (code == 127) {
    if (ci) FAIL() << "CI=true but node is not installed";
    GTEST_SKIP() << "node is not installed";
  }
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find(R"({"check":"responses","ok":true)"), std::string::npos) << out;
  EXPECT_NE(out.find(R"({"check":"responses_stream","ok":true)"), std::string::npos) << out;
  EXPECT_NE(out.find(R"({"check":"responses_cut","ok":true)"), std::string::npos) << out;
}

}  // namespace
}  // namespace cutline::test
