// Write batching (connection.h): what a connection is asked to send while a WriteBatch is open
// leaves in one send() when the batch closes, in order, and nothing written is lost when the
// connection closes, flushes or grows large inside the batch.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>

#include "cutline/proto/net/connection.h"
#include "cutline/proto/net/event_loop.h"

namespace cutline::proto {
namespace {

struct NullHandler : Connection::Handler {
  void on_readable(evbuffer*) override {}
  void on_drained() override {}
  void on_closed(Connection::CloseReason, std::string_view) override {}
};

// A Connection on one end of a socket pair (as for an accepted socket: direct writes) and the
// other end, non-blocking, for the test to read what arrived.
class WriteBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    peer_ = fds[1];
    fcntl(peer_, F_SETFL, fcntl(peer_, F_GETFL) | O_NONBLOCK);
    conn_ = std::make_unique<Connection>(loop_, fds[0], handler_, ConnectionOptions{});
  }
  void TearDown() override {
    conn_.reset();
    close(peer_);
  }
  // One recv(): what a single read on the other end gets now ("" when nothing is there).
  std::string read_once() {
    char buf[1 << 16];
    const ssize_t n = recv(peer_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }
  std::string read_all() {
    std::string out;
    for (std::string part = read_once(); !part.empty(); part = read_once()) out += part;
    return out;
  }

  EventLoop loop_;
  NullHandler handler_;
  std::unique_ptr<Connection> conn_;
  int peer_ = -1;
};

TEST_F(WriteBatchTest, WritesInABatchLeaveTogetherWhenItCloses) {
  {
    WriteBatch batch;
    conn_->write("HTTP/1.1 200 OK\r\n\r\n");
    conn_->write("5\r\nhello\r\n");
    EXPECT_EQ(read_once(), "") << "nothing leaves while the batch is open";
  }
  EXPECT_EQ(read_once(), "HTTP/1.1 200 OK\r\n\r\n5\r\nhello\r\n");
}

TEST_F(WriteBatchTest, NestedBatchesSendWhenTheOutermostCloses) {
  std::optional<WriteBatch> outer;
  outer.emplace();
  {
    WriteBatch inner;
    conn_->write("a");
  }
  conn_->write("b");
  EXPECT_EQ(read_once(), "");
  outer.reset();
  EXPECT_EQ(read_once(), "ab");
}

TEST_F(WriteBatchTest, WithoutABatchEveryWriteLeavesAtOnce) {
  conn_->write("a");
  EXPECT_EQ(read_once(), "a");
}

TEST_F(WriteBatchTest, CloseInsideABatchStillDeliversWhatWasWritten) {
  {
    WriteBatch batch;
    conn_->write("last words");
    conn_->close();
  }
  EXPECT_EQ(read_all(), "last words");
}

TEST_F(WriteBatchTest, DestroyingTheConnectionInsideABatchIsSafe) {
  {
    WriteBatch batch;
    conn_->write("x");
    conn_.reset();
  }
  EXPECT_EQ(read_all(), "x");
}

TEST_F(WriteBatchTest, CloseAfterFlushSendsHeldBytesBeforeTheEnd) {
  {
    WriteBatch batch;
    conn_->write("0\r\n\r\n");
    conn_->close_after_flush(100);
  }
  EXPECT_EQ(read_all(), "0\r\n\r\n");
  char c;
  EXPECT_EQ(recv(peer_, &c, 1, 0), 0) << "then the sending side is shut down";
}

TEST_F(WriteBatchTest, LargeWritesAreNotHeldSoBackPressureSeesThem) {
  const std::string big(64 * 1024, 'z');
  WriteBatch batch;
  conn_->write("head");
  conn_->write(big);
  // Held bytes went out (or were queued) as soon as they passed the limit, in order.
  EXPECT_EQ(read_all() + std::string(conn_->output_bytes(), 'z'), "head" + big);
}

}  // namespace
}  // namespace cutline::proto
