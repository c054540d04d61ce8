#pragma once
// Supervisor: starts and watches the co-located upstream processes (policy
// `upstreams[i].spawn`), so that `cutline-gateway --config deploy/local/cutline.yaml` is the
// whole product on one machine.
//
// For each upstream with `spawn`:
//   - start: fork + execve(command) in its own process group (Ctrl-C on the gateway's terminal
//     does not reach it; the gateway stops it), the gateway's environment plus `spawn.env`
//     minus every variable the policy reads a secret from (`env:NAME` API keys, admin token,
//     upstream credentials, Redis password: the backend needs none of them; a name that
//     spawn.env sets is passed as set there), default signal dispositions and an empty signal
//     mask, stdin from /dev/null, stdout and stderr both to the gateway's stderr (the gateway's
//     stdout stays the access log), no other descriptor (everything above 2 is closed before
//     exec, whatever its close-on-exec flag), and PR_SET_PDEATHSIG SIGTERM: a gateway killed
//     with SIGKILL does not leave its backend running.
//     command[0] without a '/' is looked up in PATH; with one it is used as written, relative
//     to the gateway's working directory. The command is passed as written: no placeholders,
//     so its port must be the one in the upstream's url.
//   - ready: GET <url>/healthz answers 200 (polled every health_interval_ms, each probe bounded
//     by probe_timeout_ms), within spawn.ready_timeout. At gateway start-up, a process that is
//     not ready in time (or exits first) fails start() with a message naming the upstream.
//   - restart: when the process exits (or a restart misses its ready_timeout) it is started
//     again after a back-off: backoff_initial_ms, doubling up to backoff_max_ms, back to the
//     initial value once a run has stayed up for stable_after_ms. Streams relayed to it end on
//     their own through the relay (the connection drops: `upstream_disconnect`).
//   - stop: SIGTERM to the process group, SIGKILL after stop_grace_ms.
//
// Children are reaped by waitpid(pid, WNOHANG) on the supervisor's own thread every
// poll_interval_ms: no SIGCHLD handler, no work in signal context, and only our own pids are
// waited for. The spawn section is read once, at start(): a reload does not restart processes.
//
// Threading: start() and stop() from the controlling thread; statuses() from any thread.

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/gateway/metrics.h"
#include "cutline/policy/policy.h"

namespace cutline::gateway {

enum class ProcessState : uint8_t {
  kStarting,    // spawned, /healthz not 200 yet
  kReady,       // /healthz answered 200; exit is watched
  kRestarting,  // exited (or missed its ready timeout); waiting out the back-off
  kFailed,      // never became ready at start-up
  kStopped,     // stopped with the gateway
};
std::string_view to_string(ProcessState state);

struct SupervisorOptions {
  int64_t backoff_initial_ms = 500;
  int64_t backoff_max_ms = 30000;
  int64_t stable_after_ms = 60000;  // a run this long resets the back-off
  int64_t health_interval_ms = 100;
  int64_t probe_timeout_ms = 1000;
  int64_t poll_interval_ms = 20;  // waitpid poll
  int64_t stop_grace_ms = 10000;  // SIGTERM -> SIGKILL
};

// A snapshot of one supervised process (for /readyz and tests).
struct ProcessStatus {
  std::string upstream;
  ProcessState state = ProcessState::kStarting;
  int pid = 0;  // 0 while none runs
  int64_t restarts = 0;
  std::string last_exit;  // "exited with status 1", "killed by signal 9", "" = none yet
};

class Supervisor {
 public:
  Supervisor(const policy::Policy& policy, GatewayMetrics& metrics, SupervisorOptions options = {});
  ~Supervisor();  // stop()
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Spawns every process and blocks until each is ready (in parallel, each within its own
  // ready_timeout). Errors (kUpstream) name the upstream and why: spawn failed, exited with
  // status N before it was ready, no 200 from /healthz in time. On error the processes are
  // stopped. With no spawn upstream it returns at once.
  Status start();
  // Stops watching and stops every process (SIGTERM, SIGKILL after stop_grace_ms). Idempotent.
  void stop();

  bool empty() const { return procs_.empty(); }
  std::vector<ProcessStatus> statuses() const;

 private:
  struct Proc;
  void run();
  void step(Proc& p, int64_t now_ms);
  Status spawn(Proc& p, int64_t now_ms);
  void on_exit(Proc& p, int wait_status, int64_t now_ms);
  bool healthy(const Proc& p) const;

  GatewayMetrics& metrics_;
  const SupervisorOptions options_;
  std::vector<std::unique_ptr<Proc>> procs_;
  std::vector<std::string> secret_env_;  // names left out of a child's environment
  std::string redis_password_;           // a variable with this value is left out too
  mutable std::mutex mu_;                // guards the status fields of procs_ and stopping_
  std::condition_variable cv_;
  bool stopping_ = false;
  bool startup_ = true;  // start() is waiting: a missed ready timeout fails instead of restarting
  std::thread thread_;
};

}  // namespace cutline::gateway
