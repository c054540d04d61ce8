#pragma once
// The policy loader's sections, one function per top-level key (loader.cc calls them in order:
// listeners and upstreams, tenants, then rules, which refer back to both). Private to
// policy/src.

#include <optional>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "cutline/policy/loader.h"
#include "cutline/policy/policy.h"
#include "yaml_reader.h"

namespace cutline::policy::detail {

// What the rules may refer to; a section that had errors is not used for reference checks
// (so one typo does not cascade into "unknown tenant" errors everywhere).
struct References {
  bool tenants_ok = true;
  bool upstreams_ok = true;
};

void load_listeners(YamlReader& r, const YAML::Node& node, Policy& p);
// admin: {address, token}. A bare ":PORT" (or no address) binds loopback.
void load_admin(YamlReader& r, const YAML::Node& node, const LoadOptions& options, Policy& p);
// An API key or token: "sha256:<64 hex>" or "env:VARNAME" (read, hashed, dropped).
std::optional<ApiKey> read_api_key(YamlReader& r, const YAML::Node& node, const std::string& path,
                                   const LoadOptions& options);
// Returns false when the section had errors.
bool load_upstreams(YamlReader& r, const YAML::Node& node, const LoadOptions& options, Policy& p);
// A secret given as env:VARNAME or file:PATH (load_credentials.cc); inline values are refused.
std::optional<Secret> read_secret(YamlReader& r, const YAML::Node& node, const std::string& path,
                                  const LoadOptions& options);
// upstreams[i].api_key and upstreams[i].headers.
bool load_upstream_credentials(YamlReader& r, const Fields& f, const std::string& path,
                               const LoadOptions& options, Upstream& u);
bool load_tenants(YamlReader& r, const YAML::Node& node, const LoadOptions& options, Policy& p);
void load_rules(YamlReader& r, const YAML::Node& node, const References& refs, Policy& p);
void load_budget_store(YamlReader& r, const YAML::Node& node, const LoadOptions& options,
                       Policy& p);
// budget_store's map form (load_budget_store.cc) and the URL both forms share.
void load_budget_store_map(YamlReader& r, const YAML::Node& node, const LoadOptions& options,
                           Policy& p);
// A `tls:` map of a client connection (upstreams[i].tls, budget_store.tls): files, name, verify.
bool load_client_tls(YamlReader& r, const YAML::Node& node, const std::string& path,
                     ClientTls& tls);
bool parse_budget_store_url(YamlReader& r, const YAML::Node& node, const std::string& path,
                            const std::string& url, BudgetStore& out);
void load_access_log(YamlReader& r, const YAML::Node& node, Policy& p);
void load_limits(YamlReader& r, const YAML::Node& node, Policy& p);

// "host:port" or "[v6]:port" -> host (brackets removed) and port; nullopt when malformed.
struct HostPort {
  std::string host;
  uint16_t port = 0;
};
std::optional<HostPort> parse_host_port(std::string_view text);
// "host:port", or "host" with default_port when that is not 0.
std::optional<HostPort> parse_host_port_default(std::string_view text, uint16_t default_port);

// An upstream URL (http://, https://, h2c://) into its scheme and endpoint; false with an
// error at `node` when malformed.
bool parse_endpoint_url(YamlReader& r, const YAML::Node& node, const std::string& path,
                        const std::string& url, UpstreamScheme& scheme, UpstreamEndpoint& out);

// upstreams[i].endpoints (load_endpoints.cc): a list of URLs or {dns: NAME:PORT, ...}. Fills
// u.endpoints or u.dns and u.url/scheme/host/port/base_path from the first one.
bool load_endpoints(YamlReader& r, const YAML::Node& node, const std::string& path, Upstream& u);
// The pool keys of upstreams[i] (balance, prefix_affinity, health, outlier, load_report) and
// their defaults; `pool` is true for an `endpoints:` upstream (health checks and ejection on).
bool load_pool_keys(YamlReader& r, const Fields& f, const std::string& path, bool pool,
                    Upstream& u);

}  // namespace cutline::policy::detail
