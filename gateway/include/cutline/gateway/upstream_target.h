#pragma once
// Where an upstream request goes and how it is spoken: one function turns a policy::Upstream
// (upstreams[i].url scheme, protocol, tls) into the connection fields of a proto::ClientRequest
// (host, port, TLS client context, SNI / verified name, HTTP version). Every place the gateway
// calls an upstream (Stream::route, Passthrough::start, the /readyz probe) uses it, so that
// https://, h2c:// and `protocol:` mean the same everywhere.
//
// TLS client contexts are built when a policy loads (UpstreamTlsContexts::build: the CA file,
// client certificate and key are read and checked then, and an unreadable or mismatched file
// refuses the load or reload naming the file and the YAML line), never per request. The gateway
// keeps the contexts of every policy still in use (UpstreamTlsCache), so a stream holding an
// older policy snapshot after a reload still finds the contexts that match its snapshot.
//
// Threading: UpstreamTlsContexts is immutable; UpstreamTlsCache is safe from any thread.

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/policy/policy.h"
#include "cutline/proto/http/http_client.h"
#include "cutline/proto/tls/tls_context.h"

namespace cutline::gateway {

// What a client is told about an upstream exchange that failed in the gateway's own transport
// (resolve, connect, TLS, a connection lost): `upstream "NAME": <what>`. The gateway's messages
// for these name internal addresses ("connect failed: ... 10.0.3.7:8000", DNS names): with
// `detail` false (the default; cutline-gateway --upstream-error-detail turns it on) the client
// gets the kind only ("connect_refused"), with it the whole message. An upstream's own error
// status and body are not this: they pass through unchanged.
std::string upstream_error_text(const std::string& upstream, const proto::ClientError& error,
                                bool detail);

// The client TLS contexts of one policy: one per https:// upstream, keyed by the Upstream's
// address inside that policy (valid while the policy is alive).
class UpstreamTlsContexts {
 public:
  // Builds a context for every https:// upstream of `policy`: verification against
  // upstreams[i].tls.ca_file (or the system CA store), the client certificate and key for mTLS,
  // verify: false honoured. Errors (kIo): "FILE:LINE: upstreams[i].tls: cannot load CA file
  // ca.pem: <OpenSSL's reason>".
  static Result<std::shared_ptr<const UpstreamTlsContexts>> build(const policy::Policy& policy);

  // The context for `upstream` (null when it is not an https:// upstream of this policy).
  std::shared_ptr<const proto::TlsContext> find(const policy::Upstream& upstream) const;

 private:
  std::vector<std::pair<const policy::Upstream*, std::shared_ptr<const proto::TlsContext>>>
      by_upstream_;
};

// The contexts of every policy still held by someone (the policy in force and snapshots that
// in-flight streams keep). The gateway adds each policy's contexts before it swaps the policy in.
class UpstreamTlsCache {
 public:
  // Remembers `contexts` for `policy` and forgets those of policies nobody holds any more.
  void add(const std::shared_ptr<const policy::Policy>& policy,
           std::shared_ptr<const UpstreamTlsContexts> contexts);
  // The context for `upstream`, looked up in the policy it belongs to; null when that policy's
  // contexts have none for it.
  std::shared_ptr<const proto::TlsContext> find(const policy::Upstream& upstream) const;

 private:
  struct Entry {
    std::weak_ptr<const policy::Policy> policy;
    std::shared_ptr<const UpstreamTlsContexts> contexts;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
};

// Fills req.host, req.port, req.tls, req.tls_server_name and req.protocol for `upstream`:
//   http://   HTTP/1.1 (protocol h2: HTTP/2 with prior knowledge)
//   h2c://    HTTP/2 with prior knowledge, cleartext
//   https://  TLS with the policy's context; SNI and the verified name are tls.server_name or
//             the URL's host; protocol auto offers ALPN h2 and http/1.1 and speaks what the
//             upstream picks, http1 / h2 force one.
// Errors (kInternal): an https:// upstream whose policy has no context in `cache` (a policy not
// loaded through the gateway); the request must not then go out in cleartext.
Status fill_upstream_target(const policy::Upstream& upstream, const UpstreamTlsCache& cache,
                            proto::ClientRequest& req);

}  // namespace cutline::gateway
