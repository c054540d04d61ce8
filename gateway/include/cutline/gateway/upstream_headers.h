#pragma once
// The headers of a request the gateway sends upstream, built from the client's, the same way on
// every route (completions, responses, embeddings, models, passthrough):
//   - hop-by-hop headers, Host, Content-Length and the gateway's own request headers
//     (Cutline-Deadline-Ms) are removed;
//   - the client's Authorization goes upstream only when the matched rule says
//     forward_client_key: true (it is the gateway's tenant key, or a key meant for the gateway);
//   - X-Request-Id is the gateway's request id (the client's own when it was valid);
//   - traceparent / tracestate pass unchanged when valid (W3C Trace Context: one traceparent
//     by valid_traceparent, tracestate by valid_tracestate); an invalid traceparent drops both,
//     an invalid tracestate drops itself;
//   - X-Forwarded-For gets the client's address appended and Forwarded a `for=` element, and
//     X-Real-IP is the client's address; what the client sent in any of them is dropped unless
//     its peer address is trusted (limits.trusted_proxies), so a client cannot claim another
//     address (a trusted proxy's X-Real-IP is kept);
//   - last, the upstream's own credentials: api_key as `Authorization: Bearer <key>` and every
//     upstreams[i].headers entry, each replacing a header of that name.
// Pure: no I/O. Callers: Stream::route, Passthrough::start, the /v1/models merge.

#include <string_view>

#include "cutline/policy/policy.h"
#include "cutline/proto/http1/http_message.h"

namespace cutline::gateway {

struct UpstreamHeaderOptions {
  bool forward_client_key = false;
  std::string_view request_id;
  // The client's "ip:port" (ServerStream::peer_address), "" when unknown.
  std::string_view peer_address;
  // The peer is a trusted proxy: the X-Forwarded-For / Forwarded it sent are kept (and appended
  // to).
  bool peer_trusted = false;
};

// `headers` holds the client's headers on entry and the upstream request's on return.
void build_upstream_headers(const policy::Upstream& upstream, const UpstreamHeaderOptions& options,
                            proto::HttpHeaders& headers);

// W3C Trace Context (version 00 grammar): "VV-<32 hex>-<16 hex>-FF", lower-case hex, neither id
// all zeros, version ff invalid; a later version may be longer (up to 512 bytes) after a '-'.
bool valid_traceparent(std::string_view value);
// At most 32 list members and 512 bytes; each member empty or key=value by the spec's grammar.
bool valid_tracestate(std::string_view value);

// The IP of an "ip:port" / "[v6]:port" peer address (brackets removed).
std::string_view peer_ip(std::string_view peer_address);

// The options for a request matched by `rule` (null: no rule matched) from `peer_address`:
// forward_client_key from the rule, peer_trusted from policy.trusted_proxies.
UpstreamHeaderOptions upstream_header_options(const policy::Policy& policy,
                                              const policy::Rule* rule,
                                              std::string_view peer_address,
                                              std::string_view request_id);

}  // namespace cutline::gateway
