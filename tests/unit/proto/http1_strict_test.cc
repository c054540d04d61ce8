// Request smuggling: framing that a proxy in front of the server may read differently is refused
// (400, then the connection closes), whatever the split of the bytes on the wire.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "cutline/proto/http/http_server.h"
#include "cutline/proto/http1/http1_parser.h"
#include "net_test_util.h"

namespace cutline::proto {
namespace {

struct Counter : Http1Parser::Sink {
  int heads = 0;
  int messages = 0;
  std::string body;
  bool on_head(Http1Head& /*head*/) override {
    ++heads;
    return true;
  }
  bool on_body(std::string_view data) override {
    body.append(data);
    return true;
  }
  bool on_message_complete(HttpHeaders& /*trailers*/) override {
    ++messages;
    return false;
  }
};

// Feeds `input` in two parts split at `split`; returns the first error (OK if none).
Status feed_two(Http1Parser& parser, std::string_view input, size_t split) {
  for (std::string_view part : {input.substr(0, split), input.substr(split)}) {
    while (!part.empty()) {
      Result<size_t> n = parser.feed(part);
      if (!n.ok()) return n.error();
      part.remove_prefix(*n);
      parser.resume();
    }
  }
  return Status();
}

struct Hostile {
  const char* name;
  std::string request;
  const char* message_part;  // what the error message names
};

std::vector<Hostile> hostile_requests() {
  return {
      {"bare CR ends a header line",
       "POST / HTTP/1.1\r\nHost: a\r\nX: a\rTransfer-Encoding: chunked\r\nContent-Length: "
       "3\r\n\r\nabc",
       "LF"},
      {"Content-Length with Transfer-Encoding",
       "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: "
       "chunked\r\n\r\n0\r\n\r\n",
       "Content-Length"},
      {"duplicate Content-Length",
       "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
       "Content-Length"},
      {"list-valued Content-Length",
       "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc", "Content-Length"},
      {"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-Note: a\r\n b\r\n\r\n", "folding"},
      {"obs-fold with a tab", "GET / HTTP/1.1\r\nHost: a\r\nX-Note:\r\n\tb\r\n\r\n", "folding"},
      {"obs-fold in a trailer",
       "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nT: "
       "a\r\n b\r\n\r\n",
       "folding"},
      {"space before the colon", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 3\r\n\r\nabc",
       "field"},
      {"Transfer-Encoding in HTTP/1.0",
       "POST / HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
       "HTTP/1.0"},
      // RFC 9112 3.2: an HTTP/1.1 request without Host, or any request with two, is 400.
      {"HTTP/1.1 without Host", "GET /v1/models HTTP/1.1\r\nAccept: */*\r\n\r\n", "Host"},
      {"two Host fields", "GET /v1/models HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "Host"},
      {"two Host fields, same value, other case",
       "POST / HTTP/1.1\r\nHost: a\r\nhost: a\r\nContent-Length: 3\r\n\r\nabc", "Host"},
      {"two Host fields in HTTP/1.0", "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", "Host"},
      // llhttp takes HTTP/2.0 on a request line; an HTTP/1 connection serves 1.0 and 1.1 only.
      {"HTTP/2.0 on the request line", "GET /v1/models HTTP/2.0\r\nHost: a\r\n\r\n", "HTTP/2.0"},
      {"HTTP/2.0 with a body",
       "POST /v1/chat/completions HTTP/2.0\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc", "HTTP/2.0"},
      {"long chunk extensions",
       "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1;" +
           std::string(5000, 'e') + "\r\nx\r\n0\r\n\r\n",
       "chunk extensions"},
      {"many short chunk extensions",
       [] {
         std::string r = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
         for (int i = 0; i < 1000; ++i) r += "1;ext=abcdefgh\r\nx\r\n";
         return r + "0\r\n\r\n";
       }(),
       "chunk extensions"},
  };
}

TEST(Http1StrictTest, HostileFramingIsBadRequestAtEverySplit) {
  for (const Hostile& h : hostile_requests()) {
    for (size_t split = 0; split <= h.request.size(); split += (h.request.size() > 600 ? 97 : 1)) {
      Counter sink;
      Http1Parser parser(Http1Parser::Type::kRequest, Http1Limits{}, sink);
      const Status status = feed_two(parser, h.request, split);
      ASSERT_FALSE(status.ok()) << h.name << " accepted at split " << split;
      EXPECT_EQ(status.error().kind, ErrorKind::kBadRequest) << h.name;
      EXPECT_NE(status.error().message.find(h.message_part), std::string::npos)
          << h.name << ": " << status.error().message;
      EXPECT_EQ(sink.messages, 0) << h.name << " completed a message at split " << split;
    }
  }
}

TEST(Http1StrictTest, ChunkExtensionsUnderTheBoundAndOrdinaryHeadersStillParse) {
  const std::string ok =
      "POST / HTTP/1.1\r\nHost: a\r\nX-Tab:\tv\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3;name=value\r\nabc\r\n0\r\nT: 1\r\n\r\n";
  for (size_t split = 0; split <= ok.size(); ++split) {
    Counter sink;
    Http1Parser parser(Http1Parser::Type::kRequest, Http1Limits{}, sink);
    ASSERT_TRUE(feed_two(parser, ok, split).ok()) << "split " << split;
    EXPECT_EQ(sink.messages, 1);
    EXPECT_EQ(sink.body, "abc");
  }
}

// Host is required in HTTP/1.1 only, counted in the head only (a trailer named Host is not a
// second one), and matched whatever its case.
TEST(Http1StrictTest, HostRulesFollowTheVersion) {
  for (const char* ok : {"GET / HTTP/1.0\r\n\r\n", "GET / HTTP/1.0\r\nHost: a\r\n\r\n",
                         "GET / HTTP/1.1\r\nHOST: a\r\n\r\n",
                         "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "1\r\nx\r\n0\r\nHost: b\r\n\r\n"}) {
    Counter sink;
    Http1Parser parser(Http1Parser::Type::kRequest, Http1Limits{}, sink);
    const Status status = feed_two(parser, ok, 0);
    EXPECT_TRUE(status.ok()) << ok << ": " << status.error().message;
    EXPECT_EQ(sink.messages, 1) << ok;
  }
}

// The server answers each hostile request with 400 and closes; the handler never runs, and a
// request smuggled behind it is never served.
TEST(Http1StrictTest, ServerAnswers400AndClosesWithoutDispatching) {
  ServerOptions options;
  std::atomic<int> handled{0};
  HttpServer server(options, [&](std::shared_ptr<ServerStream> s) {
    ++handled;
    s->send_simple(200, {}, "ok");
  });
  ASSERT_TRUE(server.start().ok());
  for (const Hostile& h : hostile_requests()) {
    const int fd = testing::connect_raw(server.port());
    ASSERT_GE(fd, 0);
    testing::send_all(fd, h.request + "GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n");
    const std::string response = testing::recv_all(fd);  // returns at the server's close
    close(fd);
    EXPECT_EQ(response.rfind("HTTP/1.1 400", 0), 0u) << h.name << ": " << response;
    EXPECT_EQ(response.find("HTTP/1.1 200"), std::string::npos) << h.name;
    EXPECT_NE(response.find("Connection: close"), std::string::npos) << h.name;
  }
  EXPECT_EQ(handled.load(), 0);
  server.stop();
}

}  // namespace
}  // namespace cutline::proto
