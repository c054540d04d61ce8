#include "cutline/proto/wire/openai_error.h"

#include <gtest/gtest.h>

namespace cutline::proto {
namespace {

TEST(OpenAiErrorTest, TypeForEveryKind) {
  EXPECT_EQ(openai_error_type(ErrorKind::kBadRequest), "invalid_request_error");
  EXPECT_EQ(openai_error_type(ErrorKind::kTooLarge), "invalid_request_error");
  EXPECT_EQ(openai_error_type(ErrorKind::kUnauthorized), "authentication_error");
  EXPECT_EQ(openai_error_type(ErrorKind::kRateLimited), "rate_limit_error");
  EXPECT_EQ(openai_error_type(ErrorKind::kUpstream), "upstream_error");
  EXPECT_EQ(openai_error_type(ErrorKind::kTimeout), "timeout_error");
  EXPECT_EQ(openai_error_type(ErrorKind::kInternal), "server_error");
  EXPECT_EQ(openai_error_type(ErrorKind::kExhausted), "service_unavailable_error");
}

TEST(OpenAiErrorTest, BodyText) {
  Error e = make_error(ErrorKind::kBadRequest, "max_tokens must be a positive integer, got -5");
  EXPECT_EQ(error_body(e, {.param = "max_tokens"}),
            R"({"error":{"message":"max_tokens must be a positive integer, got -5",)"
            R"("type":"invalid_request_error","param":"max_tokens","code":"bad_request"}})");
  EXPECT_EQ(
      error_body(make_error(ErrorKind::kRateLimited, "queue \"full\""), {.code = "queue_full"}),
      R"({"error":{"message":"queue \"full\"","type":"rate_limit_error","param":null,)"
      R"("code":"queue_full"}})");
}

TEST(OpenAiErrorTest, RoundTripWithStopRecord) {
  StopRecord rec;
  rec.cause = Cause::kAdmissionRejected;
  rec.reporter = "gateway";
  rec.rule = "policies[0].admission";
  const std::string body =
      error_body(make_error(ErrorKind::kRateLimited, "admission queue full"), {.cutline = &rec});
  auto parsed = parse_error_body(body);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->error.message, "admission queue full");
  EXPECT_EQ(parsed->error.type, "rate_limit_error");
  EXPECT_EQ(parsed->error.param, "");
  EXPECT_EQ(parsed->error.code, "rate_limited");
  ASSERT_TRUE(parsed->cutline);
  EXPECT_EQ(parsed->cutline->cause, Cause::kAdmissionRejected);
  EXPECT_EQ(parsed->cutline->rule, "policies[0].admission");
}

TEST(OpenAiErrorTest, ParsesOtherServersShapes) {
  auto vllm = parse_error_body(
      R"({"object":"error","message":"model not found","type":"NotFoundError","param":null,"code":404})");
  ASSERT_TRUE(vllm.ok());
  EXPECT_EQ(vllm->error.message, "model not found");
  EXPECT_EQ(vllm->error.code, "404");
  auto plain = parse_error_body(R"({"error":"overloaded"})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->error.message, "overloaded");
  EXPECT_EQ(parse_error_body(R"({"ok":true})").error().message, "error body: no error object");
  EXPECT_EQ(parse_error_body("<html>").error().message, "error body: not a JSON object");
  EXPECT_EQ(parse_error_body("{\"error\":").error().message, "error body: not valid JSON");
  EXPECT_EQ(parse_error_body(R"({"error":{"message":[]}})").error().message,
            "error body: error.message must be a string, a number or null");
}

TEST(OpenAiErrorTest, TypeCanBeNamedForARefusalByPolicy) {
  EXPECT_EQ(error_body(make_error(ErrorKind::kUnauthorized, "no rule"),
                       {.code = "permission_denied", .type = "permission_error"}),
            R"({"error":{"message":"no rule","type":"permission_error","param":null,)"
            R"("code":"permission_denied"}})");
}

// An upstream's error body gets the gateway's record, every other byte kept: in the error object
// where the gateway's own errors carry it (over a Cutline backend's), else at the top level.
TEST(OpenAiErrorTest, PutErrorRecordKeepsTheUpstreamsMembers) {
  StopRecord rec;
  rec.cause = Cause::kUpstreamError;
  rec.reporter = "gateway";
  const std::string record = stop_record_json(rec);
  std::string out;

  ASSERT_TRUE(
      put_error_record(R"( {"error": {"message": "bad", "code": "x_1" }, "n": 1.50} )", rec, out)
          .ok());
  EXPECT_EQ(out, R"( {"error": {"cutline":)" + record +
                     R"(,"message": "bad", "code": "x_1" }, "n": 1.50} )");

  StopRecord backend;
  backend.cause = Cause::kBackendOom;
  backend.reporter = "backend";
  const std::string from_backend =
      error_body(make_error(ErrorKind::kExhausted, "out of KV"), {.cutline = &backend});
  ASSERT_TRUE(put_error_record(from_backend, rec, out).ok());
  EXPECT_EQ(out, error_body(make_error(ErrorKind::kExhausted, "out of KV"), {.cutline = &rec}));
  auto parsed = parse_error_body(out);
  ASSERT_TRUE(parsed.ok() && parsed->cutline);
  EXPECT_EQ(parsed->cutline->cause, Cause::kUpstreamError);

  ASSERT_TRUE(put_error_record(R"({"error":{}})", rec, out).ok());
  EXPECT_EQ(out, R"({"error":{"cutline":)" + record + "}}");
  ASSERT_TRUE(
      put_error_record(R"({"object":"error","message":"m","cutline":{"v":1}})", rec, out).ok());
  EXPECT_EQ(out, R"({"object":"error","message":"m","cutline":)" + record + "}");
  ASSERT_TRUE(put_error_record(R"({"error":"overloaded"})", rec, out).ok());
  EXPECT_EQ(out, R"({"cutline":)" + record + R"(,"error":"overloaded"})");
  ASSERT_TRUE(put_error_record("{}", rec, out).ok());
  EXPECT_EQ(out, R"({"cutline":)" + record + "}");

  for (const char* not_one_object :
       {"<html>", "", "[1]", R"({"error":{"message":"x"})", R"({"a":1} {"b":2})", R"({"a":tru})",
        R"({"cutline":1,"cutline":2})"}) {
    EXPECT_FALSE(put_error_record(not_one_object, rec, out).ok()) << not_one_object;
  }
}

}  // namespace
}  // namespace cutline::proto
