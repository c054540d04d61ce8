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

// No response head within the upstream's response_head_timeout of sending the request: the
// endpoint accepted the connection and went silent (stopped, stuck). That counts against it as a
// connect failure does, and the request goes to another endpoint when one is left; otherwise it
// ends with upstream_error and, before anything went to the client (always: the client's head
// waits for the upstream's), a 504 with the record.
void Stream::on_head_timeout() {
  if (life_.finishing() || life_.phase() != Phase::kRoute || hot_.upstream_status != 0) return;
  const int64_t limit_ms = upstream_->response_head_timeout_ms;
  const double waited_ms = static_cast<double>(now_ns() - head_armed_ns_) / 1e6;
  if (rearm_if_early(head_timer_, limit_ms, waited_ms)) return;
  host_.metrics().upstream_error(upstream_->name, "response_head_timeout");
  attempts_.report(EndpointOutcome::kConnectFailure);
  if (retry_elsewhere(EndpointOutcome::kConnectFailure)) return;
  upstream_call_.cancel();
  Ending e;
  e.cause = proto::Cause::kUpstreamError;
  e.rule = "upstreams." + upstream_->name + ".response_head_timeout";
  e.limit = static_cast<double>(limit_ms);
  e.observed = waited_ms;
  e.unit = "ms";
  e.error = make_error(ErrorKind::kTimeout, "upstream \"" + upstream_->name +
                                                "\" sent no response head within " +
                                                std::to_string(limit_ms) + " ms");
  e.message = e.error->message;
  finish(std::move(e));
}

}  // namespace cutline::gateway
