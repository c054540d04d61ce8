#include "cutline/gateway/request_target.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "cutline/gateway/printable.h"

namespace cutline::gateway {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

Error refused(std::string why) {
  return make_error(ErrorKind::kBadRequest, "request-target refused: " + std::move(why));
}

// One path with its escapes normalized (see the header); segments are split later.
Result<std::string> normalize_escapes(std::string_view path) {
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    const auto c = static_cast<unsigned char>(path[i]);
    if (c < 0x20 || c >= 0x7f || c == '\\') {
      return refused("a control character, a byte over 0x7e or '\\' in the path");
    }
    if (c != '%') {
      out.push_back(static_cast<char>(c));
      continue;
    }
    if (i + 2 >= path.size()) return refused("a truncated %-escape");
    const int hi = hex_digit(path[i + 1]);
    const int lo = hex_digit(path[i + 2]);
    if (hi < 0 || lo < 0) return refused("an invalid %-escape");
    const auto decoded = static_cast<unsigned char>(hi << 4 | lo);
    if (decoded == '/' || decoded == '\\' || decoded == 0) {
      return refused("an encoded '/', '\\' or NUL in the path");
    }
    if (unreserved(decoded)) {
      out.push_back(static_cast<char>(decoded));
    } else {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out.push_back('%');
      out.push_back(kHex[decoded >> 4]);
      out.push_back(kHex[decoded & 0xf]);
    }
    i += 2;
  }
  return out;
}

// True when `path` is already what normalizing it would give: printable bytes, no escape, no
// empty, "." or ".." segment, no trailing '/' (the common case, answered without rebuilding it).
bool canonical_already(std::string_view path) {
  if (path.empty() || path.front() != '/') return false;
  if (path.size() > 1 && path.back() == '/') return false;
  for (size_t i = 0; i < path.size(); ++i) {
    const auto c = static_cast<unsigned char>(path[i]);
    if (c < 0x20 || c >= 0x7f || c == '\\' || c == '%') return false;
    if (c != '/' || i + 1 >= path.size()) continue;
    const std::string_view next = path.substr(i + 1, 3);
    if (next.front() == '/' || next == "." || next == ".." || next.substr(0, 2) == "./" ||
        next == "../") {
      return false;
    }
  }
  return true;
}

bool is_core_route_path(std::string_view path) {
  return std::find(kCoreRoutePaths.begin(), kCoreRoutePaths.end(), path) != kCoreRoutePaths.end();
}

// `s` with every valid %-escape decoded (an invalid one kept as sent).
std::string percent_decoded(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const int hi = s[i] == '%' && i + 2 < s.size() ? hex_digit(s[i + 1]) : -1;
    const int lo = hi >= 0 ? hex_digit(s[i + 2]) : -1;
    if (lo < 0) {
      out.push_back(s[i]);
      continue;
    }
    out.push_back(static_cast<char>(hi << 4 | lo));
    i += 2;
  }
  return out;
}

// The path a lenient upstream router could take `canonical` for (see the header): decoded (up to
// three times, for a router behind another that decodes), cut at a decoded '?' or '#' when
// `stop_at_decoded_delimiter` (a router that decodes before it splits; one that strips ";params"
// first does not), '\' read as '/', letters folded to lower case (with the four non-ASCII letters
// that Python's and .NET's case-insensitive matching fold onto ASCII ones), each segment's
// ";parameters" dropped and its blanks, control characters and trailing dots trimmed, empty
// segments dropped, and the dot segments resolved last.
std::string lenient_route_key(std::string_view canonical, bool stop_at_decoded_delimiter) {
  std::string s(canonical);
  for (int round = 0; round < 3 && s.find('%') != std::string::npos; ++round) {
    s = percent_decoded(s);
  }
  if (stop_at_decoded_delimiter) s.resize(std::min(s.find_first_of("?#"), s.size()));
  static constexpr std::pair<std::string_view, char> kFolded[] = {
      {"\xc4\xb0", 'i'}, {"\xc4\xb1", 'i'}, {"\xc5\xbf", 's'}, {"\xe2\x84\xaa", 'k'}};
  std::string folded;
  folded.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    bool replaced = false;
    for (const auto& [utf8, ascii] : kFolded) {
      if (s.compare(i, utf8.size(), utf8) == 0) {
        folded.push_back(ascii);
        i += utf8.size() - 1;
        replaced = true;
        break;
      }
    }
    if (replaced) continue;
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    folded.push_back(c == '\\' ? '/' : c);
  }
  const auto blank = [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; };
  std::vector<std::string_view> segments;
  std::string_view rest = folded;
  while (!rest.empty()) {
    const size_t slash = rest.find('/');
    std::string_view seg = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    seg = seg.substr(0, seg.find(';'));
    while (!seg.empty() && blank(seg.front())) seg.remove_prefix(1);
    while (!seg.empty() && blank(seg.back())) seg.remove_suffix(1);
    if (seg == "..") {
      if (!segments.empty()) segments.pop_back();
      continue;
    }
    while (!seg.empty() && seg.back() == '.') seg.remove_suffix(1);
    if (!seg.empty()) segments.push_back(seg);
  }
  std::string key;
  for (const auto& seg : segments) key.append("/").append(seg);
  return key;
}

// Refuses a canonical path that is not a core route but that a lenient router could serve as
// one: it would reach the upstream's route without that route's rules.
Status refuse_core_route_variant(std::string_view canonical) {
  if (is_core_route_path(canonical)) return {};
  std::string key = lenient_route_key(canonical, true);
  if (!is_core_route_path(key)) key = lenient_route_key(canonical, false);
  if (!is_core_route_path(key)) return {};
  return refused("not " + key +
                 " but a spelling an upstream router could still serve as it (letter case, "
                 "';' parameters, whitespace or control characters, trailing dots, an encoded "
                 "'?' or '#')");
}

}  // namespace

Result<std::string> canonical_target(const proto::HttpRequest& request) {
  if (request.method == "CONNECT") return refused("CONNECT is not supported");
  std::string_view target = request.target;
  if (target == "*") return refused("'*' (asterisk-form) is not supported");
  // The fragment is the client's own (RFC 9110 7.1): never sent on, and never part of the route
  // (uvicorn and most routers drop it).
  target = target.substr(0, target.find('#'));
  if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0) {
    const size_t scheme_end = target.find("://") + 3;
    size_t path_start = target.find_first_of("/?", scheme_end);
    if (path_start == std::string_view::npos) path_start = target.size();
    const std::string_view authority = target.substr(scheme_end, path_start - scheme_end);
    const auto host = request.headers.get("Host");
    if (!host || !proto::iequals(*host, authority)) {
      return refused("absolute-form naming another host (" + printable(authority) + ")");
    }
    target = target.substr(path_start);
    if (target.empty() || target.front() == '?') return refused("absolute-form without a path");
  }
  if (target.empty() || target.front() != '/') return refused("not an origin-form path");
  const size_t q = target.find('?');
  const std::string_view path = target.substr(0, q);
  const std::string_view query =
      q == std::string_view::npos ? std::string_view() : target.substr(q);

  if (canonical_already(path)) {
    if (Status s = refuse_core_route_variant(path); !s.ok()) return s.error();
    return std::string(path).append(query);
  }
  auto escaped = normalize_escapes(path);
  if (!escaped.ok()) return escaped.error();
  std::vector<std::string_view> segments;
  std::string_view rest = *escaped;
  while (!rest.empty()) {
    const size_t slash = rest.find('/');
    const std::string_view seg = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (seg.empty() || seg == ".") continue;  // "//", "/./" and a trailing '/'
    if (seg == "..") {
      if (segments.empty()) return refused("'..' above the root");
      segments.pop_back();
      continue;
    }
    segments.push_back(seg);
  }
  std::string out;
  out.reserve(path.size() + query.size());
  for (const auto& seg : segments) out.append("/").append(seg);
  if (out.empty()) out = "/";
  if (Status s = refuse_core_route_variant(out); !s.ok()) return s.error();
  out.append(query);
  return out;
}

}  // namespace cutline::gateway
