// Typed, position-aware reading of yaml-cpp nodes (yaml_reader.h).
#include "yaml_reader.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "cutline/policy/duration.h"

namespace cutline::policy::detail {

namespace {

// Levenshtein distance, for "did you mean" hints on unknown keys.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string join(std::span<const std::string_view> items) {
  std::string out;
  for (auto it = items.begin(); it != items.end(); ++it) {
    if (it != items.begin()) out += ", ";
    out += *it;
  }
  return out;
}

}  // namespace

const Entry* Fields::get(std::string_view name) const {
  for (const auto& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::string_view describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a string";
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Undefined:
      return "nothing";
  }
  return "nothing";
}

std::string quote(std::string_view text) {
  std::string out = "\"";
  size_t n = 0;
  for (char c : text) {
    if (++n > 64) {
      out += "...";
      break;
    }
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

std::string index_path(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

std::string key_path(const std::string& path, std::string_view key) {
  if (path.empty()) return std::string(key);
  std::string out = path;
  out += '.';
  out += key;
  return out;
}

YamlRef YamlReader::ref(const YAML::Node& node, std::string path) const {
  YamlRef r;
  r.path = std::move(path);
  if (node.IsDefined()) {
    const YAML::Mark m = node.Mark();
    if (!m.is_null()) {
      r.line = m.line + 1;
      r.column = m.column + 1;
    }
  }
  return r;
}

void YamlReader::error(const YAML::Node& at, std::string_view path, std::string message) {
  error(ref(at, std::string(path)), std::move(message));
}

Diagnostic YamlReader::diagnostic(const YamlRef& at, std::string message) const {
  Diagnostic d;
  d.file = file_;
  d.line = at.line;
  d.column = at.column;
  d.path = at.path;
  d.message = std::move(message);
  return d;
}

void YamlReader::error(const YamlRef& at, std::string message) {
  errors_->push_back(diagnostic(at, std::move(message)));
}

void YamlReader::warn(const YAML::Node& at, std::string_view path, std::string message) {
  warn(ref(at, std::string(path)), std::move(message));
}

void YamlReader::warn(const YamlRef& at, std::string message) {
  if (!warnings_) return;
  Diagnostic d = diagnostic(at, std::move(message));
  d.warning = true;
  warnings_->push_back(std::move(d));
}

std::optional<Fields> YamlReader::map(const YAML::Node& node, const std::string& path,
                                      const keys::MapSpec& spec) {
  if (!node.IsMap()) {
    error(node, path, "expected a map, got " + std::string(describe(node)));
    return std::nullopt;
  }
  Fields fields;
  std::vector<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) {
      error(key, path, "keys must be strings, got " + std::string(describe(key)));
      continue;
    }
    const std::string& name = key.Scalar();
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      error(key, path, "duplicate key " + quote(name));
      continue;
    }
    seen.push_back(name);
    if (spec.find(name) == nullptr) {
      std::string msg = "unknown key " + quote(name);
      std::string_view best;
      size_t best_distance = 3;  // suggest only close spellings
      for (const keys::KeySpec& k : spec.keys) {
        size_t d = edit_distance(name, k.name);
        if (d < best_distance) {
          best_distance = d;
          best = k.name;
        }
      }
      if (!best.empty()) {
        msg += " (did you mean " + quote(best) + "?)";
      }
      error(key, path, std::move(msg));
      continue;
    }
    fields.add(Entry{name, key, it->second});
  }
  return fields;
}

std::optional<std::vector<YAML::Node>> YamlReader::list(const YAML::Node& node,
                                                        const std::string& path) {
  if (!node.IsSequence()) {
    error(node, path, "expected a list, got " + std::string(describe(node)));
    return std::nullopt;
  }
  std::vector<YAML::Node> items;
  for (auto it = node.begin(); it != node.end(); ++it) items.push_back(*it);
  return items;
}

std::optional<std::string> YamlReader::string(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar()) {
    error(node, path, "expected a string, got " + std::string(describe(node)));
    return std::nullopt;
  }
  if (node.Scalar().empty()) {
    error(node, path, "must not be empty");
    return std::nullopt;
  }
  return node.Scalar();
}

std::optional<std::string> YamlReader::name(const YAML::Node& node, const std::string& path) {
  auto s = string(node, path);
  if (!s) return std::nullopt;
  for (char c : *s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) {
      error(node, path, "name " + quote(*s) + " may use only letters, digits, '_', '-' and '.'");
      return std::nullopt;
    }
  }
  if (s->size() > 128) {
    error(node, path, "name is longer than 128 characters");
    return std::nullopt;
  }
  return s;
}

std::optional<int64_t> YamlReader::integer(const YAML::Node& node, const std::string& path,
                                           int64_t min) {
  const std::string what = min >= 1 ? "a positive integer" : "an integer >= " + std::to_string(min);
  if (!node.IsScalar()) {
    error(node, path, "expected " + what + ", got " + std::string(describe(node)));
    return std::nullopt;
  }
  const std::string& s = node.Scalar();
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec == std::errc::result_out_of_range) {
    error(node, path, "expected " + what + ", got " + quote(s));
    return std::nullopt;
  }
  if (ec != std::errc() || ptr != s.data() + s.size()) {
    error(node, path, "expected " + what + ", got " + quote(s));
    return std::nullopt;
  }
  if (v < min) {
    error(node, path, "must be " + what + ", got " + s);
    return std::nullopt;
  }
  return v;
}

std::optional<int64_t> YamlReader::duration(const YAML::Node& node, const std::string& path) {
  static constexpr std::string_view kHelp = "a duration such as 500ms, 10s or 2m";
  if (!node.IsScalar()) {
    error(node, path, "expected " + std::string(kHelp) + ", got " + std::string(describe(node)));
    return std::nullopt;
  }
  const std::string& s = node.Scalar();
  if (!s.empty() && s[0] == '-') {
    error(node, path, "must be a positive duration, got " + s);
    return std::nullopt;
  }
  auto ms = parse_duration_ms(s);
  if (!ms) {
    const bool bare = !s.empty() && s.find_first_not_of("0123456789.") == std::string::npos;
    error(node, path,
          "expected " + std::string(kHelp) + ", got " + quote(s) +
              (bare ? " (a unit is required: ms, s or m)" : ""));
    return std::nullopt;
  }
  if (*ms <= 0) {
    error(node, path, "must be a positive duration, got " + s);
    return std::nullopt;
  }
  return ms;
}

std::optional<bool> YamlReader::boolean(const YAML::Node& node, const std::string& path) {
  if (node.IsScalar()) {
    if (node.Scalar() == "true") return true;
    if (node.Scalar() == "false") return false;
    error(node, path, "expected true or false, got " + quote(node.Scalar()));
    return std::nullopt;
  }
  error(node, path, "expected true or false, got " + std::string(describe(node)));
  return std::nullopt;
}

std::optional<size_t> YamlReader::choice(const YAML::Node& node, const std::string& path,
                                         std::span<const std::string_view> choices) {
  if (node.IsScalar()) {
    size_t i = 0;
    for (std::string_view c : choices) {
      if (node.Scalar() == c) return i;
      ++i;
    }
    error(node, path, "must be one of " + join(choices) + "; got " + quote(node.Scalar()));
    return std::nullopt;
  }
  error(node, path, "must be one of " + join(choices) + "; got " + std::string(describe(node)));
  return std::nullopt;
}

std::optional<std::vector<std::string>> YamlReader::string_list(const YAML::Node& node,
                                                                const std::string& path) {
  auto items = list(node, path);
  if (!items) return std::nullopt;
  if (items->empty()) {
    error(node, path, "must not be empty");
    return std::nullopt;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (size_t i = 0; i < items->size(); ++i) {
    auto s = string((*items)[i], index_path(path, i));
    if (s) {
      out.push_back(*s);
    } else {
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace cutline::policy::detail
