// One endpoint of an upstream pool: outstanding requests, health, ejection, load report
// (pool_endpoint.h).
#include "cutline/gateway/pool_endpoint.h"

#include <algorithm>

namespace cutline::gateway {

std::string_view to_string(EndpointOutcome outcome) {
  switch (outcome) {
    case EndpointOutcome::kSuccess:
      return "success";
    case EndpointOutcome::kConnectFailure:
      return "connect_failure";
    case EndpointOutcome::kServerError:
      return "server_error";
    case EndpointOutcome::kServerErrorAgain:
      return "server_error_again";
    case EndpointOutcome::kDisconnect:
      return "disconnect";
    case EndpointOutcome::kCancelled:
      return "cancelled";
  }
  return "cancelled";
}

void PoolEndpoint::begin(bool cold, bool affinity_hit) {
  outstanding_.fetch_add(1, std::memory_order_relaxed);
  requests_.fetch_add(1, std::memory_order_relaxed);
  if (cold) picked_cold_.fetch_add(1, std::memory_order_relaxed);
  if (affinity_hit) affinity_hits_.fetch_add(1, std::memory_order_relaxed);
}

bool PoolEndpoint::end(EndpointOutcome outcome, int64_t now_ns,
                       const policy::OutlierDetection* outlier, bool may_eject) {
  outstanding_.fetch_sub(1, std::memory_order_relaxed);
  switch (outcome) {
    case EndpointOutcome::kCancelled:
      return false;
    case EndpointOutcome::kSuccess: {
      consecutive_failures_.store(0, std::memory_order_relaxed);
      // The back-off decays once the endpoint has served well for a full max_ejection since
      // it was last let back in.
      if (outlier && ejection_level_.load(std::memory_order_relaxed) > 0 &&
          now_ns > ejected_until_ns_.load(std::memory_order_relaxed) +
                       outlier->max_ejection_ms * 1000000) {
        ejection_level_.store(0, std::memory_order_relaxed);
      }
      return false;
    }
    case EndpointOutcome::kServerErrorAgain:
      errors_.fetch_add(1, std::memory_order_relaxed);
      return false;
    case EndpointOutcome::kConnectFailure:
    case EndpointOutcome::kServerError:
    case EndpointOutcome::kDisconnect:
      break;
  }
  errors_.fetch_add(1, std::memory_order_relaxed);
  const int64_t failures = consecutive_failures_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (!outlier || failures < outlier->consecutive_failures || ejected(now_ns) || !may_eject) {
    return false;
  }
  const int level = ejection_level_.fetch_add(1, std::memory_order_relaxed);
  int64_t ms = outlier->base_ejection_ms;
  for (int i = 0; i < level && ms < outlier->max_ejection_ms; ++i) ms *= 2;
  ms = std::min(ms, outlier->max_ejection_ms);
  ejected_until_ns_.store(now_ns + ms * 1000000, std::memory_order_relaxed);
  consecutive_failures_.store(0, std::memory_order_relaxed);
  ejections_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void PoolEndpoint::set_load(std::optional<LoadSnapshot> load) {
  std::lock_guard<std::mutex> lock(load_mu_);
  load_ = std::move(load);
}

std::optional<LoadSnapshot> PoolEndpoint::load(int64_t now_ns, int64_t stale_after_ns) const {
  std::lock_guard<std::mutex> lock(load_mu_);
  if (!load_ || now_ns - load_->at_ns > stale_after_ns) return std::nullopt;
  return load_;
}

int PoolEndpoint::residency(std::string_view model, int64_t now_ns, int64_t stale_after_ns) const {
  std::lock_guard<std::mutex> lock(load_mu_);
  if (!load_ || !load_->reports_models || now_ns - load_->at_ns > stale_after_ns) return -1;
  return load_->resident(model) ? 1 : 0;
}

double PoolEndpoint::load_score(int64_t now_ns, int64_t stale_after_ns) const {
  std::lock_guard<std::mutex> lock(load_mu_);
  if (!load_ || now_ns - load_->at_ns > stale_after_ns) return -1;
  return load_->score();
}

PoolEndpoint::Counters PoolEndpoint::counters() const {
  Counters c;
  c.requests = requests_.load(std::memory_order_relaxed);
  c.errors = errors_.load(std::memory_order_relaxed);
  c.ejections = ejections_.load(std::memory_order_relaxed);
  c.picked_cold = picked_cold_.load(std::memory_order_relaxed);
  c.affinity_hits = affinity_hits_.load(std::memory_order_relaxed);
  c.retries = retries_.load(std::memory_order_relaxed);
  return c;
}

}  // namespace cutline::gateway
