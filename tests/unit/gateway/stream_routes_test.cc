#include <gtest/gtest.h>

#include "cutline/gateway/stream.h"

namespace cutline::gateway {
namespace {

TEST(EmbeddingsAnswer, TheShapesTheApiDefinesAreAccepted) {
  EXPECT_EQ(
      embeddings_answer_problem(
          R"({"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.25,-1,2e-3]}],"usage":{"prompt_tokens":3}})"),
      std::nullopt);
  EXPECT_EQ(embeddings_answer_problem(R"({"data":[{"embedding":"AACAPw=="}]})"), std::nullopt);
  EXPECT_EQ(embeddings_answer_problem(R"({"data":[]})"), std::nullopt);
  EXPECT_EQ(embeddings_answer_problem(" {\"data\":[{\"embedding\":[]}]} \n"), std::nullopt);
}

TEST(EmbeddingsAnswer, AnythingElseIsNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"object":"chat.completion","choices":[]})", "no \"data\" array"},
      {"<html>", "not a JSON object"},
      {R"([1,2])", "not a JSON object"},
      {R"({"data":[1]})", "a data[] entry is no object"},
      {R"({"data":[{"index":0}]})", "a data[] entry has no \"embedding\""},
      {R"({"data":[{"embedding":{"x":1}}]})", "neither an array nor a base64 string"},
      {R"({"data":[{"embedding":[1,"x"]}]})", "a non-number"},
      {R"({"data":[{"embedding":[1,2]})", ""},
  };
  for (const auto& [body, why] : cases) {
    const auto problem = embeddings_answer_problem(body);
    ASSERT_TRUE(problem.has_value()) << body;
    EXPECT_NE(problem->find(why), std::string::npos) << body << ": " << *problem;
  }
}

}  // namespace
}  // namespace cutline::gateway
