#include "cutline/gateway/upstream_headers.h"

#include <string>

namespace cutline::gateway {

namespace {

constexpr size_t kTraceparentBytes = 55;      // version 00: 2 + 1 + 32 + 1 + 16 + 1 + 2
constexpr size_t kMaxTraceparentBytes = 512;  // a later version's longer form, bounded
constexpr size_t kMaxTracestateMembers = 32;
constexpr size_t kMaxTracestateBytes = 512;

bool lower_hex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool all_zero(std::string_view s) { return s.find_first_not_of('0') == std::string_view::npos; }

bool lcalpha(char c) { return c >= 'a' && c <= 'z'; }
bool digit(char c) { return c >= '0' && c <= '9'; }
bool key_char(char c) {
  return lcalpha(c) || digit(c) || c == '_' || c == '-' || c == '*' || c == '/';
}

// simple-key = lcalpha 0*255(keychar); multi-tenant-key = tenant-id "@" system-id, tenant-id =
// (lcalpha / DIGIT) 0*240(keychar), system-id = lcalpha 0*13(keychar).
bool tracestate_key(std::string_view key) {
  auto run = [](std::string_view s, size_t max_rest, bool digit_first) {
    if (s.empty() || s.size() > max_rest + 1) return false;
    if (!(lcalpha(s[0]) || (digit_first && digit(s[0])))) return false;
    for (char c : s.substr(1)) {
      if (!key_char(c)) return false;
    }
    return true;
  };
  const size_t at = key.find('@');
  if (at == std::string_view::npos) return run(key, 255, false);
  return run(key.substr(0, at), 240, true) && run(key.substr(at + 1), 13, false);
}

// value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr; nblk-chr = %x21-2B / %x2D-3C / %x3E-7E.
bool tracestate_value(std::string_view value) {
  if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
  for (char c : value) {
    if (c < 0x20 || c > 0x7e || c == ',' || c == '=') return false;
  }
  return true;
}

}  // namespace

bool valid_traceparent(std::string_view v) {
  if (v.size() < kTraceparentBytes || v.size() > kMaxTraceparentBytes) return false;
  const std::string_view version = v.substr(0, 2);
  if (!lower_hex(version) || version == "ff") return false;
  // Version 00 is exactly 55 bytes; a later version may append "-..." that we pass unread.
  if (v.size() > kTraceparentBytes && (version == "00" || v[kTraceparentBytes] != '-')) {
    return false;
  }
  if (v[2] != '-' || v[35] != '-' || v[52] != '-') return false;
  const std::string_view trace_id = v.substr(3, 32);
  const std::string_view parent_id = v.substr(36, 16);
  return lower_hex(trace_id) && !all_zero(trace_id) && lower_hex(parent_id) &&
         !all_zero(parent_id) && lower_hex(v.substr(53, 2));
}

bool valid_tracestate(std::string_view v) {
  if (v.size() > kMaxTracestateBytes) return false;
  size_t members = 0;
  while (true) {
    const size_t comma = v.find(',');
    std::string_view member = v.substr(0, comma);
    while (!member.empty() && (member.front() == ' ' || member.front() == '\t')) {
      member.remove_prefix(1);
    }
    while (!member.empty() && (member.back() == ' ' || member.back() == '\t')) {
      member.remove_suffix(1);
    }
    if (!member.empty()) {  // empty list members are allowed and ignored
      const size_t eq = member.find('=');
      if (eq == std::string_view::npos || !tracestate_key(member.substr(0, eq)) ||
          !tracestate_value(member.substr(eq + 1)) || ++members > kMaxTracestateMembers) {
        return false;
      }
    }
    if (comma == std::string_view::npos) return true;
    v.remove_prefix(comma + 1);
  }
}

std::string_view peer_ip(std::string_view a) {
  if (!a.empty() && a.front() == '[') {
    const size_t close = a.find(']');
    return close == std::string_view::npos ? a.substr(1) : a.substr(1, close - 1);
  }
  const size_t colon = a.rfind(':');
  if (colon != std::string_view::npos && a.find(':') == colon) return a.substr(0, colon);
  return a;
}

UpstreamHeaderOptions upstream_header_options(const policy::Policy& policy,
                                              const policy::Rule* rule,
                                              std::string_view peer_address,
                                              std::string_view request_id) {
  UpstreamHeaderOptions o;
  o.forward_client_key = rule != nullptr && rule->forward_client_key;
  o.request_id = request_id;
  o.peer_address = peer_address;
  const std::string_view ip = peer_ip(peer_address);
  for (const auto& t : policy.trusted_proxies) o.peer_trusted = o.peer_trusted || t == ip;
  return o;
}

void build_upstream_headers(const policy::Upstream& upstream, const UpstreamHeaderOptions& o,
                            proto::HttpHeaders& h) {
  proto::remove_hop_by_hop(h);
  const std::string_view ip = peer_ip(o.peer_address);
  std::string xff;
  std::string forwarded;
  std::string real_ip;
  // W3C Trace Context: one valid traceparent, else neither it nor tracestate (which means
  // nothing without it); the tracestate fields combined (RFC 9110 list) must be valid too.
  int traceparents = 0;
  bool trace_ok = true;
  std::string tracestate;
  bool has_tracestate = false;
  for (const auto& e : h) {
    if (proto::iequals(e.name, "traceparent")) {
      ++traceparents;
      trace_ok = trace_ok && valid_traceparent(e.value);
    } else if (proto::iequals(e.name, "tracestate")) {
      if (has_tracestate) tracestate += ",";
      tracestate += e.value;
      has_tracestate = true;
    } else if (o.peer_trusted && proto::iequals(e.name, "X-Forwarded-For")) {
      if (!xff.empty()) xff += ", ";
      xff += e.value;
    } else if (o.peer_trusted && proto::iequals(e.name, "Forwarded")) {
      if (!forwarded.empty()) forwarded += ", ";
      forwarded += e.value;
    } else if (o.peer_trusted && proto::iequals(e.name, "X-Real-IP")) {
      real_ip = e.value;
    }
  }
  const bool drop_traceparent = traceparents != 1 || !trace_ok;
  const bool drop_tracestate =
      has_tracestate && (drop_traceparent || !valid_tracestate(tracestate));
  // What the gateway sets itself or must not pass on, in one pass over the client's headers.
  const bool replace_id = !o.request_id.empty();
  h.remove_if([&](const proto::HttpHeader& e) {
    using proto::iequals;
    return iequals(e.name, "Host") || iequals(e.name, "Content-Length") ||
           iequals(e.name, "Cutline-Deadline-Ms") ||
           (!o.forward_client_key && iequals(e.name, "Authorization")) ||
           (replace_id && iequals(e.name, "X-Request-Id")) || iequals(e.name, "X-Forwarded-For") ||
           iequals(e.name, "Forwarded") || iequals(e.name, "X-Real-IP") ||
           (drop_traceparent && iequals(e.name, "traceparent")) ||
           (drop_tracestate && iequals(e.name, "tracestate"));
  });
  if (replace_id) h.add("X-Request-Id", o.request_id);
  if (!ip.empty()) {
    if (!xff.empty()) xff += ", ";
    xff += ip;
    if (!forwarded.empty()) forwarded += ", ";
    const bool v6 = ip.find(':') != std::string_view::npos;
    forwarded += v6 ? "for=\"[" + std::string(ip) + "]\"" : "for=" + std::string(ip);
  }
  if (real_ip.empty()) real_ip = ip;
  if (!xff.empty()) h.add("X-Forwarded-For", xff);
  if (!real_ip.empty()) h.add("X-Real-IP", real_ip);
  if (!forwarded.empty()) h.add("Forwarded", forwarded);

  if (upstream.api_key) h.set("Authorization", "Bearer " + upstream.api_key->value);
  for (const auto& extra : upstream.headers) h.set(extra.name, extra.value.value);
}

}  // namespace cutline::gateway
