#include "cutline/gateway/upstream_target.h"

#include <algorithm>

namespace cutline::gateway {

std::string upstream_error_text(const std::string& upstream, const proto::ClientError& error,
                                bool detail) {
  std::string text = "upstream \"" + upstream + "\": ";
  if (detail) return text + error.message;
  switch (error.kind) {
    case proto::ClientErrorKind::kResolve:
      return text + "cannot resolve the upstream's address";
    case proto::ClientErrorKind::kConnectRefused:
      return text + "connection refused";
    case proto::ClientErrorKind::kConnectTimeout:
      return text + "connect timed out";
    case proto::ClientErrorKind::kConnectFailed:
      return text + "cannot connect";
    case proto::ClientErrorKind::kClosedBeforeHead:
      return text + "closed the connection before answering";
    case proto::ClientErrorKind::kClosedMidBody:
      return text + "closed the connection mid-response";
    case proto::ClientErrorKind::kParse:
      return text + "answered with a malformed response";
  }
  return text + std::string(proto::to_string(error.kind));
}

namespace {

// "FILE:LINE: upstreams[i].tls" for error messages (the upstream's line: tls has no own ref).
std::string where(const policy::Policy& p, const policy::Upstream& u) {
  std::string w = p.source_file;
  if (u.ref.line > 0) w += ":" + std::to_string(u.ref.line);
  if (!w.empty()) w += ": ";
  return w + (u.ref.path.empty() ? "upstream " + u.name : u.ref.path) + ".tls";
}

}  // namespace

Result<std::shared_ptr<const UpstreamTlsContexts>> UpstreamTlsContexts::build(
    const policy::Policy& p) {
  auto out = std::make_shared<UpstreamTlsContexts>();
  for (const policy::Upstream& u : p.upstreams) {
    if (u.scheme != policy::UpstreamScheme::kHttps) continue;
    proto::TlsClientConfig config;
    config.ca_file = u.tls.ca_file;
    config.cert_file = u.tls.cert_file;
    config.key_file = u.tls.key_file;
    config.verify = u.tls.verify;
    // ALPN is chosen per connection by HttpClient from ClientRequest::protocol.
    auto context = proto::TlsContext::client(config);
    if (!context.ok()) {
      return make_error(context.error().kind, where(p, u) + ": " + context.error().message);
    }
    out->by_upstream_.emplace_back(&u, std::move(context).value());
  }
  return std::shared_ptr<const UpstreamTlsContexts>(std::move(out));
}

std::shared_ptr<const proto::TlsContext> UpstreamTlsContexts::find(
    const policy::Upstream& upstream) const {
  for (const auto& [u, context] : by_upstream_) {
    if (u == &upstream) return context;
  }
  return nullptr;
}

void UpstreamTlsCache::add(const std::shared_ptr<const policy::Policy>& policy,
                           std::shared_ptr<const UpstreamTlsContexts> contexts) {
  std::lock_guard lock(mu_);
  std::erase_if(entries_, [](const Entry& e) { return e.policy.expired(); });
  entries_.push_back(Entry{policy, std::move(contexts)});
}

std::shared_ptr<const proto::TlsContext> UpstreamTlsCache::find(
    const policy::Upstream& upstream) const {
  std::lock_guard lock(mu_);
  // Newest first: the policy in force serves almost every request. An expired entry's Upstream
  // addresses may have been reused by a newer policy, so it is skipped.
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->policy.expired()) continue;
    if (auto context = it->contexts->find(upstream)) return context;
  }
  return nullptr;
}

Status fill_upstream_target(const policy::Upstream& upstream, const UpstreamTlsCache& cache,
                            proto::ClientRequest& req) {
  using policy::UpstreamProtocol;
  using policy::UpstreamScheme;
  req.host = upstream.host;
  req.port = upstream.port;
  req.tls = nullptr;
  req.tls_server_name.clear();
  switch (upstream.scheme) {
    case UpstreamScheme::kHttp:
      req.protocol = upstream.protocol == UpstreamProtocol::kHttp2 ? proto::ClientProtocol::kHttp2
                                                                   : proto::ClientProtocol::kHttp1;
      return {};
    case UpstreamScheme::kH2c:
      req.protocol = proto::ClientProtocol::kHttp2;
      return {};
    case UpstreamScheme::kHttps:
      break;
  }
  req.tls = cache.find(upstream);
  if (!req.tls) {
    return make_error(ErrorKind::kInternal,
                      "no TLS context for https upstream \"" + upstream.name + "\"");
  }
  req.tls_server_name = upstream.tls.server_name;
  switch (upstream.protocol) {
    case UpstreamProtocol::kAuto:
      req.protocol = proto::ClientProtocol::kAuto;
      break;
    case UpstreamProtocol::kHttp1:
      req.protocol = proto::ClientProtocol::kHttp1;
      break;
    case UpstreamProtocol::kHttp2:
      req.protocol = proto::ClientProtocol::kHttp2;
      break;
  }
  return {};
}

}  // namespace cutline::gateway
