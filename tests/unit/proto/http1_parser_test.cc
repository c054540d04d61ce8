#include "cutline/proto/http1/http1_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cutline::proto {
namespace {

// Records every event; optionally pauses at message end (as the server does).
struct Recorder : Http1Parser::Sink {
  struct Message {
    Http1Head head;
    std::string body;
    HttpHeaders trailers;
    int body_pieces = 0;
  };
  std::vector<Message> messages;
  bool pause_at_end = false;
  bool pause_in_body = false;

  bool on_head(Http1Head& head) override {
    messages.push_back(Message{head, "", {}, 0});
    return true;
  }
  bool on_body(std::string_view data) override {
    messages.back().body.append(data);
    ++messages.back().body_pieces;
    return !pause_in_body;
  }
  bool on_message_complete(HttpHeaders& trailers) override {
    messages.back().trailers = trailers;
    return !pause_at_end;
  }
};

// Feeds `input` split at `split`, resuming after pauses; returns the first error.
Status feed_split(Http1Parser& parser, std::string_view input, size_t split) {
  std::vector<std::string_view> parts = {input.substr(0, split), input.substr(split)};
  for (std::string_view part : parts) {
    while (!part.empty()) {
      Result<size_t> n = parser.feed(part);
      if (!n.ok()) return n.error();
      part.remove_prefix(*n);
      parser.resume();
    }
  }
  return Status();
}

constexpr std::string_view kChunkedRequest =
    "POST /v1/chat/completions?stream=1 HTTP/1.1\r\n"
    "Host: example\r\n"
    "Content-Type: application/json\r\n"
    "Transfer-Encoding: chunked\r\n"
    "Trailer: cutline-stop\r\n"
    "\r\n"
    "5\r\nhello\r\n"
    "7;ext=1\r\n, world\r\n"
    "0\r\n"
    "cutline-stop: cause=eos\r\n"
    "X-Other: 2\r\n"
    "\r\n";

TEST(Http1ParserTest, ChunkedRequestWithTrailersAtEverySplitPoint) {
  for (size_t split = 0; split <= kChunkedRequest.size(); ++split) {
    Recorder rec;
    Http1Parser parser(Http1Parser::Type::kRequest, Http1Limits{}, rec);
    ASSERT_TRUE(feed_split(parser, kChunkedRequest, split).ok()) << "split " << split;
    ASSERT_EQ(rec.messages.size(), 1u) << "split " << split;
    const auto& m = rec.messages[0];
    EXPECT_EQ(m.head.method, "POST");
    EXPECT_EQ(m.head.target, "/v1/chat/completions?stream=1");
    EXPECT_TRUE(m.head.chunked);
    EXPECT_TRUE(m.head.keep_alive);
    EXPECT_EQ(m.head.headers.get("content-type"), "application/json");
    EXPECT_EQ(m.body, "hello, world") << "split " << split;
    ASSERT_EQ(m.trailers.size(), 2u) << "split " << split;
    EXPECT_EQ(m.trailers.get("Cutline-Stop"), "cause=eos");
    EXPECT_EQ(m.trailers.get("x-other"), "2");
    EXPECT_EQ(parser.phase(), Http1Parser::Phase::kIdle);
  }
}

TEST(Http1ParserTest, OneByteFeedsOfAContentLengthResponse) {
  const std::string input = "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nX-Empty:\r\n\r\nhello world";
  Recorder rec;
  Http1Parser parser(Http1Parser::Type::kResponse, Http1Limits{64 * 1024, 100, 0}, rec);
  for (char c : input) ASSERT_TRUE(parser.feed(std::string_view(&c, 1)).ok());
  ASSERT_EQ(rec.messages.size(), 1u);
  EXPECT_EQ(rec.messages[0].head.status, 200);
  EXPECT_EQ(rec.messages[0].head.reason, "OK");
  EXPECT_EQ(rec.messages[0].head.content_length, 11u);
  EXPECT_EQ(rec.messages[0].head.headers.get("x-empty"), "");
  EXPECT_EQ(rec.messages[0].body, "hello world");
}

TEST(Http1ParserTest, PipelinedRequestsPauseAtEachMessageEnd) {
  const std::string input =
      "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
      "GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  Recorder rec;
  rec.pause_at_end = true;
  Http1Parser parser(Http1Parser::Type::kRequest, Http1Limits{}, rec);
  std::string_view rest = input;
  Result<size_t> n = parser.feed(rest);
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(parser.paused());
  EXPECT_EQ(rec.messages.size(), 1u);  // nothing of /b parsed while /a is being answered
  EXPECT_EQ(*n, std::string_view("GET /a HTTP/1.1\r\nHost: x\r\n\r\n").size());
  EXPECT_EQ(*parser.feed(rest.substr(*n)), 0u);  // still paused: consumes nothing
  rest.remove_prefix(*n);
  while (!rest.empty()) {
    parser.resume();
    n = parser.feed(rest);
    ASSERT_TRUE(n.ok());
    rest.remove_prefix(*n);
  }
  ASSERT_EQ(rec.messages.size(), 3u);
  EXPECT_EQ(rec.messages[1].head.target, "/b");
  EXPECT_EQ(rec.messages[1].body, "abc");
  EXPECT_TRUE(rec.messages[1].head.keep_alive);
  EXPECT_FALSE(rec.messages[2].head.keep_alive);
}

// A server frees the parser state while it answers (release_idle at each message end); the
// pipelined requests after it parse exactly as with a parser that kept its state, and a
// release in the middle of a message is refused.
TEST(Http1ParserTest, ReleasedBetweenMessagesParsesTheNextOneAfresh) {
  const std::string input =
      "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
      "GET /c HTTP/1.0\r\nHost: x\r\n\r\n";
  Recorder rec;
  rec.pause_at_end = true;
  Http1Parser parser(Http1Parser::Type::kRequest, Http1Limits{}, rec);
  std::string_view rest = input;
  while (!rest.empty()) {
    parser.resume();
    Result<size_t> n = parser.feed(rest);
    ASSERT_TRUE(n.ok());
    rest.remove_prefix(*n);
    parser.release_idle();
  }
  ASSERT_EQ(rec.messages.size(), 3u);
  EXPECT_EQ(rec.messages[1].head.target, "/b");
  EXPECT_EQ(rec.messages[1].body, "abc");
  EXPECT_TRUE(rec.messages[1].head.keep_alive);
  EXPECT_EQ(rec.messages[2].head.target, "/c");
  EXPECT_FALSE(rec.messages[2].head.keep_alive);  // HTTP/1.0 without keep-alive

  // Mid-body: the state is kept, the body continues.
  Recorder mid;
  Http1Parser p2(Http1Parser::Type::kRequest, Http1Limits{}, mid);
  ASSERT_TRUE(p2.feed("POST /d HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab").ok());
  p2.release_idle();
  ASSERT_TRUE(p2.feed("cd").ok());
  ASSERT_EQ(mid.messages.size(), 1u);
  EXPECT_EQ(mid.messages[0].body, "abcd");
  EXPECT_EQ(p2.phase(), Http1Parser::Phase::kIdle);
}

TEST(Http1ParserTest, KeepAliveFollowsVersionAndConnectionHeader) {
  struct Case {
    std::string request;
    bool keep_alive;
  };
  const std::vector<Case> cases = {
      {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", true},
      {"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false},
      {"GET / HTTP/1.0\r\n\r\n", false},
      {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true},
  };
  for (const auto& c : cases) {
    Recorder rec;
    Http1Parser parser(Http1Parser::Type::kRequest, Http1Limits{}, rec);
    ASSERT_TRUE(parser.feed(c.request).ok());
    ASSERT_EQ(rec.messages.size(), 1u);
    EXPECT_EQ(rec.messages[0].head.keep_alive, c.keep_alive) << c.request;
  }
}

TEST(Http1ParserTest, HeaderBytesOverLimitIs431) {
  Recorder rec;
  Http1Limits limits;
  limits.max_header_bytes = 100;
  Http1Parser parser(Http1Parser::Type::kRequest, limits, rec);
  const std::string input =
      "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(200, 'a') + "\r\n\r\n";
  Result<size_t> n = parser.feed(input);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().kind, ErrorKind::kHeadersTooLarge);
  EXPECT_EQ(n.error().status(), 431);
  EXPECT_NE(n.error().message.find("100 bytes"), std::string::npos) << n.error().message;
  EXPECT_TRUE(rec.messages.empty());
  // The parser stays failed.
  EXPECT_FALSE(parser.feed("GET / HTTP/1.1\r\nHost: a\r\n\r\n").ok());
}

TEST(Http1ParserTest, HeaderCountOverLimitIs431) {
  Recorder rec;
  Http1Limits limits;
  limits.max_header_count = 3;
  Http1Parser parser(Http1Parser::Type::kRequest, limits, rec);
  std::string input = "GET / HTTP/1.1\r\nHost: a\r\n";
  for (int i = 0; i < 4; ++i) input += "H" + std::to_string(i) + ": v\r\n";
  input += "\r\n";
  Result<size_t> n = parser.feed(input);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().kind, ErrorKind::kHeadersTooLarge);
  EXPECT_NE(n.error().message.find("fields exceed 3"), std::string::npos) << n.error().message;
}

TEST(Http1ParserTest, ContentLengthOverLimitIs413BeforeAnyBodyByte) {
  Recorder rec;
  Http1Limits limits;
  limits.max_body_bytes = 10;
  Http1Parser parser(Http1Parser::Type::kRequest, limits, rec);
  Result<size_t> n = parser.feed("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n");
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().kind, ErrorKind::kTooLarge);
  EXPECT_EQ(n.error().status(), 413);
  EXPECT_TRUE(rec.messages.empty());  // the handler never sees it
}

TEST(Http1ParserTest, ChunkedBodyOverLimitIs413) {
  Recorder rec;
  Http1Limits limits;
  limits.max_body_bytes = 8;
  Http1Parser parser(Http1Parser::Type::kRequest, limits, rec);
  Result<size_t> n = parser.feed(
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
      "chunked\r\n\r\n5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n");
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().kind, ErrorKind::kTooLarge);
}

TEST(Http1ParserTest, TrailerCountIsLimitedToo) {
  Recorder rec;
  Http1Limits limits;
  limits.max_header_count = 2;
  Http1Parser parser(Http1Parser::Type::kResponse, limits, rec);
  Result<size_t> n = parser.feed(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nA: 1\r\nB: 2\r\nC: "
      "3\r\n\r\n");
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().kind, ErrorKind::kHeadersTooLarge);
  EXPECT_NE(n.error().message.find("trailer"), std::string::npos);
}

TEST(Http1ParserTest, MalformedRequestIsBadRequestNamingTheProblem) {
  Recorder rec;
  Http1Parser parser(Http1Parser::Type::kRequest, Http1Limits{}, rec);
  Result<size_t> n = parser.feed("GET / HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n");
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().kind, ErrorKind::kBadRequest);
  EXPECT_NE(n.error().message.find("malformed"), std::string::npos);
}

TEST(Http1ParserTest, ResponseUntilCloseCompletesOnFinish) {
  Recorder rec;
  Http1Parser parser(Http1Parser::Type::kResponse, Http1Limits{64 * 1024, 100, 0}, rec);
  ASSERT_TRUE(parser.feed("HTTP/1.1 200 OK\r\n\r\nstreamed until close").ok());
  EXPECT_EQ(parser.phase(), Http1Parser::Phase::kBody);
  ASSERT_EQ(rec.messages.size(), 1u);
  EXPECT_TRUE(parser.finish().ok());
  EXPECT_EQ(rec.messages[0].body, "streamed until close");
  EXPECT_EQ(parser.phase(), Http1Parser::Phase::kIdle);
}

TEST(Http1ParserTest, ClosedMidBodyIsAnErrorNamingIt) {
  Recorder rec;
  Http1Parser parser(Http1Parser::Type::kResponse, Http1Limits{64 * 1024, 100, 0}, rec);
  ASSERT_TRUE(
      parser.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n").ok());
  Status st = parser.finish();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("mid-body"), std::string::npos);

  Recorder rec2;
  Http1Parser parser2(Http1Parser::Type::kResponse, Http1Limits{}, rec2);
  ASSERT_TRUE(parser2.feed("HTTP/1.1 200 OK\r\nContent-").ok());
  st = parser2.finish();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("before the end of the head"), std::string::npos);
}

TEST(Http1ParserTest, HeadResponseHasNoBody) {
  Recorder rec;
  Http1Parser parser(Http1Parser::Type::kResponse, Http1Limits{}, rec);
  parser.set_head_response(true);
  ASSERT_TRUE(parser.feed("HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n").ok());
  EXPECT_EQ(parser.phase(), Http1Parser::Phase::kIdle);
  // The next response on the connection parses normally.
  ASSERT_TRUE(parser.feed("HTTP/1.1 204 No Content\r\n\r\n").ok());
  EXPECT_EQ(rec.messages.size(), 2u);
}

TEST(Http1ParserTest, PauseInsideBodyResumesWhereItStopped) {
  Recorder rec;
  rec.pause_in_body = true;
  Http1Parser parser(Http1Parser::Type::kResponse, Http1Limits{64 * 1024, 100, 0}, rec);
  const std::string input =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n";
  std::string_view rest = input;
  int pauses = 0;
  while (!rest.empty()) {
    Result<size_t> n = parser.feed(rest);
    ASSERT_TRUE(n.ok());
    rest.remove_prefix(*n);
    if (parser.paused()) {
      ++pauses;
      parser.resume();
    }
  }
  EXPECT_EQ(pauses, 2);
  ASSERT_EQ(rec.messages.size(), 1u);
  EXPECT_EQ(rec.messages[0].body, "abcdef");
  EXPECT_EQ(parser.phase(), Http1Parser::Phase::kIdle);
}

TEST(Http1ParserTest, UpgradeRequestIsServedAsPlainHttp) {
  Recorder rec;
  rec.pause_at_end = true;
  Http1Parser parser(Http1Parser::Type::kRequest, Http1Limits{}, rec);
  const std::string input =
      "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n\r\n"
      "GET /next HTTP/1.1\r\nHost: a\r\n\r\n";
  std::string_view rest = input;
  while (!rest.empty()) {
    Result<size_t> n = parser.feed(rest);
    ASSERT_TRUE(n.ok()) << n.error().message;
    rest.remove_prefix(*n);
    parser.resume();
  }
  ASSERT_EQ(rec.messages.size(), 2u);
  EXPECT_EQ(rec.messages[1].head.target, "/next");
}

}  // namespace
}  // namespace cutline::proto
