#include "cutline/gateway/models_list.h"

#include <gtest/gtest.h>

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
  merge_model_list(b,
                   R"({"data":[{"id":"llama-3","owned_by":"b"},{"id":"qwen-2"},"junk",{"no":"id"}]})",
                   merged);
  merge_model_list(b, "not json", merged);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].id, "llama-3");
  EXPECT_EQ(merged[0].json, R"({"id":"llama-3","object":"model"})");  // the first upstream's
  EXPECT_EQ(merged[1].id, "qwen-2");
  EXPECT_EQ(merged[1].json, R"({"id":"qwen-2"})");  // a serves no qwen: b's
}

}  // namespace
}  // namespace cutline::gateway
