// The route phase's choice of an endpoint in the upstream's pool, and what the pool is told
// when the exchange ends (endpoint_pool.h). Kept apart from stream.cc: the request path's whole
// contact with upstream pools is pick_endpoint() at route, lease_.report() at the end.
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
  const EndpointAddress& a = lease_.endpoint().address();
  // TLS keeps verifying the name written in the policy, whatever address it resolved to.
  if (req.tls && req.tls_server_name.empty()) req.tls_server_name = upstream_->host;
  req.host = a.host;
  req.port = a.port;
  base_path = a.base_path;
  return {};
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
