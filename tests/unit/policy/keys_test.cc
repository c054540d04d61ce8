// The key table (keys.h) against the loader and the checked-in schema: every key of the table
// is one the loader reads (testdata/every_key.yaml sets them all and loads cleanly), every map
// of the table is one where the loader refuses an unknown key at its line and column, the
// defaults the table advertises are the loader's, and deploy/policy.schema.json is what
// `cutline policy schema` prints.
#include "cutline/policy/keys.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <yaml-cpp/yaml.h>

#include "cutline/policy/duration.h"
#include "cutline/policy/json_schema.h"
#include "cutline/policy/loader.h"
#include "policy_test_util.h"

namespace cutline::policy {
namespace {

using keys::KeySpec;
using keys::MapSpec;

const std::string kEveryKeyFile =
    std::string(CUTLINE_SOURCE_DIR) + "/tests/unit/policy/testdata/every_key.yaml";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// every_key.yaml's env: secrets, as an environment would hold them.
LoadOptions test_env() {
  LoadOptions o;
  o.env = [](const std::string& name) -> std::optional<std::string> {
    if (name.rfind("CUTLINE_TEST_", 0) == 0) return "value-of-" + name;
    return std::nullopt;
  };
  return o;
}

// The map a key's value is, in the form `value` takes (the key's own or its alternative).
const MapSpec* object_of(const KeySpec& k) {
  if (k.type == keys::Type::kObject) return k.object;
  if (k.alternative && k.alternative->type == keys::Type::kObject) return k.alternative->object;
  return nullptr;
}

using Visit = std::function<void(const MapSpec&, YAML::Node, const std::string&)>;

// Calls `visit` for `node` (a map of `spec`'s keys) and for every map below it that the table
// describes, with the path the loader names it by ("policies[0].budget").
void walk(const MapSpec& spec, YAML::Node node, const std::string& path, const Visit& visit) {
  visit(spec, node, path);
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string name = it->first.Scalar();
    const KeySpec* k = spec.find(name);
    if (!k) continue;
    const MapSpec* object = object_of(*k);
    if (!object) continue;
    const std::string child = path.empty() ? name : path + "." + name;
    YAML::Node value = it->second;
    if (k->list && value.IsSequence()) {
      for (size_t i = 0; i < value.size(); ++i) {
        walk(*object, value[i], child + "[" + std::to_string(i) + "]", visit);
      }
    } else if (!k->list && value.IsMap()) {
      walk(*object, value, child, visit);
    }
  }
}

TEST(PolicyKeys, TheFileSettingEveryKeyLoads) {
  LoadResult r = load_policy_file(kEveryKeyFile, test_env());
  EXPECT_TRUE(r.ok()) << r.error_text();
}

TEST(PolicyKeys, EveryKeyOfEveryMapIsSetInTheFile) {
  // The file exercises the whole table, so the load above proves the loader reads every key.
  YAML::Node root = YAML::LoadFile(kEveryKeyFile);
  std::set<const MapSpec*> maps_seen;
  std::set<std::string> keys_seen;
  walk(keys::kDocument, root, "", [&](const MapSpec& spec, YAML::Node node, const std::string&) {
    maps_seen.insert(&spec);
    for (auto it = node.begin(); it != node.end(); ++it) {
      keys_seen.insert(std::string(spec.name) + "." + it->first.Scalar());
    }
  });
  const MapSpec* all[] = {
      &keys::kDocument,       &keys::kListener,     &keys::kListenerTls, &keys::kAdmin,
      &keys::kUpstream,       &keys::kClientTls,    &keys::kSpawn,       &keys::kDnsEndpoints,
      &keys::kPrefixAffinity, &keys::kHealth,       &keys::kOutlier,     &keys::kLoadReport,
      &keys::kTenant,         &keys::kRule,         &keys::kMatch,       &keys::kBudget,
      &keys::kAdaptiveStep,   &keys::kAdaptiveWhen, &keys::kAdmission,   &keys::kOnCut,
      &keys::kBudgetStore,    &keys::kLimits};
  for (const MapSpec* m : all) {
    EXPECT_TRUE(maps_seen.count(m)) << "every_key.yaml has no " << m->name << " map";
    for (const KeySpec& k : m->keys) {
      const std::string key = std::string(m->name) + "." + std::string(k.name);
      EXPECT_TRUE(keys_seen.count(key)) << "every_key.yaml does not set " << key;
    }
  }
}

TEST(PolicyKeys, AKeyMissingFromTheTableIsRefusedInEveryMapAtItsPosition) {
  YAML::Node root = YAML::LoadFile(kEveryKeyFile);
  int maps = 0;
  walk(keys::kDocument, root, "",
       [&](const MapSpec& spec, YAML::Node node, const std::string& path) {
         ++maps;
         node["not_a_policy_key"] = 1;
         YAML::Emitter out;
         out << root;
         node.remove("not_a_policy_key");
         const std::string text = out.c_str();
         // Where the emitted text holds the key (1-based, as diagnostics count).
         const size_t at = text.find("not_a_policy_key");
         ASSERT_NE(at, std::string::npos);
         const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
         const int column = static_cast<int>(at - (text.rfind('\n', at) + 1)) + 1;

         LoadResult r = load_policy_text(text, "every_key.yaml", test_env());
         ASSERT_EQ(r.errors.size(), 1u) << spec.name << " at " << path << ":\n" << r.error_text();
         const Diagnostic& d = r.errors[0];
         EXPECT_EQ(d.message, "unknown key \"not_a_policy_key\"") << spec.name;
         EXPECT_EQ(d.path, path);
         EXPECT_EQ(d.line, line) << spec.name;
         EXPECT_EQ(d.column, column) << spec.name;
       });
  EXPECT_GE(maps, 22);
}

TEST(PolicyKeys, ACloseMisspellingNamesTheTableKey) {
  EXPECT_EQ(testing::load_errors(testing::with_policies("  - name: a\n    admision: {}\n")),
            "cutline.yaml:8:5: policies[0]: unknown key \"admision\" (did you mean "
            "\"admission\"?)\n");
}

int64_t default_ms(const MapSpec& map, std::string_view key) {
  const KeySpec* k = map.find(key);
  EXPECT_NE(k, nullptr) << key;
  auto ms = k ? parse_duration_ms(k->default_value) : std::nullopt;
  EXPECT_TRUE(ms) << map.name << "." << key << " has no duration default";
  return ms.value_or(-1);
}

int64_t default_int(const MapSpec& map, std::string_view key) {
  const KeySpec* k = map.find(key);
  EXPECT_NE(k, nullptr) << key;
  return k ? std::stoll(std::string(k->default_value)) : -1;
}

TEST(PolicyKeys, TheTableDefaultsAreTheLoadersDefaults) {
  auto p = testing::load_ok(
      "listen:\n  - address: 127.0.0.1:8080\n"
      "upstreams:\n"
      "  - name: one\n    url: http://127.0.0.1:8081\n    spawn: {command: [x]}\n"
      "  - name: pool\n    endpoints: {dns: backend:8081}\n    load_report: {from: cutline}\n"
      "    prefix_affinity: {bytes: 8}\n"
      "policies:\n  - name: all\n");
  ASSERT_TRUE(p);
  const Limits& l = p->limits;
  using keys::kLimits;
  EXPECT_EQ(l.max_body_bytes, default_int(kLimits, "max_body_bytes"));
  EXPECT_EQ(l.max_header_bytes, default_int(kLimits, "max_header_bytes"));
  EXPECT_EQ(l.request_header_timeout_ms, default_ms(kLimits, "request_header_timeout"));
  EXPECT_EQ(l.request_body_timeout_ms, default_ms(kLimits, "request_body_timeout"));
  EXPECT_EQ(l.max_connections, default_int(kLimits, "max_connections"));
  EXPECT_EQ(l.max_request_memory_bytes, default_int(kLimits, "max_request_memory_bytes"));
  EXPECT_EQ(l.http2_max_unfinished_streams, default_int(kLimits, "http2_max_unfinished_streams"));
  EXPECT_EQ(l.http2_max_buffered_request_bytes,
            default_int(kLimits, "http2_max_buffered_request_bytes"));
  EXPECT_EQ(l.http2_max_resets_per_s, default_int(kLimits, "http2_max_resets_per_s"));

  const Upstream& one = p->upstreams[0];
  EXPECT_EQ(one.connect_timeout_ms, default_ms(keys::kUpstream, "connect_timeout"));
  EXPECT_EQ(one.response_head_timeout_ms, default_ms(keys::kUpstream, "response_head_timeout"));
  ASSERT_TRUE(one.spawn);
  EXPECT_EQ(one.spawn->ready_timeout_ms, default_ms(keys::kSpawn, "ready_timeout"));
  const Upstream& pool = p->upstreams[1];
  ASSERT_TRUE(pool.dns && pool.health && pool.outlier && pool.prefix_affinity);
  EXPECT_EQ(pool.dns->resolve_interval_ms, default_ms(keys::kDnsEndpoints, "resolve_interval"));
  EXPECT_EQ(pool.health->path, keys::kHealth.find("path")->default_value);
  EXPECT_EQ(pool.health->interval_ms, default_ms(keys::kHealth, "interval"));
  EXPECT_EQ(pool.health->timeout_ms, default_ms(keys::kHealth, "timeout"));
  EXPECT_EQ(pool.outlier->consecutive_failures,
            default_int(keys::kOutlier, "consecutive_failures"));
  EXPECT_EQ(pool.outlier->base_ejection_ms, default_ms(keys::kOutlier, "base_ejection"));
  EXPECT_EQ(pool.outlier->max_ejection_ms, default_ms(keys::kOutlier, "max_ejection"));
  EXPECT_EQ(pool.outlier->max_ejection_percent,
            default_int(keys::kOutlier, "max_ejection_percent"));
  EXPECT_EQ(pool.load_report.interval_ms, default_ms(keys::kLoadReport, "interval"));
  EXPECT_EQ(std::to_string(pool.prefix_affinity->max_load_factor).substr(0, 4),
            keys::kPrefixAffinity.find("max_load_factor")->default_value);

  const Rule& rule = p->rules[0];
  EXPECT_EQ(rule.admission.queue_timeout_ms.value, default_ms(keys::kAdmission, "queue_timeout"));
  EXPECT_EQ(rule.admission.queue_depth.value, default_int(keys::kAdmission, "queue_depth"));
  EXPECT_EQ(rule.budget.min_output_tokens.value, default_int(keys::kBudget, "min_output_tokens"));
  EXPECT_EQ(p->budget_store.timeout_ms, default_ms(keys::kBudgetStore, "timeout"));
  EXPECT_EQ(p->budget_store.reservation_ttl_ms, default_ms(keys::kBudgetStore, "reservation_ttl"));
}

TEST(PolicyKeys, TheDurationPatternAcceptsWhatTheLoaderAccepts) {
  const std::regex pattern(std::string(kDurationPattern), std::regex::ECMAScript);
  for (std::string_view text :
       {"250ms", "10s",  "1.5s", "2m", "0.1ms", "0.5s", "100", "10", "s",    "1.s",  ".5s",
        "0s",    "0.0m", "-1s",  "1h", "10 s",  "1sec", "",    "5S", "007s", "1.25m"}) {
    const auto ms = parse_duration_ms(text);
    const bool loader = ms && *ms > 0;
    EXPECT_EQ(std::regex_match(std::string(text), pattern), loader) << '"' << text << '"';
  }
}

TEST(PolicyKeys, TheCheckedInSchemaIsTheGeneratedOne) {
  const std::string file = std::string(CUTLINE_SOURCE_DIR) + "/deploy/policy.schema.json";
  EXPECT_TRUE(read_file(file) == policy_json_schema())
      << "deploy/policy.schema.json differs from the key table (policy/src/keys.cc); "
         "regenerate it: build/tools/cutline policy schema > deploy/policy.schema.json";
}

}  // namespace
}  // namespace cutline::policy
