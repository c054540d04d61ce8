#include "cutline/gateway/upstream_headers.h"

#include <string>

namespace cutline::gateway {

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
  if (o.peer_trusted) {
    for (const auto& e : h) {
      if (proto::iequals(e.name, "X-Forwarded-For")) {
        if (!xff.empty()) xff += ", ";
        xff += e.value;
      } else if (proto::iequals(e.name, "Forwarded")) {
        if (!forwarded.empty()) forwarded += ", ";
        forwarded += e.value;
      }
    }
  }
  // What the gateway sets itself or must not pass on, in one pass over the client's headers.
  const bool replace_id = !o.request_id.empty();
  h.remove_if([&](const proto::HttpHeader& e) {
    using proto::iequals;
    return iequals(e.name, "Host") || iequals(e.name, "Content-Length") ||
           iequals(e.name, "Cutline-Deadline-Ms") ||
           (!o.forward_client_key && iequals(e.name, "Authorization")) ||
           (replace_id && iequals(e.name, "X-Request-Id")) || iequals(e.name, "X-Forwarded-For") ||
           iequals(e.name, "Forwarded");
  });
  if (replace_id) h.add("X-Request-Id", o.request_id);
  if (!ip.empty()) {
    if (!xff.empty()) xff += ", ";
    xff += ip;
    if (!forwarded.empty()) forwarded += ", ";
    const bool v6 = ip.find(':') != std::string_view::npos;
    forwarded += v6 ? "for=\"[" + std::string(ip) + "]\"" : "for=" + std::string(ip);
  }
  if (!xff.empty()) h.add("X-Forwarded-For", xff);
  if (!forwarded.empty()) h.add("Forwarded", forwarded);

  if (upstream.api_key) h.set("Authorization", "Bearer " + upstream.api_key->value);
  for (const auto& extra : upstream.headers) h.set(extra.name, extra.value.value);
}

}  // namespace cutline::gateway
