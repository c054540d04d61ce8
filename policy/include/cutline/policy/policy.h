#pragma once
// Policy: the whole gateway configuration, validated and immutable. One YAML file (documented
// key by key in policy/README.md) is loaded by load_policy_file() (loader.h) into a Policy; the
// gateway holds it as std::shared_ptr<const Policy> (PolicyHolder, policy_holder.h) and never
// touches YAML at run time. Every value remembers where it was written (YamlRef) so that each
// number a request gets can be traced to a line of the file.
//
// Defaults below are the documented ones (README.md); a value that was not written in the file
// has a YamlRef with line 0.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cutline/policy/api_key.h"
#include "cutline/policy/source.h"

namespace cutline::policy {

// A positive integer limit (tokens, ms, count) and where it was written.
struct Limit {
  int64_t value = 0;
  YamlRef ref;
};

// ---- listeners -------------------------------------------------------------------------------

enum class TlsVersion : uint8_t { kTls12, kTls13 };

// listen[i].tls. Files are not opened by the policy library; the gateway's TLS layer
// loads and checks them and refuses the reload when they are unreadable or mismatched.
struct ListenerTls {
  std::string cert_file;
  std::string key_file;
  TlsVersion min_version = TlsVersion::kTls12;
  YamlRef ref;
};

struct Listener {
  std::string address;  // as written: "127.0.0.1:8080", "[::1]:8080", "0.0.0.0:443"
  std::string host;     // "127.0.0.1", "::1" (brackets removed)
  uint16_t port = 0;    // 0 = an ephemeral port (tests)
  std::optional<ListenerTls> tls;
  YamlRef ref;
};

struct ApiKey {
  KeyDigest digest{};
  // How it was given, safe to print: "sha256:1a2b3c4d…" (first 8 hex digits) or "env:VARNAME".
  std::string label;
  YamlRef ref;
};

// admin: the gateway's admin listener. Default address 127.0.0.1:8091 (":PORT" also binds
// loopback). With a token, every path but /healthz needs "Authorization: Bearer <token>".
struct AdminListener {
  std::string address;
  std::string host;
  uint16_t port = 0;
  std::optional<ApiKey> token;  // "sha256:<hex>" or "env:VARNAME", as tenants' keys
  YamlRef ref;
};

// ---- upstreams -------------------------------------------------------------------------------

enum class UpstreamScheme : uint8_t { kHttp, kHttps, kH2c };
enum class UpstreamProtocol : uint8_t {
  kAuto,   // http:// -> HTTP/1.1, https:// -> ALPN (h2 preferred), h2c:// -> HTTP/2 prior knowledge
  kHttp1,  // force HTTP/1.1
  kHttp2,  // force HTTP/2 (h2 over TLS, h2c on cleartext)
};

// TLS to a server the gateway connects to (upstreams[i].tls for https://, budget_store.tls for
// rediss://): how its certificate is verified, and an optional client certificate.
struct ClientTls {
  std::string ca_file;      // empty = the system CA store
  std::string cert_file;    // client certificate (mTLS); empty = none
  std::string key_file;     // its key; set together with cert_file
  std::string server_name;  // SNI and name to verify; empty = the URL's host
  bool verify = true;       // false only for tests; documented as dangerous
};

// upstreams[i].spawn: the gateway starts and supervises this process (co-located backend).
struct Spawn {
  std::vector<std::string> command;                      // argv, command[0] resolved through PATH
  int64_t ready_timeout_ms = 60000;                      // until the upstream answers; default 60s
  std::vector<std::pair<std::string, std::string>> env;  // added to the gateway's environment
  YamlRef ref;
};

// A credential read at load from env:VARNAME or file:PATH. `value` goes to the upstream and
// nowhere else; `label` is what logs, errors and /v1/cutline/policy show.
struct Secret {
  std::string value;
  std::string label;  // "env:OPENAI_API_KEY" or "file:/run/secrets/openai"
};

struct UpstreamHeader {
  std::string name;  // as written
  Secret value;
};

// ---- upstream pools (upstreams[i].endpoints and the keys that shape picking) ----------------

// One address of an upstream: a URL of `endpoints:` (or the single `url:`), split like
// Upstream::url. Every endpoint of an upstream has the same scheme.
struct UpstreamEndpoint {
  std::string url;  // as written, or "scheme://ip:port" for a resolved DNS address
  std::string host;
  uint16_t port = 0;
  std::string base_path;
  YamlRef ref;
};

// upstreams[i].endpoints.dns: every address a name resolves to (a Kubernetes headless
// Service gives one per pod), re-resolved every resolve_interval_ms, asynchronously.
struct DnsEndpoints {
  std::string name;  // the host name to resolve
  uint16_t port = 0;
  std::string base_path;               // "" or "/v1"
  int64_t resolve_interval_ms = 5000;  // default 5s
  YamlRef ref;
};

enum class Balance : uint8_t {
  kLeastRequest,  // power of two choices on outstanding requests (default)
  kLoadAware,     // lowest reported load (needs load_report)
  kRoundRobin,
};
std::string_view to_string(Balance balance);

enum class AffinityUnit : uint8_t { kBytes, kTokens };
// upstreams[i].prefix_affinity: requests whose rendered prompts share their first `length`
// bytes (or pre-tokenizer words) go to the same endpoint while its outstanding requests stay
// within max_load_factor times the average (bounded-load consistent hashing).
struct PrefixAffinity {
  AffinityUnit unit = AffinityUnit::kBytes;
  int64_t length = 0;             // > 0
  double max_load_factor = 1.25;  // >= 1.0
  YamlRef ref;
};

// upstreams[i].health: active checks, one GET per endpoint per interval; a non-2xx answer, a
// transport error or no answer within timeout_ms marks the endpoint unhealthy until a check
// passes again. An endpoint not checked yet counts as healthy. Below panic_threshold percent of
// the pool healthy and not ejected, the pool routes to every endpoint not ejected (panic).
struct HealthCheck {
  std::string path = "/health";
  int64_t interval_ms = 5000;
  int64_t timeout_ms = 2000;
  int64_t panic_threshold = 50;  // percent, 0..100; 0: never
  YamlRef ref;
};

// upstreams[i].outlier: passive ejection. `consecutive_failures` connect failures or 5xx
// answers in a row eject the endpoint for base_ejection_ms * 2^(ejections so far), at most
// max_ejection_ms — unless max_ejection_percent of the pool's endpoints (rounded down) are
// ejected already: then it stays in service (a pool of two keeps one at the default 50).
struct OutlierDetection {
  int64_t consecutive_failures = 5;
  int64_t base_ejection_ms = 30000;
  int64_t max_ejection_ms = 300000;
  int64_t max_ejection_percent = 50;  // 0..100
  YamlRef ref;
};

enum class LoadReportKind : uint8_t {
  kNone,
  kCutline,  // GET /v1/cutline/state (queue depth, running, KV blocks, resident models)
  kVllm,     // GET /metrics (vllm:num_requests_waiting, _running, kv_cache_usage_perc)
  kAuto,     // per endpoint: whichever of the two it answers (a pool of several kinds)
};
std::string_view to_string(LoadReportKind kind);
struct LoadReport {
  LoadReportKind kind = LoadReportKind::kNone;
  int64_t interval_ms = 1000;     // poll period
  int64_t stale_after_ms = 3000;  // a report older than this is ignored
  YamlRef ref;
};

struct Upstream {
  std::string name;
  std::string url;  // as written
  UpstreamScheme scheme = UpstreamScheme::kHttp;
  std::string host;                 // brackets removed for IPv6
  uint16_t port = 0;                // the URL's port, or 80 / 443 by scheme
  std::string base_path;            // path prefix without trailing '/', "" when none ("/v1" in
                                    // "http://h:1/v1" is kept: requests go to base_path + route)
  std::vector<std::string> models;  // globs; default ["*"]
  UpstreamProtocol protocol = UpstreamProtocol::kAuto;
  ClientTls tls;
  std::optional<Spawn> spawn;
  int64_t connect_timeout_ms = 5000;  // default 5s
  // The longest wait for an attempt's response head once the request is sent (default 60s);
  // 0 = off (`response_head_timeout: off`).
  int64_t response_head_timeout_ms = 60000;
  // Sent on every request to this upstream: api_key as `Authorization: Bearer <key>` (it
  // replaces any Authorization the request had), then each header (replacing one of that name).
  std::optional<Secret> api_key;
  std::vector<UpstreamHeader> headers;
  // The pool. `url:` gives one endpoint (url/host/port/base_path above mirror endpoints[0]);
  // `endpoints: [URL, ...]` several; `endpoints: {dns: ...}` resolved ones (then endpoints is
  // empty and url/host/port name the DNS name).
  std::vector<UpstreamEndpoint> endpoints;
  std::optional<DnsEndpoints> dns;
  Balance balance = Balance::kLeastRequest;
  std::optional<PrefixAffinity> prefix_affinity;
  // Defaults: on for `endpoints:` pools, off for a single `url:` (unless written).
  std::optional<HealthCheck> health;
  std::optional<OutlierDetection> outlier;
  LoadReport load_report;
  YamlRef ref;
};

// ---- tenants ---------------------------------------------------------------------------------

struct Tenant {
  std::string name;
  std::vector<ApiKey> api_keys;
  YamlRef ref;
};

// ---- rules (policies[i]) ---------------------------------------------------------------------

struct HeaderMatch {
  std::string name;     // lower-case header name
  std::string pattern;  // glob on the header's value
};

// policies[i].match. Every list defaults to ["*"]; headers default to none. A request matches
// when each list has a glob matching it and every header constraint holds.
struct Match {
  std::vector<std::string> tenants{"*"};
  std::vector<std::string> models{"*"};
  std::vector<std::string> routes{"*"};
  std::vector<HeaderMatch> headers;
  YamlRef ref;

  // Matches every request: tenants, models and routes are all "*" and no header constraint.
  bool catch_all() const;
};

enum class PoolExhausted : uint8_t {
  kReject,  // 429 admission_rejected with Retry-After (default)
  kClamp,   // lower the max output tokens to what remains (labeled gateway_budget)
};

// policies[i].budget.adaptive[k]: when the rule's admission queue is deeper than
// queue_depth_gt at decide time, max output tokens is lowered to max_output_tokens.
struct AdaptiveStep {
  int64_t queue_depth_gt = 0;  // >= 0
  Limit max_output_tokens;
  YamlRef ref;  // of the step itself ("policies[0].budget.adaptive[0]")
};

struct Budget {
  std::optional<Limit> max_output_tokens;         // clamp of the request's max_tokens
  std::optional<Limit> tenant_tokens_per_minute;  // token bucket per (rule, tenant)
  std::optional<Limit> global_tokens_per_minute;  // token bucket per rule, all tenants
  PoolExhausted on_pool_exhausted = PoolExhausted::kReject;
  YamlRef on_pool_exhausted_ref;
  // With on_pool_exhausted: clamp, a request is rejected rather than clamped below this.
  Limit min_output_tokens{1, {}};
  std::vector<AdaptiveStep> adaptive;
  // Most completions one request may ask for (max of n and best_of); above it: 400
  // invalid_request. Absent = any number, each reserved and counted in full.
  std::optional<Limit> max_choices;
};

enum class Priority : uint8_t { kInteractive, kBatch };  // interactive is served first
std::string_view to_string(Priority priority);

// policies[i].admission. Rules with the same `group` share one admission queue (so priority
// classes compete for the same slots); the group defaults to the rule's name.
struct Admission {
  std::string group;
  size_t group_index = 0;               // into Policy::admission_groups
  std::optional<Limit> max_concurrent;  // absent = unlimited (no queue)
  Limit queue_depth;                    // waiters allowed; default 0 = no queue (reject at once)
  Limit queue_timeout_ms;               // default 30s
  Priority priority = Priority::kInteractive;
  YamlRef priority_ref;
};

enum class CutMode : uint8_t {
  kLabel,  // end the response normally with finish_reason + the cutline object (default)
  kError,  // an OpenAI-style error (SSE error event, or 504/429 before any byte was sent)
  // Enforce nothing: the request goes upstream and through admission as if the rule had no
  // limits, and every cut the rule would have made is recorded (StopRecord::would_cut, the
  // access log, cutline_would_cut_total). A reload switches a rule between modes.
  kObserve,
};
enum class FinishReasonStyle : uint8_t {
  kLength,  // "length" for every serving cut (OpenAI-compatible, default)
  kCause,   // the cause name itself ("gateway_deadline")
};
std::string_view to_string(CutMode mode);
std::string_view to_string(FinishReasonStyle style);

struct OnCut {
  CutMode mode = CutMode::kLabel;
  FinishReasonStyle finish_reason = FinishReasonStyle::kLength;
  YamlRef ref;
};

struct Rule {
  std::string name;
  size_t index = 0;  // position in policies[]
  YamlRef ref;       // "policies[0]" and the line of the list item
  Match match;
  std::string upstream;  // optional override of model-based routing; "" = route by model
  YamlRef upstream_ref;
  Budget budget;
  std::optional<Limit> deadline_ms;      // arrival -> last byte
  std::optional<Limit> ttft_timeout_ms;  // arrival -> first content token
  std::optional<Limit> idle_timeout_ms;  // longest gap between tokens
  Admission admission;
  OnCut on_cut;
  // The client's own Authorization header goes to the upstream only when a rule says so (with
  // tenants configured it is the tenant's gateway key; without, it may be the client's upstream
  // key). Default: never forwarded; the upstream's own api_key, when set, is sent instead.
  bool forward_client_key = false;
};

// One admission queue shared by the rules naming it.
struct AdmissionGroup {
  std::string name;
  std::optional<int64_t> max_concurrent;  // absent = unlimited
  int64_t queue_depth = 0;
};

// ---- top level -------------------------------------------------------------------------------

enum class BudgetStoreKind : uint8_t { kMemory, kRedis };
struct BudgetStore {
  BudgetStoreKind kind = BudgetStoreKind::kMemory;
  std::string url;  // as written ("memory", "redis://host:port[/db]" or "rediss://...")
  std::string host;
  uint16_t port = 6379;
  int db = 0;
  // The map form ({url, user, password, on_error, timeout, reservation_ttl}) adds these.
  std::string user;          // ACL user ("" = the default user, AUTH with the password only)
  std::string password;      // read from `env:VARNAME` at load; "" = no AUTH
  bool fail_closed = false;  // on_error: closed refuses requests while Redis is unreachable
  int64_t timeout_ms = 200;  // connect and per-command timeout (asynchronous store)
  // A reservation not settled within this time (a gateway that crashed) is refunded by Redis.
  int64_t reservation_ttl_ms = 900000;  // default 15m
  bool use_tls = false;                 // rediss://
  ClientTls tls;                        // budget_store.tls (rediss:// only)
  YamlRef ref;
};

enum class AccessLogKind : uint8_t { kStdout, kFile, kOff };
struct AccessLog {
  AccessLogKind kind = AccessLogKind::kStdout;
  std::string path;  // for kFile
  YamlRef ref;
};

// What any client may cost the gateway before a policy rule applies (README: `limits`). Read at
// start; a reload does not change them.
struct Limits {
  // Request body; over it -> 413. Default 2 MiB: a chat request with a 128k-token context is
  // about 1 MiB of JSON; twice that leaves room without letting one request hold 16 MiB.
  int64_t max_body_bytes = 2 << 20;
  int64_t max_header_bytes = 64 << 10;  // all request headers; over it -> 431. Default 64 KiB
  // The head must arrive within this of its first byte, the body within this of the head's end,
  // however the bytes trickle in; past it -> 408.
  int64_t request_header_timeout_ms = 10000;
  int64_t request_body_timeout_ms = 30000;
  // Process-wide: client connections open at once (past it a new one gets 503 and is closed) and
  // request bytes held in memory (past it a new request gets 503).
  int64_t max_connections = 16384;
  int64_t max_request_memory_bytes = 256 << 20;
  // Per HTTP/2 connection: streams whose request is still arriving, the body bytes they hold
  // (past either: 503 on the new stream), and client RST_STREAMs per second (past it: GOAWAY and
  // close; 0 = unlimited).
  int64_t http2_max_unfinished_streams = 100;
  int64_t http2_max_buffered_request_bytes = 8 << 20;
  int64_t http2_max_resets_per_s = 100;

  bool operator==(const Limits&) const = default;
};

// passthrough: what happens to a request on a route the gateway does not run itself (not a
// completion, responses, embeddings or models route) that no rule matches.
enum class PassthroughMode : uint8_t {
  kDeny,   // 403 with a stop record (default): nothing reaches an upstream outside the policy
  kAllow,  // forwarded to an upstream unchanged
};

struct Policy {
  std::string source_file;  // as given to the loader

  std::vector<Listener> listen;
  std::optional<AdminListener> admin;  // absent = no admin listener
  std::vector<Upstream> upstreams;
  std::vector<Tenant> tenants;  // empty = no authentication (every request is tenant "")
  std::vector<Rule> rules;      // policies[], first match wins
  std::vector<AdmissionGroup> admission_groups;
  BudgetStore budget_store;
  AccessLog access_log;
  Limits limits;
  PassthroughMode passthrough = PassthroughMode::kDeny;
  // Globs of the upstreams' operational paths (/metrics, /healthz, /health, /readyz,
  // /v1/cutline/*) that passthrough may forward; every other one is answered 404 by the gateway.
  std::vector<std::string> passthrough_operational;
  // Peer IPs whose X-Forwarded-For / Forwarded headers are kept (a load balancer in front);
  // from anyone else they are dropped and replaced by the peer's own address.
  std::vector<std::string> trusted_proxies;

  const Rule* find_rule(std::string_view name) const;
  const Upstream* find_upstream(std::string_view name) const;
  const Tenant* find_tenant(std::string_view name) const;
  // The first upstream one of whose model globs matches `model`, or nullptr.
  const Upstream* upstream_for_model(std::string_view model) const;
  // The upstream for a request matched by `rule`: the rule's override, else by model.
  const Upstream* route(const Rule& rule, std::string_view model) const;
  bool requires_auth() const { return !tenants.empty(); }
};

}  // namespace cutline::policy
