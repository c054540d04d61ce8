// Direct reading (ConnectionOptions::direct_read): bytes a handler does not consume from one
// recv() and hands back with keep_input() reach it again through on_readable(), in order, on an
// accepted connection and on an outgoing one. A kept byte that went missing would be a request
// or a token silently lost.

#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "cutline/proto/net/connection.h"
#include "cutline/proto/net/event_loop.h"

namespace cutline::proto {
namespace {

// Takes the first `take` bytes of each direct read and keeps the rest for on_readable(), which
// drains everything it is shown.
struct KeepingHandler : Connection::Handler {
  size_t take = 3;
  std::string taken;
  std::string readable;
  bool connected = false;
  void on_connected() override { connected = true; }
  void on_bytes(Connection& conn, std::string_view data) override {
    const size_t n = std::min(take, data.size());
    taken.append(data.substr(0, n));
    conn.keep_input(data.substr(n));
    conn.trigger_read();
  }
  void on_readable(evbuffer* input) override {
    const size_t n = evbuffer_get_length(input);
    std::string bytes(n, '\0');
    evbuffer_remove(input, bytes.data(), n);
    readable += bytes;
  }
  void on_drained() override {}
  void on_closed(Connection::CloseReason, std::string_view) override {}
};

// Runs the loop until `done` or two seconds have passed.
template <typename Done>
bool run_until(EventLoop& loop, Done done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!done() && std::chrono::steady_clock::now() < until) {
    event_base_loop(loop.base(), EVLOOP_ONCE | EVLOOP_NONBLOCK);
  }
  return done();
}

TEST(ConnectionDirectRead, AcceptedConnectionGetsKeptBytesBackInOrder) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  EventLoop loop;
  KeepingHandler handler;
  ConnectionOptions options;
  options.direct_read = true;
  auto conn = std::make_unique<Connection>(loop, fds[0], handler, options);
  const std::string sent = "POST /v1/chat/completions HTTP/1.1\r\n";
  ASSERT_EQ(write(fds[1], sent.data(), sent.size()), static_cast<ssize_t>(sent.size()));
  ASSERT_TRUE(run_until(
      loop, [&] { return handler.taken.size() + handler.readable.size() == sent.size(); }))
      << "taken " << handler.taken << ", readable " << handler.readable;
  EXPECT_EQ(handler.taken, "POS");
  EXPECT_EQ(handler.readable, sent.substr(3));
  conn.reset();
  close(fds[1]);
}

TEST(ConnectionDirectRead, OutgoingConnectionGetsKeptBytesBackInOrder) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);

  EventLoop loop;
  KeepingHandler handler;
  handler.take = 5;
  ConnectionOptions options;
  options.direct_read = true;
  auto conn = Connection::connect(loop, reinterpret_cast<sockaddr*>(&addr), sizeof addr, 1000,
                                  handler, options);
  ASSERT_NE(conn, nullptr);
  ASSERT_TRUE(run_until(loop, [&] { return handler.connected; }));
  const int server = accept(listener, nullptr, nullptr);
  ASSERT_GE(server, 0);
  const std::string sent = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";
  ASSERT_EQ(write(server, sent.data(), sent.size()), static_cast<ssize_t>(sent.size()));
  ASSERT_TRUE(run_until(
      loop, [&] { return handler.taken.size() + handler.readable.size() == sent.size(); }))
      << "taken " << handler.taken << ", readable " << handler.readable;
  EXPECT_EQ(handler.taken, "data:");
  EXPECT_EQ(handler.readable, sent.substr(5));
  conn.reset();
  close(server);
  close(listener);
}

}  // namespace
}  // namespace cutline::proto
