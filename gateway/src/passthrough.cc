#include "cutline/gateway/passthrough.h"

#include <simdjson.h>

#include "cutline/base/clock.h"
#include "cutline/gateway/bearer_auth.h"
#include "cutline/gateway/request_id.h"
#include "cutline/gateway/response_end.h"
#include "cutline/gateway/stream_host.h"
#include "cutline/gateway/upstream_headers.h"
#include "cutline/gateway/worker.h"
#include "cutline/policy/decision.h"
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

}  // namespace

Passthrough::Passthrough(StreamHost& host, Worker& worker,
                         std::shared_ptr<proto::ServerStream> client, uint64_t id)
    : host_(host), worker_(worker), client_(std::move(client)), id_(id) {}

void Passthrough::start() {
  arrival_unix_s_ = base::wall_time_s();
  policy_ = host_.policy();
  proto::HttpRequest& req = client_->request();
  request_id_ = request_id_for(req.headers);
  bytes_in_ = static_cast<int64_t>(req.body.size());
  if (policy_->requires_auth()) {
    const policy::Tenant* t = authenticate_bearer(*policy_, req.headers).tenant;
    if (!t) {
      auth_failed_ = true;
      return respond_error(make_error(ErrorKind::kUnauthorized, "missing or invalid API key"));
    }
    tenant_ = t->name;
  }
  if (policy_->upstreams.empty()) {
    return respond_error(make_error(ErrorKind::kNotFound, "no upstream configured"));
  }
  // A rule must match the route (or passthrough: allow); the rule decides forward_client_key.
  const std::string model = model_of(req);
  policy::RequestFacts facts;
  facts.tenant = tenant_;
  facts.model = model;
  const std::string path(req.path());
  facts.route = path;
  facts.header = [&req](std::string_view name) { return req.headers.get(name); };
  const auto rule_index = policy::match_rule(*policy_, facts);
  const policy::Rule* rule = rule_index ? &policy_->rules[*rule_index] : nullptr;
  if (rule) policy_name_ = rule->name;
  if (!rule && policy_->passthrough != policy::PassthroughMode::kAllow) {
    refused_ = true;
    return respond_error(
        make_error(ErrorKind::kUnauthorized,
                   "no policy rule matches " + req.method + " " + path + " (passthrough: deny)"),
        403);
  }
  // Routed by the rule's upstream, else the model the request names (model globs of
  // upstreams[]), else the first upstream.
  upstream_ = rule ? policy_->route(*rule, model) : nullptr;
  if (!upstream_ && !model.empty()) upstream_ = policy_->upstream_for_model(model);
  if (!upstream_) upstream_ = &policy_->upstreams.front();
  proto::ClientRequest up;
  up.method = req.method;
  if (Status s = fill_upstream_target(*upstream_, host_.upstream_tls(), up); !s.ok()) {
    return respond_error(s.error());
  }
  std::string base_path = upstream_->base_path;
  if (Status s = attempts_.pick(host_.upstream_pools().get(), *upstream_, model, {}, up, base_path);
      !s.ok()) {
    // The pool's reason names its endpoints (addresses, DNS names): for operators only.
    Error e = s.error();
    std::string operator_message;
    if (!host_.upstream_error_detail()) {
      operator_message = e.message;
      e.message = "upstream \"" + upstream_->name + "\": no endpoint is available";
    }
    return respond_error(e, 0, std::move(operator_message));
  }
  up.target = base_path + req.target;
  up.headers = req.headers;
  const std::string peer = client_->peer_address();
  build_upstream_headers(*upstream_, upstream_header_options(*policy_, rule, peer, request_id_),
                         up.headers);
  up.body = std::move(req.body);

  watch_client();
  send_upstream(std::move(up));
}

// The client going away cancels the upstream exchange; its socket draining resumes a paused one.
void Passthrough::watch_client() {
  std::weak_ptr<Passthrough> weak = weak_from_this();
  client_->on_close([weak] {
    if (auto self = weak.lock()) {
      self->call_.cancel();
      self->status_ = 499;
      self->done();
    }
  });
  client_->on_writable([weak] {
    if (auto self = weak.lock(); self && self->paused_) {
      self->paused_ = false;
      self->call_.resume();
    }
  });
}

// Sends `up` to the endpoint it names: at start, and again on a retry (retry_elsewhere), which
// needs its own copy while one may follow.
void Passthrough::send_upstream(proto::ClientRequest up) {
  if (attempts_.may_retry()) retry_req_ = std::make_unique<proto::ClientRequest>(up);
  proto::ClientCallbacks cb;
  cb.on_head = [this](int s, proto::HttpHeaders& h) { on_head(s, h); };
  cb.on_body = [this](std::string_view d) { on_body(d); };
  cb.on_complete = [this](proto::HttpHeaders& t) { on_complete(t); };
  cb.on_error = [this](const proto::ClientError& e) { on_error(e); };
  call_ = worker_.upstream->start(std::move(up), std::move(cb));
}

// Before anything went to the client, an exchange that failed where a retry is safe
// (retry_is_safe: a connect failure, or a reset or 5xx for GET, HEAD, OPTIONS) goes to another
// endpoint of the pool. False when no retry was started.
bool Passthrough::retry_elsewhere(EndpointOutcome failure,
                                  std::optional<proto::ClientErrorKind> error) {
  if (!retry_req_ || done_ || client_->head_sent() || bytes_out_ > 0 ||
      !retry_is_safe(retry_req_->method, error)) {
    return false;
  }
  const std::string target = client_->request().target;
  if (!attempts_.retry(host_.upstream_pools().get(), failure, *retry_req_, target)) return false;
  call_.cancel();  // no callback of the failed exchange runs after this
  status_ = 0;
  proto::ClientRequest up = std::move(*retry_req_);
  retry_req_.reset();
  // Started from the loop, not from inside the failed exchange's callback.
  worker_.loop.post([weak = weak_from_this(), up = std::move(up)]() mutable {
    auto self = weak.lock();
    if (self && !self->done_) self->send_upstream(std::move(up));
  });
  return true;
}

void Passthrough::on_head(int status, proto::HttpHeaders& headers) {
  if (status >= 500 && retry_elsewhere(EndpointOutcome::kServerError, std::nullopt)) return;
  retry_req_.reset();  // the answer has begun: no retry from here on
  status_ = status;
  upstream_answered_ = true;
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
  headers.set("X-Request-Id", request_id_);
  headers.set("Cutline-Request-Id", request_id_);
  client_->send_head(status, headers,
                     length ? proto::BodyFraming::length(*length) : proto::BodyFraming::chunked());
}

void Passthrough::on_body(std::string_view data) {
  bytes_out_ += static_cast<int64_t>(data.size());
  if (!client_->send_body(data) && !client_->closed() && !paused_) {
    paused_ = true;
    call_.pause();
  }
}

void Passthrough::on_complete(proto::HttpHeaders& trailers) {
  attempts_.report(status_ >= 500 ? EndpointOutcome::kServerError : EndpointOutcome::kSuccess);
  proto::remove_hop_by_hop(trailers);
  client_->finish(trailers);
  done();
}

void Passthrough::on_error(const proto::ClientError& error) {
  host_.metrics().upstream_error(upstream_->name, proto::to_string(error.kind));
  attempts_.report_error(error.kind);
  if (error.kind != proto::ClientErrorKind::kParse &&
      retry_elsewhere(EndpointOutcome::kConnectFailure, error.kind)) {
    return;
  }
  upstream_failed_ = true;
  error_message_ = upstream_error_text(upstream_->name, error, host_.upstream_error_detail());
  if (client_->head_sent()) {
    if (!host_.upstream_error_detail()) {
      error_message_ = upstream_error_text(upstream_->name, error, true);
    }
    client_->reset();
    done();
    return;
  }
  Error e = error.to_error();
  e.message = error_message_;
  respond_error(e, 0,
                host_.upstream_error_detail() ? std::string()
                                              : upstream_error_text(upstream_->name, error, true));
}

void Passthrough::respond_error(const Error& error, int status, std::string operator_message) {
  status_ = status != 0 ? status : error.status();
  error_message_ = error.message;
  record_ = make_record();
  // The client's copy of the record leaves out internal addresses (the endpoints tried, the
  // detail of the gateway's own upstream errors) unless --upstream-error-detail; the access log
  // and the metrics get them (restored below).
  std::vector<std::string> endpoints;
  if (!host_.upstream_error_detail()) endpoints.swap(record_.endpoints);
  proto::ErrorBodyFields fields;
  fields.cutline = &record_;
  const std::string body = proto::error_body(error, fields);
  bytes_out_ += static_cast<int64_t>(body.size());
  const std::string stop_header = proto::stop_header_value(record_);
  if (!endpoints.empty()) record_.endpoints = std::move(endpoints);
  if (!operator_message.empty()) record_.message = std::move(operator_message);
  client_->send_simple(status_, record_headers("application/json", stop_header, request_id_), body);
  done();
}

// The one stop record of a passthrough response: nothing was generated, so the cause says how
// the exchange ended (eos for an answer relayed whole).
proto::StopRecord Passthrough::make_record() const {
  using proto::Cause;
  proto::StopRecord r;
  r.reporter = "gateway";
  r.request_id = request_id_;
  r.policy = policy_name_;
  r.message = error_message_;
  if (status_ == 499) {
    r.cause = Cause::kClientCancel;
  } else if (refused_) {
    r.cause = Cause::kAdmissionRejected;
    r.rule = "passthrough";
  } else if (auth_failed_) {
    r.cause = Cause::kAdmissionRejected;
    r.rule = "tenants";
  } else if (upstream_failed_ || status_ >= 500 || (status_ >= 400 && upstream_answered_)) {
    r.cause = Cause::kUpstreamError;
    if (upstream_) r.rule = "upstreams." + upstream_->name;
  } else {
    r.cause = Cause::kEos;
  }
  attempts_.fill_record(r);
  r.duration_ms = (base::wall_time_s() - arrival_unix_s_) * 1000.0;
  return r;
}

void Passthrough::done() {
  if (done_) return;
  done_ = true;
  if (record_.request_id.empty()) record_ = make_record();
  const proto::HttpRequest& req = client_->request();
  const std::string path(req.path());
  ResponseEnd end;
  end.log.stop = &record_;
  end.log.status = status_;
  end.log.ts_unix_s = arrival_unix_s_;
  end.log.request_id = request_id_;
  end.log.method = req.method;
  end.log.path = path;
  end.route = path == "/v1/models" ? "/v1/models" : "other";
  end.log.tenant = tenant_;
  end.log.upstream = upstream_ ? std::string_view(upstream_->name) : std::string_view();
  end.policy = policy_name_;
  end.log.bytes_in = bytes_in_;
  end.log.bytes_out = bytes_out_;
  record_response_end(host_, end);
  Worker* w = &worker_;
  const uint64_t id = id_;
  worker_.loop.post([w, id] { w->passthroughs.erase(id); });
}

}  // namespace cutline::gateway
