#include "http1_client_connection.h"

#include <event2/buffer.h>

#include <algorithm>

#include "cutline/proto/http1/http1_writer.h"
#include "cutline/proto/net/event_loop.h"

namespace cutline::proto {

// ---- ClientExchange -----------------------------------------------------------------------------

ClientExchange::ClientExchange(HttpClient::Pool& pool, ClientRequest request,
                               ClientCallbacks callbacks)
    : pool_(&pool), callbacks_(std::move(callbacks)), request_(std::move(request)) {
  pool_->active.insert(this);
}

void ClientExchange::finish_state() {
  state_ = State::kDone;
  if (pool_ != nullptr) pool_->active.erase(this);
  pool_ = nullptr;
  connection = nullptr;
}

void ClientExchange::cancel() {
  if (state_ == State::kDone) return;
  Http1ClientConnection* conn = connection;
  finish_state();
  // Inside a callback the running std::function must stay alive: drop them when it returns.
  if (in_callback_ == 0) callbacks_ = ClientCallbacks{};
  if (conn != nullptr) conn->abort_exchange();
}

void ClientExchange::abandon() {
  if (state_ == State::kDone) return;
  finish_state();
  if (in_callback_ == 0) callbacks_ = ClientCallbacks{};
}

void ClientExchange::pause() {
  if (state_ == State::kDone || paused_) return;
  paused_ = true;
  if (connection != nullptr) connection->pause_reading();
}

void ClientExchange::resume() {
  if (state_ == State::kDone || !paused_) return;
  paused_ = false;
  if (connection != nullptr) connection->resume_reading();
}

void ClientExchange::deliver_head(int status, HttpHeaders& headers) {
  if (state_ == State::kDone) return;
  // The request cannot be retried any more: free its body and headers (a streaming exchange
  // lives as long as its response).
  std::string().swap(request_.body);
  request_.headers = HttpHeaders();
  if (!callbacks_.on_head) return;
  ++in_callback_;
  callbacks_.on_head(status, headers);
  after_callback();
}

void ClientExchange::after_callback() {
  if (--in_callback_ == 0 && state_ == State::kDone) callbacks_ = ClientCallbacks{};
}

void ClientExchange::deliver_body(std::string_view data) {
  if (state_ == State::kDone) return;
  if (!callbacks_.on_body) return;
  ++in_callback_;
  callbacks_.on_body(data);
  after_callback();
}

void ClientExchange::complete(HttpHeaders& trailers) {
  if (state_ == State::kDone) return;
  auto on_complete = std::move(callbacks_.on_complete);
  finish_state();
  if (in_callback_ == 0) callbacks_ = ClientCallbacks{};
  if (on_complete) on_complete(trailers);
}

void ClientExchange::fail(const ClientError& error) {
  if (state_ == State::kDone) return;
  auto on_error = std::move(callbacks_.on_error);
  finish_state();
  if (in_callback_ == 0) callbacks_ = ClientCallbacks{};
  if (on_error) on_error(error);
}

// ---- Http1ClientConnection ----------------------------------------------------------------------

Http1ClientConnection::Http1ClientConnection(HttpClient::Pool& pool, std::string key)
    : pool_(pool),
      key_(std::move(key)),
      parser_(Http1Parser::Type::kResponse, pool.options.limits, *this) {}

Http1ClientConnection::~Http1ClientConnection() = default;

bool Http1ClientConnection::connect(const sockaddr* addr, socklen_t addr_len, ssl_st* ssl) {
  conn_ = Connection::connect(
      pool_.loop, addr, addr_len, pool_.options.connect_timeout_ms, *this,
      ConnectionOptions{pool_.options.high_water_bytes, pool_.options.low_water_bytes,
                        /*direct_read=*/true},
      ssl);
  return conn_ != nullptr;
}

void Http1ClientConnection::assign(std::shared_ptr<ClientExchange> exchange, bool reused) {
  exchange_ = std::move(exchange);
  exchange_->connection = this;
  reused_ = reused;
  any_byte_ = false;
  head_delivered_ = false;
  interim_ = false;
  message_done_ = false;
  keep_alive_ = true;
  trailers_.clear();
  parser_.set_head_response(exchange_->request().method == "HEAD");
  prefetch_ = {PrefetchSpan{this, sizeof(*this)}, PrefetchSpan{exchange_.get(), 128},
               PrefetchSpan{parser_.state_address(), Http1Parser::state_bytes()}};
  const auto& hints = exchange_->prefetch_hints();
  std::copy(hints.begin(), hints.end(), prefetch_.begin() + 3);
  conn_->set_prefetch(prefetch_.data(), static_cast<uint8_t>(prefetch_.size()));
  conn_->set_read_timeout(0);
  conn_->set_reading(!exchange_->paused());
  if (connected_) send_request();
}

void Http1ClientConnection::send_request() {
  const ClientRequest& req = exchange_->request();
  const bool has_body =
      !req.body.empty() || req.method == "POST" || req.method == "PUT" || req.method == "PATCH";
  // Head and body in one buffer and one write: one send() and, with TCP_NODELAY, one segment
  // for a small body.
  std::string head;
  head.reserve(req.body.size() + req.host.size() + 96);
  write_request_head(head, req.method, req.target, req.headers,
                     has_body ? BodyFraming::length(req.body.size()) : BodyFraming::none());
  if (!req.headers.has("host")) {
    // Host goes first, right after the request line (RFC 9112 §3.2).
    std::string host = "Host: ";
    if (req.host.find(':') != std::string::npos) {
      host.append("[").append(req.host).append("]");
    } else {
      host.append(req.host);
    }
    if (req.port != 80) host.append(":").append(std::to_string(req.port));
    head.insert(head.find("\r\n") + 2, host.append("\r\n"));
  }
  head.append(req.body);
  conn_->write(head);
}

void Http1ClientConnection::on_connected() {
  connected_ = true;
  if (exchange_) send_request();
}

bool Http1ClientConnection::should_pause() const {
  return !exchange_ || !exchange_->active() || exchange_->paused();
}

void Http1ClientConnection::on_readable(evbuffer* input) {
  if (retired_) return;
  if (!exchange_) {
    if (evbuffer_get_length(input) == 0) return;
    // Bytes on an idle connection: the upstream is confused; do not reuse it.
    pool_.remove_idle(this);
    conn_->close();
    retire();
    return;
  }
  if (exchange_->paused()) return;
  any_byte_ = true;
  // Hold a reference: callbacks may cancel (and so drop) the exchange.
  std::shared_ptr<ClientExchange> exchange = exchange_;
  while (evbuffer_get_length(input) > 0) {
    parser_.resume();
    evbuffer_iovec vec;
    if (evbuffer_peek(input, -1, nullptr, &vec, 1) < 1) break;
    Result<size_t> consumed =
        feed_batched(std::string_view(static_cast<const char*>(vec.iov_base), vec.iov_len));
    if (!consumed.ok()) {
      if (exchange_ == exchange) {
        fail_exchange(ClientErrorKind::kParse,
                      "malformed response from " + key_ + ": " + consumed.error().message);
      }
      return;
    }
    evbuffer_drain(input, *consumed);
    if (retired_ || exchange_ != exchange || !exchange->active()) return;  // cancelled
    if (message_done_) {
      complete_exchange(/*reusable=*/evbuffer_get_length(input) == 0);
      return;
    }
    if (exchange->paused()) return;
  }
  // Everything buffered is consumed; read again if a resume() left reading off.
  if (!conn_->reading()) conn_->set_reading(true);
}

// The per-token path of a streaming response: the bytes of one recv(), parsed in place.
void Http1ClientConnection::on_bytes(Connection& conn, std::string_view data) {
  if (retired_ || !exchange_ || exchange_->paused()) {
    conn.keep_input(data);
    return on_readable(conn.input());
  }
  any_byte_ = true;
  // Hold a reference: callbacks may cancel (and so drop) the exchange.
  std::shared_ptr<ClientExchange> exchange = exchange_;
  parser_.resume();
  Result<size_t> consumed = feed_batched(data);
  if (!consumed.ok()) {
    if (exchange_ == exchange) {
      fail_exchange(ClientErrorKind::kParse,
                    "malformed response from " + key_ + ": " + consumed.error().message);
    }
    return;
  }
  data.remove_prefix(*consumed);
  if (retired_ || exchange_ != exchange || !exchange->active()) return;  // cancelled
  if (message_done_) return complete_exchange(/*reusable=*/data.empty());
  // Paused mid-read: the rest waits in the input buffer for resume_reading().
  conn.keep_input(data);
}

bool Http1ClientConnection::on_head(Http1Head& head) {
  if (head.status >= 100 && head.status < 200 && head.status != 101) {
    interim_ = true;  // 100 Continue and friends: skip, the final response follows
    return true;
  }
  keep_alive_ = head.keep_alive;
  head_delivered_ = true;
  std::shared_ptr<ClientExchange> exchange = exchange_;
  exchange->deliver_head(head.status, head.headers);
  // Delivered: a streaming response keeps this connection (and its parser) for its whole life.
  head.headers = HttpHeaders();
  return !should_pause();
}

namespace {

// The joined body pieces of the read being parsed (feed_batched); one per thread: a batch never
// outlives the feed_batched() call that fills it.
std::string& body_batch_buffer() {
  thread_local std::string buffer;
  return buffer;
}

}  // namespace

bool Http1ClientConnection::on_body(std::string_view data) {
  if (batching_) {
    if (!batch_joined_ && batch_first_.empty()) {
      batch_first_ = data;
    } else {
      std::string& joined = body_batch_buffer();
      if (!batch_joined_) {
        joined.assign(batch_first_);
        batch_first_ = {};
        batch_joined_ = true;
      }
      joined.append(data);
    }
    return true;
  }
  std::shared_ptr<ClientExchange> exchange = exchange_;
  exchange->deliver_body(data);
  return !should_pause();
}

Result<size_t> Http1ClientConnection::feed_batched(std::string_view data) {
  batching_ = true;
  Result<size_t> consumed = parser_.feed(data);
  batching_ = false;
  flush_body_batch();
  return consumed;
}

void Http1ClientConnection::flush_body_batch() {
  const bool joined_batch = batch_joined_;
  // Taken out of the shared buffer: the callee may parse another connection's read.
  std::string joined = joined_batch ? std::move(body_batch_buffer()) : std::string();
  const std::string_view piece = joined_batch ? std::string_view(joined) : batch_first_;
  batch_first_ = {};
  batch_joined_ = false;
  if (!piece.empty() && exchange_) {
    std::shared_ptr<ClientExchange> exchange = exchange_;
    exchange->deliver_body(piece);
  }
  if (joined_batch) {
    joined.clear();
    body_batch_buffer() = std::move(joined);  // keep the capacity for the next read
  }
}

bool Http1ClientConnection::on_message_complete(HttpHeaders& trailers) {
  if (interim_) {
    interim_ = false;
    return true;
  }
  trailers_ = std::move(trailers);
  message_done_ = true;
  return false;
}

void Http1ClientConnection::complete_exchange(bool reusable) {
  std::shared_ptr<ClientExchange> exchange = std::move(exchange_);
  exchange->connection = nullptr;
  conn_->set_prefetch(nullptr, 0);
  if (reusable && keep_alive_ && !retired_ && pool_.put_idle(this)) {
    parser_.reset();
    conn_->set_reading(true);
    conn_->set_read_timeout(pool_.options.idle_timeout_ms);
  } else {
    conn_->close();
    retire();
  }
  exchange->complete(trailers_);
}

void Http1ClientConnection::fail_exchange(ClientErrorKind kind, std::string message) {
  std::shared_ptr<ClientExchange> exchange = std::move(exchange_);
  if (exchange) exchange->connection = nullptr;
  conn_->close();
  retire();
  if (exchange) exchange->fail(ClientError{kind, std::move(message)});
}

void Http1ClientConnection::abort_exchange() {
  exchange_.reset();
  conn_->close();
  retire();
}

void Http1ClientConnection::pause_reading() { conn_->set_reading(false); }

void Http1ClientConnection::resume_reading() {
  if (!conn_->open()) return;
  // Buffered bytes first (from the loop; on_readable turns reading back on once they are
  // consumed), so that an EOF cannot overtake data still waiting in the input buffer.
  if (conn_->input_bytes() > 0) {
    conn_->trigger_read();
  } else {
    conn_->set_reading(true);
  }
}

void Http1ClientConnection::on_closed(Connection::CloseReason reason, std::string_view message) {
  if (!exchange_) {
    // An idle pooled connection the upstream closed or that timed out.
    pool_.remove_idle(this);
    retire();
    return;
  }
  using Reason = Connection::CloseReason;
  const std::string where = " (" + key_ + ")";
  switch (reason) {
    case Reason::kConnectRefused:
      return fail_exchange(ClientErrorKind::kConnectRefused, std::string(message) + where);
    case Reason::kConnectTimeout:
      return fail_exchange(ClientErrorKind::kConnectTimeout, std::string(message) + where);
    case Reason::kConnectFailed:
      return fail_exchange(ClientErrorKind::kConnectFailed, std::string(message) + where);
    default:
      break;
  }
  if (!any_byte_ && reused_ && !exchange_->retried) {
    // The keep-alive race: the upstream closed this idle connection as we reused it. It never
    // saw the request; send it once more on a new connection.
    std::shared_ptr<ClientExchange> exchange = std::move(exchange_);
    exchange->connection = nullptr;
    exchange->retried = true;
    retire();
    Http1ClientConnection* fresh = pool_.open(*exchange);
    if (fresh == nullptr) {
      exchange->fail(ClientError{ClientErrorKind::kConnectFailed, "no socket" + where});
      return;
    }
    fresh->assign(std::move(exchange), /*reused=*/false);
    return;
  }
  if (!head_delivered_) {
    return fail_exchange(
        ClientErrorKind::kClosedBeforeHead,
        "upstream closed before the response head: " + std::string(message) + where);
  }
  if (reason == Reason::kEof && parser_.finish().ok() && message_done_) {
    // A body delimited by the close.
    return complete_exchange(/*reusable=*/false);
  }
  fail_exchange(ClientErrorKind::kClosedMidBody,
                "upstream closed mid-body: " + std::string(message) + where);
}

void Http1ClientConnection::retire() {
  if (retired_) return;
  retired_ = true;
  pool_.retire(this);
}

}  // namespace cutline::proto
