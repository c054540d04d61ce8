// Warnings about rules that no request can reach (rule_warnings.h).
#include "rule_warnings.h"

#include <cctype>
#include <cstdint>

#include "cutline/policy/glob.h"

namespace cutline::policy::detail {

namespace {

constexpr size_t kMaxCoverCells = 1 << 20;  // glob_covers gives up (false) past this

bool wildcard(char c) { return c == '*' || c == '?'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 3986 unreserved: what the gateway decodes from a %-escape.
bool unreserved(unsigned char c) {
  return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

// Characters the gateway refuses in a path, or that a request-target cannot hold.
std::optional<std::string> character_warning(std::string_view pattern) {
  for (char ch : pattern) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      return std::string("contains whitespace, which no request-target holds");
    }
    if (c < 0x20 || c == 0x7f) return std::string("contains a control character");
    if (c > 0x7f) {
      return std::string(
          "contains a byte over 0x7e, which the gateway refuses in a path: clients send "
          "non-ASCII characters %-encoded, with upper-case hex (e.g. %C3%A9)");
    }
    if (c == '\\') return std::string("contains '\\', which the gateway refuses in a path");
  }
  return std::nullopt;
}

// "//", dot segments and a trailing '/', which the gateway removes before matching.
std::optional<std::string> segment_warning(std::string_view pattern) {
  constexpr auto npos = std::string_view::npos;
  if (pattern.find("//") != npos) {
    return std::string("contains \"//\", which the gateway collapses to \"/\" before matching");
  }
  const bool dot_segment = pattern.find("/./") != npos || pattern.find("/../") != npos ||
                           pattern.ends_with("/.") || pattern.ends_with("/..");
  if (dot_segment) {
    return std::string(
        "contains a \".\" or \"..\" segment, which the gateway resolves before matching");
  }
  // A pattern ending in '/' matches only texts ending in '/'; of those only "/" is canonical,
  // and only a pattern of stars before that '/' can match it.
  if (pattern.size() > 1 && pattern.back() == '/' &&
      pattern.find_first_not_of('*') < pattern.size() - 1) {
    return "ends with '/', which the gateway removes before matching (only \"/\" keeps it): "
           "write " +
           quote(pattern.substr(0, pattern.size() - 1));
  }
  return std::nullopt;
}

// A '%' in the pattern matches a '%' of the text, which in a canonical path always starts an
// escape of a reserved character in upper-case hex.
std::optional<std::string> escape_warning(std::string_view pattern) {
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') continue;
    const char a = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    const char b = i + 2 < pattern.size() ? pattern[i + 2] : '\0';
    if (wildcard(a) || (hex_value(a) >= 0 && wildcard(b))) continue;  // unsure
    const int hi = hex_value(a);
    const int lo = hex_value(b);
    if (hi < 0 || lo < 0) {
      return std::string(
          "contains a '%' not followed by two hex digits, which the gateway refuses in a path");
    }
    const std::string escape(pattern.substr(i, 3));
    const auto decoded = static_cast<unsigned char>(hi << 4 | lo);
    if (unreserved(decoded)) {
      const std::string plain = quote(std::string(1, static_cast<char>(decoded)));
      return "contains " + escape + ", which the gateway decodes to " + plain +
             " before matching: write " + plain;
    }
    if (decoded == '/' || decoded == '\\' || decoded == 0) {
      return "contains " + escape + " (an encoded '/', '\\' or NUL), which the gateway refuses";
    }
    if (std::islower(static_cast<unsigned char>(a)) ||
        std::islower(static_cast<unsigned char>(b))) {
      std::string upper = escape;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return "contains " + escape + ", which the gateway upper-cases before matching: write " +
             upper;
    }
  }
  return std::nullopt;
}

bool any_glob(const std::vector<std::string>& globs, std::string_view value) {
  for (const auto& g : globs) {
    if (glob_match(g, value)) return true;
  }
  return false;
}

// Every entry of `inner` is covered by some entry of `outer`.
bool list_covers(const std::vector<std::string>& outer, const std::vector<std::string>& inner) {
  for (const auto& q : inner) {
    bool covered = false;
    for (const auto& pat : outer) covered = covered || glob_covers(pat, q);
    if (!covered) return false;
  }
  return true;
}

// Rule `a` matches every request rule `b` matches as far as models, routes and headers go.
bool covers_beyond_tenants(const Match& a, const Match& b) {
  if (!list_covers(a.models, b.models) || !list_covers(a.routes, b.routes)) return false;
  for (const auto& ha : a.headers) {
    bool implied = false;
    for (const auto& hb : b.headers) {
      implied = implied || (hb.name == ha.name && glob_covers(ha.pattern, hb.pattern));
    }
    if (!implied) return false;
  }
  return true;
}

std::string describe(const Rule& rule) {
  return rule.ref.path + " (" + quote(rule.name) + ", line " + std::to_string(rule.ref.line) + ")";
}

// The earlier rules that together match every request rule `i` would, or {} when they don't.
std::vector<size_t> shadowing_rules(const Policy& p, const std::vector<bool>& checked, size_t i,
                                    const std::vector<std::string>& universe) {
  const Rule& rule = p.rules[i];
  std::vector<int8_t> covers(i, -1);  // per earlier rule: covers beyond tenants? -1 = not known
  std::vector<size_t> by;
  bool any_tenant = false;
  for (const auto& tenant : universe) {
    if (!any_glob(rule.match.tenants, tenant)) continue;
    any_tenant = true;
    std::optional<size_t> found;
    for (size_t k = 0; k < i && !found; ++k) {
      if (!checked[k] || !any_glob(p.rules[k].match.tenants, tenant)) continue;
      if (covers[k] < 0) covers[k] = covers_beyond_tenants(p.rules[k].match, rule.match) ? 1 : 0;
      if (covers[k] == 1) found = k;
    }
    if (!found) return {};
    bool listed = false;
    for (size_t k : by) listed = listed || k == *found;
    if (!listed) by.push_back(*found);
  }
  // A rule no tenant can select is reported by its tenants' warnings, not here.
  if (!any_tenant) return {};
  return by;
}

}  // namespace

std::optional<std::string> route_warning(std::string_view pattern) {
  std::optional<std::string> why = character_warning(pattern);
  if (!why) why = segment_warning(pattern);
  if (!why) why = escape_warning(pattern);
  if (why) return "no request path can match " + quote(pattern) + ": it " + *why;
  const size_t q = pattern.find('?');
  if (q != std::string_view::npos && pattern.find('=', q) != std::string_view::npos) {
    return quote(pattern) +
           " looks like a path with a query string, but routes match the path alone (the "
           "query is not part of it) and '?' in a glob stands for any one character";
  }
  return std::nullopt;
}

bool glob_covers(std::string_view outer, std::string_view inner) {
  if (outer == "*" || outer == inner) return true;
  const size_t n = outer.size();
  const size_t m = inner.size();
  if ((n + 1) * (m + 1) > kMaxCoverCells) return false;
  // at(i, j): outer[i..] covers inner[j..]; filled from the ends backwards.
  std::vector<char> cells((n + 1) * (m + 1), 0);
  auto at = [&](size_t i, size_t j) -> char& { return cells[i * (m + 1) + j]; };
  at(n, m) = 1;
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m + 1; j-- > 0;) {
      const char o = outer[i];
      if (o == '*') {
        at(i, j) = at(i + 1, j) || (j < m && at(i, j + 1));
      } else if (j == m) {
        at(i, j) = 0;
      } else if (o == '?') {
        at(i, j) = inner[j] != '*' && at(i + 1, j + 1);
      } else {
        at(i, j) = inner[j] == o && at(i + 1, j + 1);
      }
    }
  }
  return at(0, 0) != 0;
}

std::vector<std::string> tenant_universe(const Policy& p) {
  std::vector<std::string> names;
  for (const auto& t : p.tenants) names.push_back(t.name);
  if (names.empty()) names.emplace_back();
  return names;
}

void warn_shadowed_rules(YamlReader& r, const Policy& p, const std::vector<bool>& checked) {
  const std::vector<std::string> universe = tenant_universe(p);
  for (size_t i = 0; i < p.rules.size(); ++i) {
    if (!checked[i]) continue;
    const std::vector<size_t> by = shadowing_rules(p, checked, i, universe);
    if (by.empty()) continue;
    std::string message = "never matches (the first matching rule wins): ";
    for (size_t k = 0; k < by.size(); ++k) {
      if (k > 0) message += k + 1 == by.size() ? " and " : ", ";
      message += describe(p.rules[by[k]]);
    }
    message += by.size() == 1 ? " comes first and matches" : " come first and, between them, match";
    message += " every request this rule would match";
    r.warn(p.rules[i].ref, std::move(message));
  }
}

void warn_uncovered_core_routes(YamlReader& r, const YAML::Node& at, const Policy& p,
                                const std::vector<bool>& checked) {
  std::vector<std::string_view> uncovered;
  for (std::string_view route : kCoreRoutes) {
    bool matched = false;
    for (size_t i = 0; i < p.rules.size() && !matched; ++i) {
      matched = checked[i] && any_glob(p.rules[i].match.routes, route);
    }
    if (!matched) uncovered.push_back(route);
  }
  if (uncovered.empty()) return;
  std::string message =
      uncovered.size() == 1 ? "no rule matches route " : "no rule matches routes ";
  for (size_t k = 0; k < uncovered.size(); ++k) {
    if (k > 0) message += k + 1 == uncovered.size() ? " and " : ", ";
    message += quote(uncovered[k]);
  }
  message += uncovered.size() == 1 ? ": every request on it is refused"
                                   : ": every request on them is refused";
  message += " (name it in a rule's match.routes, or leave match.routes out to match every route)";
  r.warn(at, "policies", std::move(message));
}

}  // namespace cutline::policy::detail
