#include "cutline/gateway/passthrough.h"

#include <simdjson.h>

#include <algorithm>

#include "cutline/gateway/response_end.h"
#include "cutline/gateway/stream_host.h"
#include "cutline/gateway/upstream_headers.h"
#include "cutline/gateway/worker.h"
#include "cutline/policy/decision.h"
#include "cutline/policy/glob.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/wire/openai_error.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::gateway {
namespace {

// The model a passthrough request names: "model" in a JSON object body (/v1/embeddings, ...), or
// the last path segment of /v1/models/{model}. "" when it names none.
std::string model_of(const proto::HttpRequest& req) {
  const std::string_view path = req.path();
  constexpr std::string_view kModels = "/v1/models/";
  if (path.size() > kModels.size() && path.substr(0, kModels.size()) == kModels) {
    return std::string(path.substr(kModels.size()));
  }
  const size_t first = req.body.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || req.body[first] != '{') return {};
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(req.body);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) return {};
  std::string_view model;
  if (doc.find_field_unordered("model").get_string().get(model) != simdjson::SUCCESS) return {};
  return std::string(model);
}

// The operational paths: a Cutline backend's /healthz, /metrics and /v1/cutline/state (model
// file paths), vLLM's and TGI's /health and /metrics, the usual /readyz.
constexpr std::string_view kOperationalPaths[] = {"/metrics", "/healthz", "/health", "/readyz",
                                                  "/v1/cutline"};

}  // namespace

bool is_operational_path(std::string_view path) {
  for (std::string_view p : kOperationalPaths) {
    if (proto::iequals(path, p)) return true;
  }
  constexpr std::string_view kCutline = "/v1/cutline/";
  return path.size() >= kCutline.size() &&
         proto::iequals(path.substr(0, kCutline.size()), kCutline);
}

Passthrough::Passthrough(StreamHost& host, Worker& worker,
                         std::shared_ptr<proto::ServerStream> client, uint64_t id)
    : host_(host),
      worker_(worker),
      client_(std::move(client)),
      life_(host, id),
      head_timer_(worker.loop, [this] { on_head_timeout(); }) {}

void Passthrough::start() {
  accept();
  if (!authenticate()) return;
  if (!decide()) return;
  route();
}

// accept: the shared part (request id, policy snapshot), and the client's callbacks: its going
// away ends the request (client_cancel), its socket draining resumes a paused upstream.
void Passthrough::accept() {
  const proto::HttpRequest& req = client_->request();
  life_.accept(req.headers);
  bytes_in_ = static_cast<int64_t>(req.body.size());
  std::weak_ptr<Passthrough> weak = weak_from_this();
  client_->on_close([weak] {
    if (auto self = weak.lock()) self->on_client_close();
  });
  client_->on_writable([weak] {
    if (auto self = weak.lock()) self->on_client_writable();
  });
}

bool Passthrough::authenticate() {
  if (std::optional<Ending> refused = life_.authenticate(client_->request().headers)) {
    finish(std::move(*refused));
    return false;
  }
  return true;
}

// decide: an upstream's operational path is refused (404) unless passthrough_operational lists
// it; then a rule must match the route (or passthrough: allow); the rule decides the upstream and
// forward_client_key.
bool Passthrough::decide() {
  life_.enter(Phase::kDecide);
  const proto::HttpRequest& req = client_->request();
  const policy::Policy& policy = life_.policy();
  if (policy.upstreams.empty()) {
    finish(upstream_failure(make_error(ErrorKind::kNotFound, "no upstream configured")));
    return false;
  }
  const std::string path(req.path());
  if (is_operational_path(path) &&
      std::none_of(policy.passthrough_operational.begin(), policy.passthrough_operational.end(),
                   [&](const std::string& glob) { return policy::glob_match(glob, path); })) {
    // The upstreams' own operational answers (model file paths, metrics) are not the clients'.
    Ending e;
    e.cause = proto::Cause::kPolicyDenied;
    e.rule = "passthrough_operational";
    e.error = make_error(ErrorKind::kNotFound,
                         "no route for " + req.method + " " + path +
                             " (an upstream's operational path; passthrough_operational)");
    e.message = e.error->message;
    finish(std::move(e));
    return false;
  }
  model_ = model_of(req);
  rule_ = life_.match(path, model_, req.headers);
  if (rule_) policy_name_ = rule_->name;
  if (!rule_ && policy.passthrough != policy::PassthroughMode::kAllow) {
    // Refused by the operator's policy, not for a missing or wrong key: 403 permission_error.
    Ending e;
    e.cause = proto::Cause::kPolicyDenied;
    e.rule = "passthrough";
    e.error = make_error(ErrorKind::kUnauthorized, "no policy rule matches " + req.method + " " +
                                                       path + " (passthrough: deny)");
    e.message = e.error->message;
    e.status = 403;
    e.type = "permission_error";
    e.code = "permission_denied";
    finish(std::move(e));
    return false;
  }
  return true;
}

// route: the rule's upstream, else the model the request names (model globs of upstreams[]), else
// the first upstream; an endpoint of its pool; the request sent.
void Passthrough::route() {
  life_.enter(Phase::kRoute);
  proto::HttpRequest& req = client_->request();
  const policy::Policy& policy = life_.policy();
  upstream_ = rule_ ? policy.route(*rule_, model_) : nullptr;
  if (!upstream_ && !model_.empty()) upstream_ = policy.upstream_for_model(model_);
  if (!upstream_) upstream_ = &policy.upstreams.front();
  proto::ClientRequest up;
  up.method = req.method;
  if (Status s = fill_upstream_target(*upstream_, host_.upstream_tls(), up); !s.ok()) {
    return finish(upstream_failure(s.error()));
  }
  std::string base_path = upstream_->base_path;
  if (Status s =
          attempts_.pick(host_.upstream_pools().get(), *upstream_, model_, {}, up, base_path);
      !s.ok()) {
    // The pool's reason names its endpoints (addresses, DNS names): for operators only.
    Error e = s.error();
    std::string operator_message;
    if (!host_.upstream_error_detail()) {
      operator_message = e.message;
      e.message = "upstream \"" + upstream_->name + "\": no endpoint is available";
    }
    return finish(upstream_failure(e, std::move(operator_message)));
  }
  up.target = base_path + req.target;
  up.headers = req.headers;
  const std::string peer = client_->peer_address();
  build_upstream_headers(
      *upstream_, upstream_header_options(policy, rule_, peer, life_.request_id()), up.headers);
  up.body = std::move(req.body);
  send_upstream(std::move(up));
}

void Passthrough::on_client_close() {
  Ending e;
  e.cause = proto::Cause::kClientCancel;
  e.message = "client disconnected";
  finish(std::move(e));
}

void Passthrough::on_client_writable() {
  if (paused_ && life_.phase() == Phase::kRelay) {
    paused_ = false;
    call_.resume();
  }
}

// Sends `up` to the endpoint it names: at route, and again on a retry (retry_elsewhere), which
// needs its own copy while one may follow.
void Passthrough::send_upstream(proto::ClientRequest up) {
  if (attempts_.may_retry()) retry_req_ = std::make_unique<proto::ClientRequest>(up);
  proto::ClientCallbacks cb;
  cb.on_head = [this](int s, proto::HttpHeaders& h) { on_head(s, h); };
  cb.on_body = [this](std::string_view d) { on_body(d); };
  cb.on_complete = [this](proto::HttpHeaders& t) { on_complete(t); };
  cb.on_error = [this](const proto::ClientError& e) { on_error(e); };
  if (upstream_->response_head_timeout_ms > 0) {
    head_armed_ns_ = host_.clock().now_ns();
    head_timer_.arm(upstream_->response_head_timeout_ms);
  }
  call_ = worker_.upstream->start(std::move(up), std::move(cb));
}

// No response head within the upstream's response_head_timeout: the endpoint is silent. It
// counts there as a connect failure; the request goes elsewhere where a retry is safe (as after
// a 5xx: GET, HEAD, OPTIONS), else ends 504 (upstream_error).
void Passthrough::on_head_timeout() {
  if (life_.finishing() || life_.phase() != Phase::kRoute) return;
  const int64_t limit_ms = upstream_->response_head_timeout_ms;
  const double waited_ms = static_cast<double>(host_.clock().now_ns() - head_armed_ns_) / 1e6;
  if (rearm_if_early(head_timer_, limit_ms, waited_ms)) return;
  host_.metrics().upstream_error(upstream_->name, "response_head_timeout");
  attempts_.report(EndpointOutcome::kConnectFailure);
  if (retry_elsewhere(EndpointOutcome::kConnectFailure, std::nullopt)) return;
  call_.cancel();
  Ending e = upstream_failure(make_error(
      ErrorKind::kTimeout, "upstream \"" + upstream_->name + "\" sent no response head within " +
                               std::to_string(limit_ms) + " ms"));
  e.rule = "upstreams." + upstream_->name + ".response_head_timeout";
  e.limit = static_cast<double>(limit_ms);
  e.observed = waited_ms;
  e.unit = "ms";
  finish(std::move(e));
}

// Before anything went to the client, an exchange that failed where a retry is safe
// (retry_is_safe: a connect failure, or a reset or 5xx for GET, HEAD, OPTIONS) goes to another
// endpoint of the pool. False when no retry was started.
bool Passthrough::retry_elsewhere(EndpointOutcome failure,
                                  std::optional<proto::ClientErrorKind> error) {
  if (!retry_req_ || life_.phase() != Phase::kRoute || client_->head_sent() || bytes_out_ > 0 ||
      !retry_is_safe(retry_req_->method, error)) {
    return false;
  }
  const std::string target = client_->request().target;
  if (!attempts_.retry(host_.upstream_pools().get(), failure, *retry_req_, target)) return false;
  call_.cancel();  // no callback of the failed exchange runs after this
  proto::ClientRequest up = std::move(*retry_req_);
  retry_req_.reset();
  // Started from the loop, not from inside the failed exchange's callback.
  worker_.loop.post([weak = weak_from_this(), up = std::move(up)]() mutable {
    auto self = weak.lock();
    if (self && self->life_.phase() == Phase::kRoute) self->send_upstream(std::move(up));
  });
  return true;
}

// relay: the upstream's head goes to the client as it came (hop-by-hop headers out, the request
// id in), then its body.
void Passthrough::on_head(int status, proto::HttpHeaders& headers) {
  if (life_.finishing()) return;
  head_timer_.cancel();
  if (status >= 500 && retry_elsewhere(EndpointOutcome::kServerError, std::nullopt)) return;
  life_.enter(Phase::kRelay);
  retry_req_.reset();  // the answer has begun: no retry from here on
  status_ = status;
  std::optional<uint64_t> length;
  if (auto cl = headers.get("Content-Length")) {
    uint64_t n = 0;
    bool ok = !cl->empty();
    for (char c : *cl) {
      if (c < '0' || c > '9') ok = false;
      n = n * 10 + static_cast<uint64_t>(c - '0');
    }
    if (ok) length = n;
  }
  proto::remove_hop_by_hop(headers);
  headers.remove("Content-Length");
  headers.set("X-Request-Id", life_.request_id());
  headers.set("Cutline-Request-Id", life_.request_id());
  client_->send_head(status, headers,
                     length ? proto::BodyFraming::length(*length) : proto::BodyFraming::chunked());
}

void Passthrough::on_body(std::string_view data) {
  if (life_.finishing()) return;
  bytes_out_ += static_cast<int64_t>(data.size());
  if (!client_->send_body(data) && !client_->closed() && !paused_) {
    // Back-pressure: stop reading the upstream until the client takes what waits.
    paused_ = true;
    call_.pause();
  }
}

void Passthrough::on_complete(proto::HttpHeaders& trailers) {
  if (life_.finishing()) return;
  attempts_.report(status_ >= 500 ? EndpointOutcome::kServerError : EndpointOutcome::kSuccess);
  proto::remove_hop_by_hop(trailers);
  trailers_ = std::move(trailers);
  relayed_whole_ = true;
  Ending e;
  if (status_ >= 400) {
    e.cause = proto::Cause::kUpstreamError;
    e.rule = "upstreams." + upstream_->name;
  }
  finish(std::move(e));
}

void Passthrough::on_error(const proto::ClientError& error) {
  if (life_.finishing()) return;
  head_timer_.cancel();
  host_.metrics().upstream_error(upstream_->name, proto::to_string(error.kind));
  attempts_.report_error(error.kind);
  if (error.kind != proto::ClientErrorKind::kParse &&
      retry_elsewhere(EndpointOutcome::kConnectFailure, error.kind)) {
    return;
  }
  const bool detail = host_.upstream_error_detail();
  if (client_->head_sent()) {
    // Nothing can be answered any more (the client's connection is reset): the log says all.
    Ending e = upstream_failure(std::nullopt);
    e.message = upstream_error_text(upstream_->name, error, true);
    return finish(std::move(e));
  }
  Error answer = error.to_error();
  answer.message = upstream_error_text(upstream_->name, error, detail);
  finish(upstream_failure(
      answer, detail ? std::string() : upstream_error_text(upstream_->name, error, true)));
}

Ending Passthrough::upstream_failure(std::optional<Error> error, std::string operator_message) {
  Ending e;
  e.cause = proto::Cause::kUpstreamError;
  if (upstream_) e.rule = "upstreams." + upstream_->name;
  if (error) e.message = error->message;
  e.error = std::move(error);
  e.operator_message = std::move(operator_message);
  return e;
}

// finish: once (request_lifecycle.h). The upstream call is cancelled and its endpoint attempt
// ended, the record written (access-log line and metrics), and then the client's last bytes sent.
void Passthrough::finish(Ending e) {
  if (!life_.begin_finish()) return;  // ended already: a later end event changes nothing
  call_.cancel();                     // no upstream callback runs after this
  head_timer_.cancel();
  retry_req_.reset();
  attempts_.report(EndpointOutcome::kCancelled);  // unless its outcome was reported already
  proto::StopRecord record = life_.record_for(e);
  record.policy = policy_name_;
  attempts_.fill_record(record);
  int status = status_;
  std::string error_body;
  std::string stop_header;
  if (e.cause == proto::Cause::kClientCancel || client_->closed()) {
    status = 499;  // nginx's "client closed request"
  } else if (e.error && !client_->head_sent()) {
    status = e.status != 0 ? e.status : e.error->status();
    ClientRecordView client_view(host_.upstream_error_detail(), record);
    proto::ErrorBodyFields fields;
    fields.code = e.code;
    fields.type = e.type;
    fields.cutline = &record;
    error_body = proto::error_body(*e.error, fields);
    stop_header = proto::stop_header_value(record);
    bytes_out_ += static_cast<int64_t>(error_body.size());
  }
  if (!e.operator_message.empty()) record.message = e.operator_message;

  const proto::HttpRequest& req = client_->request();
  const std::string path(req.path());
  ResponseEnd end;
  end.log.stop = &record;
  end.log.status = status;
  end.log.method = req.method;
  end.log.path = path;
  end.route = path == "/v1/models" ? "/v1/models" : "other";
  end.log.upstream = upstream_ ? std::string_view(upstream_->name) : std::string_view();
  end.policy = policy_name_;
  end.log.bytes_in = bytes_in_;
  end.log.bytes_out = bytes_out_;
  life_.record(end);
  send_last_bytes(e, error_body, stop_header);
  life_.done();
  // Drop the worker's reference later, never inside a callback of this request.
  Worker* w = &worker_;
  const uint64_t id = life_.id();
  worker_.loop.post([w, id] { w->passthroughs.erase(id); });
}

void Passthrough::send_last_bytes(const Ending& e, const std::string& error_body,
                                  const std::string& stop_header) {
  if (e.cause == proto::Cause::kClientCancel || client_->closed()) return;
  if (!stop_header.empty()) {
    const int status = e.status != 0 ? e.status : e.error->status();
    client_->send_simple(
        status, record_headers("application/json", stop_header, life_.request_id()), error_body);
  } else if (relayed_whole_) {
    client_->finish(trailers_);
  } else if (client_->head_sent()) {
    client_->reset();  // the upstream failed mid-body: the client must not take it as whole
  }
}

}  // namespace cutline::gateway
