// The pools of one policy, their probers, and their live picture (upstream_pools.h).
#include "cutline/gateway/upstream_pools.h"

#include <unordered_map>

#include "cutline/base/json_writer.h"

namespace cutline::gateway {

UpstreamPools::UpstreamPools(std::shared_ptr<const policy::Policy> policy, const base::Clock& clock)
    : policy_(std::move(policy)), clock_(clock) {
  uint64_t seed = static_cast<uint64_t>(clock_.now_ns());
  for (const auto& u : policy_->upstreams)
    pools_.push_back(EndpointPool::create(u, clock_, ++seed, policy_));
}

UpstreamPools::~UpstreamPools() = default;

EndpointPool* UpstreamPools::find(const policy::Upstream& upstream) const {
  for (size_t i = 0; i < pools_.size(); ++i) {
    if (&policy_->upstreams[i] == &upstream) return pools_[i].get();
  }
  return find(upstream.name);
}

EndpointPool* UpstreamPools::find(std::string_view name) const {
  for (const auto& p : pools_) {
    if (p->name() == name) return p.get();
  }
  return nullptr;
}

void UpstreamPools::adopt(const UpstreamPools& old) {
  for (auto& pool : pools_) {
    const EndpointPool* before = old.find(pool->name());
    if (!before) continue;
    pool->adopt(*before);
  }
}

void UpstreamPools::start_probing(proto::EventLoop& loop, proto::HttpClient& client,
                                  const UpstreamTlsCache* tls) {
  if (!resolver_) resolver_ = std::make_unique<DnsResolver>(loop);
  for (const auto& pool : pools_) {
    const policy::Upstream& u = pool->upstream();
    if (!u.dns && !u.health && u.load_report.kind == policy::LoadReportKind::kNone) continue;
    std::shared_ptr<const proto::TlsContext> ctx = tls ? tls->find(u) : nullptr;
    probers_.push_back(std::make_unique<EndpointProber>(loop, client, *resolver_, pool, ctx));
    probers_.back()->start();
  }
}

void UpstreamPools::stop_probing() {
  probers_.clear();
  resolver_.reset();
}

std::string UpstreamPools::render_json() const {
  const int64_t now = clock_.now_ns();
  std::string out;
  base::JsonWriter w(out);
  w.begin_object().key("upstreams").begin_array();
  for (const auto& pool : pools_) {
    const policy::Upstream& u = pool->upstream();
    w.begin_object();
    w.field("name", u.name);
    w.field("balance", policy::to_string(u.balance));
    w.field("load_report", policy::to_string(u.load_report.kind));
    if (u.dns) {
      w.field("dns", u.dns->name + ":" + std::to_string(u.dns->port));
      w.field("resolve_error", pool->resolve_error());
    }
    w.field("no_endpoint", pool->no_endpoint_total());
    if (u.health) {
      w.field("health_path", u.health->path);
      w.field("panic_threshold", u.health->panic_threshold);
    }
    w.field("panic", pool->in_panic());
    w.field("panic_picks", pool->panic_total());
    w.key("endpoints").begin_array();
    for (const auto& e : pool->endpoints()) {
      const auto c = e->counters();
      w.begin_object();
      w.field("address", e->address().label);
      w.field("healthy", e->healthy());
      w.field("checked", e->checked());
      w.field("ejected", e->ejected(now));
      w.field("ejected_for_ms",
              e->ejected(now) ? (e->ejected_until_ns() - now) / 1000000 : int64_t{0});
      w.field("outstanding", e->outstanding());
      w.field("requests", c.requests);
      w.field("errors", c.errors);
      w.field("ejections", c.ejections);
      w.field("picked_cold", c.picked_cold);
      w.field("affinity_hits", c.affinity_hits);
      w.field("retries", c.retries);
      w.key("load");
      if (auto l = e->load(now, pool->stale_after_ns())) {
        w.begin_object();
        w.field("waiting", l->waiting);
        w.field("running", l->running);
        if (l->kv_usage >= 0) w.field("kv_usage", l->kv_usage);
        if (l->reports_models) {
          w.key("resident_models").begin_array();
          for (const auto& m : l->resident_models) w.value(m);
          w.end_array();
        }
        w.field("age_ms", (now - l->at_ns) / 1000000);
        w.end_object();
      } else {
        w.null();
      }
      w.end_object();
    }
    w.end_array();
    w.end_object();
  }
  w.end_array().end_object();
  return out;
}

namespace {
// A label value in the text format: backslash, quote and newline escaped.
std::string label_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    out.push_back(c == '\n' ? 'n' : c);
  }
  return out;
}
}  // namespace

std::string UpstreamPools::render_prometheus() const {
  const int64_t now = clock_.now_ns();
  struct Series {
    const char* name;
    const char* type;
    const char* help;
  };
  static constexpr Series kSeries[] = {
      {"cutline_upstream_endpoint_requests_total", "counter", "Requests sent to the endpoint."},
      {"cutline_upstream_endpoint_errors_total", "counter",
       "Connect failures, 5xx answers and disconnects."},
      {"cutline_upstream_endpoint_ejections_total", "counter", "Outlier ejections."},
      {"cutline_upstream_endpoint_picked_cold_total", "counter",
       "Requests routed there although their model was not resident anywhere."},
      {"cutline_upstream_endpoint_affinity_hits_total", "counter",
       "Requests that went to their prefix's home endpoint."},
      {"cutline_upstream_endpoint_retries_total", "counter",
       "Requests that failed there before their first byte and were retried elsewhere."},
      {"cutline_upstream_endpoint_outstanding", "gauge", "Requests in flight."},
      {"cutline_upstream_endpoint_healthy", "gauge", "1 when passing health checks."},
      {"cutline_upstream_endpoint_ejected", "gauge", "1 while ejected."},
  };
  std::string out =
      "# HELP cutline_upstream_panic_total Requests routed while too few of the pool's "
      "endpoints were healthy (health ignored).\n# TYPE cutline_upstream_panic_total counter\n";
  for (const auto& pool : pools_) {
    out += "cutline_upstream_panic_total{upstream=\"" + label_value(pool->name()) + "\"} " +
           std::to_string(pool->panic_total()) + "\n";
  }
  out +=
      "# HELP cutline_upstream_panic 1 while fewer than health.panic_threshold percent of the "
      "pool's endpoints are healthy.\n# TYPE cutline_upstream_panic gauge\n";
  for (const auto& pool : pools_) {
    out += "cutline_upstream_panic{upstream=\"" + label_value(pool->name()) + "\"} " +
           (pool->in_panic() ? "1" : "0") + "\n";
  }
  for (size_t s = 0; s < std::size(kSeries); ++s) {
    out += std::string("# HELP ") + kSeries[s].name + " " + kSeries[s].help + "\n";
    out += std::string("# TYPE ") + kSeries[s].name + " " + kSeries[s].type + "\n";
    for (const auto& pool : pools_) {
      for (const auto& e : pool->endpoints()) {
        const auto c = e->counters();
        double v = 0;
        switch (s) {
          case 0:
            v = static_cast<double>(c.requests);
            break;
          case 1:
            v = static_cast<double>(c.errors);
            break;
          case 2:
            v = static_cast<double>(c.ejections);
            break;
          case 3:
            v = static_cast<double>(c.picked_cold);
            break;
          case 4:
            v = static_cast<double>(c.affinity_hits);
            break;
          case 5:
            v = static_cast<double>(c.retries);
            break;
          case 6:
            v = static_cast<double>(e->outstanding());
            break;
          case 7:
            v = e->healthy() ? 1 : 0;
            break;
          default:
            v = e->ejected(now) ? 1 : 0;
            break;
        }
        out += std::string(kSeries[s].name) + "{upstream=\"" + label_value(pool->name()) +
               "\",endpoint=\"" + label_value(e->address().label) + "\"} " +
               std::to_string(static_cast<int64_t>(v)) + "\n";
      }
    }
  }
  return out;
}

}  // namespace cutline::gateway
