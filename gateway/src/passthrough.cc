#include "cutline/gateway/passthrough.h"

#include <chrono>

#include <simdjson.h>

#include "cutline/gateway/gateway.h"
#include "cutline/gateway/worker.h"
#include "cutline/policy/api_key.h"
#include "cutline/proto/event_loop.h"
#include "cutline/proto/openai_error.h"

namespace cutline::gateway {
namespace {

double unix_now_s() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

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

Passthrough::Passthrough(Gateway& gateway, Worker& worker,
                         std::shared_ptr<proto::ServerStream> client, uint64_t id)
    : gw_(gateway), worker_(worker), client_(std::move(client)), id_(id) {}

void Passthrough::start() {
  arrival_unix_s_ = unix_now_s();
  policy_ = gw_.policy();
  proto::HttpRequest& req = client_->request();
  bytes_in_ = static_cast<int64_t>(req.body.size());
  if (policy_->requires_auth()) {
    std::string_view token;
    if (auto h = req.headers.get("Authorization")) {
      if (h->size() > 7 && proto::iequals(h->substr(0, 7), "Bearer ")) token = h->substr(7);
    }
    const policy::Tenant* t = token.empty() ? nullptr : policy::authenticate(*policy_, token);
    if (!t)
      return respond_error(make_error(ErrorKind::kUnauthorized, "missing or invalid API key"));
    tenant_ = t->name;
  }
  if (policy_->upstreams.empty()) {
    return respond_error(make_error(ErrorKind::kNotFound, "no upstream configured"));
  }
  // Routed by the model the request names (model globs of upstreams[]), else the first upstream.
  const std::string model = model_of(req);
  upstream_ = model.empty() ? nullptr : policy_->upstream_for_model(model);
  if (!upstream_) upstream_ = &policy_->upstreams.front();
  proto::ClientRequest up;
  up.method = req.method;
  if (Status s = fill_upstream_target(*upstream_, gw_.upstream_tls(), up); !s.ok()) {
    return respond_error(s.error());
  }
  up.target = upstream_->base_path + req.target;
  up.headers = req.headers;
  proto::remove_hop_by_hop(up.headers);
  up.headers.remove("Host");
  up.headers.remove("Content-Length");
  if (policy_->requires_auth()) up.headers.remove("Authorization");
  up.body = std::move(req.body);

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
  proto::ClientCallbacks cb;
  cb.on_head = [this](int s, proto::HttpHeaders& h) { on_head(s, h); };
  cb.on_body = [this](std::string_view d) { on_body(d); };
  cb.on_complete = [this](proto::HttpHeaders& t) { on_complete(t); };
  cb.on_error = [this](const proto::ClientError& e) { on_error(e); };
  call_ = worker_.client->start(std::move(up), std::move(cb));
}

void Passthrough::on_head(int status, proto::HttpHeaders& headers) {
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
  proto::remove_hop_by_hop(trailers);
  client_->finish(trailers);
  done();
}

void Passthrough::on_error(const proto::ClientError& error) {
  gw_.metrics().upstream_error(upstream_->name, proto::to_string(error.kind));
  if (client_->head_sent()) {
    client_->reset();
    done();
    return;
  }
  Error e = error.to_error();
  e.message = "upstream \"" + upstream_->name + "\": " + error.message;
  respond_error(e);
}

void Passthrough::respond_error(const Error& error) {
  status_ = error.status();
  const std::string body = proto::error_body(error);
  bytes_out_ += static_cast<int64_t>(body.size());
  client_->send_simple(status_, proto::HttpHeaders{{"Content-Type", "application/json"}}, body);
  done();
}

void Passthrough::done() {
  if (done_) return;
  done_ = true;
  const proto::HttpRequest& req = client_->request();
  const std::string path(req.path());
  if (AccessLog* log = gw_.access_log()) {
    AccessLogEntry e;
    e.ts_unix_s = arrival_unix_s_;
    const std::string rid = "pt-" + std::to_string(id_);
    e.request_id = rid;
    e.method = req.method;
    e.path = path;
    e.tenant = tenant_;
    e.upstream = upstream_ ? std::string_view(upstream_->name) : std::string_view();
    e.status = status_;
    e.bytes_in = bytes_in_;
    e.bytes_out = bytes_out_;
    log->write(e);
  }
  RequestOutcome o;
  o.route = path == "/v1/models" ? "/v1/models" : "other";
  o.tenant = tenant_;
  o.code = status_;
  gw_.metrics().record(o);
  Worker* w = &worker_;
  const uint64_t id = id_;
  worker_.loop.post([w, id] { w->passthroughs.erase(id); });
}

}  // namespace cutline::gateway
