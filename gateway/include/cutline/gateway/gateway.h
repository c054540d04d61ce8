#pragma once
// Gateway: the cutline-gateway process's object graph. Owns the worker loops, the client-facing
// HttpServer (OpenAI routes go through Stream's phases, every other path is passed through
// unchanged), the admin listener (admin.h), the policy in force (PolicyHolder), the admission
// queues and their waiters (AdmissionDispatch), the token pools, the metrics and the access log.
//
// Who calls what: main() (or a test) calls create(), start(), reload() on SIGHUP / file change,
// and stop(), all from one controlling thread. Streams call the accessors from worker threads;
// those are thread-safe.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cutline/base/clock.h"
#include "cutline/gateway/access_log.h"
#include "cutline/gateway/admission_dispatch.h"
#include "cutline/gateway/metrics.h"
#include "cutline/gateway/stream_host.h"
#include "cutline/gateway/supervisor.h"
#include "cutline/gateway/upstream_pools.h"
#include "cutline/gateway/upstream_target.h"
#include "cutline/gateway/worker.h"
#include "cutline/policy/admission_queue.h"
#include "cutline/policy/policy_holder.h"
#include "cutline/policy/token_pool.h"
#include "cutline/proto/http/http_server.h"
#include "cutline/proto/net/worker_threads.h"

namespace cutline::gateway {

class Admin;

struct GatewayOptions {
  std::string config_path;
  int workers = 2;
  // Overrides the policy's listen/admin ports (tests pass 0 for a free port); -1 = as configured.
  int port_override = -1;
  int admin_port_override = -1;
  // Co-located upstream processes (policy upstreams[i].spawn): restart back-off, stop grace.
  SupervisorOptions supervisor;
  // Clients see the gateway's own upstream transport errors whole (addresses, DNS names)
  // instead of their kind only (upstream_error_text). For a gateway whose clients are its
  // operators; off by default.
  bool upstream_error_detail = false;
};

class Gateway final : public StreamHost {
 public:
  // Loads the policy file; errors name every problem (file:line:column).
  static Result<std::unique_ptr<Gateway>> create(GatewayOptions options);
  ~Gateway();

  // Starts the workers and the admin listener, then the supervised upstream processes (waiting
  // until each answers /healthz), then the client listener. An upstream that never becomes
  // ready fails start() with a message naming it.
  Status start();
  // Closes every connection (streams still open end as client_cancel), then stops the
  // supervised upstream processes (SIGTERM, SIGKILL after the grace period).
  void stop();

  // Graceful shutdown, in this order from the controlling thread: begin_drain() closes the
  // client listener (new connections are refused; a new request on an open keep-alive
  // connection gets 503 with a stop record, cause admission_rejected, rule "shutdown"); poll
  // open_streams() until 0 or the drain timeout; cut_remaining() ends what is left with cause
  // gateway_deadline, rule "shutdown.drain_timeout"; then stop().
  void begin_drain();
  bool draining() const { return draining_.load(); }
  size_t open_streams();
  void cut_remaining(int64_t drain_timeout_ms, double drained_ms);
  // The supervised upstream processes (null before start()).
  const Supervisor* supervisor() const { return supervisor_.get(); }
  uint16_t port() const;  // listen[0]'s bound port
  // Every listener's bound port, in listen[] order.
  std::vector<uint16_t> ports() const;
  uint16_t admin_port() const;

  // Reloads the policy file: new requests use it, in-flight streams keep their snapshot. The
  // certificates it names are loaded first (listen[i].tls: new handshakes use the new one;
  // upstreams[i].tls: new upstream connections). On error (the file, or an unreadable or
  // mismatched certificate/key) the old policy and certificates stay; the error text is returned
  // and counted.
  Status reload();

  // ---- for streams (StreamHost) and the admin listener (thread-safe) ------------------------
  const base::Clock& clock() const override { return clock_; }
  GatewayMetrics& metrics() override { return metrics_; }
  AccessLog* access_log() override { return access_log_.get(); }
  // Reopens the access log file at its path (SIGUSR1, after logrotate renamed it).
  Status reopen_logs() { return access_log_ ? access_log_->reopen() : Status{}; }
  // Failed calls of the workers' budget stores (Redis), for cutline_budget_store_errors_total.
  // Call while started (the admin listener).
  uint64_t budget_store_errors() const;
  // Tokens the running requests hold from the token pools, over every worker's store.
  int64_t pool_held_tokens() const;
  // Client TLS contexts of the https:// upstreams of every policy in use (fill_upstream_target).
  const UpstreamTlsCache& upstream_tls() const override { return upstream_tls_; }
  // The endpoint pools of the policy in force (upstream_pools.h); null before start().
  std::shared_ptr<UpstreamPools> upstream_pools() const override;
  std::shared_ptr<const policy::Policy> policy() const override { return holder_->snapshot(); }
  bool upstream_error_detail() const override { return options_.upstream_error_detail; }
  uint64_t policy_generation() const override { return holder_->generation(); }
  double policy_loaded_unix_s() const { return loaded_unix_s_.load(); }
  // The fields of the policy file in force that differ from what the gateway started with and
  // that a reload cannot apply (listen[], admin, upstreams[i].spawn, access_log): they wait for
  // a restart. "listen", "admin", "upstreams.NAME.spawn", "access_log"; empty when none.
  // Each reload that leaves one pending logs it; /v1/cutline/policy lists them. Any thread.
  std::vector<std::string> restart_required() const;
  // The admission queues of every admission group and their waiters (admission_dispatch.h).
  AdmissionDispatch& admission() override { return admission_; }
  proto::WorkerThreads& workers() { return workers_; }
  Worker& worker(int index) { return *per_loop_[static_cast<size_t>(index)]; }
  uint64_t next_stream_id() { return next_id_.fetch_add(1, std::memory_order_relaxed); }
  // Policy label bounds for the metrics, from a policy.
  static LabelBounds bounds_of(const policy::Policy& policy);

 private:
  Gateway(GatewayOptions options, std::shared_ptr<const policy::Policy> initial);
  void handle(std::shared_ptr<proto::ServerStream> stream);
  // The HTTP layer's own answer to a request it refused (on_protocol_error), with its stop
  // record: answer_refused() (response_end.h) with the cause and the limit that fired.
  void answer_protocol_error(const policy::Limits& limits, const proto::HttpRequest& request,
                             const Error& error, proto::HttpHeaders& headers, std::string& body);
  void start_worker_clients(const policy::Policy& policy);
  // Keeps (and logs) what a reloaded policy changes that only a restart applies.
  void note_restart_required(const policy::Policy& next);

  GatewayOptions options_;
  base::MonotonicClock clock_;
  std::unique_ptr<policy::PolicyHolder> holder_;
  UpstreamTlsCache upstream_tls_;
  // Rebuilt on every (re)load, taking over the endpoints' state; probed on worker 0's loop.
  void swap_upstream_pools(std::shared_ptr<const policy::Policy> policy);
  mutable std::mutex upstream_pools_mu_;
  std::shared_ptr<UpstreamPools> upstream_pools_;  // guarded by upstream_pools_mu_
  std::atomic<double> loaded_unix_s_{0};
  std::shared_ptr<const policy::Policy> started_policy_;  // what listeners, admin, spawn, log use
  mutable std::mutex restart_required_mu_;
  std::vector<std::string> restart_required_;  // guarded by restart_required_mu_
  GatewayMetrics metrics_;
  std::unique_ptr<AccessLog> access_log_;
  // This process's token pools: budget_store memory, and Redis's fail-open fallback. Each
  // worker reaches the pools through its own AsyncPoolStore (Worker::pools, make_pool_store).
  std::unique_ptr<policy::PoolStore> pools_;
  std::unique_ptr<AsyncPoolStore> make_pool_store(proto::EventLoop& loop,
                                                  const policy::BudgetStore& store);
  std::shared_ptr<const proto::TlsContext> redis_tls_;  // rediss:// budget_store; read at start
  proto::WorkerThreads workers_;
  std::vector<std::unique_ptr<Worker>> per_loop_;
  std::vector<std::unique_ptr<proto::HttpServer>> servers_;  // one per listen[] entry
  std::unique_ptr<Admin> admin_;
  std::unique_ptr<Supervisor> supervisor_;
  std::atomic<bool> draining_{false};
  std::vector<bool> listener_tls_;  // by listen[] index: that listener was started with TLS
  std::atomic<uint64_t> next_id_{1};

  AdmissionDispatch admission_{clock_};
  // Written by start()/stop() on the controlling thread, read on worker loops (the probing
  // task that swap_upstream_pools() posts to worker 0): atomic.
  std::atomic<bool> started_{false};
};

}  // namespace cutline::gateway
