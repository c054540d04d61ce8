#pragma once
// Admin: the gateway's separate admin listener (policy `admin.address`):
//   GET /metrics              Prometheus text format (prometheus-cpp core TextSerializer)
//   GET /healthz              200 "ok" while the process serves
//   GET /readyz               200 when the policy is loaded, every upstream answers
//                             (GET <base_path>/v1/models, any status, within 2 s), every
//                             supervised upstream process is "ready" and the gateway is not
//                             draining; else 503. The body names the unreachable upstreams and
//                             each process: {"upstream","state","pid","restarts","last_exit"}
//   GET /v1/cutline/streams   live streams across all workers: tenant, model, phase, tokens so
//                             far, time left on each armed timer
//   GET /v1/cutline/policy    the policy in force: file, generation, load time, rules and limits
// Runs on the gateway's worker loops (its own HttpServer sharing them).

#include <memory>

#include "cutline/proto/http_server.h"
#include "cutline/proto/result.h"

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
  void ready(std::shared_ptr<proto::ServerStream> stream);
  std::string policy_json() const;

  Gateway& gw_;
  std::unique_ptr<proto::HttpServer> server_;
};

}  // namespace cutline::gateway
