#pragma once
// EndpointPool: the endpoints of one upstream (`upstreams[i].url`, `.endpoints: [...]` or
// `.endpoints: {dns: ...}`) and the choice of one for each request.
//
// The interface with the request path is two calls (everything else is the prober's and the
// admin's business):
//
//   EndpointLease lease = pool.pick(PickRequest{model, prompt, tried});   // at route
//   if (!lease) -> 503 upstream_error, lease.error() says why ("all 3 endpoints ejected ...")
//   ... send to lease.endpoint().address() ...
//   lease.report(EndpointOutcome::kSuccess);   // or kConnectFailure / kServerError / ...
//
// Passive outlier detection (upstreams[i].outlier) ejects an endpoint after consecutive_failures
// failures in a row, but never more than max_ejection_percent of the pool at once (rounded down:
// at the default 50 a pool of two keeps one endpoint in service whatever its answers, a pool of
// one is never ejected). Clients can provoke 5xx answers with their own requests; the cap keeps
// them from emptying the pool, and UpstreamAttempts counts one 5xx per request (not one per
// endpoint it retried on).
//
// A lease counts one outstanding request on its endpoint from pick() until report() (or its
// destruction, which reports kCancelled). Before the first byte went to the client the request
// path may report a failure and pick again with the failed endpoint's id in `tried`; after
// that, never (the client has the beginning of one answer). lease.routed_cold() and
// lease.affinity_hit() go into the stop record and metrics.
//
// How pick() chooses, in order:
//   1. candidates: endpoints available now (not ejected, passing health checks, not in
//      `tried`). None: an error lease. Panic (health.panic_threshold, Envoy's
//      healthy_panic_threshold): when fewer than that percent of the pool's endpoints are
//      available, health is ignored and every endpoint not ejected (and not in `tried`) is a
//      candidate, so that a health check that fails everywhere (a wrong path, a slow /health)
//      does not take the whole pool down. Ejection stays in force (max_ejection_percent keeps
//      part of the pool in service). Such picks are counted (panic_total()).
//   2. residency: when fresh load reports list resident models, only endpoints where
//      `model` is resident stay candidates; when none has it, every candidate stays and the
//      lease is routed_cold (the request will pay a model load).
//   3. prefix affinity (when configured and the prompt is non-empty): the first candidate on the
//      consistent-hash ring whose outstanding requests are within max_load_factor × average.
//   4. balance: least_request (the less loaded of two random candidates), round_robin, or
//      load_aware (the lowest reported load plus our own outstanding requests; endpoints without
//      a fresh report count only those).
// pick() is a few hundred nanoseconds for 16 endpoints and touches nothing per token.
//
// The endpoint set is replaced as a whole (set_addresses, from DNS); an endpoint whose address
// stays keeps its counters, health and ejection. Leases keep their endpoint alive.
//
// Threading: pick(), report() and every accessor may be called from any thread.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/base/clock.h"
#include "cutline/gateway/pool_endpoint.h"
#include "cutline/gateway/prefix_ring.h"
#include "cutline/policy/policy.h"

namespace cutline::gateway {

struct PickRequest {
  std::string_view model;           // the request's model (residency); empty = no preference
  std::string_view prompt;          // the rendered prompt (prefix affinity); empty = none
  std::span<const uint64_t> tried;  // endpoint ids this request already failed on
};

class EndpointPool;

class EndpointLease {
 public:
  EndpointLease() = default;
  explicit EndpointLease(std::string error) : error_(std::move(error)) {}
  EndpointLease(std::shared_ptr<const EndpointPool> pool, std::shared_ptr<PoolEndpoint> endpoint,
                bool routed_cold, bool affinity_hit);
  EndpointLease(EndpointLease&& other) noexcept;
  EndpointLease& operator=(EndpointLease&& other) noexcept;
  EndpointLease(const EndpointLease&) = delete;
  EndpointLease& operator=(const EndpointLease&) = delete;
  ~EndpointLease();  // an unreported lease reports kCancelled

  explicit operator bool() const { return endpoint_ != nullptr; }
  const std::string& error() const { return error_; }  // when !*this
  PoolEndpoint& endpoint() const { return *endpoint_; }
  uint64_t endpoint_id() const { return endpoint_->id(); }
  bool routed_cold() const { return routed_cold_; }
  bool affinity_hit() const { return affinity_hit_; }

  // Ends the attempt; later calls do nothing. Returns true when it ejected the endpoint.
  bool report(EndpointOutcome outcome);
  // Picked and not reported yet.
  bool open() const { return pool_ != nullptr && endpoint_ != nullptr; }

 private:
  std::shared_ptr<const EndpointPool> pool_;
  std::shared_ptr<PoolEndpoint> endpoint_;
  std::string error_;
  bool routed_cold_ = false;
  bool affinity_hit_ = false;
};

class EndpointPool : public std::enable_shared_from_this<EndpointPool> {
 public:
  // `upstream` must outlive the pool (the policy snapshot owns it). Static endpoints are set
  // now; a DNS pool starts empty until set_addresses(). `seed` makes least_request's random
  // choices reproducible in tests.
  static std::shared_ptr<EndpointPool> create(const policy::Upstream& upstream,
                                              const base::Clock& clock, uint64_t seed = 0);
  // The same, keeping `owner` (the policy snapshot `upstream` belongs to) alive as long as the
  // pool: a lease taken before a reload can still report after it.
  static std::shared_ptr<EndpointPool> create(const policy::Upstream& upstream,
                                              const base::Clock& clock, uint64_t seed,
                                              std::shared_ptr<const void> owner);

  EndpointLease pick(const PickRequest& request) const;
  // Ends one attempt on `endpoint` (EndpointLease::report): counts the outcome and, when it
  // completes a run of consecutive_failures, ejects the endpoint if fewer than
  // max_ejection_percent of the pool's endpoints (rounded down) are ejected. Returns true when
  // it ejected the endpoint.
  bool end_attempt(PoolEndpoint& endpoint, EndpointOutcome outcome) const;

  // Replaces the endpoint set (DNS answer); endpoints whose address is unchanged are kept.
  void set_addresses(std::vector<EndpointAddress> addresses);
  // After a policy reload: endpoints of `old` with the same address replace this pool's own
  // (keeping their counters, health and ejection); a DNS pool with no answer yet takes old's
  // addresses until it resolves.
  void adopt(const EndpointPool& old);
  // The current endpoints (a snapshot; the prober and the admin iterate it).
  std::vector<std::shared_ptr<PoolEndpoint>> endpoints() const;
  // How many endpoints the pool has now.
  size_t size() const;

  const policy::Upstream& upstream() const { return upstream_; }
  const std::string& name() const { return upstream_.name; }
  const base::Clock& clock() const { return clock_; }
  const policy::OutlierDetection* outlier() const {
    return upstream_.outlier ? &*upstream_.outlier : nullptr;
  }
  int64_t stale_after_ns() const { return upstream_.load_report.stale_after_ms * 1000000; }

  // Picks that found no candidate (all ejected, unhealthy, or none resolved).
  uint64_t no_endpoint_total() const { return no_endpoint_.load(std::memory_order_relaxed); }
  // Picks made in panic (health ignored), and whether the pool is in panic now.
  uint64_t panic_total() const { return panic_.load(std::memory_order_relaxed); }
  bool in_panic() const;
  // Readiness: the pool has no health checks, no endpoints yet, an endpoint that passed a check,
  // or every endpoint checked once (the first round is over, whatever it found).
  bool health_settled() const;
  // The DNS state for errors and /v1/cutline/upstreams: "" when fine.
  void set_resolve_error(std::string error);
  std::string resolve_error() const;

  EndpointPool(const policy::Upstream& upstream, const base::Clock& clock, uint64_t seed);

 private:
  struct Set {
    std::vector<std::shared_ptr<PoolEndpoint>> endpoints;
    std::unique_ptr<PrefixRing> ring;  // null without prefix_affinity
  };
  std::shared_ptr<const Set> snapshot() const;
  std::shared_ptr<const Set> make_set(std::vector<std::shared_ptr<PoolEndpoint>> endpoints) const;
  uint64_t next_random() const;
  // Whether one more endpoint may be ejected at now_ns (max_ejection_percent). Under eject_mu_.
  bool ejection_room(int64_t now_ns) const;
  int balance(const Set& set, const std::vector<uint32_t>& candidates, int64_t now_ns) const;
  std::string no_candidate_error(const Set& set, int64_t now_ns, size_t tried) const;

  std::shared_ptr<const void> owner_;  // keeps upstream_ alive
  const policy::Upstream& upstream_;
  const base::Clock& clock_;
  mutable std::atomic<uint64_t> rng_;
  mutable std::atomic<uint64_t> round_robin_{0};
  mutable std::atomic<uint64_t> no_endpoint_{0};
  mutable std::atomic<uint64_t> panic_{0};

  // Ejection decisions are taken one at a time, so that two endpoints failing at once cannot
  // both take the last room under max_ejection_percent.
  mutable std::mutex eject_mu_;

  mutable std::mutex mu_;
  std::shared_ptr<const Set> set_;  // guarded by mu_
  std::string resolve_error_;       // guarded by mu_
};

// Panic routing: fewer than `threshold_percent` of `total` endpoints are `available`
// (threshold 0: never; an empty pool: never).
constexpr bool below_panic_threshold(size_t available, size_t total, int64_t threshold_percent) {
  return total > 0 && threshold_percent > 0 &&
         available * 100 < static_cast<size_t>(threshold_percent) * total;
}

// "host:port" for an address ("[v6]:port" for IPv6).
std::string endpoint_label(std::string_view host, uint16_t port);

}  // namespace cutline::gateway
