#pragma once
// UpstreamAttempts: one client request's attempts on the endpoint pool of its upstream
// (endpoint_pool.h). Every path that calls an upstream for a client uses it the same way —
// Stream (chat, completions, responses, embeddings), Passthrough (any other route) and
// ModelsList (GET /v1/models, once per upstream) — so that each goes through the same picker,
// health and ejection state, counts as outstanding on its endpoint, shows in the per-endpoint
// metrics and /v1/cutline/upstreams, and says in its stop record where it went:
//
//   UpstreamAttempts attempts;
//   attempts.pick(pools, upstream, model, prompt, req, base_path);  // at route: req -> endpoint
//   ... on a failure before the first byte went to the client, where the path allows a retry:
//   attempts.retry(pools, EndpointOutcome::kServerError, req, path);  // req -> another endpoint
//   attempts.report(EndpointOutcome::kSuccess);                        // when the exchange ends
//   attempts.fill_record(record);                                      // attempts, endpoints
//
// What an attempt's failure counts for against its endpoint (the run of failures that outlier
// detection ejects on): a connect failure, a reset or a disconnect counts on every endpoint it
// happens on — those are the endpoint's. A 5xx answer counts once per client request: the first
// 5xx this request gets counts as kServerError, a later attempt answered 5xx too counts as
// kServerErrorAgain (an error in the endpoint's counters, not one more in its run). One request
// whose own content makes every endpoint answer 500 thus advances one endpoint's run, not one
// per retry — a client cannot eject a pool twice as fast as it sends bad requests.
//
// `pools` is the gateway's UpstreamPools of the moment (Gateway::upstream_pools()); the pool is
// looked up by the upstream's name on each call, so a retry after a policy reload picks from the
// pool in force. Without a pool (a gateway not started through Gateway::start) the request goes
// to the URL as written and nothing is recorded.
//
// Threading: one request's, on its worker loop.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/gateway/endpoint_pool.h"
#include "cutline/policy/policy.h"
#include "cutline/proto/http/http_client.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::gateway {

class UpstreamPools;

class UpstreamAttempts {
 public:
  // Endpoints one request is sent to at most (the first and two retries).
  static constexpr size_t kMaxAttempts = 3;

  // Picks an endpoint of `upstream`'s pool for a request for `model` (residency; may be empty)
  // whose prompt is `prompt` (prefix affinity; may be empty), and points `req` (filled by
  // fill_upstream_target) and `base_path` at it. Errors (kExhausted): the pool has no endpoint
  // available, with the pool's reason (it names addresses: for operators).
  Status pick(const UpstreamPools* pools, const policy::Upstream& upstream, std::string_view model,
              std::string_view prompt, proto::ClientRequest& req, std::string& base_path);

  // Whether a failure of the current attempt could be retried on another endpoint (the pool has
  // more than one and attempts are left): the caller keeps a copy of its request while it does.
  bool may_retry() const { return pool_size_ > 1 && endpoints_.size() < kMaxAttempts; }

  // Reports `failure` on the current endpoint and picks one this request has not failed on;
  // points `req` at it, its target the endpoint's base path and `path`. False when no attempt is
  // left or every other endpoint is ejected, unhealthy or tried (`req` is unchanged then).
  bool retry(const UpstreamPools* pools, EndpointOutcome failure, proto::ClientRequest& req,
             std::string_view path);

  // Ends the current attempt (later calls do nothing; an unreported one counts as cancelled).
  // A kServerError after an earlier one of this request is counted as kServerErrorAgain.
  void report(EndpointOutcome outcome);
  // Ends the current attempt with a transport error: connect failure, disconnect, ....
  void report_error(proto::ClientErrorKind kind);

  // How many endpoints the request was sent to (0 without a pool).
  size_t attempts() const { return endpoints_.size(); }

  // Adds to `record` the attempts and the endpoints tried ("host:port", in order), and sets
  // routed_cold from the last pick; leaves it as it is without a pool. Adds rather than sets, so
  // that a request to several upstreams (/v1/models) reports all of them.
  void fill_record(proto::StopRecord& record) const;

 private:
  void note_pick(const EndpointPool& pool);
  void point(proto::ClientRequest& req) const;

  const policy::Upstream* upstream_ = nullptr;
  std::string model_;
  EndpointLease lease_;
  size_t pool_size_ = 0;                // endpoints in the pool at the first pick
  std::vector<uint64_t> tried_;         // endpoint ids it failed on
  std::vector<std::string> endpoints_;  // every endpoint it was sent to, in order
  std::optional<bool> routed_cold_;     // the last pick's (proto's routed_cold)
  bool server_error_counted_ = false;   // an attempt of this request was reported kServerError
};

// Whether a failed exchange may be sent again to another endpoint for a request the gateway
// forwards without knowing what it does (passthrough): always when it never reached the
// upstream (no connection: resolve, refused, timeout, another connect error); after that (reset
// before the head, a 5xx head) only for methods that change nothing (GET, HEAD, OPTIONS).
bool retry_is_safe(std::string_view method, std::optional<proto::ClientErrorKind> error);

}  // namespace cutline::gateway
