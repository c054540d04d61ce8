// HTTP/2 rapid reset (CVE-2023-44487): a client that opens streams and resets them at once costs
// the server no handler work for the reset streams, and past the reset rate the connection gets
// GOAWAY(ENHANCE_YOUR_CALM) and is closed, whatever nghttp2's own patch level.
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cutline/proto/http/http_server.h"
#include "http2_test_client.h"
#include "net_test_util.h"

#include "support/wait_for.h"

namespace cutline::proto {
namespace {

void append_frame_header(std::string& out, size_t length, uint8_t type, uint8_t flags,
                         int32_t stream_id) {
  out.push_back(static_cast<char>((length >> 16) & 0xff));
  out.push_back(static_cast<char>((length >> 8) & 0xff));
  out.push_back(static_cast<char>(length & 0xff));
  out.push_back(static_cast<char>(type));
  out.push_back(static_cast<char>(flags));
  out.push_back(static_cast<char>((stream_id >> 24) & 0x7f));
  out.push_back(static_cast<char>((stream_id >> 16) & 0xff));
  out.push_back(static_cast<char>((stream_id >> 8) & 0xff));
  out.push_back(static_cast<char>(stream_id & 0xff));
}

// One HPACK block for "POST /v1/chat/completions" that uses no dynamic table (self-contained, so
// the same bytes serve every stream).
std::string request_block() {
  nghttp2_hd_deflater* deflater = nullptr;
  nghttp2_hd_deflate_new(&deflater, 0);
  auto nv = [](const char* n, const char* v) {
    return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(n)),
                      reinterpret_cast<uint8_t*>(const_cast<char*>(v)), strlen(n), strlen(v),
                      NGHTTP2_NV_FLAG_NO_INDEX};
  };
  nghttp2_nv fields[] = {nv(":method", "POST"), nv(":scheme", "http"),
                         nv(":authority", "localhost"), nv(":path", "/v1/chat/completions")};
  std::string block(nghttp2_hd_deflate_bound(deflater, fields, 4), '\0');
  const ssize_t n = nghttp2_hd_deflate_hd(deflater, reinterpret_cast<uint8_t*>(block.data()),
                                          block.size(), fields, 4);
  nghttp2_hd_deflate_del(deflater);
  block.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return block;
}

// The client preface, an empty SETTINGS, then `count` pairs of HEADERS(END_STREAM) and
// RST_STREAM(CANCEL) on streams 1, 3, 5, ...
std::string rapid_reset_bytes(int count) {
  std::string out = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  append_frame_header(out, 0, NGHTTP2_SETTINGS, 0, 0);
  const std::string block = request_block();
  for (int i = 0; i < count; ++i) {
    const int32_t id = 2 * i + 1;
    append_frame_header(out, block.size(), NGHTTP2_HEADERS,
                        NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, id);
    out.append(block);
    append_frame_header(out, 4, NGHTTP2_RST_STREAM, 0, id);
    out.append(std::string("\0\0\0\x08", 4));  // CANCEL
  }
  return out;
}

// Reads the server's frames until it closes; returns the GOAWAY error code (-1 if none).
int64_t goaway_code_until_close(int fd) {
  const std::string in = testing::recv_all(fd, 5000);
  size_t at = 0;  // frames start right away (the server sends no preface string)
  int64_t code = -1;
  while (at + 9 <= in.size()) {
    const size_t len = (static_cast<uint8_t>(in[at]) << 16) |
                       (static_cast<uint8_t>(in[at + 1]) << 8) | static_cast<uint8_t>(in[at + 2]);
    const uint8_t type = static_cast<uint8_t>(in[at + 3]);
    if (type == NGHTTP2_GOAWAY && at + 9 + 8 <= in.size()) {
      const auto* p = reinterpret_cast<const uint8_t*>(in.data() + at + 9 + 4);
      code = (int64_t{p[0]} << 24) | (p[1] << 16) | (p[2] << 8) | p[3];
    }
    at += 9 + len;
  }
  return code;
}

TEST(Http2ResetTest, RapidResetGetsGoawayAndResetStreamsNeverReachTheHandler) {
  ServerOptions o;
  o.http2_max_resets_per_s = 50;  // a burst of 100
  std::atomic<int> handled{0};
  std::atomic<int> refused{0};
  o.on_refused = [&](std::string_view reason) {
    if (reason == "http2_resets") ++refused;
  };
  HttpServer server(o, [&](std::shared_ptr<ServerStream> s) {
    ++handled;
    s->send_simple(200, {}, "ok");
  });
  ASSERT_TRUE(server.start().ok());
  const int fd = testing::connect_raw(server.port());
  ASSERT_GE(fd, 0);
  testing::send_all(fd, rapid_reset_bytes(1000));
  const int64_t code = goaway_code_until_close(fd);
  close(fd);
  EXPECT_EQ(code, NGHTTP2_ENHANCE_YOUR_CALM);
  EXPECT_EQ(refused.load(), 1);
  // A stream reset in the same read as its HEADERS is never dispatched; a read boundary between
  // the two may let a few through, never the hundreds of the burst.
  EXPECT_LT(handled.load(), 10);
  EXPECT_TRUE(test::wait_for([&] { return server.open_connections() == 0; }));
}

TEST(Http2ResetTest, AClientThatCancelsNowAndThenKeepsItsConnection) {
  ServerOptions o;
  o.http2_max_resets_per_s = 50;
  HttpServer server(o, [](std::shared_ptr<ServerStream> s) { s->send_simple(200, {}, "ok"); });
  ASSERT_TRUE(server.start().ok());
  testing::Http2TestClient client(server.port(), {});
  for (int i = 0; i < 20; ++i) {
    const int32_t id = client.submit_open("POST", "/cancelled");
    client.run_until([] { return false; }, 10);
    client.rst(id);
  }
  const int32_t ok = client.submit("GET", "/ok");
  ASSERT_TRUE(client.wait_closed(ok));
  EXPECT_EQ(client.response(ok).status, 200);
  EXPECT_FALSE(client.goaway());
}

}  // namespace
}  // namespace cutline::proto
