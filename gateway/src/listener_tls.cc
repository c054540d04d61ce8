#include "cutline/gateway/listener_tls.h"

namespace cutline::gateway {

Result<std::shared_ptr<const proto::TlsContext>> listener_tls_context(
    const policy::ListenerTls& tls) {
  proto::TlsServerConfig config;
  config.cert_file = tls.cert_file;
  config.key_file = tls.key_file;
  config.min_version = tls.min_version == policy::TlsVersion::kTls13 ? proto::TlsMinVersion::kTls13
                                                                     : proto::TlsMinVersion::kTls12;
  config.alpn = {"h2", "http/1.1"};  // HTTP/2 by ALPN (ServerOptions::http2)
  auto context = proto::TlsContext::server(config);
  if (!context.ok()) {
    const std::string where = tls.ref.path.empty() ? std::string("listen tls") : tls.ref.path;
    return make_error(context.error().kind, where + ": " + context.error().message);
  }
  return context;
}

}  // namespace cutline::gateway
