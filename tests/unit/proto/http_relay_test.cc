// The gateway's relay pattern on the proto/ core, end to end: a downstream client, a relay
// (HttpServer + HttpClient on the same shared worker loop, wired as server_stream.h's recipe
// says) and an upstream HttpServer. Checks that a downstream that stops reading pauses the
// upstream read with bounded buffering in the relay, that everything arrives once it reads
// again, and that a downstream disconnect reaches the upstream as a close.
#include <gtest/gtest.h>

#include <algorithm>

#include "cutline/proto/http/http_client.h"
#include "cutline/proto/http/http_server.h"
#include "net_test_util.h"

namespace cutline::proto {
namespace {

using testing::Notes;

constexpr size_t kPiece = 8 * 1024;

struct Upstream {
  Notes notes;
  size_t produced = 0;
  bool closed_early = false;
  size_t total = 0;
  std::unique_ptr<HttpServer> server;

  explicit Upstream(size_t total_bytes) : total(total_bytes) {
    server = std::make_unique<HttpServer>(ServerOptions{}, [this](std::shared_ptr<ServerStream> s) {
      s->send_head(200, HttpHeaders{{"Trailer", "cutline-stop"}}, BodyFraming::chunked());
      auto produce = std::make_shared<std::function<void()>>();
      *produce = [this, raw = s.get()] {
        const std::string piece(kPiece, 'z');  // 'z' appears in no header or chunk line
        while (true) {
          const size_t done = notes.read<size_t>([&] { return produced; });
          if (done >= total) {
            raw->finish(HttpHeaders{{"cutline-stop", "eos"}});
            return;
          }
          const bool more = raw->send_body(piece);
          notes.update([&] { produced += kPiece; });
          if (!more) return;  // wait for on_writable
        }
      };
      s->on_writable([produce] { (*produce)(); });
      s->on_close([this] { notes.update([&] { closed_early = true; }); });
      (*produce)();
    });
    EXPECT_TRUE(server->start().ok());
  }
};

struct Relay {
  Notes notes;
  size_t max_buffered = 0;
  int pauses = 0;
  WorkerThreads workers{1};
  std::unique_ptr<HttpClient> client;
  std::unique_ptr<HttpServer> server;
  uint16_t upstream_port;

  explicit Relay(uint16_t upstream) : upstream_port(upstream) {
    workers.start();
    workers.run_on_all_and_wait(
        [this](EventLoop& loop) { client = std::make_unique<HttpClient>(loop); });
    server = std::make_unique<HttpServer>(
        ServerOptions{}, [this](std::shared_ptr<ServerStream> s) { relay(std::move(s)); }, workers);
    EXPECT_TRUE(server->start().ok());
  }
  ~Relay() {
    server->stop();
    workers.run_on_all_and_wait([this](EventLoop&) { client.reset(); });
    workers.stop();
  }

  void relay(std::shared_ptr<ServerStream> down) {
    auto handle = std::make_shared<ClientHandle>();
    ClientRequest req;
    req.host = "127.0.0.1";
    req.port = upstream_port;
    req.target = std::string(down->request().target);
    ClientCallbacks cb;
    cb.on_head = [down](int status, HttpHeaders& headers) {
      remove_hop_by_hop(headers);
      headers.add("Trailer", "cutline-stop");
      down->send_head(status, headers, BodyFraming::chunked());
    };
    cb.on_body = [this, down, handle](std::string_view data) {
      const bool more = down->send_body(data);
      notes.update([&] {
        max_buffered = std::max(max_buffered, down->buffered_bytes());
        if (!more) ++pauses;
      });
      if (!more) handle->pause();
    };
    cb.on_complete = [down](HttpHeaders& trailers) { down->finish(trailers); };
    cb.on_error = [down](const ClientError&) { down->reset(); };
    down->on_writable([handle] { handle->resume(); });
    down->on_close([handle] { handle->cancel(); });
    *handle = client->start(std::move(req), std::move(cb));
  }
};

TEST(HttpRelayTest, SlowDownstreamPausesUpstreamWithBoundedRelayBuffering) {
  constexpr size_t kTotal = 24 * 1024 * 1024;
  Upstream upstream(kTotal);
  Relay relay(upstream.server->port());
  const int fd = testing::connect_raw(relay.server->port());
  ASSERT_GE(fd, 0);
  testing::send_all(fd, "GET /v1/stream HTTP/1.1\r\nHost: relay\r\n\r\n");
  // The downstream reads nothing: the relay pauses the upstream read, so the upstream's producer
  // stalls well before the end.
  ASSERT_TRUE(relay.notes.wait_for([&] { return relay.pauses > 0; }));
  const size_t produced_then = upstream.notes.read<size_t>([&] { return upstream.produced; });
  EXPECT_LT(produced_then, kTotal);
  // Now read everything (chunked framing included) up to the final trailer.
  const std::string got = testing::recv_until(
      fd,
      [](const std::string& s) { return s.find("cutline-stop: eos\r\n\r\n") != std::string::npos; },
      30000);
  close(fd);
  ASSERT_NE(got.find("cutline-stop: eos\r\n\r\n"), std::string::npos) << got.size();
  EXPECT_NE(got.find("Trailer: cutline-stop"), std::string::npos);
  const size_t body_bytes = static_cast<size_t>(std::count(got.begin(), got.end(), 'z'));
  EXPECT_EQ(body_bytes, kTotal);
  // The relay never held more than its high-water mark plus one upstream piece.
  EXPECT_LE(relay.max_buffered, ServerOptions{}.high_water_bytes + 64 * 1024);
  EXPECT_FALSE(upstream.notes.read<bool>([&] { return upstream.closed_early; }));
}

TEST(HttpRelayTest, DownstreamDisconnectClosesTheUpstreamStream) {
  Upstream upstream(1024 * 1024 * 1024);  // effectively endless
  Relay relay(upstream.server->port());
  const int fd = testing::connect_raw(relay.server->port());
  testing::send_all(fd, "GET / HTTP/1.1\r\nHost: relay\r\n\r\n");
  testing::recv_until(fd, [](const std::string& s) { return s.size() > 100000; });
  close(fd);
  ASSERT_TRUE(upstream.notes.wait_for([&] { return upstream.closed_early; }));
}

}  // namespace
}  // namespace cutline::proto
