#pragma once
// Passthrough: a path and method the gateway does not run itself is forwarded to an upstream
// unchanged — method, target, headers except hop-by-hop and the client's key (upstream_headers.h),
// body — and the response streams back the same way (status, headers except hop-by-hop, body,
// back-pressure included), when a policy rule matches its route (or `passthrough: allow`);
// otherwise 403. Authentication applies when tenants are configured.
//
// Its phases, with what it shares with Stream and ModelsList in a RequestLifecycle
// (request_lifecycle.h: request id, arrival, tenant, policy snapshot, phase, the finish guard):
//
//   accept -> authenticate (401) -> decide (the first rule that matches, or 403 under
//   passthrough: deny) -> route (pick the upstream and its endpoint, send) -> relay (the body,
//   back-pressure included) -> finish
//
// An upstream that sends no response head within its response_head_timeout (default 60s) of the
// request counts as failed there (a connect failure, for outlier detection); the request is
// retried elsewhere where that is safe (as after a 5xx), else answered 504 (upstream_error).
//
// The upstreams' operational paths (/metrics, /healthz, /health, /readyz, /v1/cutline/*: what a
// Cutline backend, vLLM or llama.cpp serve to their operators) are not forwarded unless the
// policy's passthrough_operational lists them: a client gets 404 (policy_denied, rule
// passthrough_operational) whatever rule matches. A route no rule serves under passthrough: deny
// gets 403 (policy_denied, rule passthrough, error type permission_error).
//
// Every end — 401, 403, 404, no endpoint, an upstream failure, the client going away mid-relay, the
// answer relayed whole — goes through finish(Ending), which runs once (a later end event, such as
// an upstream error arriving after the client left, is a no-op): it cancels the upstream call and
// ends its endpoint attempt, writes the one stop record (eos for an answer relayed whole, also
// for an upstream's 2xx/3xx; upstream_error for an upstream 4xx/5xx or failure; client_cancel;
// admission_rejected for a refused key; policy_denied for a refused route) to the access log and
// the metrics, and then sends the last bytes: the errors the gateway answers itself carry the
// record in their body and Cutline-Stop header; a relayed answer ends with the upstream's trailers;
// one that fails mid-body is reset.
//
// The upstream is chosen by the model the request names — "model" in a JSON object body
// (/v1/embeddings, ...) or the {model} of /v1/models/{model} — with the upstreams' model globs;
// a request that names none (or a model no upstream serves) goes to the first upstream
// configured. The endpoint is picked in that upstream's pool as for the OpenAI routes
// (upstream_attempts.h), and a failure before anything went to the client is retried on another
// endpoint when that is safe (retry_is_safe: any method when no connection was made, GET, HEAD
// and OPTIONS after a reset or a 5xx). Runs on the request's worker loop.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cutline/gateway/request_lifecycle.h"
#include "cutline/gateway/upstream_attempts.h"
#include "cutline/policy/policy.h"
#include "cutline/proto/http/http_client.h"
#include "cutline/proto/http/server_stream.h"
#include "cutline/proto/net/timer.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::gateway {

class StreamHost;
struct Worker;

// Whether `path` (canonical, without the query) is one of the upstreams' operational paths that
// passthrough keeps from clients unless the policy's passthrough_operational allows it: /metrics,
// /healthz, /health, /readyz, /v1/cutline and everything under it (ASCII case ignored).
bool is_operational_path(std::string_view path);

class Passthrough : public std::enable_shared_from_this<Passthrough> {
 public:
  Passthrough(StreamHost& host, Worker& worker, std::shared_ptr<proto::ServerStream> client,
              uint64_t id);
  // Runs the phases from accept on. Called once by the gateway's request handler.
  void start();

  uint64_t id() const { return life_.id(); }
  Phase phase() const { return life_.phase(); }

 private:
  // ---- phases ------------------------------------------------------------------------------
  void accept();
  bool authenticate();
  bool decide();
  void route();
  void finish(Ending ending);

  // ---- relay callbacks ---------------------------------------------------------------------
  void on_head(int status, proto::HttpHeaders& headers);
  void on_body(std::string_view data);
  void on_complete(proto::HttpHeaders& trailers);
  void on_error(const proto::ClientError& error);
  void on_client_close();
  void on_client_writable();
  void on_head_timeout();

  void send_upstream(proto::ClientRequest up);
  bool retry_elsewhere(EndpointOutcome failure, std::optional<proto::ClientErrorKind> error);
  // An upstream_error Ending for `upstreams.<name>` with `error` to answer (when set).
  Ending upstream_failure(std::optional<Error> error, std::string operator_message = {});
  // finish's last step: the bytes the client gets after the record is written.
  void send_last_bytes(const Ending& ending, const std::string& error_body,
                       const std::string& stop_header);

  StreamHost& host_;
  Worker& worker_;
  std::shared_ptr<proto::ServerStream> client_;
  RequestLifecycle life_;
  // decide's: the model the request names, the matched rule (null: none, passthrough: allow).
  std::string model_;
  const policy::Rule* rule_ = nullptr;
  std::string policy_name_;  // the matched rule's name, "" when none
  const policy::Upstream* upstream_ = nullptr;
  // The endpoints of upstream_'s pool it went to (upstream_attempts.h), and the request as sent
  // while a retry on another one may follow.
  UpstreamAttempts attempts_;
  std::unique_ptr<proto::ClientRequest> retry_req_;
  proto::ClientHandle call_;
  int status_ = 0;               // the upstream's, once its head came
  proto::HttpHeaders trailers_;  // the upstream's, sent last
  bool relayed_whole_ = false;   // the upstream's answer completed
  int64_t bytes_in_ = 0;
  int64_t bytes_out_ = 0;
  bool paused_ = false;  // the upstream is held back for a slow client
  // Armed when the request goes to an endpoint (route, and each retry) for the upstream's
  // response_head_timeout (unless off); disarmed when the response head arrives, when the
  // exchange fails, and in finish. `head_armed_ns_` is when it was armed.
  proto::Timer head_timer_;
  int64_t head_armed_ns_ = 0;
};

}  // namespace cutline::gateway
