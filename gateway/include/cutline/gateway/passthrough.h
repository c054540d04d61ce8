#pragma once
// Passthrough: a path and method the gateway does not run itself is forwarded to an upstream
// unchanged — method, target, headers except hop-by-hop and the client's key (upstream_headers.h),
// body — and the response streams back the same way (status, headers except hop-by-hop, body,
// back-pressure included), when a policy rule matches its route (or `passthrough: allow`);
// otherwise 403. Authentication applies when tenants are configured. One stop record per request
// (eos for an answer relayed whole, upstream_error, client_cancel, admission_rejected for a
// refusal) in the access-log line and the metrics, and in the body and Cutline-Stop header of
// the errors the gateway answers itself.
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

#include "cutline/gateway/upstream_attempts.h"
#include "cutline/policy/policy.h"
#include "cutline/proto/http/http_client.h"
#include "cutline/proto/http/server_stream.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::gateway {

class StreamHost;
struct Worker;

class Passthrough : public std::enable_shared_from_this<Passthrough> {
 public:
  Passthrough(StreamHost& host, Worker& worker, std::shared_ptr<proto::ServerStream> client,
              uint64_t id);
  void start();

 private:
  void on_head(int status, proto::HttpHeaders& headers);
  void on_body(std::string_view data);
  void on_complete(proto::HttpHeaders& trailers);
  void on_error(const proto::ClientError& error);
  void watch_client();
  void send_upstream(proto::ClientRequest up);
  bool retry_elsewhere(EndpointOutcome failure, std::optional<proto::ClientErrorKind> error);
  // Answers `error` (status: its own unless given); `operator_message`, when set, replaces the
  // client's message in the record the access log gets.
  void respond_error(const Error& error, int status = 0, std::string operator_message = {});
  proto::StopRecord make_record() const;
  void done();

  StreamHost& host_;
  Worker& worker_;
  std::shared_ptr<proto::ServerStream> client_;
  const uint64_t id_;
  std::shared_ptr<const policy::Policy> policy_;
  const policy::Upstream* upstream_ = nullptr;
  std::string tenant_;
  std::string request_id_;
  std::string policy_name_;  // the matched rule's name, "" when none
  std::string error_message_;
  proto::StopRecord record_;
  bool refused_ = false;      // no rule matched and passthrough is deny
  bool auth_failed_ = false;  // 401
  bool upstream_failed_ = false;
  bool upstream_answered_ = false;
  // The endpoints of upstream_'s pool it went to (upstream_attempts.h), and the request as sent
  // while a retry on another one may follow.
  UpstreamAttempts attempts_;
  std::unique_ptr<proto::ClientRequest> retry_req_;
  proto::ClientHandle call_;
  int status_ = 0;
  int64_t bytes_in_ = 0;
  int64_t bytes_out_ = 0;
  double arrival_unix_s_ = 0;
  bool paused_ = false;
  bool done_ = false;
};

}  // namespace cutline::gateway
