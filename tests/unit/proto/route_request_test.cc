// parse_route_request: the embeddings input's token estimate that token pools reserve.
#include "cutline/proto/wire/route_request.h"

#include <gtest/gtest.h>

#include <string>

namespace cutline::proto {
namespace {

int64_t estimate(const std::string& input) {
  auto r = parse_route_request(RouteKind::kEmbeddings, R"({"model":"m","input":)" + input + "}");
  EXPECT_TRUE(r.ok()) << input << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? r->input_tokens_estimate : -1;
}

TEST(RouteRequest, EmbeddingsInputTokensAreEstimatedFromItsSize) {
  EXPECT_EQ(estimate(R"("hello")"), 2);                              // 5 bytes
  EXPECT_EQ(estimate(R"("abcd")"), 1);                               // 4 bytes
  EXPECT_EQ(estimate(R"("\u00e9\u00e9")"), 1);                       // 4 bytes once decoded
  EXPECT_EQ(estimate("\"" + std::string(20000, 'a') + "\""), 5000);  // 20 KB
  EXPECT_EQ(estimate(R"(["hello","abcd"])"), 3);                     // strings add up
  EXPECT_EQ(estimate(R"([1,2,3,4,5])"), 5);                          // token ids
  EXPECT_EQ(estimate(R"([[1,2],[3],[4,5,6]])"), 6);                  // batches of token ids
  EXPECT_EQ(estimate(R"("")"), 1);                                   // at least one
  EXPECT_EQ(estimate(R"([])"), 1);
}

TEST(RouteRequest, EmbeddingsInputIsStillValidated) {
  auto bad = parse_route_request(RouteKind::kEmbeddings, R"({"model":"m","input":["a",tru]})");
  EXPECT_FALSE(bad.ok());
  auto deep = parse_route_request(
      RouteKind::kEmbeddings,
      R"({"model":"m","input":)" + std::string(300, '[') + std::string(300, ']') + "}");
  EXPECT_FALSE(deep.ok());
  auto number = parse_route_request(RouteKind::kEmbeddings, R"({"model":"m","input":7})");
  EXPECT_FALSE(number.ok());  // a string or an array
  auto responses = parse_route_request(RouteKind::kResponses, R"({"model":"m","input":"hello"})");
  ASSERT_TRUE(responses.ok());
  EXPECT_EQ(responses->input_tokens_estimate, 0);  // responses reserve their output
}

}  // namespace
}  // namespace cutline::proto
