#include "cutline/gateway/admin.h"

#include <algorithm>
#include <cctype>
#include <mutex>

#include "cutline/base/json_writer.h"
#include "cutline/gateway/gateway.h"
#include "cutline/gateway/stream.h"
#include "cutline/gateway/supervisor.h"
#include "cutline/gateway/worker.h"
#include "cutline/policy/api_key.h"
#include "cutline/policy/policy_json.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/net/timer.h"

namespace cutline::gateway {
namespace {

const proto::HttpHeaders kJson{{"Content-Type", "application/json"}};

}  // namespace

Admin::Admin(Gateway& gateway, std::string address, uint16_t port) : gw_(gateway) {
  proto::ServerOptions o;
  o.address = std::move(address);
  o.port = port;
  server_ = std::make_unique<proto::HttpServer>(
      o, [this](std::shared_ptr<proto::ServerStream> s) { handle(std::move(s)); },
      gateway.workers());
}

Admin::~Admin() { stop(); }
Status Admin::start() { return server_->start(); }
void Admin::stop() { server_->stop(); }

// Method, then token: a scanner learns nothing but 405 / 401 from any path but /healthz.
bool Admin::allowed(proto::ServerStream& s) {
  const proto::HttpRequest& req = s.request();
  if (req.method != "GET" && req.method != "HEAD") {
    s.send_simple(
        405, {{"Content-Type", "application/json"}, {"Allow", "GET, HEAD"}},
        R"({"error":{"message":"the admin listener answers GET and HEAD only","type":"invalid_request_error","param":null,"code":"method_not_allowed"}})");
    return false;
  }
  if (req.path() == "/healthz") return true;
  auto policy = gw_.policy();
  if (!policy->admin || !policy->admin->token) return true;
  std::optional<std::string_view> auth = req.headers.get("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  bool ok = false;
  if (auth && auth->size() > kBearer.size() &&
      std::equal(kBearer.begin(), kBearer.end(), auth->begin(), [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) ==
               std::tolower(static_cast<unsigned char>(b));
      })) {
    ok = policy::digest_equal(policy::sha256_digest(auth->substr(kBearer.size())),
                              policy->admin->token->digest);
  }
  if (!ok) {
    s.send_simple(
        401, {{"Content-Type", "application/json"}, {"WWW-Authenticate", "Bearer"}},
        R"({"error":{"message":"the admin listener needs Authorization: Bearer <admin.token>","type":"invalid_request_error","param":null,"code":"invalid_api_key"}})");
  }
  return ok;
}

void Admin::handle(std::shared_ptr<proto::ServerStream> s) {
  if (!allowed(*s)) return;
  const std::string_view path = s->request().path();
  if (path == "/metrics") {
    gw_.metrics().set_budget_store_errors(gw_.budget_store_errors());
    if (AccessLog* log = gw_.access_log())
      gw_.metrics().set_access_log_dropped(log->dropped_lines());
    const auto pools = gw_.upstream_pools();
    // Tokens the running requests hold from the token pools: back to 0 whenever the gateway is
    // idle, so a reservation that was never settled shows.
    const std::string reserved =
        "# HELP cutline_pool_reserved_tokens Tokens reserved from token pools by requests not "
        "finished yet\n# TYPE cutline_pool_reserved_tokens gauge\ncutline_pool_reserved_tokens " +
        std::to_string(gw_.pool_held_tokens()) + "\n";
    s->send_simple(
        200, {{"Content-Type", "text/plain; version=0.0.4"}},
        gw_.metrics().serialize() + reserved + (pools ? pools->render_prometheus() : ""));
  } else if (path == "/healthz") {
    s->send_simple(200, {{"Content-Type", "text/plain"}}, "ok\n");
  } else if (path == "/readyz") {
    ready(std::move(s));
  } else if (path == "/v1/cutline/streams") {
    streams(std::move(s));
  } else if (path == "/v1/cutline/upstreams") {
    const auto pools = gw_.upstream_pools();
    s->send_simple(200, kJson, pools ? pools->render_json() : R"({"upstreams":[]})");
  } else if (path == "/v1/cutline/policy") {
    s->send_simple(200, kJson, policy_json());
  } else {
    s->send_simple(
        404, kJson,
        R"({"error":{"message":"unknown admin path","type":"invalid_request_error","param":null,"code":"not_found"}})");
  }
}

// Each worker describes its own streams on its own thread; the last one to finish answers.
void Admin::streams(std::shared_ptr<proto::ServerStream> s) {
  struct Gather {
    std::mutex mu;
    std::string items;
    int left = 0;
    std::shared_ptr<proto::ServerStream> stream;
  };
  auto g = std::make_shared<Gather>();
  g->left = gw_.workers().size();
  g->stream = std::move(s);
  proto::EventLoop* home = &g->stream->loop();
  Gateway* gw = &gw_;
  for (int i = 0; i < gw_.workers().size(); ++i) {
    gw_.worker(i).loop.post([g, gw, i, home] {
      std::string part;
      base::JsonWriter w(part);
      const int64_t now = gw->clock().now_ns();
      w.begin_array();
      for (const auto& [id, stream] : gw->worker(i).streams) {
        if (stream->phase() != Phase::kDone) stream->describe(w, now);
      }
      w.end_array();
      std::lock_guard lock(g->mu);
      if (part.size() > 2) {
        if (!g->items.empty()) g->items.push_back(',');
        g->items.append(part, 1, part.size() - 2);
      }
      if (--g->left == 0) {
        home->post([g] { g->stream->send_simple(200, kJson, "{\"streams\":[" + g->items + "]}"); });
      }
    });
  }
}

// Readiness is probed at most once per kReadyCacheMs: answers within that window (from any
// worker) reuse the last result, and requests that arrive while a probe runs wait for it, so a
// burst of /readyz (kubelet, load balancers, scrapers) costs one probe of each upstream.
void Admin::ready(std::shared_ptr<proto::ServerStream> s) {
  const int64_t now_ms = gw_.clock().now_ns() / 1000000;
  std::shared_ptr<proto::ServerStream> first;
  {
    std::lock_guard lock(ready_mu_);
    if (!gw_.draining() && ready_cache_.at_ms > 0 && now_ms - ready_cache_.at_ms < kReadyCacheMs) {
      const int status = ready_cache_.status;
      const std::string body = ready_cache_.body;
      s->send_simple(status, kJson, body);
      return;
    }
    ready_waiters_.push_back(s);
    if (ready_waiters_.size() > 1) return;  // a probe is running; it answers this one too
    first = std::move(s);
  }
  probe_ready(std::move(first));
}

void Admin::ready_answered(int status, const std::string& body) {
  std::vector<std::shared_ptr<proto::ServerStream>> waiters;
  {
    std::lock_guard lock(ready_mu_);
    ready_cache_.status = status;
    ready_cache_.body = body;
    ready_cache_.at_ms = std::max<int64_t>(1, gw_.clock().now_ns() / 1000000);
    waiters.swap(ready_waiters_);
  }
  for (auto& w : waiters) {
    proto::EventLoop& loop = w->loop();
    loop.post([w, status, body] { w->send_simple(status, kJson, body); });
  }
}

// Each upstream is probed with GET <base_path>/v1/models (any status counts as reachable); an
// upstream that accepts but does not answer within kReadyProbeTimeoutMs counts as unreachable,
// so /readyz never hangs. Supervised upstream processes must also be in state "ready".
void Admin::probe_ready(std::shared_ptr<proto::ServerStream> s) {
  constexpr int64_t kReadyProbeTimeoutMs = 2000;
  auto policy = gw_.policy();
  struct Probe {
    std::shared_ptr<proto::ServerStream> stream;
    std::vector<proto::ClientHandle> calls;
    std::vector<std::string> names;
    std::vector<int> outcome;  // per upstream: 0 = waiting, 1 = answered, -1 = failed
    std::unique_ptr<proto::Timer> timeout;
    bool sent = false;
  };
  auto p = std::make_shared<Probe>();
  p->stream = std::move(s);
  Gateway* gw = &gw_;
  Admin* admin = this;
  auto answer = [gw, admin](const std::shared_ptr<Probe>& p) {
    if (p->sent) return;
    p->sent = true;
    bool ready = !p->names.empty() && !gw->draining();
    std::string body;
    base::JsonWriter w(body);
    w.begin_object();
    w.key("unreachable").begin_array();
    for (size_t i = 0; i < p->names.size(); ++i) {
      if (p->outcome[i] != 1) {
        w.value(p->names[i]);
        ready = false;
      }
    }
    w.end_array();
    // Pools whose first round of health checks is still running (no endpoint has passed one
    // yet): a check is bounded by health.timeout, so this lasts that long at most.
    w.key("health_pending").begin_array();
    if (const auto pools = gw->upstream_pools()) {
      for (const policy::Upstream& u : pools->policy().upstreams) {
        const EndpointPool* pool = pools->find(u);
        if (pool && !pool->health_settled()) {
          w.value(u.name);
          ready = false;
        }
      }
    }
    w.end_array();
    w.key("processes").begin_array();
    if (const Supervisor* sup = gw->supervisor()) {
      for (const ProcessStatus& st : sup->statuses()) {
        if (st.state != ProcessState::kReady) ready = false;
        w.begin_object().field("upstream", st.upstream).field("state", to_string(st.state));
        w.field("pid", static_cast<int64_t>(st.pid)).field("restarts", st.restarts);
        if (!st.last_exit.empty()) w.field("last_exit", st.last_exit);
        w.end_object();
      }
    }
    w.end_array();
    w.field("policy_loaded", true).field("draining", gw->draining());
    if (p->names.empty()) w.field("reason", "no upstreams");
    w.field("ready", ready).end_object();
    admin->ready_answered(ready ? 200 : 503, body);
    p->stream->loop().post([p] {
      for (auto& c : p->calls) c.cancel();
      p->calls.clear();
      p->timeout.reset();
    });
  };
  for (const policy::Upstream& u : policy->upstreams) p->names.push_back(u.name);
  p->outcome.assign(p->names.size(), 0);
  if (p->names.empty()) return answer(p);
  auto finished = [p, answer](size_t i, bool ok) {
    if (p->outcome[i] == 0) p->outcome[i] = ok ? 1 : -1;
    for (int o : p->outcome) {
      if (o == 0) return;
    }
    answer(p);
  };
  std::weak_ptr<Probe> weak = p;
  p->timeout = std::make_unique<proto::Timer>(p->stream->loop(), [weak, answer] {
    if (auto p = weak.lock()) answer(p);
  });
  p->timeout->arm(kReadyProbeTimeoutMs);
  Worker& worker = gw_.worker(p->stream->loop().index());
  for (size_t i = 0; i < policy->upstreams.size(); ++i) {
    const policy::Upstream& u = policy->upstreams[i];
    proto::ClientRequest req;
    if (!fill_upstream_target(u, gw_.upstream_tls(), req).ok()) {
      finished(i, false);
      continue;
    }
    req.target = u.base_path + "/v1/models";
    proto::ClientCallbacks cb;
    cb.on_complete = [finished, i](proto::HttpHeaders&) { finished(i, true); };
    cb.on_error = [finished, i](const proto::ClientError&) { finished(i, false); };
    p->calls.push_back(worker.client->start(std::move(req), std::move(cb)));
  }
}

std::string Admin::policy_json() const {
  auto policy = gw_.policy();
  std::string out;
  base::JsonWriter w(out);
  w.begin_object();
  w.field("generation", static_cast<int64_t>(gw_.policy_generation()));
  w.field("loaded_at_unix_s", gw_.policy_loaded_unix_s());
  // Changed in the file but not applied by a reload (listeners, admin, spawn, access log).
  w.key("restart_required").begin_array();
  for (const std::string& field : gw_.restart_required()) w.value(field);
  w.end_array();
  // The same rendering as `cutline policy check --format json`.
  w.key("policy");
  policy::write_policy_json(w, *policy);
  w.end_object();
  return out;
}

}  // namespace cutline::gateway
