// Loader sections for the network side: listen, admin, upstreams, budget_store, access_log,
// limits (load_sections.h).
#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>

#include "load_sections.h"

namespace cutline::policy::detail {

namespace {

std::optional<uint16_t> parse_port(std::string_view s) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  unsigned v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v > 65535) return std::nullopt;
  return static_cast<uint16_t>(v);
}

// Host part of an authority: "[v6]" or a name/IPv4 without ':' '/' '@' or spaces.
bool valid_host(std::string_view host) {
  if (host.empty()) return false;
  for (char c : host) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '/' || c == '@' || c == '?' || c == '#') return false;
  }
  return true;
}

// 127.0.0.0/8, ::1, an IPv4-mapped 127.x or "localhost": an address only this machine reaches.
bool loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

// Splits "host:port" / "[v6]:port" / "host" (port optional when allow_no_port).
std::optional<HostPort> split_authority(std::string_view text, bool allow_no_port,
                                        uint16_t default_port) {
  HostPort hp;
  std::string_view rest;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos || close == 1) return std::nullopt;
    hp.host = std::string(text.substr(1, close - 1));
    if (hp.host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos) {
      return std::nullopt;
    }
    rest = text.substr(close + 1);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      hp.host = std::string(text);
      rest = {};
    } else {
      hp.host = std::string(text.substr(0, colon));
      rest = text.substr(colon);
    }
    if (hp.host.find(':') != std::string::npos) return std::nullopt;  // bare IPv6
    if (!valid_host(hp.host)) return std::nullopt;
  }
  if (rest.empty()) {
    if (!allow_no_port) return std::nullopt;
    hp.port = default_port;
    return hp;
  }
  if (rest[0] != ':') return std::nullopt;
  auto port = parse_port(rest.substr(1));
  if (!port) return std::nullopt;
  hp.port = *port;
  return hp;
}

std::optional<HostPort> read_address(YamlReader& r, const YAML::Node& node,
                                     const std::string& path) {
  auto s = r.string(node, path);
  if (!s) return std::nullopt;
  auto hp = parse_host_port(*s);
  if (!hp) {
    r.error(node, path,
            "expected HOST:PORT such as 127.0.0.1:8080 or [::1]:8080, got " + quote(*s));
  }
  return hp;
}

void load_listener_tls(YamlReader& r, const YAML::Node& node, const std::string& path,
                       Listener& l) {
  auto f = r.map(node, path, keys::kListenerTls);
  if (!f) return;
  ListenerTls tls;
  tls.ref = r.ref(node, path);
  bool ok = true;
  if (auto* e = f->get("cert")) {
    if (auto s = r.string(e->value, key_path(path, "cert")))
      tls.cert_file = *s;
    else
      ok = false;
  } else {
    r.error(node, path, "missing required key \"cert\"");
    ok = false;
  }
  if (auto* e = f->get("key")) {
    if (auto s = r.string(e->value, key_path(path, "key")))
      tls.key_file = *s;
    else
      ok = false;
  } else {
    r.error(node, path, "missing required key \"key\"");
    ok = false;
  }
  if (auto* e = f->get("min_version")) {
    auto c = r.choice(e->value, key_path(path, "min_version"), keys::kTlsVersions);
    if (c)
      tls.min_version = *c == 0 ? TlsVersion::kTls12 : TlsVersion::kTls13;
    else
      ok = false;
  }
  if (ok) l.tls = std::move(tls);
}

}  // namespace

std::optional<HostPort> parse_host_port(std::string_view text) {
  return split_authority(text, /*allow_no_port=*/false, 0);
}

void load_listeners(YamlReader& r, const YAML::Node& node, Policy& p) {
  const std::string base = "listen";
  auto items = r.list(node, base);
  if (!items) return;
  if (items->empty()) r.error(node, base, "must list at least one listener");
  for (size_t i = 0; i < items->size(); ++i) {
    const YAML::Node& item = (*items)[i];
    const std::string path = index_path(base, i);
    auto f = r.map(item, path, keys::kListener);
    if (!f) continue;
    Listener l;
    l.ref = r.ref(item, path);
    const Entry* addr = f->get("address");
    if (!addr) {
      r.error(item, path, "missing required key \"address\"");
      continue;
    }
    auto hp = read_address(r, addr->value, key_path(path, "address"));
    if (!hp) continue;
    l.address = addr->value.Scalar();
    l.host = hp->host;
    l.port = hp->port;
    if (auto* e = f->get("tls")) load_listener_tls(r, e->value, key_path(path, "tls"), l);
    for (const auto& other : p.listen) {
      if (other.host == l.host && other.port == l.port && l.port != 0) {
        r.error(addr->value, key_path(path, "address"),
                "duplicate address: " + other.ref.path + " (line " +
                    std::to_string(other.ref.line) + ") listens there already");
      }
    }
    p.listen.push_back(std::move(l));
  }
}

void load_admin(YamlReader& r, const YAML::Node& node, const LoadOptions& options, Policy& p) {
  auto f = r.map(node, "admin", keys::kAdmin);
  if (!f) return;
  AdminListener a;
  a.ref = r.ref(node, "admin");
  if (const Entry* addr = f->get("address")) {
    // ":8091" binds loopback: the admin listener is reachable from elsewhere only when an
    // address says so.
    const std::string& text = addr->value.Scalar();
    std::optional<HostPort> hp;
    if (!text.empty() && text[0] == ':') {
      hp = parse_host_port("127.0.0.1" + text);
      if (!hp)
        r.error(addr->value, "admin.address", "expected HOST:PORT or :PORT, got " + quote(text));
    } else {
      hp = read_address(r, addr->value, "admin.address");
    }
    if (!hp) return;
    a.address = text[0] == ':' ? "127.0.0.1" + text : text;
    a.host = hp->host;
    a.port = hp->port;
    a.ref = r.ref(addr->value, "admin.address");
  } else {
    a.address = "127.0.0.1:8091";
    a.host = "127.0.0.1";
    a.port = 8091;
  }
  if (const Entry* t = f->get("token")) {
    auto key = read_api_key(r, t->value, "admin.token", options);
    if (!key) return;
    a.token = std::move(*key);
  } else if (!loopback_host(a.host)) {
    // The admin paths show the policy, the upstreams and the metrics, and /v1/cutline/reload
    // swaps the policy: open to the network only behind a token.
    r.warn(a.ref, "the admin listener binds " + quote(a.host) +
                      ", reachable from other machines, without admin.token: anyone who reaches it "
                      "reads the policy and the metrics and can reload it; set admin.token, bind "
                      "127.0.0.1, or make sure a firewall lets only the scraper in");
  }
  p.admin = std::move(a);
}

bool parse_endpoint_url(YamlReader& r, const YAML::Node& node, const std::string& path,
                        const std::string& url, UpstreamScheme& scheme_out, UpstreamEndpoint& out) {
  auto fail = [&](const std::string& why) {
    r.error(node, path, why);
    return false;
  };
  size_t sep = url.find("://");
  if (sep == std::string::npos) {
    return fail("expected a URL such as http://127.0.0.1:8081, got " + quote(url));
  }
  const std::string scheme = url.substr(0, sep);
  uint16_t default_port;
  if (scheme == "http") {
    scheme_out = UpstreamScheme::kHttp;
    default_port = 80;
  } else if (scheme == "https") {
    scheme_out = UpstreamScheme::kHttps;
    default_port = 443;
  } else if (scheme == "h2c") {
    scheme_out = UpstreamScheme::kH2c;
    default_port = 80;
  } else {
    return fail("unsupported scheme " + quote(scheme) + " (use http://, https:// or h2c://)");
  }
  std::string_view rest = std::string_view(url).substr(sep + 3);
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view tail = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    return fail("credentials in upstream URLs are not supported");
  }
  if (tail.find_first_of("?#") != std::string_view::npos) {
    return fail("an upstream URL may not carry a query or fragment");
  }
  auto hp = split_authority(authority, /*allow_no_port=*/true, default_port);
  if (!hp) return fail("invalid host or port in " + quote(url));
  out.url = url;
  out.host = hp->host;
  out.port = hp->port;
  while (!tail.empty() && tail.back() == '/') tail.remove_suffix(1);
  out.base_path = std::string(tail);
  out.ref = r.ref(node, path);
  return true;
}

std::optional<HostPort> parse_host_port_default(std::string_view text, uint16_t default_port) {
  return split_authority(text, /*allow_no_port=*/default_port != 0, default_port);
}

namespace {

// Parses an upstream URL into u's scheme/host/port/base_path; false (with an error) if invalid.
bool parse_upstream_url(YamlReader& r, const YAML::Node& node, const std::string& path,
                        const std::string& url, Upstream& u) {
  UpstreamEndpoint e;
  if (!parse_endpoint_url(r, node, path, url, u.scheme, e)) return false;
  u.host = e.host;
  u.port = e.port;
  u.base_path = e.base_path;
  u.endpoints.push_back(std::move(e));
  return true;
}

bool load_spawn(YamlReader& r, const YAML::Node& node, const std::string& path, Upstream& u) {
  auto f = r.map(node, path, keys::kSpawn);
  if (!f) return false;
  Spawn s;
  s.ref = r.ref(node, path);
  bool ok = true;
  if (auto* e = f->get("command")) {
    if (auto l = r.string_list(e->value, key_path(path, "command")))
      s.command = *l;
    else
      ok = false;
  } else {
    r.error(node, path, "missing required key \"command\"");
    ok = false;
  }
  if (auto* e = f->get("ready_timeout")) {
    if (auto d = r.duration(e->value, key_path(path, "ready_timeout")))
      s.ready_timeout_ms = *d;
    else
      ok = false;
  }
  if (auto* e = f->get("env")) {
    const std::string env_path = key_path(path, "env");
    if (!e->value.IsMap()) {
      r.error(e->value, env_path,
              "expected a map of NAME: value, got " + std::string(describe(e->value)));
      ok = false;
    } else {
      for (auto it = e->value.begin(); it != e->value.end(); ++it) {
        const YAML::Node k = it->first;
        const YAML::Node v = it->second;
        if (!k.IsScalar() || k.Scalar().empty() ||
            k.Scalar().find_first_of("=") != std::string::npos) {
          r.error(k, env_path, "environment variable names must be non-empty strings without '='");
          ok = false;
          continue;
        }
        if (!v.IsScalar()) {
          r.error(v, key_path(env_path, k.Scalar()),
                  "expected a string, got " + std::string(describe(v)));
          ok = false;
          continue;
        }
        s.env.emplace_back(k.Scalar(), v.Scalar());
      }
    }
  }
  if (ok) u.spawn = std::move(s);
  return ok;
}

bool load_upstream_tls(YamlReader& r, const YAML::Node& node, const std::string& path,
                       Upstream& u) {
  bool ok = load_client_tls(r, node, path, u.tls);
  if (u.scheme != UpstreamScheme::kHttps) {
    r.error(node, path, "tls applies to https:// upstreams only");
    ok = false;
  }
  return ok;
}

// One upstreams[i] entry into `u` (u.name empty when it has none); false when it has errors.
bool load_upstream(YamlReader& r, const YAML::Node& item, const std::string& path,
                   const LoadOptions& options, const Policy& p, Upstream& u) {
  auto f = r.map(item, path, keys::kUpstream);
  if (!f) return false;
  u.ref = r.ref(item, path);
  bool ok = true;
  const Entry* name = f->get("name");
  if (!name) {
    r.error(item, path, "missing required key \"name\"");
    ok = false;
  } else if (auto n = r.name(name->value, key_path(path, "name"))) {
    u.name = *n;
    if (const Upstream* other = p.find_upstream(u.name)) {
      r.error(name->value, key_path(path, "name"),
              "duplicate upstream name " + quote(u.name) + " (first at " + other->ref.path +
                  ", line " + std::to_string(other->ref.line) + ")");
      ok = false;
    }
  } else {
    ok = false;
  }
  const Entry* url = f->get("url");
  const Entry* endpoints = f->get("endpoints");
  if (url && endpoints) {
    r.error(endpoints->key, key_path(path, "endpoints"),
            "give either \"url\" (one endpoint) or \"endpoints\" (a pool), not both");
    ok = false;
  } else if (endpoints) {
    ok = load_endpoints(r, endpoints->value, key_path(path, "endpoints"), u) && ok;
  } else if (!url) {
    r.error(item, path, "missing required key \"url\" (or \"endpoints\")");
    ok = false;
  } else if (auto s = r.string(url->value, key_path(path, "url"))) {
    u.url = *s;
    ok = parse_upstream_url(r, url->value, key_path(path, "url"), *s, u) && ok;
  } else {
    ok = false;
  }
  if (auto* e = f->get("models")) {
    if (auto l = r.string_list(e->value, key_path(path, "models")))
      u.models = *l;
    else
      ok = false;
  } else {
    u.models = {"*"};
  }
  if (auto* e = f->get("protocol")) {
    const std::string pp = key_path(path, "protocol");
    if (auto c = r.choice(e->value, pp, keys::kProtocols)) {
      u.protocol = static_cast<UpstreamProtocol>(*c);
      if (u.protocol == UpstreamProtocol::kHttp1 && u.scheme == UpstreamScheme::kH2c) {
        r.error(e->value, pp, "h2c:// upstreams speak HTTP/2; protocol http1 contradicts it");
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  if (auto* e = f->get("connect_timeout")) {
    if (auto d = r.duration(e->value, key_path(path, "connect_timeout"))) {
      u.connect_timeout_ms = *d;
    } else {
      ok = false;
    }
  }
  if (auto* e = f->get("response_head_timeout")) {
    if (e->value.IsScalar() && e->value.Scalar() == keys::kOff[0]) {
      u.response_head_timeout_ms = 0;
    } else if (auto d = r.duration(e->value, key_path(path, "response_head_timeout"))) {
      u.response_head_timeout_ms = *d;
    } else {
      ok = false;
    }
  }
  if (auto* e = f->get("tls")) ok = load_upstream_tls(r, e->value, key_path(path, "tls"), u) && ok;
  if (auto* e = f->get("spawn")) ok = load_spawn(r, e->value, key_path(path, "spawn"), u) && ok;
  ok = load_upstream_credentials(r, *f, path, options, u) && ok;
  ok = load_pool_keys(r, *f, path, endpoints != nullptr, u) && ok;
  return ok;
}

}  // namespace

bool load_client_tls(YamlReader& r, const YAML::Node& node, const std::string& path,
                     ClientTls& tls) {
  auto f = r.map(node, path, keys::kClientTls);
  if (!f) return false;
  bool ok = true;
  auto str = [&](std::string_view key, std::string& out) {
    if (auto* e = f->get(key)) {
      if (auto s = r.string(e->value, key_path(path, key)))
        out = *s;
      else
        ok = false;
    }
  };
  str("ca_file", tls.ca_file);
  str("cert", tls.cert_file);
  str("key", tls.key_file);
  str("server_name", tls.server_name);
  if (auto* e = f->get("verify")) {
    if (auto b = r.boolean(e->value, key_path(path, "verify")))
      tls.verify = *b;
    else
      ok = false;
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    r.error(node, path, "cert and key must be given together (client certificate)");
    ok = false;
  }
  return ok;
}

bool load_upstreams(YamlReader& r, const YAML::Node& node, const LoadOptions& options, Policy& p) {
  const std::string base = "upstreams";
  auto items = r.list(node, base);
  if (!items) return false;
  bool all_ok = true;
  if (items->empty()) {
    r.error(node, base, "must list at least one upstream");
    all_ok = false;
  }
  for (size_t i = 0; i < items->size(); ++i) {
    Upstream u;
    all_ok = load_upstream(r, (*items)[i], index_path(base, i), options, p, u) && all_ok;
    if (!u.name.empty()) p.upstreams.push_back(std::move(u));
  }
  return all_ok;
}

void load_budget_store(YamlReader& r, const YAML::Node& node, const LoadOptions& options,
                       Policy& p) {
  const std::string path = "budget_store";
  if (node.IsMap()) {
    load_budget_store_map(r, node, options, p);
    return;
  }
  auto s = r.string(node, path);
  if (!s) return;
  parse_budget_store_url(r, node, path, *s, p.budget_store);
}

bool parse_budget_store_url(YamlReader& r, const YAML::Node& node, const std::string& path,
                            const std::string& url, BudgetStore& out) {
  const std::optional<std::string> s = url;
  BudgetStore& p_store = out;
  BudgetStore b;
  b.url = *s;
  b.ref = r.ref(node, path);
  if (*s == "memory") {
    b.kind = BudgetStoreKind::kMemory;
    p_store = std::move(b);
    return true;
  }
  std::string_view kPrefix = "redis://";
  if (s->compare(0, 9, "rediss://") == 0) {
    kPrefix = "rediss://";
    b.use_tls = true;
  } else if (s->compare(0, kPrefix.size(), kPrefix) != 0) {
    r.error(
        node, path,
        "expected \"memory\", redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB], got " + quote(*s));
    return false;
  }
  std::string_view rest = std::string_view(*s).substr(kPrefix.size());
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (authority.find('@') != std::string_view::npos) {
    r.error(
        node, path,
        "credentials in the budget_store URL are not supported (use user and password: env:VAR)");
    return false;
  }
  auto hp = split_authority(authority, /*allow_no_port=*/true, 6379);
  if (!hp || hp->port == 0) {
    r.error(node, path, "invalid host or port in " + quote(*s));
    return false;
  }
  b.kind = BudgetStoreKind::kRedis;
  b.host = hp->host;
  b.port = hp->port;
  if (slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    int v = 0;
    auto [ptr, ec] = std::from_chars(db.data(), db.data() + db.size(), v);
    if (db.empty() || ec != std::errc() || ptr != db.data() + db.size() || v < 0 || v > 15) {
      r.error(node, path, "the database after '/' must be a number from 0 to 15, got " + quote(db));
      return false;
    }
    b.db = v;
  }
  p_store = std::move(b);
  return true;
}

void load_access_log(YamlReader& r, const YAML::Node& node, Policy& p) {
  const std::string path = "access_log";
  auto s = r.string(node, path);
  if (!s) return;
  AccessLog a;
  a.ref = r.ref(node, path);
  if (*s == "stdout") {
    a.kind = AccessLogKind::kStdout;
  } else if (*s == "off") {
    a.kind = AccessLogKind::kOff;
  } else {
    a.kind = AccessLogKind::kFile;
    a.path = *s;
  }
  p.access_log = std::move(a);
}

void load_limits(YamlReader& r, const YAML::Node& node, Policy& p) {
  auto f = r.map(node, "limits", keys::kLimits);
  if (!f) return;
  Limits& l = p.limits;
  const auto integer = [&](const char* key, int64_t min, int64_t& out) {
    if (auto* e = f->get(key)) {
      if (auto v = r.integer(e->value, std::string("limits.") + key, min)) out = *v;
    }
  };
  const auto duration = [&](const char* key, int64_t& out) {
    if (auto* e = f->get(key)) {
      if (auto v = r.duration(e->value, std::string("limits.") + key)) out = *v;
    }
  };
  integer("max_body_bytes", 1, l.max_body_bytes);
  integer("max_header_bytes", 1, l.max_header_bytes);
  duration("request_header_timeout", l.request_header_timeout_ms);
  duration("request_body_timeout", l.request_body_timeout_ms);
  integer("max_connections", 1, l.max_connections);
  integer("max_request_memory_bytes", 1, l.max_request_memory_bytes);
  integer("http2_max_unfinished_streams", 1, l.http2_max_unfinished_streams);
  integer("http2_max_buffered_request_bytes", 1, l.http2_max_buffered_request_bytes);
  integer("http2_max_resets_per_s", 0, l.http2_max_resets_per_s);
  if (l.max_request_memory_bytes < l.max_body_bytes) {
    if (auto* e = f->get("max_request_memory_bytes")) {
      r.error(e->value, "limits.max_request_memory_bytes",
              "must be at least limits.max_body_bytes (" + std::to_string(l.max_body_bytes) +
                  "), or no request of the largest allowed size could ever be served");
    }
  }
}

}  // namespace cutline::policy::detail
