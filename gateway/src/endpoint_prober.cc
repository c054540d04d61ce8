// Health checks, load polls and DNS re-resolution for one upstream pool (endpoint_prober.h).
#include "cutline/gateway/endpoint_prober.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "cutline/gateway/load_report.h"
#include "cutline/proto/net/event_loop.h"

namespace cutline::gateway {

namespace {
constexpr size_t kMaxProbeBodyBytes = 1 << 20;
}  // namespace

struct EndpointProber::Probe {
  std::shared_ptr<PoolEndpoint> endpoint;
  Kind kind = Kind::kHealth;
  policy::LoadReportKind format = policy::LoadReportKind::kNone;  // of a load probe
  proto::ClientHandle handle;
  std::unique_ptr<proto::Timer> timeout;
  std::string body;
  int status = 0;
};

EndpointProber::EndpointProber(proto::EventLoop& loop, proto::HttpClient& client,
                               DnsResolver& resolver, std::shared_ptr<EndpointPool> pool,
                               std::shared_ptr<const proto::TlsContext> tls)
    : loop_(loop),
      client_(client),
      resolver_(resolver),
      pool_(std::move(pool)),
      tls_(std::move(tls)),
      alive_(std::make_shared<bool>(true)) {}

EndpointProber::~EndpointProber() {
  *alive_ = false;
  probes_.clear();  // cancels every probe in flight (their callbacks never run)
}

void EndpointProber::start() {
  const policy::Upstream& u = pool_->upstream();
  if (u.dns) {
    resolve();
    dns_timer_ = std::make_unique<proto::Timer>(loop_, [this] { resolve(); });
    dns_timer_->arm_periodic(u.dns->resolve_interval_ms);
  }
  if (u.health) {
    check_health();
    health_timer_ = std::make_unique<proto::Timer>(loop_, [this] { check_health(); });
    health_timer_->arm_periodic(u.health->interval_ms);
  }
  if (u.load_report.kind != policy::LoadReportKind::kNone) {
    poll_load();
    load_timer_ = std::make_unique<proto::Timer>(loop_, [this] { poll_load(); });
    load_timer_->arm_periodic(u.load_report.interval_ms);
  }
}

void EndpointProber::resolve() {
  const policy::DnsEndpoints& dns = *pool_->upstream().dns;
  std::weak_ptr<bool> alive = alive_;
  resolver_.resolve(dns.name, [this, alive, &dns](Result<std::vector<std::string>> r) {
    if (alive.expired() || !*alive.lock()) return;
    ++resolutions_;
    if (!r.ok()) {
      pool_->set_resolve_error(r.error().message);  // keep the last addresses
      return;
    }
    std::vector<EndpointAddress> addresses;
    for (const auto& ip : *r) {
      addresses.push_back({ip, dns.port, dns.base_path, endpoint_label(ip, dns.port)});
    }
    pool_->set_addresses(std::move(addresses));
    pool_->set_resolve_error("");
    // New addresses are checked now, not an interval later (they are routable meanwhile).
    if (pool_->upstream().health) {
      for (const auto& e : pool_->endpoints()) {
        if (!e->checked()) probe(e, Kind::kHealth);
      }
    }
  });
}

void EndpointProber::check_health() {
  ++health_rounds_;
  for (const auto& e : pool_->endpoints()) probe(e, Kind::kHealth);
}

void EndpointProber::note_first_round() const {
  const auto endpoints = pool_->endpoints();
  const auto healthy = std::count_if(endpoints.begin(), endpoints.end(),
                                     [](const auto& e) { return e->checked() && e->healthy(); });
  if (healthy > 0) return;
  std::fprintf(stderr,
               "cutline-gateway: upstream %s: no endpoint of %zu passed its first health check "
               "(GET %s); /readyz no longer waits for it%s\n",
               pool_->name().c_str(), endpoints.size(), pool_->upstream().health->path.c_str(),
               pool_->in_panic() ? ", requests go to every endpoint not ejected (panic)" : "");
}

void EndpointProber::poll_load() {
  ++load_polls_;
  const auto endpoints = pool_->endpoints();
  // Forget what was learned of endpoints that left the pool (DNS).
  for (auto it = auto_kinds_.begin(); it != auto_kinds_.end();) {
    const bool present = std::any_of(endpoints.begin(), endpoints.end(),
                                     [&](const auto& e) { return e->id() == it->first; });
    it = present ? std::next(it) : auto_kinds_.erase(it);
  }
  for (const auto& e : endpoints) probe(e, Kind::kLoad);
}

policy::LoadReportKind EndpointProber::report_kind(const PoolEndpoint& endpoint) const {
  const policy::LoadReportKind kind = pool_->upstream().load_report.kind;
  if (kind != policy::LoadReportKind::kAuto) return kind;
  auto it = auto_kinds_.find(endpoint.id());
  return it == auto_kinds_.end() ? policy::LoadReportKind::kCutline : it->second;
}

void EndpointProber::probe(const std::shared_ptr<PoolEndpoint>& endpoint, Kind kind) {
  const uint64_t key = endpoint->id() * 2 + (kind == Kind::kLoad ? 1 : 0);
  if (probes_.count(key)) return;  // the last one has not answered yet
  const policy::Upstream& u = pool_->upstream();
  proto::ClientRequest req;
  req.host = endpoint->address().host;
  req.port = endpoint->address().port;
  req.tls = tls_;
  req.tls_server_name = u.tls.server_name;
  req.protocol = u.scheme == policy::UpstreamScheme::kH2c         ? proto::ClientProtocol::kHttp2
                 : u.protocol == policy::UpstreamProtocol::kHttp2 ? proto::ClientProtocol::kHttp2
                                                                  : proto::ClientProtocol::kHttp1;
  int64_t timeout_ms = 0;
  policy::LoadReportKind format = policy::LoadReportKind::kNone;
  if (kind == Kind::kHealth) {
    req.target = u.health->path;
    timeout_ms = u.health->timeout_ms;
  } else {
    format = report_kind(*endpoint);
    req.target = format == policy::LoadReportKind::kVllm ? "/metrics" : "/v1/cutline/state";
    timeout_ms = u.load_report.interval_ms;
  }
  auto p = std::make_unique<Probe>();
  p->endpoint = endpoint;
  p->kind = kind;
  p->format = format;
  Probe* raw = p.get();
  probes_.emplace(key, std::move(p));
  raw->timeout = std::make_unique<proto::Timer>(loop_, [this, key] {
    finish(key, false, 0, "");  // no answer in time: the handle is cancelled with the probe
  });
  raw->timeout->arm(timeout_ms);
  proto::ClientCallbacks cb;
  cb.on_head = [raw](int status, proto::HttpHeaders&) { raw->status = status; };
  cb.on_body = [this, raw, key](std::string_view data) {
    if (raw->body.size() + data.size() > kMaxProbeBodyBytes) {
      finish(key, false, raw->status, "");
      return;
    }
    raw->body.append(data);
  };
  cb.on_complete = [this, raw, key](proto::HttpHeaders&) {
    finish(key, raw->status >= 200 && raw->status < 300, raw->status, raw->body);
  };
  cb.on_error = [this, key](const proto::ClientError&) { finish(key, false, 0, ""); };
  raw->handle = client_.start(std::move(req), std::move(cb));
}

void EndpointProber::finish(uint64_t key, bool ok, int /*status*/, const std::string& body) {
  auto it = probes_.find(key);
  if (it == probes_.end()) return;
  std::unique_ptr<Probe> p = std::move(it->second);
  probes_.erase(it);
  if (p->kind == Kind::kHealth) {
    p->endpoint->set_healthy(ok);
    if (!first_round_over_ && pool_->health_settled()) {
      first_round_over_ = true;
      note_first_round();
    }
  } else {
    std::optional<LoadSnapshot> snapshot;
    if (ok) {
      Result<LoadSnapshot> r = p->format == policy::LoadReportKind::kVllm
                                   ? parse_vllm_metrics(body)
                                   : parse_cutline_state(body);
      if (r.ok()) {
        snapshot = std::move(*r);
        snapshot->at_ns = pool_->clock().now_ns();
      }
    }
    if (!snapshot && pool_->upstream().load_report.kind == policy::LoadReportKind::kAuto) {
      auto_kinds_[p->endpoint->id()] = p->format == policy::LoadReportKind::kVllm
                                           ? policy::LoadReportKind::kCutline
                                           : policy::LoadReportKind::kVllm;
    }
    p->endpoint->set_load(std::move(snapshot));
  }
  // The probe (its handle and timer) may be the one whose callback is running: free it later.
  loop_.post([doomed = std::shared_ptr<Probe>(std::move(p))] { doomed->handle.cancel(); });
}

}  // namespace cutline::gateway
