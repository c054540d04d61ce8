// The route phase's choice of an endpoint in the upstream's pool and the retry on another
// endpoint before the first byte went to the client (upstream_attempts.h, shared with
// passthrough and /v1/models). Kept apart from stream.cc: the request path's whole contact with
// upstream pools is pick_endpoint() at route, retry_elsewhere() on a failure before the answer
// began, attempts_.report() at the end.
#include <string_view>

#include "cutline/gateway/stream.h"
#include "cutline/gateway/stream_host.h"
#include "cutline/gateway/worker.h"
#include "cutline/proto/net/event_loop.h"

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
  const std::string_view prompt =
      upstream_->prefix_affinity ? affinity_source(body_) : std::string_view();
  return attempts_.pick(host_.upstream_pools().get(), *upstream_, model_, prompt, req, base_path);
}

bool Stream::retry_elsewhere(EndpointOutcome failure) {
  if (!retry_req_ || life_.phase() != Phase::kRoute || client_->head_sent() || hot_.bytes_out > 0) {
    return false;
  }
  if (!attempts_.retry(host_.upstream_pools().get(), failure, *retry_req_, route_path(route_))) {
    return false;
  }
  // Forget the failed exchange (no callback of it runs after cancel) and what it sent.
  upstream_call_.cancel();
  hot_.upstream_status = 0;
  hot_.upstream_error_body.clear();
  upstream_error_type_.clear();
  upstream_retry_after_.clear();
  proto::ClientRequest req = std::move(*retry_req_);
  retry_req_.reset();
  // Started from the loop, not from inside the failed exchange's callback.
  worker_.loop.post([weak = weak_from_this(), req = std::move(req)]() mutable {
    auto self = weak.lock();
    if (!self || self->life_.phase() != Phase::kRoute)
      return;  // ended meanwhile (deadline, client)
    self->start_upstream(std::move(req));
  });
  return true;
}

}  // namespace cutline::gateway
