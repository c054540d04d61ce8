#include "cutline/proto/http1/http1_writer.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include "cutline/proto/http1/http1_parser.h"

namespace cutline::proto {
namespace {

struct Collect : Http1Parser::Sink {
  Http1Head head;
  std::string body;
  HttpHeaders trailers;
  bool complete = false;
  bool on_head(Http1Head& h) override {
    head = h;
    return true;
  }
  bool on_body(std::string_view d) override {
    body.append(d);
    return true;
  }
  bool on_message_complete(HttpHeaders& t) override {
    trailers = t;
    complete = true;
    return true;
  }
};

TEST(Http1WriterTest, ChunkedResponseWithTrailersRoundTripsThroughTheParser) {
  std::string wire;
  HttpHeaders headers{{"Content-Type", "text/event-stream"},
                      {"Trailer", "cutline-stop"},
                      {"Content-Length", "99"},  // framing headers from the caller are ignored
                      {"Connection", "keep-alive"}};
  write_response_head(wire, 200, headers, BodyFraming::chunked());
  EXPECT_EQ(wire.find("Content-Length"), std::string::npos);
  EXPECT_EQ(wire.find("keep-alive"), std::string::npos);
  EXPECT_NE(wire.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  write_chunk(wire, "data: {\"a\":1}\n\n");
  write_chunk(wire, "");  // writes nothing: an empty chunk would end the body
  write_chunk(wire, std::string(300, 'x'));
  write_last_chunk(wire, HttpHeaders{{"cutline-stop", "{\"cause\":\"eos\"}"}});

  Collect c;
  Http1Parser parser(Http1Parser::Type::kResponse, Http1Limits{64 * 1024, 100, 0}, c);
  ASSERT_TRUE(parser.feed(wire).ok());
  ASSERT_TRUE(c.complete);
  EXPECT_EQ(c.head.status, 200);
  EXPECT_EQ(c.head.headers.get("trailer"), "cutline-stop");
  EXPECT_EQ(c.body, "data: {\"a\":1}\n\n" + std::string(300, 'x'));
  EXPECT_EQ(c.trailers.get("Cutline-Stop"), "{\"cause\":\"eos\"}");
}

TEST(Http1WriterTest, ChunkSizeLineIsHex) {
  char buf[24];
  EXPECT_EQ(std::string_view(buf, format_chunk_size_line(buf, 300)), "12c\r\n");
  EXPECT_EQ(std::string_view(buf, format_chunk_size_line(buf, 1)), "1\r\n");
}

TEST(Http1WriterTest, RequestHeadWithLengthAndClose) {
  std::string wire;
  write_request_head(wire, "POST", "/v1/completions", HttpHeaders{{"Host", "up:8000"}},
                     BodyFraming::length(4), /*keep_alive=*/false);
  EXPECT_EQ(wire,
            "POST /v1/completions HTTP/1.1\r\nHost: up:8000\r\nContent-Length: 4\r\n"
            "Connection: close\r\n\r\n");
}

TEST(Http1WriterTest, NoBodyResponsesSayContentLengthZeroExceptWhereForbidden) {
  std::string a, b;
  write_response_head(a, 200, {}, BodyFraming::none());
  EXPECT_EQ(a, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  write_response_head(b, 204, {}, BodyFraming::none());
  EXPECT_EQ(b, "HTTP/1.1 204 No Content\r\n\r\n");
}

TEST(Http1WriterTest, ErrorResponseIsOpenAiStyleJson) {
  std::string wire;
  write_error_response(wire, Error{ErrorKind::kHeadersTooLarge, "request head exceed \"64\""});
  ASSERT_EQ(wire.rfind("HTTP/1.1 431 Request Header Fields Too Large\r\n", 0), 0u) << wire;
  EXPECT_NE(wire.find("Connection: close\r\n"), std::string::npos);
  EXPECT_NE(wire.find("Content-Type: application/json\r\n"), std::string::npos);
  const std::string body = wire.substr(wire.find("\r\n\r\n") + 4);
  simdjson::dom::parser json;
  simdjson::dom::element doc;
  ASSERT_EQ(json.parse(body).get(doc), simdjson::SUCCESS) << body;
  EXPECT_EQ(std::string_view(doc["error"]["message"]), "request head exceed \"64\"");
  EXPECT_EQ(std::string_view(doc["error"]["type"]), "invalid_request_error");
  EXPECT_EQ(std::string_view(doc["error"]["code"]), "headers_too_large");
  EXPECT_NE(wire.find("Content-Length: " + std::to_string(body.size())), std::string::npos);

  EXPECT_NE(protocol_error_json(Error{ErrorKind::kUpstream, "x"}).find("\"server_error\""),
            std::string::npos);
}

}  // namespace
}  // namespace cutline::proto
