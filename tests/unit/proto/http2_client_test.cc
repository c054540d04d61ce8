// HttpClient over HTTP/2 (ClientRequest::protocol kHttp2 / kAuto) while the upstream behaves:
// many streams multiplexed on one connection, the peer's SETTINGS_MAX_CONCURRENT_STREAMS respected
// by opening more connections, pause() of one stream not blocking another (flow control per
// stream), cancel() as RST_STREAM with the connection kept, and TLS with ALPN (h2, or HTTP/1.1
// when the upstream picks it). The upstream is the scripted nghttp2 server of h2_scripted_server.h
// (http2_client_failures_test.cc has the upstream's resets, GOAWAY and lost connections).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cutline/proto/http/http_client.h"
#include "cutline/proto/http/http_server.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/net/worker_threads.h"
#include "cutline/proto/tls/tls_context.h"
#include "h2_scripted_server.h"
#include "tls_test_util.h"

namespace cutline::proto {
namespace {

using testing::ClientThread;
using testing::h2_request;
using testing::H2Server;
using testing::Outcome;
using testing::SeenStream;

TEST(Http2Client, ManyStreamsShareOneConnection) {
  H2Server server(/*auto_reply=*/true);
  ClientThread client;
  constexpr int kStreams = 20;
  std::vector<Outcome> out(kStreams);
  std::vector<ClientHandle> handles(kStreams);
  client.run([&] {
    for (int i = 0; i < kStreams; ++i) {
      handles[i] = client.client().start(h2_request(server.port(), "/s" + std::to_string(i)),
                                         out[i].callbacks());
    }
  });
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(out[i].wait_done()) << i;
    EXPECT_FALSE(out[i].error) << out[i].error->message;
    EXPECT_EQ(out[i].status, 200);
    EXPECT_EQ(out[i].body, "ok /s" + std::to_string(i));
  }
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(client.client().connections_opened(), 1u);
  for (const SeenStream& s : server.streams()) EXPECT_EQ(s.body, "{\"q\":\"" + s.path + "\"}");
  client.run([&] { handles.clear(); });
}

TEST(Http2Client, PeerStreamLimitOpensAnotherConnection) {
  H2Server server(/*auto_reply=*/false, /*max_streams=*/5);
  ClientThread client;
  // One exchange first so that the server's SETTINGS are known.
  Outcome first;
  ClientHandle first_handle;
  client.run([&] {
    first_handle = client.client().start(h2_request(server.port(), "/first"), first.callbacks());
  });
  ASSERT_TRUE(server.wait_streams(1));
  server.respond(0, 1);
  server.send(0, 1, "done", true);
  ASSERT_TRUE(first.wait_done());
  constexpr int kStreams = 12;
  std::vector<Outcome> out(kStreams);
  std::vector<ClientHandle> handles(kStreams);
  client.run([&] {
    for (int i = 0; i < kStreams; ++i) {
      handles[i] = client.client().start(h2_request(server.port(), "/h" + std::to_string(i)),
                                         out[i].callbacks());
    }
  });
  ASSERT_TRUE(server.wait_streams(1 + kStreams));
  EXPECT_EQ(server.connections(), 3);  // 5 + 5 + 2 streams
  std::map<int, int> per_conn;
  for (const SeenStream& s : server.streams()) {
    if (s.path != "/first") ++per_conn[s.conn];
  }
  for (const auto& [conn, n] : per_conn) EXPECT_LE(n, 5) << "connection " << conn;
  for (const SeenStream& s : server.streams()) {
    if (s.path == "/first") continue;
    server.respond(s.conn, s.id);
    server.send(s.conn, s.id, "x", true);
  }
  for (auto& o : out) ASSERT_TRUE(o.wait_done());
  client.run([&] {
    handles.clear();
    first_handle = ClientHandle();
  });
}

TEST(Http2Client, PausedStreamDoesNotBlockItsNeighbour) {
  H2Server server(/*auto_reply=*/false);
  ClientThread client;
  Outcome a, b;
  ClientHandle ha, hb;
  a.pause_on_head = true;
  a.handle = &ha;
  client.run([&] {
    ha = client.client().start(h2_request(server.port(), "/a"), a.callbacks());
    hb = client.client().start(h2_request(server.port(), "/b"), b.callbacks());
  });
  ASSERT_TRUE(server.wait_streams(2));
  const auto seen = server.streams();
  const int32_t id_a = seen[0].path == "/a" ? seen[0].id : seen[1].id;
  const int32_t id_b = seen[0].path == "/a" ? seen[1].id : seen[0].id;
  server.respond(0, id_a);
  ASSERT_TRUE(a.notes.wait_for([&] { return a.status == 200; }));
  // 600 KiB for the paused stream: more than its 256 KiB window, so the rest waits upstream.
  server.send(0, id_a, std::string(600 * 1024, 'a'), true);
  ASSERT_TRUE(test::wait_for([&] { return server.window(0, id_a) == 0; }));
  EXPECT_GT(server.unsent(0, id_a), 0u);
  EXPECT_EQ(a.body_size(), 0u);  // paused: nothing delivered
  // The neighbour on the same connection still flows.
  server.respond(0, id_b);
  server.send(0, id_b, std::string(100 * 1024, 'b'), true);
  ASSERT_TRUE(b.wait_done());
  EXPECT_FALSE(b.error);
  EXPECT_EQ(b.body.size(), 100u * 1024);
  // Resumed, the paused stream gets everything (window updates let the upstream send the rest).
  client.run([&] { ha.resume(); });
  ASSERT_TRUE(a.wait_done());
  EXPECT_FALSE(a.error) << a.error->message;
  EXPECT_EQ(a.body.size(), 600u * 1024);
  EXPECT_EQ(server.connections(), 1);
  client.run([&] {
    ha = ClientHandle();
    hb = ClientHandle();
  });
}

TEST(Http2Client, CancelResetsTheStreamAndKeepsTheConnection) {
  H2Server server(/*auto_reply=*/false);
  ClientThread client;
  Outcome a;
  ClientHandle ha;
  client.run([&] { ha = client.client().start(h2_request(server.port(), "/a"), a.callbacks()); });
  ASSERT_TRUE(server.wait_streams(1));
  server.respond(0, 1);
  server.send(0, 1, "partial", false);
  ASSERT_TRUE(a.notes.wait_for([&] { return a.body == "partial"; }));
  client.run([&] { ha.cancel(); });
  EXPECT_EQ(server.wait_closed(0), std::optional<uint32_t>(NGHTTP2_CANCEL));
  EXPECT_FALSE(a.done);  // nothing after cancel
  // The next request goes on the same connection.
  Outcome b;
  ClientHandle hb;
  client.run([&] { hb = client.client().start(h2_request(server.port(), "/b"), b.callbacks()); });
  ASSERT_TRUE(server.wait_streams(2));
  server.respond(0, 3);
  server.send(0, 3, "fine", true);
  ASSERT_TRUE(b.wait_done());
  EXPECT_EQ(b.body, "fine");
  EXPECT_EQ(server.connections(), 1);
  EXPECT_FALSE(a.done);
  client.run([&] { hb = ClientHandle(); });
}

class Http2ClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::ignore_sigpipe();
    files_ = testing::make_self_signed(dir_, "server");
    TlsClientConfig config;
    config.ca_file = files_.cert;
    client_tls_ = TlsContext::client(config).value();
  }
  std::shared_ptr<const TlsContext> server_tls(std::vector<std::string> alpn) {
    TlsServerConfig config;
    config.cert_file = files_.cert;
    config.key_file = files_.key;
    config.alpn = std::move(alpn);
    return TlsContext::server(config).value();
  }
  ClientRequest tls_request(uint16_t port, ClientProtocol protocol) {
    ClientRequest req = h2_request(port, "/tls", protocol);
    req.tls = client_tls_;
    return req;
  }

  testing::TempDir dir_;
  testing::CertFiles files_;
  std::shared_ptr<const TlsContext> client_tls_;
};

TEST_F(Http2ClientTlsTest, AlpnH2CarriesTheStreams) {
  H2Server server(/*auto_reply=*/true, 100, server_tls({"h2"}));
  ClientThread client;
  std::vector<Outcome> out(3);
  std::vector<ClientHandle> handles(3);
  client.run([&] {
    for (int i = 0; i < 3; ++i) {
      handles[i] = client.client().start(tls_request(server.port(), ClientProtocol::kAuto),
                                         out[i].callbacks());
    }
  });
  for (auto& o : out) {
    ASSERT_TRUE(o.wait_done());
    EXPECT_FALSE(o.error) << o.error->message;
    EXPECT_EQ(o.body, "ok /tls");
  }
  EXPECT_EQ(server.connections(), 1);
  client.run([&] { handles.clear(); });
}

TEST_F(Http2ClientTlsTest, AutoFallsBackToHttp1WhenTheUpstreamPicksIt) {
  ServerOptions options;
  TlsServerConfig config;
  config.cert_file = files_.cert;
  config.key_file = files_.key;
  config.alpn = {"http/1.1"};
  options.tls = TlsContext::server(config).value();
  HttpServer server(options, [](std::shared_ptr<ServerStream> s) {
    s->send_simple(200, HttpHeaders{{"Content-Type", "text/plain"}},
                   "http1 " + s->request().target);
  });
  ASSERT_TRUE(server.start().ok());
  ClientThread client;
  for (int round = 0; round < 2; ++round) {
    Outcome o;
    ClientHandle h;
    client.run([&] {
      h = client.client().start(tls_request(server.port(), ClientProtocol::kAuto), o.callbacks());
    });
    ASSERT_TRUE(o.wait_done());
    EXPECT_FALSE(o.error) << o.error->message;
    EXPECT_EQ(o.body, "http1 /tls");
    client.run([&] { h = ClientHandle(); });
  }
  // Forcing HTTP/2 against it is a clear connect error.
  Outcome forced;
  ClientHandle hf;
  client.run([&] {
    hf = client.client().start(tls_request(server.port(), ClientProtocol::kHttp2),
                               forced.callbacks());
  });
  ASSERT_TRUE(forced.wait_done());
  ASSERT_TRUE(forced.error);
  EXPECT_EQ(forced.error->kind, ClientErrorKind::kConnectFailed);
  EXPECT_NE(forced.error->message.find("ALPN"), std::string::npos) << forced.error->message;
  client.run([&] { hf = ClientHandle(); });
  server.stop();
}

}  // namespace
}  // namespace cutline::proto
