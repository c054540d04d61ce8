// GET /v1/models: merging the upstreams' lists, and ModelsList's phases against scripted
// upstreams, no socket (accept -> authenticate -> route: every upstream asked -> relay: merged
// -> finish): an upstream that fails is left out of the answer, a client that leaves ends it as
// client_cancel, and each answer has one stop record, one access-log line.
#include "cutline/gateway/models_list.h"

#include <gtest/gtest.h>

#include "cutline/proto/wire/stop_record.h"
#include "stream_fakes.h"

namespace cutline::gateway {
namespace {

TEST(ModelsList, MergesEachModelOnceFromTheUpstreamsThatServeIt) {
  policy::Upstream a;
  a.name = "a";
  a.models = {"llama-*"};
  policy::Upstream b;
  b.name = "b";
  b.models = {"*"};
  std::vector<ListedModel> merged;
  merge_model_list(a,
                   R"({"object":"list","data":[{"id":"llama-3","object":"model"},)"
                   R"({"id":"qwen-2","object":"model"}]})",
                   merged);
  merge_model_list(
      b, R"({"data":[{"id":"llama-3","owned_by":"b"},{"id":"qwen-2"},"junk",{"no":"id"}]})",
      merged);
  merge_model_list(b, "not json", merged);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].id, "llama-3");
  EXPECT_EQ(merged[0].json, R"({"id":"llama-3","object":"model"})");  // the first upstream's
  EXPECT_EQ(merged[1].id, "qwen-2");
  EXPECT_EQ(merged[1].json, R"({"id":"qwen-2"})");  // a serves no qwen: b's
}

class ModelsListPhases : public test::PhaseTest {
 protected:
  ModelsListPhases()
      : PhaseTest(
            "listen:\n  - address: 127.0.0.1:0\n"
            "upstreams:\n  - name: up\n    url: http://127.0.0.1:9\n    models: [\"m\", \"m-*\"]\n"
            "policies:\n  - name: default\n    match: {}\n") {}

  std::shared_ptr<test::FakeClient> list() {
    auto c = client("GET", "/v1/models");
    const uint64_t id = next_id_++;
    auto ml = std::make_shared<ModelsList>(host_, worker_, c, id);
    worker_.model_lists.emplace(id, ml);
    ml->start();
    return c;
  }
};

TEST_F(ModelsListPhases, ListsTheUpstreamsModelsItServesAndCachesThem) {
  auto first = list();
  ASSERT_EQ(upstream_->calls.size(), 1u);
  EXPECT_EQ(upstream_->calls[0].request.target, "/v1/models");
  proto::ClientCallbacks& cb = upstream_->calls[0].callbacks;
  proto::HttpHeaders head{{"Content-Type", "application/json"}};
  cb.on_head(200, head);
  cb.on_body(R"({"object":"list","data":[{"id":"m"},{"id":"m-2"},{"id":"not-routed"}]})");
  proto::HttpHeaders trailers;
  cb.on_complete(trailers);

  ASSERT_TRUE(first->answered());
  EXPECT_EQ(first->status(), 200);
  EXPECT_EQ(first->body(), R"({"object":"list","data":[{"id":"m"},{"id":"m-2"}]})");
  auto rec = proto::parse_stop_header(first->headers().get("Cutline-Stop").value_or(""));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->cause, proto::Cause::kEos);

  // Within the cache's lifetime (on the host's clock) the list is not fetched again.
  host_.clock_.advance_ms(kModelsCacheMs - 1);
  auto cached = list();
  EXPECT_EQ(upstream_->calls.size(), 1u);
  EXPECT_EQ(cached->body(), first->body());
  host_.clock_.advance_ms(2);
  auto refetched = list();
  EXPECT_EQ(upstream_->calls.size(), 2u);
  EXPECT_FALSE(refetched->answered());

  const std::vector<std::string> lines = host_.log_lines();
  ASSERT_EQ(lines.size(), 2u);  // the two answered
  for (const std::string& l : lines) {
    EXPECT_NE(l.find("\"path\":\"/v1/models\""), std::string::npos) << l;
    EXPECT_NE(l.find("\"cause\":\"eos\""), std::string::npos) << l;
  }
}

// Two upstreams, each serving its own models.
class ModelsFanOut : public test::PhaseTest {
 protected:
  ModelsFanOut()
      : PhaseTest(
            "listen:\n  - address: 127.0.0.1:0\n"
            "upstreams:\n"
            "  - name: a\n    url: http://127.0.0.1:9\n    models: [\"a-*\"]\n"
            "  - name: b\n    url: http://127.0.0.1:10\n    models: [\"b-*\"]\n"
            "policies:\n  - name: default\n    match: {}\n") {}

  std::shared_ptr<test::FakeClient> list() {
    auto c = client("GET", "/v1/models");
    const uint64_t id = next_id_++;
    last_ = std::make_shared<ModelsList>(host_, worker_, c, id);
    worker_.model_lists.emplace(id, last_);
    last_->start();
    return c;
  }
  void answer(size_t call, std::string_view body) {
    proto::ClientCallbacks& cb = upstream_->calls[call].callbacks;
    proto::HttpHeaders head{{"Content-Type", "application/json"}};
    cb.on_head(200, head);
    cb.on_body(body);
    proto::HttpHeaders trailers;
    cb.on_complete(trailers);
  }
  double records() { return test::metric_sum(metrics(), "cutline_stops_total{"); }

  std::shared_ptr<ModelsList> last_;
};

TEST_F(ModelsFanOut, AnUpstreamThatFailsIsLeftOutAndTheOthersModelsAreListed) {
  auto c = list();
  ASSERT_EQ(upstream_->calls.size(), 2u);  // both asked at once
  EXPECT_EQ(last_->phase(), Phase::kRoute);
  upstream_->calls[0].callbacks.on_error(
      proto::ClientError{proto::ClientErrorKind::kConnectRefused, "connect refused"});
  EXPECT_FALSE(c->answered());  // b has not answered yet
  answer(1, R"({"object":"list","data":[{"id":"b-1","object":"model"}]})");

  ASSERT_TRUE(c->answered());
  EXPECT_EQ(c->ends(), 1);
  EXPECT_EQ(c->status(), 200);
  EXPECT_EQ(c->body(), R"({"object":"list","data":[{"id":"b-1","object":"model"}]})");
  EXPECT_EQ(last_->phase(), Phase::kDone);
  auto rec = proto::parse_stop_header(c->headers().get("Cutline-Stop").value_or(""));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->cause, proto::Cause::kEos);
  const std::vector<std::string> lines = host_.log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"path\":\"/v1/models\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"cause\":\"eos\""), std::string::npos) << lines[0];
  EXPECT_EQ(records(), 1.0);
  EXPECT_EQ(test::metric_sum(metrics(), "cutline_upstream_errors_total{"), 1.0);

  // A partial list is not cached: the next request asks both again.
  list();
  EXPECT_EQ(upstream_->calls.size(), 4u);
}

// The client leaves while the upstreams are asked: client_cancel at once, one record; an
// upstream's answer delivered after that changes nothing.
TEST_F(ModelsFanOut, AClientThatLeavesWhileTheUpstreamsAreAskedIsOneClientCancel) {
  auto c = list();
  ASSERT_EQ(upstream_->calls.size(), 2u);
  answer(0, R"({"data":[{"id":"a-1"}]})");
  host_.clock_.advance_ms(5);
  c->hang_up();
  EXPECT_EQ(last_->phase(), Phase::kDone);
  answer(1, R"({"data":[{"id":"b-1"}]})");  // raced the cancel
  upstream_->calls[1].callbacks.on_error(
      proto::ClientError{proto::ClientErrorKind::kClosedMidBody, "reset"});

  EXPECT_EQ(c->ends(), 0);  // nothing is sent to a client that is gone
  const std::vector<std::string> lines = host_.log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"cause\":\"client_cancel\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"status\":499"), std::string::npos) << lines[0];
  EXPECT_EQ(records(), 1.0);
  EXPECT_EQ(test::metric_sum(metrics(), "cutline_stops_total{cause=\"client_cancel\""), 1.0);
  EXPECT_EQ(metrics().find("cutline_upstream_errors_total{"), std::string::npos);
  EXPECT_EQ(worker_.models_cache.fetched_ns, -1);  // nothing cached from an abandoned list
}

// With tenants configured, a list request without a key of one is refused before any upstream is
// asked: 401 with its record in the body and the Cutline-Stop header, one log line.
class ModelsListWithTenants : public test::PhaseTest {
 protected:
  ModelsListWithTenants()
      : PhaseTest(
            "listen:\n  - address: 127.0.0.1:0\n"
            "upstreams:\n  - name: up\n    url: http://127.0.0.1:9\n    models: [\"m\"]\n" +
            test::kAliceTenant + "policies:\n  - name: default\n    match: {}\n") {}
};

TEST_F(ModelsListWithTenants, AMissingKeyIs401WithItsRecordAndNoUpstreamIsAsked) {
  auto c = client("GET", "/v1/models");
  auto ml = std::make_shared<ModelsList>(host_, worker_, c, next_id_++);
  worker_.model_lists.emplace(ml->id(), ml);
  ml->start();

  ASSERT_TRUE(c->answered());
  EXPECT_EQ(c->ends(), 1);
  EXPECT_EQ(c->status(), 401);
  EXPECT_TRUE(upstream_->calls.empty());
  EXPECT_EQ(ml->phase(), Phase::kDone);
  EXPECT_EQ(test::count_of(c->body(), "\"cutline\":{"), 1u) << c->body();
  auto rec = proto::parse_stop_header(c->headers().get("Cutline-Stop").value_or(""));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->cause, proto::Cause::kAdmissionRejected);
  EXPECT_EQ(rec->rule, "tenants");
  const std::string id(c->headers().get("Cutline-Request-Id").value_or(""));
  EXPECT_NE(c->body().find("\"request_id\":\"" + id + "\""), std::string::npos) << c->body();
  const std::vector<std::string> lines = host_.log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"status\":401"), std::string::npos) << lines[0];
  EXPECT_EQ(test::metric_sum(metrics(), "cutline_stops_total{"), 1.0);
}

}  // namespace
}  // namespace cutline::gateway
