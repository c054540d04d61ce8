#pragma once
// UpstreamPools: the EndpointPool of every upstream of one policy snapshot, their probers, and
// the live picture for operators: `/v1/cutline/upstreams` (render_json) and the per-endpoint
// Prometheus series appended to /metrics (render_prometheus).
//
// The gateway builds one per loaded policy (the pools refer into that policy's Upstreams) and
// hands state over on reload (adopt): an endpoint that stays keeps its counters, health and
// ejection; a DNS pool keeps its addresses until the name is resolved again.
//
// The request path needs only find(upstream) and EndpointPool::pick (endpoint_pool.h).
//
// Threading: find(), render_*() from any thread; start_probing()/stop_probing() on the probing
// loop's thread.

#include <memory>
#include <string>
#include <vector>

#include "cutline/base/clock.h"
#include "cutline/gateway/dns_resolver.h"
#include "cutline/gateway/endpoint_pool.h"
#include "cutline/gateway/endpoint_prober.h"
#include "cutline/gateway/upstream_target.h"
#include "cutline/policy/policy.h"

namespace cutline::gateway {

class UpstreamPools {
 public:
  UpstreamPools(std::shared_ptr<const policy::Policy> policy, const base::Clock& clock);
  ~UpstreamPools();

  // The pool of `upstream` (an Upstream of this policy, or one with the same name); null when
  // there is none.
  EndpointPool* find(const policy::Upstream& upstream) const;
  EndpointPool* find(std::string_view name) const;

  // Takes over the state of the endpoints `old` shares with this one.
  void adopt(const UpstreamPools& old);

  // Starts health checks, load polls and DNS on `loop` (its thread). `tls`: the policy's
  // client contexts for https:// upstreams (may be null).
  void start_probing(proto::EventLoop& loop, proto::HttpClient& client,
                     const UpstreamTlsCache* tls = nullptr);
  void stop_probing();

  // {"upstreams":[{"name":..,"balance":..,"dns":..,"resolve_error":..,"no_endpoint":N,
  //   "health_path":"/health","panic_threshold":50,"panic":false,"panic_picks":N,
  //   "endpoints":[{"address":"10.0.0.1:8081","healthy":true,"checked":true,"ejected":false,
  //   "ejected_for_ms":0,"outstanding":2,"requests":..,"errors":..,"ejections":..,
  //   "picked_cold":..,"affinity_hits":..,"load":{"waiting":..,"running":..,"kv_usage":..,
  //   "resident_models":[..],"age_ms":..}|null}]}]}
  std::string render_json() const;
  // cutline_upstream_endpoint_{requests,errors,ejections,picked_cold,affinity_hits}_total,
  // cutline_upstream_endpoint_{outstanding,healthy,ejected} with labels upstream, endpoint;
  // cutline_upstream_panic_total and cutline_upstream_panic with label upstream.
  std::string render_prometheus() const;

  const policy::Policy& policy() const { return *policy_; }

 private:
  std::shared_ptr<const policy::Policy> policy_;
  const base::Clock& clock_;
  std::vector<std::shared_ptr<EndpointPool>> pools_;  // one per policy upstream, same order
  std::unique_ptr<DnsResolver> resolver_;
  std::vector<std::unique_ptr<EndpointProber>> probers_;
};

}  // namespace cutline::gateway
