#include "cutline/gateway/models_list.h"

#include <simdjson.h>

#include "cutline/base/clock.h"
#include "cutline/gateway/bearer_auth.h"
#include "cutline/gateway/request_id.h"
#include "cutline/gateway/response_end.h"
#include "cutline/gateway/stream_host.h"
#include "cutline/gateway/upstream_headers.h"
#include "cutline/gateway/upstream_target.h"
#include "cutline/gateway/worker.h"
#include "cutline/policy/decision.h"
#include "cutline/policy/glob.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/wire/openai_error.h"

namespace cutline::gateway {
namespace {

constexpr size_t kMaxModelsBody = 4u << 20;
constexpr std::string_view kModelsPath = "/v1/models";
constexpr std::string_view kRoutes[] = {"/v1/chat/completions", "/v1/completions", "/v1/responses",
                                        "/v1/embeddings"};

bool serves(const policy::Upstream& u, std::string_view model) {
  for (const auto& g : u.models) {
    if (policy::glob_match(g, model)) return true;
  }
  return false;
}

}  // namespace

void merge_model_list(const policy::Upstream& upstream, std::string_view body,
                      std::vector<ListedModel>& out) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) return;
  simdjson::ondemand::array data;
  if (doc.find_field_unordered("data").get_array().get(data) != simdjson::SUCCESS) return;
  for (auto item : data) {
    simdjson::ondemand::object obj;
    if (item.get_object().get(obj) != simdjson::SUCCESS) continue;
    std::string_view raw;
    if (obj.raw_json().get(raw) != simdjson::SUCCESS) continue;
    bool rewound = false;
    if (obj.reset().get(rewound) != simdjson::SUCCESS) continue;
    std::string_view id;
    if (obj.find_field_unordered("id").get_string().get(id) != simdjson::SUCCESS) continue;
    if (!serves(upstream, id)) continue;
    bool seen = false;
    for (const auto& m : out) seen = seen || m.id == id;
    if (!seen) out.push_back(ListedModel{std::string(id), std::string(raw)});
  }
}

ModelsList::ModelsList(StreamHost& host, Worker& worker,
                       std::shared_ptr<proto::ServerStream> client, uint64_t id)
    : host_(host), worker_(worker), client_(std::move(client)), id_(id) {}

void ModelsList::start() {
  arrival_unix_s_ = base::wall_time_s();
  policy_ = host_.policy();
  generation_ = host_.policy_generation();
  const proto::HttpRequest& req = client_->request();
  request_id_ = request_id_for(req.headers);
  std::weak_ptr<ModelsList> weak = weak_from_this();
  client_->on_close([weak] {
    if (auto self = weak.lock()) {
      for (auto& p : self->pending_) p.call.cancel();
      proto::StopRecord r;
      r.cause = proto::Cause::kClientCancel;
      self->finish(499, "", std::move(r));
    }
  });
  if (policy_->requires_auth()) {
    const policy::Tenant* t = authenticate_bearer(*policy_, req.headers).tenant;
    if (!t) {
      proto::StopRecord r;
      r.cause = proto::Cause::kAdmissionRejected;
      r.rule = "tenants";
      r.message = "missing or invalid API key";
      proto::ErrorBodyFields fields;
      fields.cutline = &r;
      const std::string body = proto::error_body(
          make_error(ErrorKind::kUnauthorized, "missing or invalid API key"), fields);
      finish(401, body, std::move(r));
      return;
    }
    tenant_ = t->name;
  }
  const ModelsCache& cache = worker_.models_cache;
  const int64_t now = host_.clock().now_ns();
  if (cache.fetched_ns >= 0 && cache.policy_generation == generation_ &&
      now - cache.fetched_ns < kModelsCacheMs * 1'000'000) {
    answer(cache.models);
    return;
  }
  fetch_all();
}

void ModelsList::fetch_all() {
  pending_.resize(policy_->upstreams.size());
  outstanding_ = pending_.size();
  const std::string peer = client_->peer_address();
  for (size_t i = 0; i < policy_->upstreams.size(); ++i) {
    const policy::Upstream& u = policy_->upstreams[i];
    proto::ClientRequest up;
    up.method = "GET";
    if (Status s = fill_upstream_target(u, host_.upstream_tls(), up); !s.ok()) {
      on_upstream_done(i, 0, "");
      continue;
    }
    // One endpoint of the pool (they serve the same models); none available: left out.
    std::string base_path = u.base_path;
    if (Status s =
            pending_[i].attempts.pick(host_.upstream_pools().get(), u, {}, {}, up, base_path);
        !s.ok()) {
      host_.metrics().upstream_error(u.name, "no_endpoint");
      on_upstream_done(i, 0, "");
      continue;
    }
    up.target = base_path + std::string(kModelsPath);
    up.headers = client_->request().headers;
    build_upstream_headers(u, upstream_header_options(*policy_, nullptr, peer, request_id_),
                           up.headers);
    ask(i, std::move(up));
  }
}

// Sends `up` to upstream `index`'s endpoint: at first, and again on another endpoint when one
// fails (a connect failure, a reset before the answer, a 5xx), while the pool has one left.
void ModelsList::ask(size_t index, proto::ClientRequest up) {
  Pending& p = pending_[index];
  if (p.attempts.may_retry()) p.retry_req = std::make_unique<proto::ClientRequest>(up);
  std::weak_ptr<ModelsList> weak = weak_from_this();
  proto::ClientCallbacks cb;
  cb.on_head = [weak, index](int status, proto::HttpHeaders&) {
    auto self = weak.lock();
    if (!self) return;
    if (status >= 500 && self->retry_elsewhere(index, EndpointOutcome::kServerError)) return;
    self->pending_[index].status = status;
  };
  cb.on_body = [weak, index](std::string_view data) {
    auto self = weak.lock();
    if (self && self->pending_[index].body.size() + data.size() <= kMaxModelsBody) {
      self->pending_[index].body.append(data);
    }
  };
  cb.on_complete = [weak, index](proto::HttpHeaders&) {
    if (auto self = weak.lock()) {
      Pending& p = self->pending_[index];
      p.attempts.report(p.status >= 500 ? EndpointOutcome::kServerError
                                        : EndpointOutcome::kSuccess);
      self->on_upstream_done(index, p.status, std::move(p.body));
    }
  };
  cb.on_error = [weak, index](const proto::ClientError& error) {
    auto self = weak.lock();
    if (!self) return;
    self->host_.metrics().upstream_error(self->policy_->upstreams[index].name,
                                         proto::to_string(error.kind));
    self->pending_[index].attempts.report_error(error.kind);
    if (error.kind != proto::ClientErrorKind::kParse &&
        self->retry_elsewhere(index, EndpointOutcome::kConnectFailure)) {
      return;
    }
    self->on_upstream_done(index, 0, "");
  };
  p.call = worker_.upstream->start(std::move(up), std::move(cb));
}

bool ModelsList::retry_elsewhere(size_t index, EndpointOutcome failure) {
  Pending& p = pending_[index];
  if (!p.retry_req || p.done || done_ ||
      !p.attempts.retry(host_.upstream_pools().get(), failure, *p.retry_req, kModelsPath)) {
    return false;
  }
  p.call.cancel();  // no callback of the failed exchange runs after this
  p.status = 0;
  p.body.clear();
  proto::ClientRequest up = std::move(*p.retry_req);
  p.retry_req.reset();
  // Started from the loop, not from inside the failed exchange's callback.
  worker_.loop.post([weak = weak_from_this(), index, up = std::move(up)]() mutable {
    auto self = weak.lock();
    if (self && !self->done_) self->ask(index, std::move(up));
  });
  return true;
}

void ModelsList::on_upstream_done(size_t index, int status, std::string body) {
  Pending& p = pending_[index];
  if (p.done || done_) return;
  p.done = true;
  p.status = status;
  p.body = std::move(body);
  if (--outstanding_ > 0) return;
  std::vector<ListedModel> merged;
  bool all_ok = true;
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i].status != 200) {
      all_ok = false;
      if (pending_[i].status != 0) {  // transport errors and no endpoint: counted already
        host_.metrics().upstream_error(policy_->upstreams[i].name,
                                       "status_" + std::to_string(pending_[i].status));
      }
      continue;
    }
    merge_model_list(policy_->upstreams[i], pending_[i].body, merged);
  }
  if (all_ok) {
    worker_.models_cache =
        ModelsCache{generation_, host_.clock().now_ns(), std::vector<ListedModel>(merged)};
  }
  answer(merged);
}

// The tenant's view: a model is listed when some rule would serve this tenant that model on one
// of the OpenAI routes.
void ModelsList::answer(const std::vector<ListedModel>& models) {
  const proto::HttpHeaders& headers = client_->request().headers;
  std::string body = R"({"object":"list","data":[)";
  bool first = true;
  for (const ListedModel& m : models) {
    bool allowed = false;
    for (std::string_view route : kRoutes) {
      policy::RequestFacts facts;
      facts.tenant = tenant_;
      facts.model = m.id;
      facts.route = route;
      facts.header = [&headers](std::string_view name) { return headers.get(name); };
      if (policy::match_rule(*policy_, facts)) {
        allowed = true;
        break;
      }
    }
    if (!allowed) continue;
    if (!first) body.push_back(',');
    first = false;
    body.append(m.json);
  }
  body.append("]}");
  proto::StopRecord r;
  r.cause = proto::Cause::kEos;
  for (const Pending& p : pending_) p.attempts.fill_record(r);
  finish(200, body, std::move(r));
}

void ModelsList::finish(int status, const std::string& body, proto::StopRecord record) {
  if (done_) return;
  done_ = true;
  record.reporter = "gateway";
  record.request_id = request_id_;
  record.duration_ms = (base::wall_time_s() - arrival_unix_s_) * 1000.0;
  if (status != 499 && !client_->closed()) {
    // The client's copy leaves out the endpoints asked unless --upstream-error-detail.
    std::vector<std::string> endpoints;
    if (!host_.upstream_error_detail()) endpoints.swap(record.endpoints);
    const std::string stop_header = proto::stop_header_value(record);
    if (!endpoints.empty()) record.endpoints = std::move(endpoints);
    client_->send_simple(status, record_headers("application/json", stop_header, request_id_),
                         body);
  }
  ResponseEnd end;
  end.log.stop = &record;
  end.log.status = status;
  end.log.ts_unix_s = arrival_unix_s_;
  end.log.request_id = request_id_;
  end.log.method = "GET";
  end.log.path = kModelsPath;
  end.route = kModelsPath;
  end.log.tenant = tenant_;
  end.log.bytes_out = static_cast<int64_t>(body.size());
  record_response_end(host_, end);
  Worker* w = &worker_;
  const uint64_t id = id_;
  worker_.loop.post([w, id] { w->model_lists.erase(id); });
}

}  // namespace cutline::gateway
