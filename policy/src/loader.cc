// load_policy_file / load_policy_text: the yaml-cpp boundary (nothing throws past it) and the
// top-level keys (loader.h).
#include "cutline/policy/loader.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <tuple>

#include "load_sections.h"
#include "yaml_reader.h"

namespace cutline::policy {

namespace {

using detail::YamlReader;

constexpr size_t kMaxFileBytes = 4 << 20;  // a policy file is small; refuse anything huge

void load_document(YamlReader& r, const YAML::Node& root, const LoadOptions& options, Policy& p) {
  if (root.IsNull() || !root.IsDefined()) {
    r.error(root, "", "the file is empty: expected a map with listen, upstreams and policies");
    return;
  }
  auto fields = r.map(root, "", keys::kDocument);
  if (!fields) return;
  auto required = [&](std::string_view key) -> const detail::Entry* {
    const detail::Entry* e = fields->get(key);
    if (!e) r.error(root, "", "missing required key \"" + std::string(key) + "\"");
    return e;
  };
  if (auto* e = required("listen")) detail::load_listeners(r, e->value, p);
  if (auto* e = fields->get("admin")) detail::load_admin(r, e->value, options, p);
  detail::References refs;
  if (auto* e = required("upstreams")) {
    refs.upstreams_ok = detail::load_upstreams(r, e->value, options, p);
  } else {
    refs.upstreams_ok = false;
  }
  if (auto* e = fields->get("tenants")) {
    refs.tenants_ok = detail::load_tenants(r, e->value, options, p);
  }
  if (auto* e = required("policies")) detail::load_rules(r, e->value, refs, p);
  if (auto* e = fields->get("budget_store")) detail::load_budget_store(r, e->value, options, p);
  if (auto* e = fields->get("access_log")) detail::load_access_log(r, e->value, p);
  if (auto* e = fields->get("limits")) detail::load_limits(r, e->value, p);
  if (auto* e = fields->get("passthrough")) {
    if (auto c = r.choice(e->value, "passthrough", keys::kPassthroughModes)) {
      p.passthrough = *c == 0 ? PassthroughMode::kDeny : PassthroughMode::kAllow;
    }
  }
  if (auto* e = fields->get("passthrough_operational")) {
    if (auto l = r.string_list(e->value, "passthrough_operational")) {
      bool ok = true;
      for (size_t i = 0; i < l->size(); ++i) {
        if ((*l)[i][0] != '/' && (*l)[i][0] != '*') {
          r.error(e->value[i], detail::index_path("passthrough_operational", i),
                  "a path starting with '/' (or a glob), got " + detail::quote((*l)[i]));
          ok = false;
        }
      }
      if (ok) p.passthrough_operational = std::move(*l);
    }
  }
  if (auto* e = fields->get("trusted_proxies")) {
    if (auto l = r.string_list(e->value, "trusted_proxies")) p.trusted_proxies = std::move(*l);
  }

  // The admin listener must not share a client listener's address.
  if (p.admin) {
    for (const auto& l : p.listen) {
      if (l.host == p.admin->host && l.port == p.admin->port && l.port != 0) {
        r.error(p.admin->ref, "the admin address is also " + l.ref.path + "'s address (line " +
                                  std::to_string(l.ref.line) + ")");
      }
    }
  }
}

// Where the text has content, and where a second document starts ("---" at column 1 after
// content). Lines are 1-based.
struct TextShape {
  int first_content_line = 0;
  int first_content_column = 0;
  int second_document_line = 0;
};

TextShape scan_text(std::string_view text) {
  TextShape shape;
  int line = 1;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(pos, end - pos);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    const size_t first = l.find_first_not_of(" \t");
    const bool blank = first == std::string_view::npos || l[first] == '#';
    const bool marker = l == "---" || l.substr(0, 4) == "--- ";
    if (marker && shape.first_content_line > 0 && shape.second_document_line == 0) {
      shape.second_document_line = line;
    } else if (!blank && !marker && l[0] != '%' && shape.first_content_line == 0) {
      shape.first_content_line = line;
      shape.first_content_column = static_cast<int>(first) + 1;
    }
    if (end == text.size()) break;
    pos = end + 1;
    ++line;
  }
  return shape;
}

Diagnostic syntax_error(const std::string& file, const YAML::Mark& mark, const std::string& msg) {
  Diagnostic d;
  d.file = file;
  if (!mark.is_null()) {
    d.line = mark.line + 1;
    d.column = mark.column + 1;
  }
  d.message = "YAML syntax error: " + msg;
  return d;
}

}  // namespace

std::string Diagnostic::to_string() const {
  std::string out = file;
  if (line > 0) {
    out += ':' + std::to_string(line) + ':' + std::to_string(column);
  }
  out += ": ";
  if (warning) out += "warning: ";
  if (!path.empty()) out += path + ": ";
  out += message;
  return out;
}

std::string LoadResult::error_text() const {
  std::string out;
  for (const auto& d : errors) {
    out += d.to_string();
    out += '\n';
  }
  return out;
}

std::string LoadResult::warning_text() const {
  std::string out;
  for (const auto& d : warnings) {
    out += d.to_string();
    out += '\n';
  }
  return out;
}

LoadResult load_policy_text(std::string_view yaml, const std::string& file_name,
                            const LoadOptions& options) {
  LoadResult result;
  try {
    auto policy = std::make_shared<Policy>();
    policy->source_file = file_name;
    YamlReader reader(file_name, &result.errors, &result.warnings);
    // YAML::Load, not LoadAll: yaml-cpp 0.7's LoadAll loops forever on input such as ","
    // (jbeder/yaml-cpp#1040, fixed upstream after 0.8). Load reads the first document only, so
    // a second one is found by scanning the text.
    const TextShape shape = scan_text(yaml);
    YAML::Node root = YAML::Load(std::string(yaml));
    if (shape.second_document_line > 0) {
      reader.error(YamlRef{"", shape.second_document_line, 1},
                   "the file holds more than one YAML document (---); use one");
    }
    if (root.IsNull() && shape.first_content_line > 0) {
      // yaml-cpp 0.7 returns null for some malformed input (a stray ',' at the start) instead
      // of throwing; do not call that an empty file.
      result.errors.push_back(
          syntax_error(file_name, YAML::Mark(), "no YAML document could be read here"));
      result.errors.back().line = shape.first_content_line;
      result.errors.back().column = shape.first_content_column;
    } else {
      load_document(reader, root, options, *policy);
    }
    // Report in file order (sections are read in dependency order, not file order).
    auto file_order = [](const Diagnostic& a, const Diagnostic& b) {
      return std::tie(a.line, a.column) < std::tie(b.line, b.column);
    };
    std::stable_sort(result.errors.begin(), result.errors.end(), file_order);
    std::stable_sort(result.warnings.begin(), result.warnings.end(), file_order);
    if (result.errors.empty()) {
      result.policy = std::move(policy);
    } else {
      result.warnings.clear();
    }
  } catch (const YAML::Exception& e) {
    result.errors.push_back(syntax_error(file_name, e.mark, e.msg));
    result.policy = nullptr;
  } catch (const std::exception& e) {
    Diagnostic d;
    d.file = file_name;
    d.message = std::string("cannot load: ") + e.what();
    result.errors.push_back(std::move(d));
    result.policy = nullptr;
  } catch (...) {
    Diagnostic d;
    d.file = file_name;
    d.message = "cannot load: unexpected error";
    result.errors.push_back(std::move(d));
    result.policy = nullptr;
  }
  return result;
}

LoadResult load_policy_file(const std::string& path, const LoadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    LoadResult result;
    Diagnostic d;
    d.file = path;
    d.message = std::string("cannot read: ") + std::strerror(errno);
    result.errors.push_back(std::move(d));
    return result;
  }
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxFileBytes) {
      LoadResult result;
      Diagnostic d;
      d.file = path;
      d.message = "file is larger than " + std::to_string(kMaxFileBytes >> 20) + " MiB";
      result.errors.push_back(std::move(d));
      return result;
    }
  }
  if (in.bad()) {
    LoadResult result;
    Diagnostic d;
    d.file = path;
    d.message = "read error";
    result.errors.push_back(std::move(d));
    return result;
  }
  return load_policy_text(text, path, options);
}

}  // namespace cutline::policy
