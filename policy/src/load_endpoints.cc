// Loader section for upstream pools: upstreams[i].endpoints and the keys that shape how an
// endpoint is picked (balance, prefix_affinity, health, outlier, load_report). See
// load_sections.h and policy/README.md.
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "load_sections.h"

namespace cutline::policy::detail {

namespace {

bool load_dns(YamlReader& r, const YAML::Node& node, const std::string& path, Upstream& u) {
  auto f = r.map(node, path, keys::kDnsEndpoints);
  if (!f) return false;
  DnsEndpoints d;
  d.ref = r.ref(node, path);
  bool ok = true;
  uint16_t default_port = 80;
  if (auto* e = f->get("scheme")) {
    auto c = r.choice(e->value, key_path(path, "scheme"), keys::kSchemes);
    if (c) {
      u.scheme = static_cast<UpstreamScheme>(*c);
      if (u.scheme == UpstreamScheme::kHttps) default_port = 443;
    } else {
      ok = false;
    }
  }
  const Entry* name = f->get("dns");
  if (!name) {
    r.error(node, path, "missing required key \"dns\" (NAME:PORT)");
    return false;
  }
  const std::string dns_path = key_path(path, "dns");
  auto s = r.string(name->value, dns_path);
  if (!s) return false;
  auto hp = parse_host_port_default(*s, default_port);
  if (!hp || hp->port == 0 || hp->host.empty()) {
    r.error(name->value, dns_path,
            "expected NAME:PORT such as backend.cutline.svc.cluster.local:8081, got " + quote(*s));
    return false;
  }
  d.name = hp->host;
  d.port = hp->port;
  if (auto* e = f->get("path")) {
    auto p = r.string(e->value, key_path(path, "path"));
    if (p && (*p)[0] == '/' && p->find_first_of("?# ") == std::string::npos) {
      std::string_view v = *p;
      while (!v.empty() && v.back() == '/') v.remove_suffix(1);
      d.base_path = std::string(v);
    } else {
      if (p) r.error(e->value, key_path(path, "path"), "expected a path such as /v1");
      ok = false;
    }
  }
  if (auto* e = f->get("resolve_interval")) {
    if (auto v = r.duration(e->value, key_path(path, "resolve_interval")))
      d.resolve_interval_ms = *v;
    else
      ok = false;
  }
  if (!ok) return false;
  const char* scheme = u.scheme == UpstreamScheme::kHttps ? "https"
                       : u.scheme == UpstreamScheme::kH2c ? "h2c"
                                                          : "http";
  u.url = std::string(scheme) + "://" + *s + d.base_path;
  u.host = d.name;
  u.port = d.port;
  u.base_path = d.base_path;
  u.dns = std::move(d);
  return true;
}

bool load_endpoint_list(YamlReader& r, const YAML::Node& node, const std::string& path,
                        Upstream& u) {
  auto items = r.list(node, path);
  if (!items) return false;
  if (items->empty()) {
    r.error(node, path, "must list at least one endpoint URL (or give {dns: NAME:PORT})");
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < items->size(); ++i) {
    const std::string item_path = index_path(path, i);
    auto s = r.string((*items)[i], item_path);
    if (!s) {
      ok = false;
      continue;
    }
    UpstreamScheme scheme = UpstreamScheme::kHttp;
    UpstreamEndpoint e;
    if (!parse_endpoint_url(r, (*items)[i], item_path, *s, scheme, e)) {
      ok = false;
      continue;
    }
    if (!u.endpoints.empty() && scheme != u.scheme) {
      r.error((*items)[i], item_path,
              "every endpoint of an upstream must use the same scheme as " + u.endpoints[0].url);
      ok = false;
      continue;
    }
    bool duplicate = false;
    for (const auto& other : u.endpoints) {
      if (other.host == e.host && other.port == e.port && other.base_path == e.base_path) {
        r.error((*items)[i], item_path,
                "duplicate endpoint " + quote(*s) + " (first at " + other.ref.path + ")");
        duplicate = true;
      }
    }
    if (duplicate) {
      ok = false;
      continue;
    }
    u.scheme = scheme;
    u.endpoints.push_back(std::move(e));
  }
  if (!u.endpoints.empty()) {
    u.url = u.endpoints[0].url;
    u.host = u.endpoints[0].host;
    u.port = u.endpoints[0].port;
    u.base_path = u.endpoints[0].base_path;
  }
  return ok;
}

// A number >= min written as a plain decimal (1.25, 2).
std::optional<double> read_number(YamlReader& r, const YAML::Node& node, const std::string& path,
                                  double min) {
  if (!node.IsScalar()) {
    r.error(node, path, "expected a number, got " + std::string(describe(node)));
    return std::nullopt;
  }
  const std::string& s = node.Scalar();
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) {
    r.error(node, path, "expected a number, got " + quote(s));
    return std::nullopt;
  }
  if (v < min) {
    r.error(node, path, "must be at least " + std::to_string(min).substr(0, 4) + ", got " + s);
    return std::nullopt;
  }
  return v;
}

bool load_affinity(YamlReader& r, const YAML::Node& node, const std::string& path, Upstream& u) {
  auto f = r.map(node, path, keys::kPrefixAffinity);
  if (!f) return false;
  PrefixAffinity a;
  a.ref = r.ref(node, path);
  const Entry* bytes = f->get("bytes");
  const Entry* tokens = f->get("tokens");
  if ((bytes != nullptr) == (tokens != nullptr)) {
    r.error(node, path, "give exactly one of \"bytes: N\" or \"tokens: N\" (the prefix length)");
    return false;
  }
  const Entry* len = bytes ? bytes : tokens;
  a.unit = bytes ? AffinityUnit::kBytes : AffinityUnit::kTokens;
  auto n = r.integer(len->value, key_path(path, bytes ? "bytes" : "tokens"), 1);
  if (!n) return false;
  a.length = *n;
  if (auto* e = f->get("max_load_factor")) {
    auto v = read_number(r, e->value, key_path(path, "max_load_factor"), 1.0);
    if (!v) return false;
    a.max_load_factor = *v;
  }
  u.prefix_affinity = a;
  return true;
}

bool load_health(YamlReader& r, const YAML::Node& node, const std::string& path, Upstream& u) {
  if (node.IsScalar() && node.Scalar() == keys::kOff[0]) {
    u.health.reset();
    return true;
  }
  auto f = r.map(node, path, keys::kHealth);
  if (!f) return false;
  HealthCheck h;
  h.ref = r.ref(node, path);
  bool ok = true;
  if (auto* e = f->get("path")) {
    auto p = r.string(e->value, key_path(path, "path"));
    if (p && (*p)[0] == '/' && p->find_first_of(" \r\n") == std::string::npos) {
      h.path = *p;
    } else {
      if (p) r.error(e->value, key_path(path, "path"), "expected a path such as /health");
      ok = false;
    }
  }
  if (auto* e = f->get("interval")) {
    if (auto v = r.duration(e->value, key_path(path, "interval")))
      h.interval_ms = *v;
    else
      ok = false;
  }
  if (auto* e = f->get("timeout")) {
    if (auto v = r.duration(e->value, key_path(path, "timeout")))
      h.timeout_ms = *v;
    else
      ok = false;
  }
  if (auto* e = f->get("panic_threshold")) {
    const std::string pp = key_path(path, "panic_threshold");
    if (auto v = r.integer(e->value, pp, 0)) {
      if (*v > 100) {
        r.error(e->value, pp, "must be at most 100, got " + std::to_string(*v));
        ok = false;
      } else {
        h.panic_threshold = *v;
      }
    } else {
      ok = false;
    }
  }
  if (ok && h.timeout_ms > h.interval_ms) {
    r.error(node, path, "timeout must not exceed interval");
    ok = false;
  }
  if (ok) u.health = h;
  return ok;
}

bool load_outlier(YamlReader& r, const YAML::Node& node, const std::string& path, Upstream& u) {
  if (node.IsScalar() && node.Scalar() == keys::kOff[0]) {
    u.outlier.reset();
    return true;
  }
  auto f = r.map(node, path, keys::kOutlier);
  if (!f) return false;
  OutlierDetection o;
  o.ref = r.ref(node, path);
  bool ok = true;
  if (auto* e = f->get("consecutive_failures")) {
    if (auto v = r.integer(e->value, key_path(path, "consecutive_failures"), 1))
      o.consecutive_failures = *v;
    else
      ok = false;
  }
  if (auto* e = f->get("base_ejection")) {
    if (auto v = r.duration(e->value, key_path(path, "base_ejection")))
      o.base_ejection_ms = *v;
    else
      ok = false;
  }
  if (auto* e = f->get("max_ejection")) {
    if (auto v = r.duration(e->value, key_path(path, "max_ejection")))
      o.max_ejection_ms = *v;
    else
      ok = false;
  }
  if (auto* e = f->get("max_ejection_percent")) {
    const std::string pp = key_path(path, "max_ejection_percent");
    if (auto v = r.integer(e->value, pp, 0)) {
      if (*v > 100) {
        r.error(e->value, pp, "must be at most 100, got " + std::to_string(*v));
        ok = false;
      } else {
        o.max_ejection_percent = *v;
      }
    } else {
      ok = false;
    }
  }
  if (ok && o.max_ejection_ms < o.base_ejection_ms) {
    r.error(node, path, "max_ejection must be at least base_ejection");
    ok = false;
  }
  if (ok) u.outlier = o;
  return ok;
}

bool load_load_report(YamlReader& r, const YAML::Node& node, const std::string& path, Upstream& u) {
  LoadReport l;
  l.ref = r.ref(node, path);
  const YAML::Node* kind_node = &node;
  std::string kind_path = path;
  std::optional<Fields> f;
  if (node.IsMap()) {
    f = r.map(node, path, keys::kLoadReport);
    if (!f) return false;
    const Entry* from = f->get("from");
    if (!from) {
      r.error(node, path, "missing required key \"from\" (cutline, vllm, auto or none)");
      return false;
    }
    kind_node = &from->value;
    kind_path = key_path(path, "from");
  }
  auto c = r.choice(*kind_node, kind_path, keys::kLoadReportKinds);
  if (!c) return false;
  l.kind = static_cast<LoadReportKind>(*c);
  bool ok = true;
  if (f) {
    if (auto* e = f->get("interval")) {
      if (auto v = r.duration(e->value, key_path(path, "interval")))
        l.interval_ms = *v;
      else
        ok = false;
    }
    if (auto* e = f->get("stale_after")) {
      if (auto v = r.duration(e->value, key_path(path, "stale_after")))
        l.stale_after_ms = *v;
      else
        ok = false;
    } else {
      l.stale_after_ms = 3 * l.interval_ms;
    }
  }
  if (ok && l.stale_after_ms < l.interval_ms) {
    r.error(node, path, "stale_after must be at least interval");
    ok = false;
  }
  if (ok) u.load_report = l;
  return ok;
}

}  // namespace

bool load_endpoints(YamlReader& r, const YAML::Node& node, const std::string& path, Upstream& u) {
  if (node.IsMap()) return load_dns(r, node, path, u);
  if (!node.IsSequence()) {
    r.error(node, path,
            "expected a list of URLs or {dns: NAME:PORT}, got " + std::string(describe(node)));
    return false;
  }
  return load_endpoint_list(r, node, path, u);
}

bool load_pool_keys(YamlReader& r, const Fields& f, const std::string& path, bool pool,
                    Upstream& u) {
  bool ok = true;
  if (pool) {
    u.health = HealthCheck{};
    u.outlier = OutlierDetection{};
  }
  if (auto* e = f.get("balance")) {
    auto c = r.choice(e->value, key_path(path, "balance"), keys::kBalances);
    if (c)
      u.balance = static_cast<Balance>(*c);
    else
      ok = false;
  }
  if (auto* e = f.get("prefix_affinity"))
    ok = load_affinity(r, e->value, key_path(path, "prefix_affinity"), u) && ok;
  if (auto* e = f.get("health")) ok = load_health(r, e->value, key_path(path, "health"), u) && ok;
  if (auto* e = f.get("outlier"))
    ok = load_outlier(r, e->value, key_path(path, "outlier"), u) && ok;
  if (auto* e = f.get("load_report"))
    ok = load_load_report(r, e->value, key_path(path, "load_report"), u) && ok;
  if (u.balance == Balance::kLoadAware && u.load_report.kind == LoadReportKind::kNone) {
    const Entry* e = f.get("balance");
    r.error(e->value, key_path(path, "balance"),
            "load_aware needs load_report: cutline or vllm (what the endpoints report)");
    ok = false;
  }
  if (u.spawn && (u.endpoints.size() > 1 || u.dns)) {
    r.error(f.get("spawn")->key, key_path(path, "spawn"),
            "spawn starts one process; it cannot be combined with several endpoints");
    ok = false;
  }
  return ok;
}

}  // namespace cutline::policy::detail
