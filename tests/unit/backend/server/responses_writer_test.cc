#include "cutline/server/responses_writer.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "cutline/proto/sse/sse_parser.h"
#include "writer_test_support.h"

namespace cutline::server {
namespace {

using test::ByteTokenizer;
using test::events_of;
using test::RecordingStream;

ResponsesParams params(bool stream, int32_t top_logprobs = -1) {
  ResponsesParams p;
  p.id = "resp_1";
  p.item_id = "msg_1";
  p.model = "m";
  p.created_at = 1700000000;
  p.stream = stream;
  p.top_logprobs = top_logprobs;
  return p;
}

TEST(ResponsesWriter, RunnerFailureEndsTheStreamWithResponseFailed) {
  ByteTokenizer tok;
  RecordingStream http;
  ResponsesWriter w(params(true), tok);
  w.start(http);
  w.text(http, "ab", {});
  proto::StopRecord stop;
  stop.cause = proto::Cause::kUpstreamError;
  engine::SequenceRecord rec;
  rec.cause = proto::Cause::kUpstreamError;
  rec.runner_error = true;
  rec.message = "forward failed";
  w.finish(http, stop, rec);
  const auto events = events_of(http.body_);
  ASSERT_EQ(events.size(), 6u) << http.body_;
  EXPECT_EQ(events[4].first, "response.output_text.delta");
  EXPECT_EQ(events[5].first, "response.failed");
  const std::string& last = events[5].second;
  EXPECT_NE(last.find(R"("sequence_number":5)"), std::string::npos) << last;
  EXPECT_NE(last.find(R"("status":"failed")"), std::string::npos) << last;
  EXPECT_NE(last.find(R"("error":{"code":"server_error","message":"forward failed"})"),
            std::string::npos)
      << last;
  EXPECT_NE(last.find(R"("cutline":{)"), std::string::npos);
  EXPECT_TRUE(http.finished_);
  EXPECT_TRUE(http.trailers_.get("cutline-stop").has_value());
}

TEST(ResponsesWriter, LogprobsRideOnDeltasAndTheFinalPart) {
  ByteTokenizer tok;
  RecordingStream http;
  ResponsesWriter w(params(true, 1), tok);
  w.start(http);
  std::vector<engine::TokenLogprobs> lp(1);
  lp[0] = {'a', -0.5f, {{'a', -0.5f}}};
  w.text(http, "a", lp);
  proto::StopRecord stop;
  stop.cause = proto::Cause::kEos;
  engine::SequenceRecord rec;
  rec.output_tokens = 1;
  w.finish(http, stop, rec);
  const auto events = events_of(http.body_);
  ASSERT_EQ(events.size(), 9u) << http.body_;
  EXPECT_NE(events[3].second.find(R"("annotations":[],"logprobs":[])"), std::string::npos)
      << events[3].second;
  const std::string item = R"({"token":"a","logprob":-0.5,"bytes":[97],)"
                           R"("top_logprobs":[{"token":"a","logprob":-0.5,"bytes":[97]}]})";
  EXPECT_NE(events[4].second.find(R"("delta":"a","logprobs":[)" + item + "]"), std::string::npos)
      << events[4].second;
  EXPECT_EQ(events[8].first, "response.completed");
  EXPECT_NE(events[8].second.find(R"("text":"a","annotations":[],"logprobs":[)" + item + "]"),
            std::string::npos)
      << events[8].second;
  EXPECT_NE(events[8].second.find(R"("top_logprobs":1)"), std::string::npos);
}

TEST(ResponsesWriter, NonStreamingRunnerFailureIsA500WithTheRecord) {
  ByteTokenizer tok;
  RecordingStream http;
  ResponsesWriter w(params(false), tok);
  w.start(http);
  w.text(http, "ab", {});
  EXPECT_EQ(http.status_, 0);  // nothing sent before the end
  proto::StopRecord stop;
  engine::SequenceRecord rec;
  rec.runner_error = true;
  rec.message = "forward failed";
  w.finish(http, stop, rec);
  EXPECT_EQ(http.status_, 500);
  EXPECT_NE(http.body_.find(R"("cutline":{)"), std::string::npos) << http.body_;
}

}  // namespace
}  // namespace cutline::server
