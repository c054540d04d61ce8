#pragma once
// Admin: the gateway's separate admin listener (policy `admin.address`):
//   GET /metrics              Prometheus text format (prometheus-cpp core TextSerializer)
//   GET /healthz              200 "ok" while the process serves
//   GET /readyz               (cached for 1 s) 200 when the policy is loaded, every upstream
//   answers
//                             (GET <base_path>/v1/models, any status, within 2 s), every
//                             supervised upstream process is "ready", every pool with health
//                             checks has an endpoint that passed one or has checked each
//                             endpoint once ("health_pending" names the others; the first round
//                             lasts at most health.timeout), and the gateway is not draining;
//                             else 503. The body names the unreachable upstreams and each
//                             process: {"upstream","state","pid","restarts","last_exit"}
//   GET /v1/cutline/streams   live streams across all workers: tenant, model, phase, tokens so
//                             far, time left on each armed timer
//   GET /v1/cutline/policy    {"generation", "loaded_at_unix_s", "restart_required": [...],
//                             "policy": the policy in force (policy_json.h)}
// GET and HEAD only (405 with Allow otherwise). With policy `admin.token`, every path but
// /healthz needs "Authorization: Bearer <token>" (401 otherwise). /readyz probes at most once per
// kReadyCacheMs and answers from that result in between. The listener binds loopback unless
// `admin.address` names another address.
// Runs on the gateway's worker loops (its own HttpServer sharing them).

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/proto/http/http_server.h"

namespace cutline::gateway {

class Gateway;

class Admin {
 public:
  Admin(Gateway& gateway, std::string address, uint16_t port);
  ~Admin();
  Status start();
  void stop();
  uint16_t port() const { return server_->port(); }

 private:
  void handle(std::shared_ptr<proto::ServerStream> stream);
  void streams(std::shared_ptr<proto::ServerStream> stream);
  bool allowed(proto::ServerStream& stream);  // method and token; answers 405/401 itself
  void ready(std::shared_ptr<proto::ServerStream> stream);
  void probe_ready(std::shared_ptr<proto::ServerStream> stream);
  void ready_answered(int status, const std::string& body);
  std::string policy_json() const;

  static constexpr int64_t kReadyCacheMs = 1000;

  Gateway& gw_;
  std::unique_ptr<proto::HttpServer> server_;
  // The last /readyz answer and the requests waiting for the probe in flight (any worker).
  struct ReadyCache {
    int status = 0;
    std::string body;
    int64_t at_ms = 0;  // 0 = never probed
  };
  std::mutex ready_mu_;
  ReadyCache ready_cache_;                                           // guarded by ready_mu_
  std::vector<std::shared_ptr<proto::ServerStream>> ready_waiters_;  // guarded by ready_mu_
};

}  // namespace cutline::gateway
