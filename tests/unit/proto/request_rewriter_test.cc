#include "cutline/proto/wire/request_rewriter.h"

#include <gtest/gtest.h>

namespace cutline::proto {
namespace {

ParsedRequest parse(const std::string& body, Endpoint ep = Endpoint::kChatCompletions) {
  auto r = parse_openai_request(body, ep);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return std::move(r).value();
}

TEST(RequestRewriterTest, KeepsEveryOtherByte) {
  // Odd spacing, key order, unknown fields, unicode escapes and a tab must survive untouched.
  const std::string body =
      "{ \"zeta\" : {\"x\":[1, 2 ,3]},\n\t\"model\":\"m\\u00e9\", \"max_tokens\" :  512 ,"
      "\"messages\":[{\"role\":\"user\",\"content\":\"caf\\u00e9 \\ud83d\\ude00\"}],"
      "\"stream\":false, \"vendor_ext\":{\"k\":null}  }  ";
  ParsedRequest req = parse(body);
  RewriteOptions opt;
  opt.max_tokens = 100;
  opt.force_stream = true;
  opt.force_include_usage = true;
  std::string out = rewrite_request(req, opt);
  EXPECT_EQ(out,
            "{\"stream_options\":{\"include_usage\":true}, \"zeta\" : {\"x\":[1, 2 ,3]},\n\t"
            "\"model\":\"m\\u00e9\", \"max_tokens\" :  100 ,"
            "\"messages\":[{\"role\":\"user\",\"content\":\"caf\\u00e9 \\ud83d\\ude00\"}],"
            "\"stream\":true, \"vendor_ext\":{\"k\":null}  }  ");
  auto again = parse(out);
  EXPECT_EQ(again.max_tokens, 100);
  EXPECT_TRUE(again.stream);
  EXPECT_TRUE(again.include_usage);
}

TEST(RequestRewriterTest, InsertsMissingFieldsAfterTheBrace) {
  const std::string body = R"({"model":"m","messages":[{"role":"user","content":"x"}]})";
  RewriteOptions opt;
  opt.max_tokens = 64;
  opt.force_stream = true;
  opt.force_include_usage = true;
  EXPECT_EQ(rewrite_request(parse(body), opt),
            R"({"max_tokens":64,"stream":true,"stream_options":{"include_usage":true},)"
            R"("model":"m","messages":[{"role":"user","content":"x"}]})");
}

TEST(RequestRewriterTest, MergesIntoExistingStreamOptions) {
  const std::string body =
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{ "continuous_usage_stats" : true }})";
  RewriteOptions opt;
  opt.force_include_usage = true;
  std::string out = rewrite_request(parse(body), opt);
  EXPECT_EQ(
      out,
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true, "continuous_usage_stats" : true }})");

  const std::string empty =
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{ }})";
  EXPECT_EQ(
      rewrite_request(parse(empty), opt),
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true }})");

  const std::string off =
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":false,"a":1}})";
  EXPECT_EQ(
      rewrite_request(parse(off), opt),
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true,"a":1}})");

  const std::string null_opts =
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":null})";
  EXPECT_EQ(
      rewrite_request(parse(null_opts), opt),
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}})");
}

TEST(RequestRewriterTest, ReplacesBothLimitNamesAndNulls) {
  const std::string body =
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":null,"max_completion_tokens":4000})";
  ParsedRequest req = parse(body);
  EXPECT_EQ(clamp_max_tokens(req, 256), 256);
  RewriteOptions opt;
  opt.max_tokens = clamp_max_tokens(req, 256);
  EXPECT_EQ(
      rewrite_request(req, opt),
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":256,"max_completion_tokens":256})");
}

TEST(RequestRewriterTest, ClampKeepsASmallerClientLimit) {
  const std::string body =
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":10})";
  ParsedRequest req = parse(body);
  EXPECT_EQ(clamp_max_tokens(req, 256), 10);
  RewriteOptions opt;
  opt.max_tokens = clamp_max_tokens(req, 256);
  EXPECT_FALSE(rewrite_changes_body(req, opt));
  EXPECT_EQ(rewrite_request(req, opt), req.body);
}

TEST(RequestRewriterTest, NoChangeWhenAlreadyAsForced) {
  const std::string body =
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true}})";
  ParsedRequest req = parse(body);
  RewriteOptions opt;
  opt.force_stream = true;
  opt.force_include_usage = true;
  EXPECT_FALSE(rewrite_changes_body(req, opt));
  EXPECT_EQ(rewrite_request(req, opt), req.body);
}

TEST(RequestRewriterTest, CompletionsBodyAndOutputBufferReuse) {
  const std::string body = R"({"prompt":"p","model":"m"})";
  ParsedRequest req = parse(body, Endpoint::kCompletions);
  RewriteOptions opt;
  opt.max_tokens = 5;
  std::string out = "stale contents";
  rewrite_request(req, opt, out);
  EXPECT_EQ(out, R"({"max_tokens":5,"prompt":"p","model":"m"})");
}

}  // namespace
}  // namespace cutline::proto

namespace cutline::proto {
namespace {

// The chat route inserts max_completion_tokens (reasoning models refuse max_tokens); a limit the
// client sent keeps its key, and both keys are clamped when both were sent.
TEST(RequestRewriterTest, InsertedLimitKeyIsTheRoutesAndClientKeysAreKept) {
  const std::string none = R"({"model":"m","messages":[{"role":"user","content":"x"}]})";
  RewriteOptions opt;
  opt.max_tokens = 64;
  opt.inserted_limit_key = "max_completion_tokens";
  EXPECT_EQ(
      rewrite_request(parse(none), opt),
      R"({"max_completion_tokens":64,"model":"m","messages":[{"role":"user","content":"x"}]})");
  const std::string legacy =
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":500})";
  EXPECT_EQ(rewrite_request(parse(legacy), opt),
            R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":64})");
  const std::string both =
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":500,"max_completion_tokens":300})";
  EXPECT_EQ(
      rewrite_request(parse(both), opt),
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":64,"max_completion_tokens":64})");
}

}  // namespace
}  // namespace cutline::proto
