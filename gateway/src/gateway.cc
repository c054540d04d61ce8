#include "cutline/gateway/gateway.h"

#include <sys/time.h>

#include <algorithm>
#include <cstdio>

#include "cutline/base/clock.h"
#include "cutline/gateway/admin.h"
#include "cutline/gateway/async_redis_pool_store.h"
#include "cutline/gateway/bearer_auth.h"
#include "cutline/gateway/listener_tls.h"
#include "cutline/gateway/models_list.h"
#include "cutline/gateway/passthrough.h"
#include "cutline/gateway/request_target.h"
#include "cutline/gateway/response_end.h"
#include "cutline/gateway/server_limits.h"
#include "cutline/gateway/stream.h"
#include "cutline/gateway/upstream_target.h"
#include "cutline/policy/glob.h"
#include "cutline/policy/loader.h"
#include "cutline/proto/wire/openai_error.h"

namespace cutline::gateway {
namespace {

// The fields a reload cannot apply that differ between the policy the gateway started with and
// `next` (Gateway::restart_required()).
std::vector<std::string> fields_needing_restart(const policy::Policy& started,
                                                const policy::Policy& next) {
  std::vector<std::string> out;
  bool listen_same = started.listen.size() == next.listen.size();
  for (size_t i = 0; listen_same && i < next.listen.size(); ++i) {
    listen_same = started.listen[i].address == next.listen[i].address &&
                  started.listen[i].tls.has_value() == next.listen[i].tls.has_value();
  }
  if (!listen_same) out.emplace_back("listen");
  if (started.admin.has_value() != next.admin.has_value() ||
      (started.admin && started.admin->address != next.admin->address)) {
    out.emplace_back("admin");
  }
  auto spawn_of = [](const policy::Policy& p, const std::string& name) -> const policy::Spawn* {
    const policy::Upstream* u = p.find_upstream(name);
    return u && u->spawn ? &*u->spawn : nullptr;
  };
  auto spawn_same = [](const policy::Spawn* a, const policy::Spawn* b) {
    if (!a || !b) return a == b;
    return a->command == b->command && a->env == b->env &&
           a->ready_timeout_ms == b->ready_timeout_ms;
  };
  std::vector<std::string> names;
  for (const auto& u : started.upstreams) names.push_back(u.name);
  for (const auto& u : next.upstreams) {
    if (std::find(names.begin(), names.end(), u.name) == names.end()) names.push_back(u.name);
  }
  for (const std::string& name : names) {
    if (!spawn_same(spawn_of(started, name), spawn_of(next, name))) {
      out.push_back("upstreams." + name + ".spawn");
    }
  }
  if (started.access_log.kind != next.access_log.kind ||
      started.access_log.path != next.access_log.path) {
    out.emplace_back("access_log");
  }
  const policy::BudgetStore& a = started.budget_store;
  const policy::BudgetStore& b = next.budget_store;
  if (a.url != b.url || a.user != b.user || a.password != b.password ||
      a.fail_closed != b.fail_closed || a.timeout_ms != b.timeout_ms ||
      a.reservation_ttl_ms != b.reservation_ttl_ms) {
    out.emplace_back("budget_store");
  }
  if (!(started.limits == next.limits)) out.emplace_back("limits");
  return out;
}

// What `cutline policy check` warns about (parts of the file no request can reach), once per
// load: at start and on every reload that is applied.
void log_policy_warnings(const policy::LoadResult& loaded) {
  for (const policy::Diagnostic& d : loaded.warnings) {
    std::fprintf(stderr, "cutline-gateway: %s\n", d.to_string().c_str());
  }
}

// The TLS contexts a policy names: its https:// upstreams' and, by listen[] index, its
// listeners' (null for a cleartext listener).
struct TlsContexts {
  std::shared_ptr<const UpstreamTlsContexts> upstream;
  std::vector<std::shared_ptr<const proto::TlsContext>> listeners;
};

// Reads every certificate and key the policy names; the first that fails is the error.
Result<TlsContexts> load_tls_contexts(const policy::Policy& p) {
  TlsContexts out;
  auto upstream = UpstreamTlsContexts::build(p);
  if (!upstream.ok()) return upstream.error();
  out.upstream = std::move(upstream).value();
  for (const policy::Listener& l : p.listen) {
    out.listeners.emplace_back();
    if (!l.tls) continue;
    auto built = listener_tls_context(*l.tls);
    if (!built.ok()) {
      return make_error(built.error().kind, p.source_file + ":" + std::to_string(l.tls->ref.line) +
                                                ": " + built.error().message);
    }
    out.listeners.back() = std::move(built).value();
  }
  return out;
}

}  // namespace

LabelBounds Gateway::bounds_of(const policy::Policy& p) {
  LabelBounds b;
  for (const auto& u : p.upstreams) {
    for (const auto& m : u.models) {
      if (!policy::is_glob(m)) b.models.push_back(m);
    }
  }
  for (const auto& t : p.tenants) b.tenants.push_back(t.name);
  for (const auto& r : p.rules) b.policies.push_back(r.name);
  return b;
}

Result<std::unique_ptr<Gateway>> Gateway::create(GatewayOptions options) {
  policy::LoadResult loaded = policy::load_policy_file(options.config_path);
  if (!loaded.ok()) return make_error(ErrorKind::kBadRequest, loaded.error_text());
  log_policy_warnings(loaded);
  if (loaded.policy->listen.empty()) {
    return make_error(ErrorKind::kBadRequest, options.config_path + ": no listen address");
  }
  // Upstream TLS files (CA, client certificate, key) are read now: a bad one stops the start.
  auto upstream_tls = UpstreamTlsContexts::build(*loaded.policy);
  if (!upstream_tls.ok()) return upstream_tls.error();
  std::unique_ptr<Gateway> gw(new Gateway(std::move(options), loaded.policy));
  gw->upstream_tls_.add(loaded.policy, std::move(upstream_tls).value());
  const auto& log = loaded.policy->access_log;
  if (log.kind != policy::AccessLogKind::kOff) {
    auto opened = AccessLog::open(log.kind == policy::AccessLogKind::kFile ? log.path : "-");
    if (!opened.ok()) return opened.error();
    gw->access_log_ = std::move(opened).value();
  }
  if (const auto& store = loaded.policy->budget_store;
      store.kind == policy::BudgetStoreKind::kRedis) {
    // Token pools shared by every replica, reached asynchronously from each worker's loop
    // (async_redis_pool_store.h). rediss:// files (CA, client certificate) are read now: a bad
    // one stops the start. One PING here, before the workers run, only to say at start whether
    // Redis answers. Changing budget_store takes a restart.
    auto tls = redis_tls_context(store);
    if (!tls.ok()) return tls.error();
    gw->redis_tls_ = std::move(tls).value();
    const bool answered = redis_answers(redis_options(store, gw->redis_tls_));
    std::fprintf(stderr, "cutline-gateway: token pools in %s%s\n", store.url.c_str(),
                 answered ? ""
                 : store.fail_closed
                     ? " (not answering yet: requests that need a token pool are refused until "
                       "it does, on_error: closed)"
                     : " (not answering yet: this process uses its own pools until it does)");
  }
  return gw;
}

Gateway::Gateway(GatewayOptions options, std::shared_ptr<const policy::Policy> initial)
    : options_(std::move(options)),
      holder_(std::make_unique<policy::PolicyHolder>(initial)),
      metrics_(bounds_of(*initial)),
      pools_(std::make_unique<policy::MemoryPoolStore>(clock_)),
      workers_(std::max(1, options_.workers)) {
  loaded_unix_s_ = base::wall_time_s();
  for (int i = 0; i < workers_.size(); ++i) {
    per_loop_.push_back(std::make_unique<Worker>(workers_.loop(i)));
  }
  admission_.set_limits(*initial);
}

Gateway::~Gateway() { stop(); }

std::unique_ptr<AsyncPoolStore> Gateway::make_pool_store(proto::EventLoop& loop,
                                                         const policy::BudgetStore& store) {
  if (store.kind != policy::BudgetStoreKind::kRedis) {
    return std::make_unique<AsyncMemoryStore>(loop, *pools_);
  }
  // The process's own pools serve fail-open calls (shared by every worker).
  return std::make_unique<AsyncRedisPoolStore>(loop, redis_options(store, redis_tls_), clock_,
                                               *pools_);
}

uint64_t Gateway::budget_store_errors() const {
  uint64_t total = 0;
  for (const auto& w : per_loop_) {
    if (w->pools) total += w->pools->errors_total();
  }
  return total;
}

int64_t Gateway::pool_held_tokens() const {
  int64_t total = 0;
  for (const auto& w : per_loop_) {
    if (w->pools) total += w->pools->held_tokens();
  }
  return total;
}

Status Gateway::start() {
  auto policy = holder_->snapshot();
  started_policy_ = policy;
  proto::ServerOptions so;
  apply_limits(policy->limits, metrics_, so);  // sizes, deadlines, process-wide caps
  // The HTTP layer answers 400/408/413/431 and its own 503s itself; the hook gives that answer
  // its stop record.
  so.on_protocol_error = [this, limits = policy->limits](
                             const proto::HttpRequest& req, const Error& e, proto::HttpHeaders& h,
                             std::string& body) { answer_protocol_error(limits, req, e, h, body); };
  // No `100 Continue` before authentication: a request whose key matches no tenant gets its 401
  // (with its stop record, from the authenticate phase) before it uploads its body.
  so.on_expect_continue = [this](const proto::HttpRequest& head) {
    const std::shared_ptr<const policy::Policy> p = this->policy();
    return !p->requires_auth() || authenticate_bearer(*p, head.headers).tenant != nullptr;
  };
  // One server per listen[] entry, all on the same workers and handler. --port overrides the
  // first one's port only.
  for (size_t i = 0; i < policy->listen.size(); ++i) {
    const policy::Listener& l = policy->listen[i];
    so.address = l.host;
    so.port = i == 0 && options_.port_override >= 0 ? static_cast<uint16_t>(options_.port_override)
                                                    : l.port;
    so.tls = nullptr;
    if (l.tls) {  // a bad cert/key stops the start here, naming the file
      auto tls = listener_tls_context(*l.tls);
      if (!tls.ok()) return tls.error();
      so.tls = std::move(tls).value();
    }
    listener_tls_.push_back(l.tls.has_value());
    servers_.push_back(std::make_unique<proto::HttpServer>(
        so, [this](std::shared_ptr<proto::ServerStream> s) { handle(std::move(s)); }, workers_));
  }
  workers_.start();
  started_ = true;
  start_worker_clients(*policy);
  swap_upstream_pools(policy);
  // The admin listener first, so that /readyz reports the upstream processes while they start.
  if (policy->admin) {
    const uint16_t port = options_.admin_port_override >= 0
                              ? static_cast<uint16_t>(options_.admin_port_override)
                              : policy->admin->port;
    admin_ = std::make_unique<Admin>(*this, policy->admin->host, port);
    if (Status s = admin_->start(); !s.ok()) return s;
  }
  supervisor_ = std::make_unique<Supervisor>(*policy, metrics_, options_.supervisor);
  if (Status s = supervisor_->start(); !s.ok()) return s;
  for (auto& server : servers_) {
    if (Status s = server->start(); !s.ok()) return s;
  }
  return {};
}

// A malformed or too slow request is the client's (invalid_request, naming the limit it broke); a
// 503 for the process-wide request memory or a connection's unfinished streams is capacity
// (admission_rejected).
void Gateway::answer_protocol_error(const policy::Limits& limits, const proto::HttpRequest& req,
                                    const Error& e, proto::HttpHeaders& h, std::string& body) {
  std::string rule = "request";
  std::optional<double> limit;
  proto::Cause cause = proto::Cause::kInvalidRequest;
  if (e.kind == ErrorKind::kTooLarge) {
    rule = "limits.max_body_bytes";
    limit = static_cast<double>(limits.max_body_bytes);
  } else if (e.kind == ErrorKind::kHeadersTooLarge) {
    rule = "limits.max_header_bytes";
    limit = static_cast<double>(limits.max_header_bytes);
  } else if (e.kind == ErrorKind::kRequestTimeout) {
    const bool head = e.message.starts_with("request head");
    rule = head ? "limits.request_header_timeout" : "limits.request_body_timeout";
    limit = static_cast<double>(head ? limits.request_header_timeout_ms
                                     : limits.request_body_timeout_ms);
  } else if (e.kind == ErrorKind::kExhausted) {
    rule = "limits";
    cause = proto::Cause::kAdmissionRejected;
  }
  if (cause == proto::Cause::kInvalidRequest) metrics_.bad_request(to_string(e.kind));
  answer_refused(*this, req, e, cause, std::move(rule), limit, h, body);
}

// One client per worker serves every upstream: it takes the longest connect timeout configured
// (upstreams[i].connect_timeout, default 5 s). Each worker also gets its token-pool store.
void Gateway::start_worker_clients(const policy::Policy& policy) {
  int64_t connect_timeout_ms = 0;
  for (const auto& u : policy.upstreams) {
    connect_timeout_ms = std::max(connect_timeout_ms, u.connect_timeout_ms);
  }
  workers_.run_on_all_and_wait([this, connect_timeout_ms, &policy](proto::EventLoop& loop) {
    proto::ClientOptions co;
    co.connect_timeout_ms = connect_timeout_ms > 0 ? connect_timeout_ms : 5000;
    Worker& w = *per_loop_[static_cast<size_t>(loop.index())];
    w.client = std::make_unique<proto::HttpClient>(loop, co);
    w.upstream = std::make_unique<HttpUpstreamCaller>(*w.client);
    w.pools = make_pool_store(loop, policy.budget_store);
  });
}

void Gateway::stop() {
  if (!started_) return;
  started_ = false;
  for (auto& server : servers_) server->stop();
  if (admin_) admin_->stop();
  workers_.run_on_all_and_wait([this](proto::EventLoop& loop) {
    Worker& w = *per_loop_[static_cast<size_t>(loop.index())];
    if (auto pools = upstream_pools(); pools && loop.index() == 0) pools->stop_probing();
    w.streams.clear();
    w.passthroughs.clear();
    w.model_lists.clear();
    w.pools.reset();  // unsettled Redis reservations are refunded by Redis when they expire
    w.upstream.reset();
    w.client.reset();
  });
  workers_.stop();
  if (supervisor_) supervisor_->stop();
}

void Gateway::begin_drain() {
  if (!started_ || draining_.exchange(true)) return;
  for (auto& server : servers_) server->stop_accepting();
}

size_t Gateway::open_streams() {
  if (!started_) return 0;
  std::atomic<size_t> open{0};
  workers_.run_on_all_and_wait([this, &open](proto::EventLoop& loop) {
    const Worker& w = *per_loop_[static_cast<size_t>(loop.index())];
    size_t n = w.passthroughs.size();
    for (const auto& [id, stream] : w.streams) n += stream->phase() != Phase::kDone ? 1 : 0;
    // A finished stream whose last bytes a slow client has not taken yet counts too.
    for (const auto& server : servers_) n += server->unsent_connections_on(loop);
    open += n;
  });
  return open.load();
}

void Gateway::cut_remaining(int64_t drain_timeout_ms, double drained_ms) {
  if (!started_) return;
  workers_.run_on_all_and_wait([this, drain_timeout_ms, drained_ms](proto::EventLoop& loop) {
    Worker& w = *per_loop_[static_cast<size_t>(loop.index())];
    std::vector<std::shared_ptr<Stream>> open;
    for (const auto& [id, stream] : w.streams) open.push_back(stream);
    for (const auto& stream : open) stream->cut_for_shutdown(drain_timeout_ms, drained_ms);
  });
}

uint16_t Gateway::port() const { return servers_.empty() ? 0 : servers_.front()->port(); }

std::vector<uint16_t> Gateway::ports() const {
  std::vector<uint16_t> out;
  for (const auto& server : servers_) out.push_back(server->port());
  return out;
}
uint16_t Gateway::admin_port() const { return admin_ ? admin_->port() : 0; }

Status Gateway::reload() {
  policy::LoadResult r = policy::load_policy_file(options_.config_path);
  std::string error_text = r.ok() ? std::string() : r.error_text();
  // The certificates and keys the new policy names are loaded before it is swapped in: an
  // unreadable or mismatched file refuses the reload and the old policy and contexts stay.
  TlsContexts tls;
  if (r.ok()) {
    auto loaded = load_tls_contexts(*r.policy);
    if (loaded.ok()) {
      tls = std::move(loaded).value();
    } else {
      error_text = loaded.error().message;
    }
  }
  metrics_.policy_reload(error_text.empty());
  if (!error_text.empty()) {
    std::fprintf(stderr,
                 "cutline-gateway: reload of %s refused, keeping the policy in force:\n%s\n",
                 options_.config_path.c_str(), error_text.c_str());
    return make_error(ErrorKind::kBadRequest, error_text);
  }
  upstream_tls_.add(r.policy, std::move(tls.upstream));
  note_restart_required(*r.policy);
  log_policy_warnings(r);
  holder_->replace(r.policy);
  swap_upstream_pools(r.policy);
  // New handshakes use the reloaded certificates; open connections keep theirs. Turning TLS on
  // or off on a listener, or adding, removing or moving listeners, needs a restart.
  const auto& listen = r.policy->listen;
  for (size_t i = 0; i < servers_.size() && i < listen.size(); ++i) {
    if (listener_tls_[i] && tls.listeners[i]) {
      servers_[i]->set_tls(std::move(tls.listeners[i]));
    } else if (listener_tls_[i] != (tls.listeners[i] != nullptr)) {
      std::fprintf(stderr,
                   "cutline-gateway: listen[%zu].tls was %s in %s; the listener keeps %s until a "
                   "restart\n",
                   i, tls.listeners[i] ? "added" : "removed", options_.config_path.c_str(),
                   listener_tls_[i] ? "TLS" : "cleartext");
    }
  }
  if (listen.size() != servers_.size()) {
    std::fprintf(stderr,
                 "cutline-gateway: %s lists %zu listener(s); the %zu open keep serving until a "
                 "restart\n",
                 options_.config_path.c_str(), listen.size(), servers_.size());
  }
  loaded_unix_s_ = base::wall_time_s();
  metrics_.set_bounds(bounds_of(*r.policy));
  admission_.set_limits(*r.policy);
  std::fprintf(stderr, "cutline-gateway: policy reloaded from %s (generation %llu)\n",
               options_.config_path.c_str(),
               static_cast<unsigned long long>(holder_->generation()));
  return {};
}

// What `next` changes but this process cannot apply: said in the log on every reload that leaves
// it pending, and in /v1/cutline/policy, instead of silently ignored.
void Gateway::note_restart_required(const policy::Policy& next) {
  std::vector<std::string> pending;
  if (started_policy_) pending = fields_needing_restart(*started_policy_, next);
  for (const std::string& field : pending) {
    std::fprintf(stderr,
                 "cutline-gateway: reload: %s in %s differs from the running gateway's and is "
                 "not applied until a restart\n",
                 field.c_str(), options_.config_path.c_str());
  }
  std::lock_guard lock(restart_required_mu_);
  restart_required_ = std::move(pending);
}

std::vector<std::string> Gateway::restart_required() const {
  std::lock_guard lock(restart_required_mu_);
  return restart_required_;
}

std::shared_ptr<UpstreamPools> Gateway::upstream_pools() const {
  std::lock_guard<std::mutex> lock(upstream_pools_mu_);
  return upstream_pools_;
}

void Gateway::swap_upstream_pools(std::shared_ptr<const policy::Policy> policy) {
  auto next = std::make_shared<UpstreamPools>(std::move(policy), clock_);
  std::shared_ptr<UpstreamPools> old = upstream_pools();
  if (old) next->adopt(*old);
  {
    std::lock_guard<std::mutex> lock(upstream_pools_mu_);
    upstream_pools_ = next;
  }
  // Health checks, load polls and DNS run on worker 0 with its client; the old pools stop there.
  workers_.loop(0).post([this, next, old] {
    if (old) old->stop_probing();
    Worker& w = *per_loop_[0];
    if (w.client && started_) next->start_probing(w.loop, *w.client, &upstream_tls_);
  });
}

void Gateway::handle(std::shared_ptr<proto::ServerStream> s) {
  if (draining_.load()) {
    // A new request on a keep-alive connection opened before the drain began.
    proto::HttpHeaders h{{"Content-Type", "application/json"}};
    std::string body;
    const Error e = make_error(ErrorKind::kExhausted, "the gateway is shutting down");
    answer_refused(*this, s->request(), e, proto::Cause::kAdmissionRejected, "shutdown",
                   std::nullopt, h, body);
    s->send_simple(e.status(), h, body);
    return;
  }
  // Routing and the policy see the canonical path, and it is what goes upstream: no spelling of
  // a route (absolute-form, %-escapes, "//", dot segments, a trailing '/', a fragment) escapes
  // the policy, and a path an upstream router could still serve as a core route (letter case,
  // ";params", whitespace) is refused. The routes below are kCoreRoutePaths, compared exactly.
  auto canonical = canonical_target(s->request());
  if (!canonical.ok()) {
    proto::HttpHeaders h{{"Content-Type", "application/json"}};
    std::string body;
    metrics_.bad_request(to_string(canonical.error().kind));
    answer_refused(*this, s->request(), canonical.error(), proto::Cause::kInvalidRequest,
                   "request.target", std::nullopt, h, body);
    s->send_simple(canonical.error().status(), h, body);
    return;
  }
  s->request().target = std::move(canonical).value();
  Worker& w = *per_loop_[static_cast<size_t>(s->loop().index())];
  const uint64_t id = next_stream_id();
  const std::string_view path = s->request().path();
  const bool post = s->request().method == "POST";
  std::optional<Route> route;
  if (post && path == "/v1/chat/completions") route = Route::kChatCompletions;
  if (post && path == "/v1/completions") route = Route::kCompletions;
  if (post && path == "/v1/responses") route = Route::kResponses;
  if (post && path == "/v1/embeddings") route = Route::kEmbeddings;
  if (route) {
    auto stream = std::make_shared<Stream>(*this, w, std::move(s), id, *route);
    w.streams.emplace(id, stream);
    stream->start();
    return;
  }
  if (s->request().method == "GET" && path == "/v1/models") {
    auto list = std::make_shared<ModelsList>(*this, w, std::move(s), id);
    w.model_lists.emplace(id, list);
    list->start();
    return;
  }
  auto pt = std::make_shared<Passthrough>(*this, w, std::move(s), id);
  w.passthroughs.emplace(id, pt);
  pt->start();
}

}  // namespace cutline::gateway
