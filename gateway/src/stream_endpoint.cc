// The route phase's choice of an endpoint in the upstream's pool, what the pool is told when
// the exchange ends (endpoint_pool.h), and the retry on another endpoint before the first byte
// went to the client. Kept apart from stream.cc: the request path's whole contact with upstream
// pools is pick_endpoint() at route, retry_elsewhere() on a failure before the answer began,
// lease_.report() at the end.
#include <string_view>

#include "cutline/gateway/gateway.h"
#include "cutline/gateway/stream.h"
#include "cutline/gateway/upstream_pools.h"

namespace cutline::gateway {

namespace {

// What prefix affinity hashes: the request body from its "messages" (chat) or "prompt"
// (completions) member on, a stand-in for the rendered prompt that starts with the system
// prompt and the conversation so far.
std::string_view affinity_source(std::string_view body) {
  for (std::string_view key : {std::string_view("\"messages\""), std::string_view("\"prompt\""),
                               std::string_view("\"input\"")}) {
    const size_t at = body.find(key);
    if (at != std::string_view::npos) return body.substr(at + key.size());
  }
  return {};
}

}  // namespace

Status Stream::pick_endpoint(proto::ClientRequest& req, std::string& base_path) {
  std::shared_ptr<UpstreamPools> pools = gw_.upstream_pools();
  EndpointPool* pool = pools ? pools->find(*upstream_) : nullptr;
  if (!pool) return {};  // not started through Gateway::start (tests): the URL as written
  const std::string_view prompt =
      upstream_->prefix_affinity ? affinity_source(body_) : std::string_view();
  lease_ = pool->pick(PickRequest{model_, prompt, {}});
  if (!lease_) return make_error(ErrorKind::kExhausted, lease_.error());
  pool_size_ = pool->size();
  note_pick(*pool);
  const EndpointAddress& a = lease_.endpoint().address();
  // TLS keeps verifying the name written in the policy, whatever address it resolved to.
  if (req.tls && req.tls_server_name.empty()) req.tls_server_name = upstream_->host;
  req.host = a.host;
  req.port = a.port;
  base_path = a.base_path;
  return {};
}

// What the record says about the endpoint just picked: its label, and routed_cold — true when
// the pick was cold, false when a fresh report shows the model resident there, else unknown.
void Stream::note_pick(const EndpointPool& pool) {
  endpoints_tried_.push_back(lease_.endpoint().address().label);
  routed_cold_.reset();
  if (lease_.routed_cold()) {
    routed_cold_ = true;
  } else if (!model_.empty() && lease_.endpoint().residency(model_, pool.clock().now_ns(),
                                                            pool.stale_after_ns()) == 1) {
    routed_cold_ = false;
  }
}

bool Stream::retry_elsewhere(EndpointOutcome failure) {
  if (!retry_req_ || !lease_ || phase_ != Phase::kRoute || client_->head_sent() || bytes_out_ > 0 ||
      endpoints_tried_.size() >= kMaxUpstreamAttempts) {
    return false;
  }
  std::shared_ptr<UpstreamPools> pools = gw_.upstream_pools();
  EndpointPool* pool = pools ? pools->find(*upstream_) : nullptr;
  if (!pool) return false;
  lease_.report(failure);  // no-op when the error path reported it already
  tried_.push_back(lease_.endpoint_id());
  EndpointLease next = pool->pick(PickRequest{model_, {}, tried_});
  if (!next) return false;  // every other endpoint is ejected, unhealthy or tried
  lease_.endpoint().retried_away();
  lease_ = std::move(next);
  note_pick(*pool);
  // Forget the failed exchange (no callback of it runs after cancel) and what it sent.
  upstream_call_.cancel();
  upstream_status_ = 0;
  upstream_error_body_.clear();
  upstream_error_type_.clear();
  upstream_retry_after_.clear();
  proto::ClientRequest req = std::move(*retry_req_);
  retry_req_.reset();
  const EndpointAddress& a = lease_.endpoint().address();
  req.host = a.host;
  req.port = a.port;
  req.target = a.base_path + std::string(route_path(route_));
  // Started from the loop, not from inside the failed exchange's callback.
  worker_.loop.post([weak = weak_from_this(), req = std::move(req)]() mutable {
    auto self = weak.lock();
    if (!self || self->phase_ != Phase::kRoute) return;  // ended meanwhile (deadline, client)
    self->start_upstream(std::move(req));
  });
  return true;
}

void Stream::fill_pool_record(proto::StopRecord& r) const {
  if (endpoints_tried_.empty()) return;
  r.attempts = static_cast<int64_t>(endpoints_tried_.size());
  r.endpoints = endpoints_tried_;
  r.routed_cold = routed_cold_;
}

void Stream::report_endpoint_failure(proto::ClientErrorKind kind) {
  switch (kind) {
    case proto::ClientErrorKind::kClosedMidBody:
      lease_.report(EndpointOutcome::kDisconnect);
      return;
    case proto::ClientErrorKind::kParse:
      lease_.report(EndpointOutcome::kServerError);
      return;
    case proto::ClientErrorKind::kResolve:
    case proto::ClientErrorKind::kConnectRefused:
    case proto::ClientErrorKind::kConnectTimeout:
    case proto::ClientErrorKind::kConnectFailed:
    case proto::ClientErrorKind::kClosedBeforeHead:
      lease_.report(EndpointOutcome::kConnectFailure);
      return;
  }
}

}  // namespace cutline::gateway
