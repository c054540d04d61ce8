#pragma once
// PoolEndpoint: one address of an upstream pool (endpoint_pool.h) and everything the pool knows
// about it — requests in flight, active health, passive outlier ejection with back-off, the
// last load report, and the per-endpoint counters exported as metrics and in
// /v1/cutline/upstreams.
//
// Each HTTP connection pool is keyed by host:port in the worker's HttpClient, so every endpoint
// has its own keep-alive connections without another pool here.
//
// Threading: every member may be read and written from any worker thread. Counters are
// relaxed atomics; the load report sits behind a small mutex (held to copy or compare a few
// fields). Ejection decisions race benignly: two workers failing at once may both count, one
// ejection results.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "cutline/gateway/load_report.h"
#include "cutline/policy/policy.h"

namespace cutline::gateway {

// How one attempt on an endpoint ended, as the request path reports it (EndpointLease::report).
enum class EndpointOutcome : uint8_t {
  kSuccess,         // a response head below 500 arrived (whatever the body did after)
  kConnectFailure,  // refused, timed out or reset before a response head
  kServerError,     // a 5xx response head
  // A 5xx response head to a request an earlier endpoint already answered 5xx: an error, but
  // not one more in the endpoint's run of failures (the request is the likely cause, not the
  // endpoint; upstream_attempts.h).
  kServerErrorAgain,
  kDisconnect,  // the connection closed mid-body (upstream_disconnect)
  kCancelled,   // ended by the client or the gateway: says nothing about the endpoint
};
std::string_view to_string(EndpointOutcome outcome);

struct EndpointAddress {
  std::string host;  // IP literal or name
  uint16_t port = 0;
  std::string base_path;
  std::string label;  // "host:port", the metric label and JSON key
};

class PoolEndpoint {
 public:
  PoolEndpoint(uint64_t id, EndpointAddress address) : id_(id), address_(std::move(address)) {}
  PoolEndpoint(const PoolEndpoint&) = delete;
  PoolEndpoint& operator=(const PoolEndpoint&) = delete;

  uint64_t id() const { return id_; }  // unique within the process
  const EndpointAddress& address() const { return address_; }

  // Eligible for new requests: not ejected at `now_ns` and not failing health checks.
  bool available(int64_t now_ns) const {
    return healthy_.load(std::memory_order_relaxed) &&
           now_ns >= ejected_until_ns_.load(std::memory_order_relaxed);
  }
  // Passing health checks, or not checked yet: an endpoint is routable from the start, as
  // Envoy's hosts are before their first check (ignore_new_hosts_until_first_hc off).
  bool healthy() const { return healthy_.load(std::memory_order_relaxed); }
  // A health check of this endpoint has completed (pass or fail).
  bool checked() const { return checked_.load(std::memory_order_relaxed); }
  bool ejected(int64_t now_ns) const {
    return now_ns < ejected_until_ns_.load(std::memory_order_relaxed);
  }
  int64_t outstanding() const { return outstanding_.load(std::memory_order_relaxed); }

  // The request path: one attempt starts (pick) and ends (report).
  void begin(bool cold, bool affinity_hit);
  // Counts the outcome; returns true when it ejected the endpoint (outlier may be null: no
  // ejection, as for a single-URL upstream). `may_eject`: the pool has room for one more
  // ejection (max_ejection_percent); without it a run of failures long enough to eject leaves
  // the endpoint in service, and the next failure asks again.
  bool end(EndpointOutcome outcome, int64_t now_ns, const policy::OutlierDetection* outlier,
           bool may_eject);
  // A request failed here before its first byte went to the client and was sent to another
  // endpoint of the pool.
  void retried_away() { retries_.fetch_add(1, std::memory_order_relaxed); }

  // The prober: active health, and the latest load report (nullopt: none or unparseable).
  void set_healthy(bool healthy) {
    healthy_.store(healthy, std::memory_order_relaxed);
    checked_.store(true, std::memory_order_relaxed);
  }
  void set_load(std::optional<LoadSnapshot> load);
  // The report if it is younger than stale_after_ns at now_ns.
  std::optional<LoadSnapshot> load(int64_t now_ns, int64_t stale_after_ns) const;
  // For picking without copying the report: resident (1), not resident (0), or no fresh report
  // that lists models (-1); and the load score (negative when there is no fresh report).
  int residency(std::string_view model, int64_t now_ns, int64_t stale_after_ns) const;
  double load_score(int64_t now_ns, int64_t stale_after_ns) const;

  struct Counters {
    uint64_t requests = 0;
    uint64_t errors = 0;
    uint64_t ejections = 0;
    uint64_t picked_cold = 0;
    uint64_t affinity_hits = 0;
    uint64_t retries = 0;  // retried_away()
  };
  Counters counters() const;
  int64_t ejected_until_ns() const { return ejected_until_ns_.load(std::memory_order_relaxed); }

 private:
  const uint64_t id_;
  const EndpointAddress address_;

  std::atomic<int64_t> outstanding_{0};
  std::atomic<bool> healthy_{true};  // optimistic until a check fails
  std::atomic<bool> checked_{false};
  std::atomic<int64_t> consecutive_failures_{0};
  std::atomic<int64_t> ejected_until_ns_{0};
  std::atomic<int> ejection_level_{0};  // back-off exponent: the next ejection lasts 2^level base

  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> ejections_{0};
  std::atomic<uint64_t> picked_cold_{0};
  std::atomic<uint64_t> affinity_hits_{0};
  std::atomic<uint64_t> retries_{0};

  mutable std::mutex load_mu_;
  std::optional<LoadSnapshot> load_;  // guarded by load_mu_
};

}  // namespace cutline::gateway
