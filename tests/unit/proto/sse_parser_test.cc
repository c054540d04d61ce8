#include "cutline/proto/sse/sse_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cutline::proto {
namespace {

struct Seen {
  std::string event;
  std::string data;
  std::string id;
  std::optional<uint64_t> retry_ms;
  bool done = false;
  bool operator==(const Seen&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Seen& s) {
  return os << "{event=" << s.event << " data=" << s.data << " id=" << s.id << " done=" << s.done
            << "}";
}

// Feeds `pieces` one after another and collects every event.
std::vector<Seen> parse_pieces(const std::vector<std::string_view>& pieces, SseOptions opt = {}) {
  SseParser p(opt);
  std::vector<Seen> out;
  for (auto piece : pieces) {
    Status s = p.feed(piece, [&](const SseEvent& e) {
      out.push_back(
          {std::string(e.event), std::string(e.data), std::string(e.id), e.retry_ms, e.done});
    });
    EXPECT_TRUE(s.ok()) << s.error().message;
  }
  return out;
}

std::vector<Seen> parse_all(std::string_view bytes) { return parse_pieces({bytes}); }

constexpr std::string_view kStream =
    ": keep-alive\n"
    "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n"
    "event: error\r\n"
    "data:first\r\n"
    "data: second\r\n"
    "id: 7\r\n"
    "retry: 1500\r\n"
    "\r\n"
    "data: lone cr\r\r"
    "data\n"
    "\n"
    "data: [DONE]\n\n";

const std::vector<Seen> kExpected = {
    {"", "{\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}", "", std::nullopt, false},
    {"error", "first\nsecond", "7", 1500, false},
    {"", "lone cr", "7", std::nullopt, false},
    {"", "", "7", std::nullopt, false},
    {"", "[DONE]", "7", std::nullopt, true},
};

TEST(SseParserTest, ParsesMixedStreamInOneFeed) { EXPECT_EQ(parse_all(kStream), kExpected); }

TEST(SseParserTest, EverySplitPointGivesTheSameEvents) {
  for (size_t i = 0; i <= kStream.size(); ++i) {
    auto got = parse_pieces({kStream.substr(0, i), kStream.substr(i)});
    ASSERT_EQ(got, kExpected) << "split at " << i;
  }
}

TEST(SseParserTest, EveryPairOfSplitPointsGivesTheSameEvents) {
  for (size_t i = 0; i <= kStream.size(); ++i) {
    for (size_t j = i; j <= kStream.size(); ++j) {
      auto got = parse_pieces({kStream.substr(0, i), kStream.substr(i, j - i), kStream.substr(j)});
      ASSERT_EQ(got, kExpected) << "split at " << i << "," << j;
    }
  }
}

TEST(SseParserTest, OneByteFeeds) {
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < kStream.size(); ++i) bytes.push_back(kStream.substr(i, 1));
  EXPECT_EQ(parse_pieces(bytes), kExpected);
}

TEST(SseParserTest, CrlfSplitBetweenCrAndLfIsOneLineEnd) {
  // "data: a\r" | "\n\r" | "\n": the LF after a CR in the next feed must not make an extra
  // blank line (which would dispatch nothing but must not swallow the real blank line either).
  auto got = parse_pieces({"data: a\r", "\n\r", "\ndata: b\r\n\r\n"});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].data, "a");
  EXPECT_EQ(got[1].data, "b");
}

TEST(SseParserTest, FieldWithoutSpaceAndWithTwoSpaces) {
  auto got = parse_all("data:x\n\ndata:  y\n\n");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].data, "x");
  EXPECT_EQ(got[1].data, " y");  // only one space is dropped
}

TEST(SseParserTest, MalformedLinesAreIgnoredNotFatal) {
  auto got = parse_all(
      "bogus line without colon\n"
      "unknownfield: 1\n"
      "retry: 12a\n"
      ": comment: with colon\n"
      "data: ok\n\n");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data, "ok");
  EXPECT_FALSE(got[0].retry_ms.has_value());
}

TEST(SseParserTest, EventWithoutDataIsNotDispatchedAndDropsItsType) {
  auto got = parse_all("event: ping\n\ndata: x\n\n");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].event, "");
  EXPECT_EQ(got[0].data, "x");
}

TEST(SseParserTest, EmptyDataLineDispatchesAnEmptyEvent) {
  auto got = parse_all("data\n\n");
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data, "");
}

TEST(SseParserTest, DoneOnlyWhenExact) {
  auto got = parse_all("data: [DONE] \n\ndata:[DONE]\n\n");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_FALSE(got[0].done);
  EXPECT_TRUE(got[1].done);
}

TEST(SseParserTest, LeadingBomIsSkippedEvenWhenSplit) {
  auto got = parse_pieces({"\xEF", "\xBB",
                           "\xBF"
                           "data: a\n\n"});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].data, "a");
}

TEST(SseParserTest, IncompleteEventAtEndIsReportedAsPartial) {
  SseParser p;
  int events = 0;
  ASSERT_TRUE(p.feed("data: a\n\ndata: b\n", [&](const SseEvent&) { ++events; }).ok());
  EXPECT_EQ(events, 1);
  EXPECT_TRUE(p.has_partial_event());
  ASSERT_TRUE(p.feed("\n", [&](const SseEvent&) { ++events; }).ok());
  EXPECT_EQ(events, 2);
  EXPECT_FALSE(p.has_partial_event());
  EXPECT_EQ(p.events_dispatched(), 2u);
}

TEST(SseParserTest, LineTooLongIsAnErrorAndStaysFailed) {
  SseOptions opt;
  opt.max_line_bytes = 16;
  SseParser p(opt);
  std::string line = "data: " + std::string(32, 'x');
  // Byte by byte, the line never completes: the limit must still trip.
  Status s;
  for (char c : line) {
    s = p.feed(std::string_view(&c, 1), [](const SseEvent&) {});
    if (!s.ok()) break;
  }
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(p.error_code(), SseErrorCode::kLineTooLong);
  EXPECT_EQ(s.error().kind, ErrorKind::kUpstream);
  EXPECT_EQ(s.error().message, "SSE line longer than 16 bytes");
  int events = 0;
  EXPECT_FALSE(p.feed("\n\ndata: a\n\n", [&](const SseEvent&) { ++events; }).ok());
  EXPECT_EQ(events, 0);
  p.reset();
  EXPECT_TRUE(p.feed("data: a\n\n", [&](const SseEvent&) { ++events; }).ok());
  EXPECT_EQ(events, 1);
}

TEST(SseParserTest, EventTooLargeAcrossManyShortLines) {
  SseOptions opt;
  opt.max_event_bytes = 64;
  SseParser p(opt);
  std::string stream;
  for (int i = 0; i < 20; ++i) stream += "data: 0123456789\n";
  Status s = p.feed(stream, [](const SseEvent&) {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(p.error_code(), SseErrorCode::kEventTooLarge);
  EXPECT_EQ(s.error().message, "SSE event larger than 64 bytes");
}

TEST(SseParserTest, LimitIsPerEventNotPerStream) {
  SseOptions opt;
  opt.max_event_bytes = 64;
  SseParser p(opt);
  std::string stream;
  for (int i = 0; i < 100; ++i) stream += "data: 0123456789\n\n";
  int events = 0;
  ASSERT_TRUE(p.feed(stream, [&](const SseEvent&) { ++events; }).ok());
  EXPECT_EQ(events, 100);
}

TEST(SseParserTest, PullApiLeavesUnconsumedBytes) {
  SseParser p;
  std::string_view in = "data: a\n\ndata: b\n\ndata: c";
  ASSERT_EQ(p.next(in), SseParser::Step::kEvent);
  EXPECT_EQ(p.event().data, "a");
  EXPECT_EQ(in, "data: b\n\ndata: c");
  ASSERT_EQ(p.next(in), SseParser::Step::kEvent);
  EXPECT_EQ(p.event().data, "b");
  ASSERT_EQ(p.next(in), SseParser::Step::kNeedMore);
  EXPECT_TRUE(in.empty());
}

TEST(SseParserTest, RawBytesOfEachEventWhenCaptured) {
  SseOptions opt;
  opt.capture_raw = true;
  SseParser p(opt);
  std::vector<std::string> raws;
  std::string_view stream = ": ping\n\ndata: a\r\nid: 1\r\n\r\nevent: x\ndata: b\n\n";
  // Byte-by-byte feeding must give the same raw bytes as one feed.
  for (size_t i = 0; i < stream.size(); ++i) {
    ASSERT_TRUE(
        p.feed(stream.substr(i, 1), [&](const SseEvent& e) { raws.emplace_back(e.raw); }).ok());
  }
  ASSERT_EQ(raws.size(), 2u);
  // The ": ping" block dispatched nothing; its bytes are not part of the next event.
  EXPECT_EQ(raws[0].substr(0, 9), "data: a\r\n");
  EXPECT_EQ(raws[1], "event: x\ndata: b\n\n");
  // Concatenated raw events parse back to the same events.
  auto again = parse_all(raws[0] + raws[1]);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].data, "a");
  EXPECT_EQ(again[1].event, "x");
}

TEST(SseParserTest, SteadyStateReusesBuffers) {
  SseParser p;
  std::string chunk = "data: {\"choices\":[{\"delta\":{\"content\":\"tok\"}}]}\n\n";
  const char* first_data = nullptr;
  bool same_buffer = true;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(p.feed(chunk, [&](const SseEvent& e) {
                   // Two buffers alternate (dispatched / being read); every other event reuses one.
                   if (i == 0) first_data = e.data.data();
                   if (i == 2 && e.data.data() != first_data) same_buffer = false;
                 }).ok());
  }
  EXPECT_TRUE(same_buffer);
}

}  // namespace
}  // namespace cutline::proto
