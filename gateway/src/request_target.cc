#include "cutline/gateway/request_target.h"

#include <vector>

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

}  // namespace

Result<std::string> canonical_target(const proto::HttpRequest& request) {
  if (request.method == "CONNECT") return refused("CONNECT is not supported");
  std::string_view target = request.target;
  if (target == "*") return refused("'*' (asterisk-form) is not supported");
  if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0) {
    const size_t scheme_end = target.find("://") + 3;
    size_t path_start = target.find_first_of("/?", scheme_end);
    if (path_start == std::string_view::npos) path_start = target.size();
    const std::string_view authority = target.substr(scheme_end, path_start - scheme_end);
    const auto host = request.headers.get("Host");
    if (!host || !proto::iequals(*host, authority)) {
      return refused("absolute-form naming another host (" + std::string(authority) + ")");
    }
    target = target.substr(path_start);
    if (target.empty() || target.front() == '?') return refused("absolute-form without a path");
  }
  if (target.empty() || target.front() != '/') return refused("not an origin-form path");
  const size_t q = target.find('?');
  const std::string_view path = target.substr(0, q);
  const std::string_view query =
      q == std::string_view::npos ? std::string_view() : target.substr(q);

  if (canonical_already(path)) return std::string(path).append(query);
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
  out.append(query);
  return out;
}

}  // namespace cutline::gateway
