#pragma once
// The policy document's keys: for every YAML map the loader reads, its keys with their type,
// whether they are required, a one-line description and the default. This one table is what
// the loader checks keys and enum values against (policy/src/yaml_reader.cc refuses a key not
// listed here; the enum arrays below are the values its readers accept) and what
// `cutline policy schema` renders as JSON Schema (json_schema.h), so the two cannot disagree.
//
// The loader still reads each value itself (positions, cross-key checks, messages); the table
// says which keys exist and which words an enum takes.

#include <cstdint>
#include <span>
#include <string_view>

namespace cutline::policy::keys {

enum class Type {
  kString,    // a non-empty string (`pattern` narrows it)
  kName,      // letters, digits, '_', '-', '.' (at most 128): safe in metric labels
  kInteger,   // an integer >= `min`
  kNumber,    // a decimal number >= `min`
  kDuration,  // a positive duration: "250ms", "1.5s", "2m" (duration.h)
  kBool,      // true or false
  kEnum,      // one of `choices`
  kSecret,    // "env:VARNAME" or "file:PATH": a credential read at load, never inline
  kApiKey,    // "sha256:<64 hex digits>" or "env:VARNAME": a client key, kept as a digest
  kObject,    // a map whose keys are `object`'s
  kMap,       // a free map of names to values of type `value`
};

struct MapSpec;

// One key of a YAML map.
struct KeySpec {
  std::string_view name;
  Type type = Type::kString;
  bool required = false;
  std::string_view description;
  // As written in YAML ("5s", "100", "true", "least_request"); empty where there is none.
  std::string_view default_value = {};
  // The value is a list of `type` items (at least one item when `min_items` is 1).
  bool list = false;
  int min_items = 0;
  std::span<const std::string_view> choices = {};  // kEnum
  const MapSpec* object = nullptr;                 // kObject
  int64_t min = 0;                                 // kInteger, kNumber
  std::string_view pattern = {};                   // kString: ECMA-262 regex the loader agrees with
  Type value = Type::kString;                      // kMap: the values' type
  // Another form the same key accepts in place of this one ("health: off" for the map).
  const KeySpec* alternative = nullptr;
};

// The keys of one YAML map. The loader refuses any other key ("unknown key").
struct MapSpec {
  std::string_view name;  // the JSON Schema definition's name ("rule", "upstream")
  std::string_view description;
  std::span<const KeySpec> keys;

  // The key named `key`, or nullptr.
  const KeySpec* find(std::string_view key) const;
};

// Enum values, in the order the loader maps them to its enum classes (index = enumerator).
inline constexpr std::string_view kPassthroughModes[] = {"deny", "allow"};
inline constexpr std::string_view kTlsVersions[] = {"1.2", "1.3"};
inline constexpr std::string_view kSchemes[] = {"http", "https", "h2c"};
inline constexpr std::string_view kProtocols[] = {"auto", "http1", "h2"};
inline constexpr std::string_view kBalances[] = {"least_request", "load_aware", "round_robin"};
inline constexpr std::string_view kLoadReportKinds[] = {"none", "cutline", "vllm", "auto"};
inline constexpr std::string_view kPoolExhausted[] = {"reject", "clamp"};
inline constexpr std::string_view kPriorities[] = {"interactive", "batch"};
inline constexpr std::string_view kCutModes[] = {"label", "error", "observe"};
inline constexpr std::string_view kFinishReasons[] = {"length", "cause"};
inline constexpr std::string_view kBudgetStoreOnError[] = {"open", "closed"};
// `health: off`, `outlier: off` in place of the map.
inline constexpr std::string_view kOff[] = {"off"};

// The maps of a policy document, outermost first.
extern const MapSpec kDocument;  // the top level: listen, upstreams, policies, ...
extern const MapSpec kListener;
extern const MapSpec kListenerTls;
extern const MapSpec kAdmin;
extern const MapSpec kUpstream;
extern const MapSpec kClientTls;
extern const MapSpec kSpawn;
extern const MapSpec kDnsEndpoints;
extern const MapSpec kPrefixAffinity;
extern const MapSpec kHealth;
extern const MapSpec kOutlier;
extern const MapSpec kLoadReport;
extern const MapSpec kTenant;
extern const MapSpec kRule;
extern const MapSpec kMatch;
extern const MapSpec kBudget;
extern const MapSpec kAdaptiveStep;
extern const MapSpec kAdaptiveWhen;
extern const MapSpec kAdmission;
extern const MapSpec kOnCut;
extern const MapSpec kBudgetStore;
extern const MapSpec kLimits;

}  // namespace cutline::policy::keys
