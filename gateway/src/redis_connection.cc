// RESP over proto::Connection (redis_connection.h).
#include "cutline/gateway/redis_connection.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <hiredis/hiredis.h>
#include <hiredis/read.h>
#include <netinet/in.h>
#include <openssl/ssl.h>

#include <cstring>
#include <utility>

#include "cutline/proto/net/event_loop.h"

namespace cutline::gateway {

RedisConnection::RedisConnection(proto::EventLoop& loop, Events events)
    : loop_(loop),
      events_(std::move(events)),
      reader_(redisReaderCreate()),
      alive_(std::make_shared<bool>(true)) {}

RedisConnection::~RedisConnection() {
  *alive_ = false;
  conn_.reset();  // no Handler callback runs after this
  if (reader_) redisReaderFree(reader_);
}

bool RedisConnection::connect(const std::string& address, uint16_t port, int64_t timeout_ms,
                              ssl_st* ssl, std::string& error) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
  } else {
    error = "not an IP address: " + address;
    if (ssl != nullptr) SSL_free(ssl);
    return false;
  }
  if (reader_ == nullptr) {
    error = "out of memory";
    if (ssl != nullptr) SSL_free(ssl);
    return false;
  }
  conn_ = proto::Connection::connect(loop_, reinterpret_cast<const sockaddr*>(&ss), len, timeout_ms,
                                     *this, proto::ConnectionOptions{}, ssl);
  if (!conn_) {
    error = std::string("cannot connect: ") + std::strerror(errno);
    return false;
  }
  return true;
}

void RedisConnection::command(const std::vector<std::string_view>& args, ReplyFn done) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  char* encoded = nullptr;
  const int n =
      redisFormatCommandArgv(&encoded, static_cast<int>(argv.size()), argv.data(), lens.data());
  if (n < 0 || !conn_ || closing_) {
    if (encoded) redisFreeCommand(encoded);
    auto alive = alive_;
    // Never inline: the caller may still be setting up what the callback reads.
    loop_.post([alive, done = std::move(done)]() {
      if (*alive) done(nullptr);
    });
    return;
  }
  conn_->write(std::string_view(encoded, static_cast<size_t>(n)));
  redisFreeCommand(encoded);
  replies_.push_back(std::move(done));
}

void RedisConnection::close_when_answered() {
  closing_ = true;
  if (replies_.empty()) end("");
}

void RedisConnection::on_connected() {
  if (events_.connected) events_.connected();
}

void RedisConnection::on_readable(evbuffer* input) {
  auto alive = alive_;
  // Feed what arrived, then hand out every complete reply.
  while (evbuffer_get_length(input) > 0) {
    evbuffer_iovec v;
    if (evbuffer_peek(input, -1, nullptr, &v, 1) < 1) break;
    if (redisReaderFeed(reader_, static_cast<const char*>(v.iov_base), v.iov_len) != REDIS_OK)
      break;
    evbuffer_drain(input, v.iov_len);
  }
  for (;;) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
      end(std::string("protocol error: ") + reader_->errstr);
      return;
    }
    if (reply == nullptr) return;
    if (replies_.empty()) {  // Redis never answers what was not asked
      freeReplyObject(reply);
      end("a reply to no command");
      return;
    }
    ReplyFn done = std::move(replies_.front());
    replies_.pop_front();
    done(static_cast<const redisReply*>(reply));
    freeReplyObject(reply);
    if (!*alive || !conn_) return;  // destroyed, or ended by the callback
    if (closing_ && replies_.empty()) {
      end("");
      return;
    }
  }
}

void RedisConnection::on_closed(proto::Connection::CloseReason reason, std::string_view message) {
  using R = proto::Connection::CloseReason;
  std::string why(message);
  switch (reason) {
    case R::kEof:
      why = "connection closed by Redis";
      break;
    case R::kConnectRefused:
      why = "cannot connect: connection refused";
      break;
    case R::kConnectTimeout:
      why = "connect timed out";
      break;
    case R::kConnectFailed:
      why = "cannot connect: " + why;
      break;
    default:
      why = "connection lost: " + why;
      break;
  }
  end(why);  // destroying the Connection from its own callback is allowed
}

void RedisConnection::end(const std::string& why) {
  if (ended_) return;
  ended_ = true;
  auto alive = alive_;
  conn_.reset();
  std::deque<ReplyFn> waiting;
  waiting.swap(replies_);
  for (auto& done : waiting) {
    done(nullptr);
    if (!*alive) return;
  }
  if (events_.closed) events_.closed(why);
}

}  // namespace cutline::gateway
