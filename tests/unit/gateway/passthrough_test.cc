// Passthrough's phases against a scripted upstream, no socket: a route the gateway does not run
// itself is relayed unchanged and ends with its one stop record in the access log and the
// metrics; a request refused first (no rule under passthrough: deny, a key of no tenant) gets an
// error answer with the record in its body and Cutline-Stop header; a client that leaves
// mid-relay ends it as client_cancel and frees its upstream endpoint; and whatever ends it, and
// however many end events race, finish writes one record.
#include "cutline/gateway/passthrough.h"

#include <gtest/gtest.h>

#include "cutline/proto/wire/stop_record.h"
#include "stream_fakes.h"

namespace cutline::gateway::test {
namespace {

std::string policy_yaml(std::string_view passthrough) {
  return "listen:\n  - address: 127.0.0.1:0\n"
         "passthrough: " +
         std::string(passthrough) +
         "\nupstreams:\n  - name: up\n    url: http://127.0.0.1:9/base\n    models: [\"m\"]\n" +
         kAliceTenant +
         "policies:\n  - name: default\n    match: {routes: [\"/v1/chat/completions\"]}\n";
}

proto::HttpHeaders alice() { return {{"Authorization", "Bearer sk-alice-example"}}; }

class PassthroughPhases : public PhaseTest {
 protected:
  explicit PassthroughPhases(std::string_view mode = "allow") : PhaseTest(policy_yaml(mode)) {}

  std::shared_ptr<FakeClient> pass(std::string method, std::string target,
                                   proto::HttpHeaders headers, std::string body = {}) {
    auto c = client(std::move(method), std::move(target), std::move(headers), std::move(body));
    const uint64_t id = next_id_++;
    last_ = std::make_shared<Passthrough>(host_, worker_, c, id);
    worker_.passthroughs.emplace(id, last_);
    last_->start();
    return c;
  }
  // Stop records counted in the metrics, of every cause.
  double records() { return metric_sum(metrics(), "cutline_stops_total{"); }

  std::shared_ptr<Passthrough> last_;  // the last one started
};

TEST_F(PassthroughPhases, AnotherRouteIsRelayedUnchangedAndLoggedWithItsRecord) {
  auto c = pass("GET", "/v1/files/f-1?purpose=batch", alice());
  EXPECT_EQ(last_->phase(), Phase::kRoute);  // sent, no answer yet
  ASSERT_EQ(upstream_->calls.size(), 1u);
  const proto::ClientRequest& sent = upstream_->calls[0].request;
  EXPECT_EQ(sent.method, "GET");
  EXPECT_EQ(sent.target, "/base/v1/files/f-1?purpose=batch");
  EXPECT_FALSE(sent.headers.has("Authorization"));  // the gateway's key stays here

  proto::ClientCallbacks& cb = upstream_->calls[0].callbacks;
  proto::HttpHeaders head{
      {"Content-Type", "application/json"}, {"Content-Length", "13"}, {"Connection", "keep-alive"}};
  cb.on_head(200, head);
  EXPECT_EQ(last_->phase(), Phase::kRelay);
  cb.on_body(R"({"id":"f-1"})");
  cb.on_body("\n");
  EXPECT_EQ(records(), 0.0);  // nothing recorded before the end
  proto::HttpHeaders trailers;
  cb.on_complete(trailers);

  EXPECT_EQ(last_->phase(), Phase::kDone);
  ASSERT_TRUE(c->answered());
  EXPECT_EQ(c->ends(), 1);
  EXPECT_EQ(c->status(), 200);
  EXPECT_EQ(c->body(), "{\"id\":\"f-1\"}\n");
  EXPECT_FALSE(c->headers().has("Connection"));  // hop-by-hop: not passed on
  EXPECT_FALSE(c->headers().has("Cutline-Stop"));
  const std::string id(c->headers().get("Cutline-Request-Id").value_or(""));
  EXPECT_FALSE(id.empty());
  const std::vector<std::string> lines = host_.log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"request_id\":\"" + id + "\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"cause\":\"eos\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"tenant\":\"alice\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"bytes_out\":13"), std::string::npos) << lines[0];
  EXPECT_NE(metrics().find("route=\"other\""), std::string::npos);
  EXPECT_EQ(records(), 1.0);
  EXPECT_EQ(metric_sum(metrics(), "cutline_stops_total{cause=\"eos\""), 1.0);
  run_posted();
  EXPECT_TRUE(worker_.passthroughs.empty());  // dropped after finish, from the loop
}

TEST_F(PassthroughPhases, AKeyOfNoTenantIs401WithItsRecord) {
  auto c = pass("GET", "/v1/files", {{"Authorization", "Bearer sk-wrong"}});
  ASSERT_TRUE(c->answered());
  EXPECT_EQ(c->status(), 401);
  EXPECT_TRUE(upstream_->calls.empty());
  EXPECT_EQ(count_of(c->body(), "\"cutline\":{"), 1u) << c->body();
  auto rec = proto::parse_stop_header(c->headers().get("Cutline-Stop").value_or(""));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->cause, proto::Cause::kAdmissionRejected);
  EXPECT_EQ(rec->rule, "tenants");
  EXPECT_EQ(last_->phase(), Phase::kDone);
  EXPECT_EQ(host_.log_lines().size(), 1u);
  EXPECT_EQ(records(), 1.0);
}

class PassthroughDenied : public PassthroughPhases {
 protected:
  PassthroughDenied() : PassthroughPhases("deny") {}
};

TEST_F(PassthroughDenied, ARouteNoRuleMatchesIs403) {
  auto c = pass("POST", "/v1/fine_tuning/jobs", alice(), "{}");
  ASSERT_TRUE(c->answered());
  EXPECT_EQ(c->status(), 403);
  EXPECT_TRUE(upstream_->calls.empty());
  auto rec = proto::parse_stop_header(c->headers().get("Cutline-Stop").value_or(""));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->cause, proto::Cause::kPolicyDenied);
  EXPECT_EQ(rec->rule, "passthrough");
  EXPECT_EQ(c->ends(), 1);
  EXPECT_EQ(count_of(c->body(), "\"cutline\":{"), 1u) << c->body();
  EXPECT_NE(c->body().find("\"cause\":\"policy_denied\""), std::string::npos) << c->body();
  EXPECT_NE(c->body().find("\"type\":\"permission_error\""), std::string::npos) << c->body();
  EXPECT_EQ(last_->phase(), Phase::kDone);
  const std::vector<std::string> lines = host_.log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"status\":403"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"rule\":\"passthrough\""), std::string::npos) << lines[0];
  EXPECT_EQ(records(), 1.0);
  EXPECT_EQ(metric_sum(metrics(), "cutline_stops_total{cause=\"policy_denied\""), 1.0);
  EXPECT_EQ(metric_sum(metrics(), "cutline_stops_total{cause=\"admission_rejected\""), 0.0);
}

// The upstreams' operational paths are not the clients': even under passthrough: allow (or a
// catch-all rule) they get 404 with the record, and nothing goes upstream.
TEST_F(PassthroughPhases, AnUpstreamsOperationalPathIs404) {
  for (const char* target : {"/v1/cutline/state", "/metrics?x=1", "/healthz", "/health", "/readyz",
                             "/v1/cutline", "/v1/Cutline/state", "/METRICS"}) {
    auto c = pass("GET", target, alice());
    ASSERT_TRUE(c->answered()) << target;
    EXPECT_EQ(c->status(), 404) << target;
    EXPECT_NE(c->body().find("\"error\":{"), std::string::npos) << c->body();
    EXPECT_EQ(count_of(c->body(), "\"cutline\":{"), 1u) << c->body();
    auto rec = proto::parse_stop_header(c->headers().get("Cutline-Stop").value_or(""));
    ASSERT_TRUE(rec.ok()) << target;
    EXPECT_EQ(rec->cause, proto::Cause::kPolicyDenied);
    EXPECT_EQ(rec->rule, "passthrough_operational");
  }
  EXPECT_TRUE(upstream_->calls.empty());
  // Paths that only look alike go through.
  pass("GET", "/v1/cutlines", alice());
  pass("GET", "/metrics-export", alice());
  EXPECT_EQ(upstream_->calls.size(), 2u);
}

TEST(OperationalPath, TheUpstreamsOperationalPathsAndNothingElse) {
  for (std::string_view p : {"/metrics", "/healthz", "/health", "/readyz", "/v1/cutline",
                             "/v1/cutline/state", "/v1/cutline/a/b", "/Healthz"}) {
    EXPECT_TRUE(is_operational_path(p)) << p;
  }
  for (std::string_view p : {"/", "/v1/models", "/v1/cutlines", "/v1/cutline-state", "/metric",
                             "/healthz2", "/v1/files/metrics", "/v2/cutline/state"}) {
    EXPECT_FALSE(is_operational_path(p)) << p;
  }
}

TEST_F(PassthroughPhases, AClientThatLeavesMidRelayIsAClientCancelAndFreesTheEndpoint) {
  host_.use_endpoint_pools();
  auto c = pass("GET", "/v1/files/f-1/content", alice());
  ASSERT_EQ(upstream_->calls.size(), 1u);
  EXPECT_EQ(host_.outstanding("up"), 1);
  proto::ClientCallbacks& cb = upstream_->calls[0].callbacks;
  proto::HttpHeaders head{{"Content-Type", "application/octet-stream"}};
  cb.on_head(200, head);
  cb.on_body("first half");
  host_.clock_.advance_ms(12);
  c->hang_up();

  // Finished at once: the upstream attempt is over (the endpoint has nothing outstanding), the
  // record written, nothing more sent to a client that is gone.
  EXPECT_EQ(last_->phase(), Phase::kDone);
  EXPECT_EQ(host_.outstanding("up"), 0);
  EXPECT_EQ(c->ends(), 0);
  EXPECT_EQ(c->body(), "first half");
  const std::vector<std::string> lines = host_.log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"cause\":\"client_cancel\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"status\":499"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"endpoints\":[\"127.0.0.1:9\"]"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"duration_ms\":12"), std::string::npos) << lines[0];
  EXPECT_EQ(records(), 1.0);
  EXPECT_EQ(metric_sum(metrics(), "cutline_stops_total{cause=\"client_cancel\""), 1.0);
}

// The client leaves, and the upstream's failure of the same moment is delivered after it: the
// first end event wins, the second changes nothing (no second record, no upstream error counted).
TEST_F(PassthroughPhases, FinishRunsOnceWhenAnUpstreamErrorRacesTheClientsCancel) {
  auto c = pass("GET", "/v1/files/f-1/content", alice());
  ASSERT_EQ(upstream_->calls.size(), 1u);
  proto::ClientCallbacks& cb = upstream_->calls[0].callbacks;
  proto::HttpHeaders head{{"Content-Type", "application/octet-stream"}};
  cb.on_head(200, head);
  cb.on_body("part");
  c->hang_up();
  cb.on_error(proto::ClientError{proto::ClientErrorKind::kClosedMidBody, "connection reset"});
  proto::HttpHeaders trailers;
  cb.on_complete(trailers);

  EXPECT_EQ(last_->phase(), Phase::kDone);
  EXPECT_EQ(c->ends(), 0);
  const std::vector<std::string> lines = host_.log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"cause\":\"client_cancel\""), std::string::npos) << lines[0];
  EXPECT_EQ(records(), 1.0);
  EXPECT_EQ(metrics().find("cutline_upstream_errors_total{"), std::string::npos) << metrics();
}

// An upstream that fails before answering: a 502 with its record (the upstream's address stays
// out of the client's copy), one log line.
TEST_F(PassthroughPhases, AnUpstreamThatFailsBeforeAnsweringIs502WithItsRecord) {
  auto c = pass("POST", "/v1/batches", alice(), "{}");
  ASSERT_EQ(upstream_->calls.size(), 1u);
  upstream_->calls[0].callbacks.on_error(
      proto::ClientError{proto::ClientErrorKind::kConnectRefused, "connect 127.0.0.1:9 refused"});
  ASSERT_TRUE(c->answered());
  EXPECT_EQ(c->ends(), 1);
  EXPECT_GE(c->status(), 500);
  EXPECT_EQ(c->body().find("127.0.0.1:9"), std::string::npos) << c->body();
  auto rec = proto::parse_stop_header(c->headers().get("Cutline-Stop").value_or(""));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->cause, proto::Cause::kUpstreamError);
  EXPECT_EQ(rec->rule, "upstreams.up");
  const std::vector<std::string> lines = host_.log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"cause\":\"upstream_error\""), std::string::npos) << lines[0];
  EXPECT_EQ(records(), 1.0);
}

}  // namespace
}  // namespace cutline::gateway::test
