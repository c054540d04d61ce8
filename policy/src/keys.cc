// The policy document's keys (keys.h). policy/README.md says the same at more length; a key
// added here is accepted by the loader (which must then read it) and appears in the schema.
#include "cutline/policy/keys.h"

namespace cutline::policy::keys {

namespace {

// Patterns that mirror the loader's grammar (ECMA-262, as JSON Schema uses).
constexpr std::string_view kNamePattern = "^[A-Za-z0-9_.-]{1,128}$";
// HOST:PORT, IPv6 in brackets (parse_host_port in load_network.cc).
constexpr std::string_view kAddressPattern =
    "^(\\[[0-9A-Fa-f:.]+\\]|[^\\s:/@?#\\[\\]]+):[0-9]{1,5}$";
// Also ":PORT" (loopback).
constexpr std::string_view kAdminAddressPattern =
    "^(\\[[0-9A-Fa-f:.]+\\]|[^\\s:/@?#\\[\\]]*):[0-9]{1,5}$";
// parse_endpoint_url: a scheme, an authority without credentials, no query or fragment.
constexpr std::string_view kUrlPattern = "^(http|https|h2c)://[^/@?#\\s]+(/[^?#]*)?$";
// parse_budget_store_url: "memory", redis://HOST[:PORT][/DB] or rediss://... (TLS).
constexpr std::string_view kBudgetStoreUrlPattern = "^(memory|rediss?://[^/@\\s]+(/[0-9]{1,2})?)$";
// A match route: a path or a glob.
constexpr std::string_view kRoutePattern = "^[/*]";
// An HTTP token (header names).
constexpr std::string_view kTokenPattern = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";

constexpr KeySpec kListenerTlsKeys[] = {
    {.name = "cert", .required = true, .description = "Certificate chain file (PEM)."},
    {.name = "key", .required = true, .description = "Private key file (PEM)."},
    {.name = "min_version",
     .type = Type::kEnum,
     .description = "Lowest TLS version accepted from clients.",
     .default_value = "1.2",
     .choices = kTlsVersions},
};

constexpr KeySpec kListenerKeys[] = {
    {.name = "address",
     .required = true,
     .description = "HOST:PORT to listen on, IPv6 as [::1]:8080; port 0 picks a free port.",
     .pattern = kAddressPattern},
    {.name = "tls",
     .type = Type::kObject,
     .description = "Serve HTTPS on this listener.",
     .object = &kListenerTls},
};

constexpr KeySpec kAdminKeys[] = {
    {.name = "address",
     .description = "HOST:PORT of /metrics, /healthz, /readyz and /v1/cutline/*; :PORT binds "
                    "loopback.",
     .default_value = "127.0.0.1:8091",
     .pattern = kAdminAddressPattern},
    {.name = "token",
     .type = Type::kApiKey,
     .description = "Bearer token every admin path but /healthz then needs."},
};

constexpr KeySpec kClientTlsKeys[] = {
    {.name = "ca_file", .description = "CA bundle to verify the server (default: system CAs)."},
    {.name = "cert", .description = "Client certificate for mTLS (with key)."},
    {.name = "key", .description = "Client private key for mTLS (with cert)."},
    {.name = "server_name", .description = "SNI and the name verified (default: the URL's host)."},
    {.name = "verify",
     .type = Type::kBool,
     .description = "false disables certificate verification: tests only.",
     .default_value = "true"},
};

constexpr KeySpec kSpawnKeys[] = {
    {.name = "command",
     .required = true,
     .description = "argv of a process the gateway starts and supervises.",
     .list = true,
     .min_items = 1},
    {.name = "ready_timeout",
     .type = Type::kDuration,
     .description = "How long the process may take to answer.",
     .default_value = "60s"},
    {.name = "env",
     .type = Type::kMap,
     .description = "Extra environment variables.",
     .pattern = "^[^=]+$"},
};

constexpr KeySpec kDnsEndpointsKeys[] = {
    {.name = "dns",
     .required = true,
     .description = "NAME:PORT whose every address is an endpoint (a headless Service)."},
    {.name = "scheme",
     .type = Type::kEnum,
     .description = "Scheme of every endpoint.",
     .default_value = "http",
     .choices = kSchemes},
    {.name = "path", .description = "Path prefix prepended to routes.", .pattern = "^/[^?# ]*$"},
    {.name = "resolve_interval",
     .type = Type::kDuration,
     .description = "How often NAME is resolved again.",
     .default_value = "5s"},
};

constexpr KeySpec kPrefixAffinityKeys[] = {
    {.name = "bytes",
     .type = Type::kInteger,
     .description = "Prefix length in bytes of the rendered prompt (give bytes or tokens).",
     .min = 1},
    {.name = "tokens",
     .type = Type::kInteger,
     .description = "Prefix length in pre-tokenizer words (give bytes or tokens).",
     .min = 1},
    {.name = "max_load_factor",
     .type = Type::kNumber,
     .description = "Leave the preferred endpoint when it has more than this times the average "
                    "requests in flight.",
     .default_value = "1.25",
     .min = 1},
};

constexpr KeySpec kHealthKeys[] = {
    {.name = "path",
     .description = "Path checked; a non-2xx answer marks the endpoint unhealthy (vLLM, SGLang, "
                    "TGI, llama.cpp and Cutline backends answer /health).",
     .default_value = "/health",
     .pattern = "^/[^ \\r\\n]*$"},
    {.name = "interval",
     .type = Type::kDuration,
     .description = "Time between checks.",
     .default_value = "5s"},
    {.name = "timeout",
     .type = Type::kDuration,
     .description = "Longest wait for an answer (at most interval).",
     .default_value = "2s"},
    {.name = "panic_threshold",
     .type = Type::kInteger,
     .description = "Below this percent of the pool's endpoints healthy (and not ejected), "
                    "requests go to every endpoint not ejected, health ignored; 0 never (at "
                    "most 100).",
     .default_value = "50",
     .min = 0},
};

constexpr KeySpec kOutlierKeys[] = {
    {.name = "consecutive_failures",
     .type = Type::kInteger,
     .description = "Failures in a row that eject the endpoint.",
     .default_value = "5",
     .min = 1},
    {.name = "base_ejection",
     .type = Type::kDuration,
     .description = "First ejection; doubles with each ejection.",
     .default_value = "30s"},
    {.name = "max_ejection",
     .type = Type::kDuration,
     .description = "Longest ejection.",
     .default_value = "5m"},
    {.name = "max_ejection_percent",
     .type = Type::kInteger,
     .description = "Most of the pool ejected at once, in percent of its endpoints rounded down "
                    "(at most 100); past it a failing endpoint stays in service.",
     .default_value = "50",
     .min = 0},
};

constexpr KeySpec kLoadReportKeys[] = {
    {.name = "from",
     .type = Type::kEnum,
     .required = true,
     .description = "What the endpoints report: cutline (/v1/cutline/state), vllm (/metrics), "
                    "auto (each endpoint whichever of the two it answers) or none.",
     .choices = kLoadReportKinds},
    {.name = "interval",
     .type = Type::kDuration,
     .description = "Poll interval.",
     .default_value = "1s"},
    {.name = "stale_after",
     .type = Type::kDuration,
     .description = "A report older than this is not used (default: 3 intervals)."},
};

// The forms a key takes in place of its map.
constexpr KeySpec kEndpointUrls = {.name = "endpoints",
                                   .description = "A pool of URLs, one scheme for all.",
                                   .list = true,
                                   .min_items = 1,
                                   .pattern = kUrlPattern};
constexpr KeySpec kHealthOff = {
    .name = "health", .type = Type::kEnum, .description = "No active checks.", .choices = kOff};
constexpr KeySpec kOutlierOff = {
    .name = "outlier", .type = Type::kEnum, .description = "No ejection.", .choices = kOff};
constexpr KeySpec kResponseHeadTimeoutOff = {.name = "response_head_timeout",
                                             .type = Type::kEnum,
                                             .description = "No limit.",
                                             .choices = kOff};
constexpr KeySpec kLoadReportMap = {.name = "load_report",
                                    .type = Type::kObject,
                                    .description = "What endpoints report, and how often.",
                                    .object = &kLoadReport};
constexpr KeySpec kBudgetStoreUrl = {
    .name = "budget_store",
    .description =
        "memory (this process), or redis://HOST[:PORT][/DB] or rediss://... (TLS) "
        "shared by replicas.",
    .default_value = "memory",
    .pattern = kBudgetStoreUrlPattern};

constexpr KeySpec kUpstreamKeys[] = {
    {.name = "name", .type = Type::kName, .required = true, .description = "Unique name."},
    {.name = "url",
     .description = "http://HOST[:PORT][/PREFIX], https://... or h2c://... (give url or "
                    "endpoints).",
     .pattern = kUrlPattern},
    {.name = "endpoints",
     .type = Type::kObject,
     .description = "A pool: a list of URLs, or {dns: NAME:PORT} (give url or endpoints).",
     .object = &kDnsEndpoints,
     .alternative = &kEndpointUrls},
    {.name = "models",
     .description = "Globs of the model names served there.",
     .default_value = "*",
     .list = true,
     .min_items = 1},
    {.name = "protocol",
     .type = Type::kEnum,
     .description = "auto (by scheme and ALPN), http1 or h2.",
     .default_value = "auto",
     .choices = kProtocols},
    {.name = "connect_timeout",
     .type = Type::kDuration,
     .description = "Longest wait for a connection.",
     .default_value = "5s"},
    {.name = "response_head_timeout",
     .type = Type::kDuration,
     .description = "Longest wait for the response head once a request is sent (504), or off.",
     .default_value = "60s",
     .alternative = &kResponseHeadTimeoutOff},
    {.name = "tls",
     .type = Type::kObject,
     .description = "TLS to an https:// upstream.",
     .object = &kClientTls},
    {.name = "spawn",
     .type = Type::kObject,
     .description = "A process the gateway starts and supervises (co-located backend).",
     .object = &kSpawn},
    {.name = "api_key",
     .type = Type::kSecret,
     .description = "The upstream's key, sent as Authorization: Bearer."},
    {.name = "headers",
     .type = Type::kMap,
     .description = "Headers sent on every request to this upstream, each from a secret.",
     .pattern = kTokenPattern,
     .value = Type::kSecret},
    {.name = "balance",
     .type = Type::kEnum,
     .description = "How an endpoint is picked (load_aware needs load_report).",
     .default_value = "least_request",
     .choices = kBalances},
    {.name = "prefix_affinity",
     .type = Type::kObject,
     .description = "Requests sharing a prompt prefix go to the same endpoint.",
     .object = &kPrefixAffinity},
    {.name = "health",
     .type = Type::kObject,
     .description = "Active health checks (on for endpoints, off for url), or off.",
     .object = &kHealth,
     .alternative = &kHealthOff},
    {.name = "outlier",
     .type = Type::kObject,
     .description = "Ejection after failures in a row (on for endpoints, off for url), or off.",
     .object = &kOutlier,
     .alternative = &kOutlierOff},
    {.name = "load_report",
     .type = Type::kEnum,
     .description = "What endpoints report about their load.",
     .default_value = "none",
     .choices = kLoadReportKinds,
     .alternative = &kLoadReportMap},
};

constexpr KeySpec kTenantKeys[] = {
    {.name = "name", .type = Type::kName, .required = true, .description = "Unique name."},
    {.name = "api_keys",
     .type = Type::kApiKey,
     .required = true,
     .description = "The tenant's keys: sha256:<64 hex> digests or env:VARNAME.",
     .list = true,
     .min_items = 1},
};

constexpr KeySpec kMatchKeys[] = {
    {.name = "tenants",
     .description = "Globs of tenant names; plain names must be configured tenants.",
     .default_value = "*",
     .list = true,
     .min_items = 1},
    {.name = "models",
     .description = "Globs of the request's model.",
     .default_value = "*",
     .list = true,
     .min_items = 1},
    {.name = "routes",
     .description = "Request paths or globs, e.g. /v1/chat/completions.",
     .default_value = "*",
     .list = true,
     .min_items = 1,
     .pattern = kRoutePattern},
    {.name = "headers",
     .type = Type::kMap,
     .description = "header-name: glob; every one must match.",
     .pattern = kTokenPattern},
};

constexpr KeySpec kAdaptiveWhenKeys[] = {
    {.name = "queue_depth_gt",
     .type = Type::kInteger,
     .required = true,
     .description = "The step applies while the admission queue holds more than this.",
     .min = 0},
};

constexpr KeySpec kAdaptiveStepKeys[] = {
    {.name = "when",
     .type = Type::kObject,
     .required = true,
     .description = "When the step applies.",
     .object = &kAdaptiveWhen},
    {.name = "max_output_tokens",
     .type = Type::kInteger,
     .required = true,
     .description = "Output tokens while the step applies (below budget.max_output_tokens).",
     .min = 1},
};

constexpr KeySpec kBudgetKeys[] = {
    {.name = "max_output_tokens",
     .type = Type::kInteger,
     .description = "Clamp of the request's max_tokens / max_completion_tokens.",
     .min = 1},
    {.name = "tenant_tokens_per_minute",
     .type = Type::kInteger,
     .description = "Token bucket per (rule, tenant).",
     .min = 1},
    {.name = "global_tokens_per_minute",
     .type = Type::kInteger,
     .description = "Token bucket per rule, shared by all tenants.",
     .min = 1},
    {.name = "on_pool_exhausted",
     .type = Type::kEnum,
     .description = "reject (429) or clamp max output tokens to what remains.",
     .default_value = "reject",
     .choices = kPoolExhausted},
    {.name = "min_output_tokens",
     .type = Type::kInteger,
     .description = "With clamp: reject rather than clamp below this.",
     .default_value = "1",
     .min = 1},
    {.name = "adaptive",
     .type = Type::kObject,
     .description = "Smaller budgets while the admission queue is long.",
     .list = true,
     .object = &kAdaptiveStep},
    {.name = "max_choices",
     .type = Type::kInteger,
     .description = "Most completions one request may ask for (n, best_of).",
     .min = 1},
};

constexpr KeySpec kAdmissionKeys[] = {
    {.name = "max_concurrent",
     .type = Type::kInteger,
     .description = "Requests running at once in the admission group.",
     .min = 1},
    {.name = "queue_depth",
     .type = Type::kInteger,
     .description = "Waiters allowed (0: reject at once when full); needs max_concurrent.",
     .default_value = "0",
     .min = 0},
    {.name = "queue_timeout",
     .type = Type::kDuration,
     .description = "Longest wait in the queue.",
     .default_value = "30s"},
    {.name = "priority",
     .type = Type::kEnum,
     .description = "interactive waiters are admitted before batch ones of the same group.",
     .default_value = "interactive",
     .choices = kPriorities},
    {.name = "group",
     .type = Type::kName,
     .description = "Rules naming the same group share one queue (default: the rule's name)."},
};

constexpr KeySpec kOnCutKeys[] = {
    {.name = "mode",
     .type = Type::kEnum,
     .description = "label (end normally), error (an OpenAI error) or observe (record only).",
     .default_value = "label",
     .choices = kCutModes},
    {.name = "finish_reason",
     .type = Type::kEnum,
     .description = "length (OpenAI-compatible) or cause (the cause's name).",
     .default_value = "length",
     .choices = kFinishReasons},
};

constexpr KeySpec kRuleKeys[] = {
    {.name = "name",
     .type = Type::kName,
     .required = true,
     .description = "Unique name; the policy label in logs and metrics."},
    {.name = "match",
     .type = Type::kObject,
     .description = "Which requests the rule applies to (default: all).",
     .object = &kMatch},
    {.name = "upstream",
     .type = Type::kName,
     .description = "Send matched requests to this upstream (default: by model)."},
    {.name = "budget",
     .type = Type::kObject,
     .description = "Output token limits and pools.",
     .object = &kBudget},
    {.name = "deadline",
     .type = Type::kDuration,
     .description = "From request arrival to the last byte."},
    {.name = "ttft_timeout",
     .type = Type::kDuration,
     .description = "From arrival to the first content token."},
    {.name = "idle_timeout", .type = Type::kDuration, .description = "Longest gap between tokens."},
    {.name = "admission",
     .type = Type::kObject,
     .description = "Concurrency limit, queue and priority.",
     .object = &kAdmission},
    {.name = "on_cut",
     .type = Type::kObject,
     .description = "How a cut response ends.",
     .object = &kOnCut},
    {.name = "forward_client_key",
     .type = Type::kBool,
     .description = "true: the client's Authorization header goes to the upstream.",
     .default_value = "false"},
};

constexpr KeySpec kBudgetStoreKeys[] = {
    {.name = "url",
     .required = true,
     .description = "memory, redis://HOST[:PORT][/DB] or rediss://... (TLS).",
     .pattern = kBudgetStoreUrlPattern},
    {.name = "user", .type = Type::kName, .description = "Redis ACL user (needs password)."},
    {.name = "password", .type = Type::kSecret, .description = "Redis AUTH password."},
    {.name = "on_error",
     .type = Type::kEnum,
     .description = "While Redis is unreachable: open (serve from local pools) or closed.",
     .default_value = "open",
     .choices = kBudgetStoreOnError},
    {.name = "timeout",
     .type = Type::kDuration,
     .description = "Connect and per-command timeout.",
     .default_value = "200ms"},
    {.name = "reservation_ttl",
     .type = Type::kDuration,
     .description = "How long an unsettled reservation is held (at least 1s).",
     .default_value = "15m"},
    {.name = "tls",
     .type = Type::kObject,
     .description = "rediss:// only: the CA, client certificate and name to verify.",
     .object = &kClientTls},
};

constexpr KeySpec kLimitsKeys[] = {
    {.name = "max_body_bytes",
     .type = Type::kInteger,
     .description = "Request body limit in bytes; over it: 413.",
     .default_value = "2097152",
     .min = 1},
    {.name = "max_header_bytes",
     .type = Type::kInteger,
     .description = "All request headers, in bytes; over it: 431.",
     .default_value = "65536",
     .min = 1},
    {.name = "request_header_timeout",
     .type = Type::kDuration,
     .description = "The request head must be complete within this; past it: 408.",
     .default_value = "10s"},
    {.name = "request_body_timeout",
     .type = Type::kDuration,
     .description = "The body must be complete within this of the head; past it: 408.",
     .default_value = "30s"},
    {.name = "max_connections",
     .type = Type::kInteger,
     .description = "Client connections open at once, all listeners together.",
     .default_value = "16384",
     .min = 1},
    {.name = "max_request_memory_bytes",
     .type = Type::kInteger,
     .description = "Request body bytes held in memory at once, process-wide.",
     .default_value = "268435456",
     .min = 1},
    {.name = "http2_max_unfinished_streams",
     .type = Type::kInteger,
     .description = "Per HTTP/2 connection: streams whose body is still arriving.",
     .default_value = "100",
     .min = 1},
    {.name = "http2_max_buffered_request_bytes",
     .type = Type::kInteger,
     .description = "Per HTTP/2 connection: body bytes those streams hold.",
     .default_value = "8388608",
     .min = 1},
    {.name = "http2_max_resets_per_s",
     .type = Type::kInteger,
     .description = "Per HTTP/2 connection: client RST_STREAMs per second (0: unlimited).",
     .default_value = "100",
     .min = 0},
};

constexpr KeySpec kDocumentKeys[] = {
    {.name = "listen",
     .type = Type::kObject,
     .required = true,
     .description = "Client listeners.",
     .list = true,
     .min_items = 1,
     .object = &kListener},
    {.name = "admin",
     .type = Type::kObject,
     .description = "The admin listener: metrics, health, /v1/cutline/*.",
     .object = &kAdmin},
    {.name = "upstreams",
     .type = Type::kObject,
     .required = true,
     .description = "Where requests go.",
     .list = true,
     .min_items = 1,
     .object = &kUpstream},
    {.name = "tenants",
     .type = Type::kObject,
     .description = "Clients and their API keys (none: requests are not authenticated).",
     .list = true,
     .object = &kTenant},
    {.name = "policies",
     .type = Type::kObject,
     .required = true,
     .description = "The rules; the first that matches a request wins.",
     .list = true,
     .min_items = 1,
     .object = &kRule},
    {.name = "budget_store",
     .type = Type::kObject,
     .description = "Where token pools live, with Redis credentials and failure policy.",
     .object = &kBudgetStore,
     .alternative = &kBudgetStoreUrl},
    {.name = "access_log",
     .description = "stdout, off, or a file path: one JSON line per request.",
     .default_value = "stdout"},
    {.name = "limits",
     .type = Type::kObject,
     .description = "Limits on what clients send.",
     .object = &kLimits},
    {.name = "passthrough",
     .type = Type::kEnum,
     .description = "A route the gateway does not run itself with no matching rule: deny "
                    "(403) or allow.",
     .default_value = "deny",
     .choices = kPassthroughModes},
    {.name = "passthrough_operational",
     .description = "Globs of the upstreams' operational paths (/metrics, /healthz, /health, "
                    "/readyz, /v1/cutline/*) passthrough may forward; others get 404.",
     .list = true,
     .min_items = 1,
     .pattern = kRoutePattern},
    {.name = "trusted_proxies",
     .description = "Peer IPs whose X-Forwarded-For / Forwarded headers are kept.",
     .list = true,
     .min_items = 1},
};

}  // namespace

const KeySpec* MapSpec::find(std::string_view key) const {
  for (const KeySpec& k : keys) {
    if (k.name == key) return &k;
  }
  return nullptr;
}

const MapSpec kDocument{"policy", "A Cutline gateway policy.", kDocumentKeys};
const MapSpec kListener{"listener", "A client listener.", kListenerKeys};
const MapSpec kListenerTls{"listener_tls", "HTTPS on a listener.", kListenerTlsKeys};
const MapSpec kAdmin{"admin", "The admin listener.", kAdminKeys};
const MapSpec kUpstream{"upstream", "An upstream: one URL or a pool of endpoints.", kUpstreamKeys};
const MapSpec kClientTls{"client_tls",
                         "TLS to a server: an https:// upstream, a rediss:// budget store.",
                         kClientTlsKeys};
const MapSpec kSpawn{"spawn", "A process the gateway supervises.", kSpawnKeys};
const MapSpec kDnsEndpoints{"dns_endpoints", "Every address a DNS name resolves to.",
                            kDnsEndpointsKeys};
const MapSpec kPrefixAffinity{"prefix_affinity", "Prefix-affine endpoint choice.",
                              kPrefixAffinityKeys};
const MapSpec kHealth{"health", "Active health checks.", kHealthKeys};
const MapSpec kOutlier{"outlier", "Outlier ejection.", kOutlierKeys};
const MapSpec kLoadReport{"load_report", "Load reports polled from the endpoints.",
                          kLoadReportKeys};
const MapSpec kTenant{"tenant", "A client and its API keys.", kTenantKeys};
const MapSpec kRule{"rule", "A rule: what it matches and what it enforces.", kRuleKeys};
const MapSpec kMatch{"match", "What a rule matches.", kMatchKeys};
const MapSpec kBudget{"budget", "Output token limits.", kBudgetKeys};
const MapSpec kAdaptiveStep{"adaptive_step", "A smaller budget under load.", kAdaptiveStepKeys};
const MapSpec kAdaptiveWhen{"adaptive_when", "When an adaptive step applies.", kAdaptiveWhenKeys};
const MapSpec kAdmission{"admission", "Concurrency and queueing.", kAdmissionKeys};
const MapSpec kOnCut{"on_cut", "How a cut response ends.", kOnCutKeys};
const MapSpec kBudgetStore{"budget_store", "The shared token-pool store.", kBudgetStoreKeys};
const MapSpec kLimits{"limits", "Limits on what clients send.", kLimitsKeys};

}  // namespace cutline::policy::keys
