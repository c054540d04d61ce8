#pragma once
// YamlReader: typed, position-aware reading of yaml-cpp nodes for the policy loader. Every
// problem becomes a Diagnostic (FILE:LINE:COLUMN: PATH: message) appended to one list; the
// readers return nullopt and the loader carries on, so one pass reports every error.
// Private to policy/src.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "cutline/policy/keys.h"
#include "cutline/policy/loader.h"
#include "cutline/policy/source.h"

namespace cutline::policy::detail {

// One key of a map: the key node (for positions) and its value.
struct Entry {
  std::string name;
  YAML::Node key;
  YAML::Node value;
};

// The entries of a map that passed the key check, looked up by name.
class Fields {
 public:
  void add(Entry e) { entries_.push_back(std::move(e)); }
  const Entry* get(std::string_view name) const;
  bool empty() const { return entries_.empty(); }

 private:
  std::vector<Entry> entries_;
};

class YamlReader {
 public:
  // `warnings` may be null: warnings are then dropped.
  YamlReader(std::string file, std::vector<Diagnostic>* errors,
             std::vector<Diagnostic>* warnings = nullptr)
      : file_(std::move(file)), errors_(errors), warnings_(warnings) {}

  const std::string& file() const { return file_; }
  size_t error_count() const { return errors_->size(); }

  YamlRef ref(const YAML::Node& node, std::string path) const;
  void error(const YAML::Node& at, std::string_view path, std::string message);
  void error(const YamlRef& at, std::string message);
  // A warning (Diagnostic::warning): the file still loads.
  void warn(const YAML::Node& at, std::string_view path, std::string message);
  void warn(const YamlRef& at, std::string message);

  // A map's entries. Reports: not a map, duplicate keys, keys not in `spec` (with a suggestion
  // when one is close). Unknown keys are left out of the result.
  std::optional<Fields> map(const YAML::Node& node, const std::string& path,
                            const keys::MapSpec& spec);
  // A list's items; reports a node that is not a list.
  std::optional<std::vector<YAML::Node>> list(const YAML::Node& node, const std::string& path);

  // A non-empty scalar string.
  std::optional<std::string> string(const YAML::Node& node, const std::string& path);
  // A name: letters, digits, '_', '-', '.' (safe in metric labels and pool keys).
  std::optional<std::string> name(const YAML::Node& node, const std::string& path);
  // An integer >= min (min 1: "must be a positive integer").
  std::optional<int64_t> integer(const YAML::Node& node, const std::string& path, int64_t min);
  // A positive duration in ms ("500ms", "10s", "2m").
  std::optional<int64_t> duration(const YAML::Node& node, const std::string& path);
  std::optional<bool> boolean(const YAML::Node& node, const std::string& path);
  // One of `choices` (an enum of keys.h); returns its index.
  std::optional<size_t> choice(const YAML::Node& node, const std::string& path,
                               std::span<const std::string_view> choices);
  // A list of non-empty strings (at least one).
  std::optional<std::vector<std::string>> string_list(const YAML::Node& node,
                                                      const std::string& path);

 private:
  // A Diagnostic for `at` in this file.
  Diagnostic diagnostic(const YamlRef& at, std::string message) const;

  std::string file_;
  std::vector<Diagnostic>* errors_;
  std::vector<Diagnostic>* warnings_;
};

// "a map", "a list", "a string", "null".
std::string_view describe(const YAML::Node& node);
// Quoted for messages, with control characters escaped and long text shortened.
std::string quote(std::string_view text);
// "policies" + 2 -> "policies[2]"; "a" + "b" -> "a.b".
std::string index_path(const std::string& path, size_t i);
std::string key_path(const std::string& path, std::string_view key);

}  // namespace cutline::policy::detail
