#include "cutline/gateway/models_list.h"

#include <simdjson.h>

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
    : host_(host), worker_(worker), client_(std::move(client)), life_(host, id) {}

void ModelsList::start() {
  accept();
  if (!authenticate()) return;
  const ModelsCache& cache = worker_.models_cache;
  const int64_t now = host_.clock().now_ns();
  if (cache.fetched_ns >= 0 && cache.policy_generation == generation_ &&
      now - cache.fetched_ns < kModelsCacheMs * 1'000'000) {
    relay(cache.models);
    return;
  }
  route();
}

// accept: the shared part (request id, policy snapshot) and its generation; the client going
// away ends the request (client_cancel).
void ModelsList::accept() {
  life_.accept(client_->request().headers);
  generation_ = host_.policy_generation();
  std::weak_ptr<ModelsList> weak = weak_from_this();
  client_->on_close([weak] {
    if (auto self = weak.lock()) {
      Ending e;
      e.cause = proto::Cause::kClientCancel;
      e.message = "client disconnected";
      self->finish(std::move(e));
    }
  });
}

bool ModelsList::authenticate() {
  if (std::optional<Ending> refused = life_.authenticate(client_->request().headers)) {
    finish(std::move(*refused));
    return false;
  }
  return true;
}

// route: every upstream asked at once, each through one endpoint of its pool.
void ModelsList::route() {
  life_.enter(Phase::kRoute);
  const policy::Policy& policy = life_.policy();
  pending_.resize(policy.upstreams.size());
  outstanding_ = pending_.size();
  const std::string peer = client_->peer_address();
  for (size_t i = 0; i < policy.upstreams.size(); ++i) {
    const policy::Upstream& u = policy.upstreams[i];
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
    build_upstream_headers(u, upstream_header_options(policy, nullptr, peer, life_.request_id()),
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
    if (!self || self->life_.finishing()) return;  // ended: nothing of it counts
    self->pending_[index].head_timer->cancel();
    if (status >= 500 && self->retry_elsewhere(index, EndpointOutcome::kServerError)) return;
    self->pending_[index].status = status;
  };
  cb.on_body = [weak, index](std::string_view data) {
    auto self = weak.lock();
    if (self && !self->life_.finishing() &&
        self->pending_[index].body.size() + data.size() <= kMaxModelsBody) {
      self->pending_[index].body.append(data);
    }
  };
  cb.on_complete = [weak, index](proto::HttpHeaders&) {
    if (auto self = weak.lock(); self && !self->life_.finishing()) {
      Pending& p = self->pending_[index];
      p.attempts.report(p.status >= 500 ? EndpointOutcome::kServerError
                                        : EndpointOutcome::kSuccess);
      self->on_upstream_done(index, p.status, std::move(p.body));
    }
  };
  cb.on_error = [weak, index](const proto::ClientError& error) {
    auto self = weak.lock();
    if (!self || self->life_.finishing()) return;  // ended: nothing of it counts
    self->pending_[index].head_timer->cancel();
    self->host_.metrics().upstream_error(self->life_.policy().upstreams[index].name,
                                         proto::to_string(error.kind));
    self->pending_[index].attempts.report_error(error.kind);
    if (error.kind != proto::ClientErrorKind::kParse &&
        self->retry_elsewhere(index, EndpointOutcome::kConnectFailure)) {
      return;
    }
    self->on_upstream_done(index, 0, "");
  };
  if (!p.head_timer) {
    p.head_timer =
        std::make_unique<proto::Timer>(worker_.loop, [this, index] { on_head_timeout(index); });
  }
  const int64_t head_timeout_ms = life_.policy().upstreams[index].response_head_timeout_ms;
  if (head_timeout_ms > 0) p.head_timer->arm(head_timeout_ms);
  p.call = worker_.upstream->start(std::move(up), std::move(cb));
}

void ModelsList::on_head_timeout(size_t index) {
  Pending& p = pending_[index];
  if (p.done || p.status != 0 || life_.finishing()) return;
  host_.metrics().upstream_error(life_.policy().upstreams[index].name, "response_head_timeout");
  p.attempts.report(EndpointOutcome::kConnectFailure);
  if (retry_elsewhere(index, EndpointOutcome::kConnectFailure)) return;
  p.call.cancel();
  on_upstream_done(index, 0, "");
}

bool ModelsList::retry_elsewhere(size_t index, EndpointOutcome failure) {
  Pending& p = pending_[index];
  if (!p.retry_req || p.done || life_.finishing() ||
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
    if (self && !self->life_.finishing()) self->ask(index, std::move(up));
  });
  return true;
}

void ModelsList::on_upstream_done(size_t index, int status, std::string body) {
  Pending& p = pending_[index];
  if (p.done || life_.finishing()) return;
  p.done = true;
  p.status = status;
  p.body = std::move(body);
  if (--outstanding_ > 0) return;
  const policy::Policy& policy = life_.policy();
  std::vector<ListedModel> merged;
  bool all_ok = true;
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i].status != 200) {
      all_ok = false;
      if (pending_[i].status != 0) {  // transport errors and no endpoint: counted already
        host_.metrics().upstream_error(policy.upstreams[i].name,
                                       "status_" + std::to_string(pending_[i].status));
      }
      continue;
    }
    merge_model_list(policy.upstreams[i], pending_[i].body, merged);
  }
  if (all_ok) {
    worker_.models_cache =
        ModelsCache{generation_, host_.clock().now_ns(), std::vector<ListedModel>(merged)};
  }
  relay(merged);
}

// relay: the tenant's view of the merged list. A model is listed when some rule would serve this
// tenant that model on one of the OpenAI routes.
void ModelsList::relay(const std::vector<ListedModel>& models) {
  life_.enter(Phase::kRelay);
  const proto::HttpHeaders& headers = client_->request().headers;
  body_ = R"({"object":"list","data":[)";
  bool first = true;
  for (const ListedModel& m : models) {
    bool allowed = false;
    for (std::string_view route : kRoutes) {
      if (life_.match(route, m.id, headers)) {
        allowed = true;
        break;
      }
    }
    if (!allowed) continue;
    if (!first) body_.push_back(',');
    first = false;
    body_.append(m.json);
  }
  body_.append("]}");
  finish(Ending{});  // eos
}

// finish: once (request_lifecycle.h). The upstream calls still open are cancelled, the record
// written (access-log line and metrics), and then the answer sent.
void ModelsList::finish(Ending e) {
  if (!life_.begin_finish()) return;  // ended already: a later end event changes nothing
  for (Pending& p : pending_) {
    p.call.cancel();  // no upstream callback runs after this
    if (p.head_timer) p.head_timer->cancel();
    p.retry_req.reset();
    p.attempts.report(EndpointOutcome::kCancelled);  // unless its outcome was reported already
  }
  proto::StopRecord record = life_.record_for(e);
  for (const Pending& p : pending_) p.attempts.fill_record(record);
  int status = 200;
  std::string stop_header;
  if (e.cause == proto::Cause::kClientCancel || client_->closed()) {
    status = 499;  // nginx's "client closed request"
    body_.clear();
  } else {
    ClientRecordView client_view(host_.upstream_error_detail(), record);
    if (e.error) {
      status = e.status != 0 ? e.status : e.error->status();
      proto::ErrorBodyFields fields;
      fields.cutline = &record;
      body_ = proto::error_body(*e.error, fields);
    }
    stop_header = proto::stop_header_value(record);
  }
  ResponseEnd end;
  end.log.stop = &record;
  end.log.status = status;
  end.log.method = "GET";
  end.log.path = kModelsPath;
  end.route = kModelsPath;
  end.log.bytes_out = static_cast<int64_t>(body_.size());
  life_.record(end);
  if (status != 499) {
    client_->send_simple(
        status, record_headers("application/json", stop_header, life_.request_id()), body_);
  }
  life_.done();
  // Drop the worker's reference later, never inside a callback of this request.
  Worker* w = &worker_;
  const uint64_t id = life_.id();
  worker_.loop.post([w, id] { w->model_lists.erase(id); });
}

}  // namespace cutline::gateway
