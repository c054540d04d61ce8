// Passthrough against a scripted upstream, no socket: a route the gateway does not run itself is
// relayed unchanged and ends with its one stop record in the access log and the metrics; a
// request refused first (no rule under passthrough: deny, a key of no tenant) gets an error
// answer with the record in its body and Cutline-Stop header.
#include "cutline/gateway/passthrough.h"

#include <gtest/gtest.h>

#include "cutline/proto/wire/stop_record.h"
#include "stream_fakes.h"

namespace cutline::gateway::test {
namespace {

// printf %s sk-alice-example | sha256sum
std::string policy_yaml(std::string_view passthrough) {
  return "listen:\n  - address: 127.0.0.1:0\n"
         "passthrough: " +
         std::string(passthrough) +
         "\nupstreams:\n  - name: up\n    url: http://127.0.0.1:9/base\n    models: [\"m\"]\n"
         "tenants:\n  - name: alice\n    api_keys: "
         "[\"sha256:d48fce52832c460238fb82e9f6c57be593ad27ea6ddb5e15d74d1fb4245a76cd\"]\n"
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
    auto pt = std::make_shared<Passthrough>(host_, worker_, c, id);
    worker_.passthroughs.emplace(id, pt);
    pt->start();
    return c;
  }
};

TEST_F(PassthroughPhases, AnotherRouteIsRelayedUnchangedAndLoggedWithItsRecord) {
  auto c = pass("GET", "/v1/files/f-1?purpose=batch", alice());
  ASSERT_EQ(upstream_->calls.size(), 1u);
  const proto::ClientRequest& sent = upstream_->calls[0].request;
  EXPECT_EQ(sent.method, "GET");
  EXPECT_EQ(sent.target, "/base/v1/files/f-1?purpose=batch");
  EXPECT_FALSE(sent.headers.has("Authorization"));  // the gateway's key stays here

  proto::ClientCallbacks& cb = upstream_->calls[0].callbacks;
  proto::HttpHeaders head{
      {"Content-Type", "application/json"}, {"Content-Length", "13"}, {"Connection", "keep-alive"}};
  cb.on_head(200, head);
  cb.on_body(R"({"id":"f-1"})");
  cb.on_body("\n");
  proto::HttpHeaders trailers;
  cb.on_complete(trailers);

  ASSERT_TRUE(c->answered());
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
  EXPECT_EQ(host_.log_lines().size(), 1u);
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
  EXPECT_EQ(rec->cause, proto::Cause::kAdmissionRejected);
  EXPECT_EQ(rec->rule, "passthrough");
  const std::vector<std::string> lines = host_.log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"status\":403"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace cutline::gateway::test
