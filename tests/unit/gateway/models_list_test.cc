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

}  // namespace
}  // namespace cutline::gateway
