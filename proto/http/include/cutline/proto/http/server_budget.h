#pragma once
// ServerBudget: the limits that hold across every connection of a process, not one connection:
// how many client connections may be open at once, and how many request bytes (bodies being
// received or held by a request in progress) may be in memory at once. Several HttpServers (the
// gateway's listeners) share one through ServerOptions::budget, so the caps are process-wide.
//
// Past the connection cap a new connection is answered 503 and closed at once; past the memory
// budget a new request (or the next piece of a chunked body) is answered 503 at once. Both keep
// what is already running going: nothing admitted earlier is slowed down or cut.
//
// RequestCharge is one request's share of the memory budget: it grows as the body arrives (or
// reserves a declared Content-Length up front), travels with the request into its stream, and is
// given back when the stream is destroyed.
//
// Threading: every member is safe from any thread (atomics; no locks).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace cutline::proto {

class ServerBudget {
 public:
  // 0 = unlimited, for either.
  ServerBudget(size_t max_connections, size_t max_request_bytes)
      : max_connections_(max_connections), max_request_bytes_(max_request_bytes) {}

  // A connection wants in: true (and counted) under the cap.
  bool try_open_connection();
  void close_connection() { connections_.fetch_sub(1, std::memory_order_relaxed); }
  // Request memory: true (and counted) when `bytes` more fit the budget.
  bool try_reserve(size_t bytes);
  void release(size_t bytes) { request_bytes_.fetch_sub(bytes, std::memory_order_relaxed); }

  size_t connections() const { return connections_.load(std::memory_order_relaxed); }
  size_t request_bytes() const { return request_bytes_.load(std::memory_order_relaxed); }
  size_t max_connections() const { return max_connections_; }
  size_t max_request_bytes() const { return max_request_bytes_; }
  // How often each cap said no (for tests and metrics).
  uint64_t refused_connections() const { return refused_connections_.load(); }
  uint64_t refused_requests() const { return refused_requests_.load(); }

 private:
  const size_t max_connections_;
  const size_t max_request_bytes_;
  std::atomic<size_t> connections_{0};
  std::atomic<size_t> request_bytes_{0};
  std::atomic<uint64_t> refused_connections_{0};
  std::atomic<uint64_t> refused_requests_{0};
};

// One request's bytes in a ServerBudget (see above). Movable; gives its bytes back when destroyed
// or reset(). A default-constructed charge (no budget) accepts everything.
class RequestCharge {
 public:
  RequestCharge() = default;
  explicit RequestCharge(std::shared_ptr<ServerBudget> budget) : budget_(std::move(budget)) {}
  ~RequestCharge() { reset(); }
  RequestCharge(RequestCharge&& other) noexcept
      : budget_(std::move(other.budget_)), bytes_(other.bytes_) {
    other.bytes_ = 0;
  }
  RequestCharge& operator=(RequestCharge&& other) noexcept {
    if (this != &other) {
      reset();
      budget_ = std::move(other.budget_);
      bytes_ = other.bytes_;
      other.bytes_ = 0;
    }
    return *this;
  }
  RequestCharge(const RequestCharge&) = delete;
  RequestCharge& operator=(const RequestCharge&) = delete;

  // Adds `bytes` to this request's share; false (nothing added) when the budget has no room.
  bool add(size_t bytes) {
    if (budget_ == nullptr || bytes == 0) return true;
    if (!budget_->try_reserve(bytes)) return false;
    bytes_ += bytes;
    return true;
  }
  size_t bytes() const { return bytes_; }
  void reset() {
    if (budget_ != nullptr && bytes_ != 0) budget_->release(bytes_);
    bytes_ = 0;
  }

 private:
  std::shared_ptr<ServerBudget> budget_;
  size_t bytes_ = 0;
};

}  // namespace cutline::proto
