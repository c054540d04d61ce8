#pragma once
// The TLS side of the gateway's client listener: turns listen[i].tls from the policy into a
// proto::TlsContext (certificate chain, key, minimum version, ALPN). Called by Gateway::start()
// before the listener opens, so that an unreadable or mismatched certificate/key stops the start
// with a clear error naming the file, instead of failing every handshake later.

#include <memory>

#include "cutline/base/result.h"
#include "cutline/policy/policy.h"
#include "cutline/proto/tls/tls_context.h"

namespace cutline::gateway {

// ALPN offered: "h2" then "http/1.1" (the HTTP server serves HTTP/2 when h2 is negotiated; a
// client that offers only http/1.1, or none, gets HTTP/1.1). Errors (kIo) name the YAML path of
// the listener and the file.
Result<std::shared_ptr<const proto::TlsContext>> listener_tls_context(
    const policy::ListenerTls& tls);

}  // namespace cutline::gateway
