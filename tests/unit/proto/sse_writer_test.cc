#include "cutline/proto/sse/sse_writer.h"

#include <gtest/gtest.h>

#include "cutline/proto/sse/sse_parser.h"

namespace cutline::proto {
namespace {

TEST(SseWriterTest, Frames) {
  std::string out;
  append_sse_data(out, "{\"a\":1}");
  append_sse_error(out, "{\"error\":{}}");
  append_sse_done(out);
  append_sse_comment(out, "keep\nalive");
  EXPECT_EQ(out,
            "data: {\"a\":1}\n\n"
            "event: error\ndata: {\"error\":{}}\n\n"
            "data: [DONE]\n\n"
            ": keep alive\n\n");
}

TEST(SseWriterTest, MultiLinePayloadRoundTripsThroughParser) {
  std::string out;
  append_sse_event(out, "mes\nsage", "line1\nline2\r\nline3\rline4");
  EXPECT_EQ(out, "event: mes sage\ndata: line1\ndata: line2\ndata: line3\ndata: line4\n\n");
  SseParser p;
  std::string data;
  std::string event;
  ASSERT_TRUE(p.feed(out, [&](const SseEvent& e) {
                 data = e.data;
                 event = e.event;
               }).ok());
  EXPECT_EQ(data, "line1\nline2\nline3\nline4");
  EXPECT_EQ(event, "mes sage");
}

TEST(SseWriterTest, EmptyPayloadIsOneEmptyDataLine) {
  std::string out;
  append_sse_data(out, "");
  EXPECT_EQ(out, "data: \n\n");
}

}  // namespace
}  // namespace cutline::proto
