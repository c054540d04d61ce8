#pragma once
// StreamHost: what a request in flight (Stream, Passthrough, ModelsList — each through its
// RequestLifecycle, request_lifecycle.h) needs from the process around it, and nothing more: the
// clock, the metrics and the access log it records into, the policy in force, the upstream pools
// and TLS contexts it routes with, and the admission queues. The Gateway implements it; the phase
// tests implement it with a ManualClock, a policy parsed from inline YAML and a captured access
// log, so a request's phases run without a process or a socket (Envoy's ActiveStream /
// FilterManagerCallbacks split).
//
// Who calls what: a request calls these per request (the clock and the policy at accept, the
// access log and the metrics once, from finish, through record_response_end; the pools and TLS
// contexts at route; the admission queues at decide and admit), never per token: what the relay
// touches per chunk (the clock) is read once when the stream is made and held by reference.
//
// Threading: every method may be called from any worker thread.

#include <cstdint>
#include <memory>

#include "cutline/base/clock.h"
#include "cutline/gateway/access_log.h"
#include "cutline/gateway/admission_dispatch.h"
#include "cutline/gateway/metrics.h"
#include "cutline/gateway/upstream_pools.h"
#include "cutline/gateway/upstream_target.h"
#include "cutline/policy/policy.h"

namespace cutline::gateway {

class StreamHost {
 public:
  virtual ~StreamHost() = default;

  // The monotonic clock every measurement reads (outlives every stream).
  virtual const base::Clock& clock() const = 0;
  virtual GatewayMetrics& metrics() = 0;
  // Null when the policy turns the access log off.
  virtual AccessLog* access_log() = 0;
  // The policy in force now (a stream takes it once and holds it for its life), and how many
  // times it was loaded (/v1/models caches its merged list per generation).
  virtual std::shared_ptr<const policy::Policy> policy() const = 0;
  virtual uint64_t policy_generation() const = 0;
  // Client TLS contexts of the https:// upstreams of every policy in use (fill_upstream_target).
  virtual const UpstreamTlsCache& upstream_tls() const = 0;
  // The endpoint pools of the policy in force (upstream_pools.h); null before the gateway runs.
  virtual std::shared_ptr<UpstreamPools> upstream_pools() const = 0;
  // Clients see the gateway's own upstream transport errors whole (GatewayOptions).
  virtual bool upstream_error_detail() const = 0;
  // The admission queues of every admission group and their waiters.
  virtual AdmissionDispatch& admission() = 0;
};

}  // namespace cutline::gateway
