#include "cutline/proto/wire/openai_writer.h"

#include <gtest/gtest.h>

#include "cutline/proto/wire/openai_response.h"

namespace cutline::proto {
namespace {

StopRecord budget_record() {
  StopRecord rec;
  rec.cause = Cause::kGatewayBudget;
  rec.reporter = "gateway";
  rec.output_tokens = 64;
  return rec;
}

TEST(OpenAiWriterTest, ChatChunks) {
  std::string out;
  ChunkFields f;
  f.id = "chatcmpl-1";
  f.created = 1700000000;
  f.model = "m";
  f.role = "assistant";
  f.content = "He said \"hi\"\n";
  write_chunk(out, f);
  EXPECT_EQ(
      out,
      R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m",)"
      R"("choices":[{"index":0,"delta":{"role":"assistant","content":"He said \"hi\"\n"},)"
      R"("finish_reason":null}]})");
}

TEST(OpenAiWriterTest, LastChunkWithUsageAndCutlineParsesBack) {
  std::string out;
  Usage usage{10, 64, 74};
  StopRecord rec = budget_record();
  ChunkFields f;
  f.id = "c";
  f.model = "m";
  f.finish_reason = "length";
  f.usage = &usage;
  f.cutline = &rec;
  write_chunk(out, f);
  ChunkParser p;
  ASSERT_TRUE(p.parse(out).ok()) << out;
  EXPECT_EQ(p.chunk().finish_reason(), "length");
  EXPECT_FALSE(p.chunk().choices[0].has_content);
  EXPECT_EQ(*p.chunk().usage, usage);
  ASSERT_TRUE(p.chunk().cutline);
  EXPECT_EQ(p.chunk().cutline->cause, Cause::kGatewayBudget);
}

TEST(OpenAiWriterTest, TextCompletionChunkAndNoChoices) {
  std::string out;
  ChunkFields f;
  f.endpoint = Endpoint::kCompletions;
  f.id = "cmpl-1";
  f.model = "m";
  f.content = "abc";
  write_chunk(out, f);
  EXPECT_EQ(out, R"({"id":"cmpl-1","object":"text_completion","created":0,"model":"m",)"
                 R"("choices":[{"index":0,"text":"abc","finish_reason":null}]})");
  out.clear();
  Usage usage{1, 2, 3};
  f.no_choices = true;
  f.usage = &usage;
  write_chunk(out, f);
  EXPECT_EQ(out,
            R"({"id":"cmpl-1","object":"text_completion","created":0,"model":"m","choices":[],)"
            R"("usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}})");
}

TEST(OpenAiWriterTest, CompletionRoundTrip) {
  std::string out;
  Usage usage{3, 2, 5};
  StopRecord rec = budget_record();
  CompletionFields f;
  f.id = "chatcmpl-2";
  f.created = 9;
  f.model = "m";
  f.content = "caf\xC3\xA9";
  f.finish_reason = "length";
  f.usage = &usage;
  f.cutline = &rec;
  write_completion(out, f);
  auto r = parse_completion_response(out);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->object, "chat.completion");
  EXPECT_EQ(r->content, "caf\xC3\xA9");
  EXPECT_EQ(r->role, "assistant");
  EXPECT_EQ(r->finish_reason, "length");
  EXPECT_EQ(*r->usage, usage);
  EXPECT_EQ(r->cutline->cause, Cause::kGatewayBudget);

  out.clear();
  f.endpoint = Endpoint::kCompletions;
  f.usage = nullptr;
  f.cutline = nullptr;
  write_completion(out, f);
  EXPECT_EQ(out,
            "{\"id\":\"chatcmpl-2\",\"object\":\"text_completion\",\"created\":9,\"model\":\"m\","
            "\"choices\":[{\"index\":0,\"text\":\"caf\xC3\xA9\",\"finish_reason\":\"length\"}]}");
}

TEST(OpenAiWriterTest, PatchInjectsCutlineAndReplacesFinishReason) {
  const std::string upstream =
      R"({"id":"x", "choices":[{"index":0,"delta":{"content":"\u00e9"},"finish_reason":"stop"},)"
      R"({"index":1,"delta":{}}, {}],"vendor":{"k":[1,2]}})";
  StopRecord rec = budget_record();
  ChunkPatch patch;
  patch.cutline = &rec;
  patch.finish_reason = "length";
  std::string out;
  ASSERT_TRUE(patch_chunk(upstream, patch, out).ok());
  const std::string expected_cutline = stop_record_json(rec);
  EXPECT_EQ(out, "{\"cutline\":" + expected_cutline +
                     R"(,"id":"x", "choices":[{"index":0,"delta":{"content":"\u00e9"},)"
                     R"("finish_reason":"length"},{"finish_reason":"length","index":1,"delta":{}},)"
                     R"( {"finish_reason":"length"}],"vendor":{"k":[1,2]}})");
  ChunkParser p;
  ASSERT_TRUE(p.parse(out).ok());
  EXPECT_EQ(p.chunk().choices.size(), 3u);
  for (const auto& c : p.chunk().choices) EXPECT_EQ(c.finish_reason, "length");
}

TEST(OpenAiWriterTest, PatchReplacesAnUpstreamCutline) {
  const std::string upstream =
      R"({"choices":[],"cutline": {"v":1,"cause":"eos","phases":{"queue_ms":1}} ,"z":1})";
  StopRecord rec = budget_record();
  ChunkPatch patch;
  patch.cutline = &rec;
  std::string out;
  ASSERT_TRUE(patch_chunk(upstream, patch, out).ok());
  EXPECT_EQ(out, R"({"choices":[],"cutline": )" + stop_record_json(rec) + R"( ,"z":1})");
  patch.cutline = nullptr;
  patch.finish_reason = "stop";
  EXPECT_FALSE(patch_chunk("[1]", patch, out).ok());
  EXPECT_FALSE(patch_chunk("{\"choices\":5}", patch, out).ok());
  ASSERT_TRUE(patch_chunk("{}", ChunkPatch{&rec, std::nullopt}, out).ok());
  EXPECT_EQ(out, "{\"cutline\":" + stop_record_json(rec) + "}");
}

}  // namespace
}  // namespace cutline::proto
