// HttpClient over HTTP/2 when the upstream fails a stream or the connection: RST_STREAM before
// or during the body, GOAWAY (open streams finish, refused ones retried on another connection),
// and a connection lost mid-body, before any response (a reused connection is retried once, a
// fresh one is not). The upstream is the scripted nghttp2 server of h2_scripted_server.h.

#include <gtest/gtest.h>

#include <string>

#include "cutline/proto/http/http_client.h"
#include "cutline/proto/net/event_loop.h"
#include "h2_scripted_server.h"

namespace cutline::proto {
namespace {

using testing::ClientThread;
using testing::h2_request;
using testing::H2Server;
using testing::Outcome;
using testing::SeenStream;

TEST(Http2Client, UpstreamResetIsClosedMidBodyOrBeforeHead) {
  H2Server server(/*auto_reply=*/false);
  ClientThread client;
  Outcome mid, before, other;
  ClientHandle h1, h2, h3;
  client.run([&] {
    h1 = client.client().start(h2_request(server.port(), "/mid"), mid.callbacks());
    h2 = client.client().start(h2_request(server.port(), "/before"), before.callbacks());
    h3 = client.client().start(h2_request(server.port(), "/other"), other.callbacks());
  });
  ASSERT_TRUE(server.wait_streams(3));
  std::map<std::string, int32_t> id;
  for (const SeenStream& s : server.streams()) id[s.path] = s.id;
  server.respond(0, id["/mid"]);
  server.send(0, id["/mid"], "data: x\n\n", false);
  ASSERT_TRUE(mid.notes.wait_for([&] { return !mid.body.empty(); }));
  server.reset(0, id["/mid"]);
  server.reset(0, id["/before"]);
  ASSERT_TRUE(mid.wait_done());
  ASSERT_TRUE(before.wait_done());
  ASSERT_TRUE(mid.error);
  EXPECT_EQ(mid.error->kind, ClientErrorKind::kClosedMidBody) << mid.error->message;
  ASSERT_TRUE(before.error);
  EXPECT_EQ(before.error->kind, ClientErrorKind::kClosedBeforeHead) << before.error->message;
  // The third stream is unaffected.
  server.respond(0, id["/other"]);
  server.send(0, id["/other"], "still here", true);
  ASSERT_TRUE(other.wait_done());
  EXPECT_FALSE(other.error);
  EXPECT_EQ(other.body, "still here");
  client.run([&] {
    h1 = ClientHandle();
    h2 = ClientHandle();
    h3 = ClientHandle();
  });
}

TEST(Http2Client, GoawayFinishesOpenStreamsAndRetriesRefusedOnesElsewhere) {
  H2Server server(/*auto_reply=*/false);
  ClientThread client;
  Outcome kept, refused;
  ClientHandle hk, hr;
  client.run([&] {
    hk = client.client().start(h2_request(server.port(), "/kept"), kept.callbacks());
    hr = client.client().start(h2_request(server.port(), "/refused"), refused.callbacks());
  });
  ASSERT_TRUE(server.wait_streams(2));
  std::map<std::string, int32_t> id;
  for (const SeenStream& s : server.streams()) id[s.path] = s.id;
  ASSERT_LT(id["/kept"], id["/refused"]);
  server.goaway(0, id["/kept"]);
  // The refused stream never reached the application: it is sent again on a new connection.
  ASSERT_TRUE(server.wait_streams(3));
  EXPECT_EQ(server.connections(), 2);
  const SeenStream again = server.streams()[2];
  EXPECT_EQ(again.path, "/refused");
  EXPECT_EQ(again.conn, 1);
  server.respond(1, again.id);
  server.send(1, again.id, "second try", true);
  server.respond(0, id["/kept"]);
  server.send(0, id["/kept"], "first", true);
  ASSERT_TRUE(kept.wait_done());
  ASSERT_TRUE(refused.wait_done());
  EXPECT_FALSE(kept.error);
  EXPECT_EQ(kept.body, "first");
  EXPECT_FALSE(refused.error) << refused.error->message;
  EXPECT_EQ(refused.body, "second try");
  client.run([&] {
    hk = ClientHandle();
    hr = ClientHandle();
  });
}

TEST(Http2Client, ConnectionLostMidBodyFailsEveryOpenStream) {
  auto server = std::make_unique<H2Server>(/*auto_reply=*/false);
  ClientThread client;
  Outcome a, b;
  ClientHandle ha, hb;
  const uint16_t port = server->port();
  client.run([&] {
    ha = client.client().start(h2_request(port, "/a"), a.callbacks());
    hb = client.client().start(h2_request(port, "/b"), b.callbacks());
  });
  ASSERT_TRUE(server->wait_streams(2));
  server->respond(0, 1);
  server->send(0, 1, "some", false);
  ASSERT_TRUE(a.notes.wait_for([&] { return !a.body.empty(); }));
  server.reset();  // closes every connection
  ASSERT_TRUE(a.wait_done());
  ASSERT_TRUE(b.wait_done());
  EXPECT_EQ(a.error->kind, ClientErrorKind::kClosedMidBody);
  EXPECT_EQ(b.error->kind, ClientErrorKind::kClosedBeforeHead);
  client.run([&] {
    ha = ClientHandle();
    hb = ClientHandle();
  });
}

TEST(Http2Client, ReusedConnectionLostBeforeAnyResponseIsRetriedOnce) {
  H2Server server(/*auto_reply=*/true);  // drops connection 0 when "/die" arrives on it
  ClientThread client;
  Outcome first, retried;
  ClientHandle h1, h2;
  client.run(
      [&] { h1 = client.client().start(h2_request(server.port(), "/one"), first.callbacks()); });
  ASSERT_TRUE(first.wait_done());
  EXPECT_EQ(first.body, "ok /one");
  client.run(
      [&] { h2 = client.client().start(h2_request(server.port(), "/die"), retried.callbacks()); });
  ASSERT_TRUE(retried.wait_done());
  EXPECT_FALSE(retried.error) << retried.error->message;
  EXPECT_EQ(retried.body, "ok /die");  // answered on a second connection
  EXPECT_EQ(server.connections(), 2);
  client.run([&] {
    h1 = ClientHandle();
    h2 = ClientHandle();
  });
}

TEST(Http2Client, FreshConnectionLostBeforeTheHeadIsNotRetried) {
  H2Server server(/*auto_reply=*/true);
  ClientThread client;
  Outcome o;
  ClientHandle h;
  client.run([&] { h = client.client().start(h2_request(server.port(), "/die"), o.callbacks()); });
  ASSERT_TRUE(o.wait_done());
  ASSERT_TRUE(o.error);
  EXPECT_EQ(o.error->kind, ClientErrorKind::kClosedBeforeHead) << o.error->message;
  EXPECT_EQ(server.connections(), 1);
  client.run([&] { h = ClientHandle(); });
}

}  // namespace
}  // namespace cutline::proto
