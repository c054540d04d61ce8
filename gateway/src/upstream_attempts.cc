// One request's attempts on its upstream's endpoint pool (upstream_attempts.h).
#include "cutline/gateway/upstream_attempts.h"

#include "cutline/gateway/upstream_pools.h"

namespace cutline::gateway {

Status UpstreamAttempts::pick(const UpstreamPools* pools, const policy::Upstream& upstream,
                              std::string_view model, std::string_view prompt,
                              proto::ClientRequest& req, std::string& base_path) {
  EndpointPool* pool = pools ? pools->find(upstream) : nullptr;
  if (!pool) return {};  // not started through Gateway::start (tests): the URL as written
  upstream_ = &upstream;
  model_ = std::string(model);
  lease_ = pool->pick(PickRequest{model, prompt, {}});
  if (!lease_) return make_error(ErrorKind::kExhausted, lease_.error());
  pool_size_ = pool->size();
  note_pick(*pool);
  // TLS keeps verifying the name written in the policy, whatever address it resolved to.
  if (req.tls && req.tls_server_name.empty()) req.tls_server_name = upstream.host;
  point(req);
  base_path = lease_.endpoint().address().base_path;
  return {};
}

bool UpstreamAttempts::retry(const UpstreamPools* pools, EndpointOutcome failure,
                             proto::ClientRequest& req, std::string_view path) {
  if (!lease_ || !upstream_ || endpoints_.size() >= kMaxAttempts) return false;
  EndpointPool* pool = pools ? pools->find(*upstream_) : nullptr;
  if (!pool) return false;
  report(failure);  // no-op when the error path reported it already
  tried_.push_back(lease_.endpoint_id());
  EndpointLease next = pool->pick(PickRequest{model_, {}, tried_});
  if (!next) return false;  // every other endpoint is ejected, unhealthy or tried
  lease_.endpoint().retried_away();
  lease_ = std::move(next);
  note_pick(*pool);
  point(req);
  req.target = lease_.endpoint().address().base_path + std::string(path);
  return true;
}

// What the record says about the endpoint just picked: its label, and routed_cold — true when
// the pick was cold, false when a fresh report shows the model resident there, else unknown.
void UpstreamAttempts::note_pick(const EndpointPool& pool) {
  endpoints_.push_back(lease_.endpoint().address().label);
  routed_cold_.reset();
  if (lease_.routed_cold()) {
    routed_cold_ = true;
  } else if (!model_.empty() && lease_.endpoint().residency(model_, pool.clock().now_ns(),
                                                            pool.stale_after_ns()) == 1) {
    routed_cold_ = false;
  }
}

void UpstreamAttempts::point(proto::ClientRequest& req) const {
  const EndpointAddress& a = lease_.endpoint().address();
  req.host = a.host;
  req.port = a.port;
}

void UpstreamAttempts::report(EndpointOutcome outcome) {
  if (!lease_.open()) return;  // reported already (or never picked)
  if (outcome == EndpointOutcome::kServerError) {
    if (server_error_counted_) outcome = EndpointOutcome::kServerErrorAgain;
    server_error_counted_ = true;
  }
  lease_.report(outcome);
}

void UpstreamAttempts::report_error(proto::ClientErrorKind kind) {
  switch (kind) {
    case proto::ClientErrorKind::kClosedMidBody:
      report(EndpointOutcome::kDisconnect);
      return;
    case proto::ClientErrorKind::kParse:
      report(EndpointOutcome::kServerError);
      return;
    case proto::ClientErrorKind::kResolve:
    case proto::ClientErrorKind::kConnectRefused:
    case proto::ClientErrorKind::kConnectTimeout:
    case proto::ClientErrorKind::kConnectFailed:
    case proto::ClientErrorKind::kClosedBeforeHead:
      report(EndpointOutcome::kConnectFailure);
      return;
  }
}

void UpstreamAttempts::fill_record(proto::StopRecord& r) const {
  if (endpoints_.empty()) return;
  r.attempts = r.attempts.value_or(0) + static_cast<int64_t>(endpoints_.size());
  r.endpoints.insert(r.endpoints.end(), endpoints_.begin(), endpoints_.end());
  if (routed_cold_) r.routed_cold = routed_cold_;
}

bool retry_is_safe(std::string_view method, std::optional<proto::ClientErrorKind> error) {
  if (error) {
    switch (*error) {
      case proto::ClientErrorKind::kResolve:
      case proto::ClientErrorKind::kConnectRefused:
      case proto::ClientErrorKind::kConnectTimeout:
      case proto::ClientErrorKind::kConnectFailed:
        return true;  // nothing reached the upstream
      case proto::ClientErrorKind::kClosedBeforeHead:
        break;
      case proto::ClientErrorKind::kClosedMidBody:
      case proto::ClientErrorKind::kParse:
        return false;  // it answered: the request was handled
    }
  }
  return method == "GET" || method == "HEAD" || method == "OPTIONS";
}

}  // namespace cutline::gateway
