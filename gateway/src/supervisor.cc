#include "cutline/gateway/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "cutline/base/clock.h"
#include "cutline/proto/http/http_fetch.h"

extern char** environ;

namespace cutline::gateway {
namespace {

// The supervisor's waits and restart back-offs, on the one monotonic clock.
int64_t now_ms() {
  static const base::MonotonicClock clock;
  return clock.now_ms();
}

std::string describe_exit(int wait_status) {
  if (WIFEXITED(wait_status))
    return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "ended (wait status " + std::to_string(wait_status) + ")";
}

std::string joined(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out.push_back(' ');
    out += a;
  }
  return out;
}

// The environment variables the policy read a secret from (labels "env:NAME"). The Redis
// password keeps no label: a variable holding its value is left out by value (spawn()).
std::vector<std::string> secret_env_names(const policy::Policy& policy) {
  std::vector<std::string> names;
  auto add = [&](const std::string& label) {
    if (label.rfind("env:", 0) == 0) names.push_back(label.substr(4));
  };
  for (const policy::Tenant& t : policy.tenants) {
    for (const policy::ApiKey& k : t.api_keys) add(k.label);
  }
  if (policy.admin && policy.admin->token) add(policy.admin->token->label);
  for (const policy::Upstream& u : policy.upstreams) {
    if (u.api_key) add(u.api_key->label);
    for (const policy::UpstreamHeader& h : u.headers) add(h.value.label);
  }
  return names;
}

// command[0] as execvp would find it: as written when it has a '/', else the first executable
// PATH entry of that name. Resolved before fork, so the child only calls execve.
std::string resolve_command(const std::string& command) {
  if (command.find('/') != std::string::npos) return command;
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    const size_t colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + command;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return command;  // execve fails with ENOENT, reported as for a path
}

// Sends `sig` to the child's process group (it leads one), or to the child alone if that fails.
void signal_child(pid_t pid, int sig) {
  if (pid <= 0) return;
  if (kill(-pid, sig) != 0) kill(pid, sig);
}

// A spawned process's environment: the gateway's, minus the policy's secrets (the variables they
// are read from, and any holding the Redis password), with spawn.env added (a name given there
// replaces the inherited value).
std::vector<std::string> child_environment(const policy::Spawn& spawn,
                                           const std::vector<std::string>& secret_env,
                                           const std::string& redis_password) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    const bool replaced = std::any_of(spawn.env.begin(), spawn.env.end(),
                                      [&](const auto& kv) { return kv.first == name; });
    const std::string_view value = entry.substr(std::min(entry.size(), name.size() + 1));
    const bool secret = std::find(secret_env.begin(), secret_env.end(), name) != secret_env.end() ||
                        (!redis_password.empty() && value == redis_password);
    if (!replaced && !secret) env.emplace_back(entry);
  }
  for (const auto& [k, v] : spawn.env) env.push_back(k + "=" + v);
  return env;
}

// In the forked child: detaches from the gateway's signals, descriptors and stdout, then execs.
// A failed exec writes its errno to `report_fd`.
[[noreturn]] void exec_child(pid_t parent, int report_fd, const char* program, char** argv,
                             char** envp) {
  // Child of a threaded process: async-signal-safe calls only, until execve.
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) _exit(127);  // the gateway died before prctl took effect
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD})
    sigaction(sig, &dfl, nullptr);
  sigprocmask(SIG_SETMASK, &none, nullptr);  // the gateway blocks signals for its signalfd
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0 && null_fd != 0) {
    dup2(null_fd, 0);
    close(null_fd);
  }
  dup2(2, 1);  // keep the gateway's stdout for its log
  // Nothing else: listeners, client and upstream connections, the access log, Redis, DNS.
  // (close_range: Linux 5.9; a kernel without it leaves the close-on-exec flags to do this.)
  const int keep = report_fd;
  if (keep > 3) close_range(3, keep - 1, 0);
  close_range(keep < 3 ? 3 : keep + 1, ~0U, 0);
  execve(program, argv, envp);
  const int err = errno;
  (void)!write(report_fd, &err, sizeof err);
  _exit(127);
}

}  // namespace

std::string_view to_string(ProcessState state) {
  switch (state) {
    case ProcessState::kStarting:
      return "starting";
    case ProcessState::kReady:
      return "ready";
    case ProcessState::kRestarting:
      return "restarting";
    case ProcessState::kFailed:
      return "failed";
    case ProcessState::kStopped:
      return "stopped";
  }
  return "unknown";
}

struct Supervisor::Proc {
  // Configuration (immutable after construction).
  std::string name;
  std::string host;
  uint16_t port = 0;
  policy::Spawn spawn;

  // Status (written by the supervisor thread under mu_, read by statuses()).
  ProcessState state = ProcessState::kStarting;
  pid_t pid = 0;
  int64_t restarts = 0;
  std::string last_exit;
  std::string failure;  // why start-up failed

  // Supervisor thread only.
  int64_t started_ms = 0;     // when the current run was spawned
  int64_t restart_at_ms = 0;  // kRestarting: when to spawn again
  int64_t next_probe_ms = 0;  // kStarting: next /healthz probe
  int64_t backoff_ms = 0;     // delay before the next restart
};

Supervisor::Supervisor(const policy::Policy& policy, GatewayMetrics& metrics,
                       SupervisorOptions options)
    : metrics_(metrics), options_(options) {
  for (const policy::Upstream& u : policy.upstreams) {
    if (!u.spawn || u.spawn->command.empty()) continue;
    auto p = std::make_unique<Proc>();
    p->name = u.name;
    p->host = u.host;
    p->port = u.port;
    p->spawn = *u.spawn;
    p->backoff_ms = options_.backoff_initial_ms;
    procs_.push_back(std::move(p));
  }
  secret_env_ = secret_env_names(policy);
  redis_password_ = policy.budget_store.password;
}

Supervisor::~Supervisor() { stop(); }

Status Supervisor::spawn(Proc& p, int64_t now) {
  std::vector<std::string> env = child_environment(p.spawn, secret_env_, redis_password_);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = p.spawn.command;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string program = resolve_command(args[0]);

  // The child reports a failed execve through this pipe (close-on-exec: a successful exec
  // closes it, and the parent reads end-of-file).
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    return make_error(ErrorKind::kUpstream,
                      "upstream \"" + p.name + "\": cannot start: pipe: " + strerror(errno));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    exec_child(parent, report[1], program.c_str(), argv.data(), envp.data());
  }
  const int fork_errno = errno;
  if (pid > 0) setpgid(pid, pid);  // also here: a signal to the group right away finds it
  close(report[1]);
  int exec_errno = 0;
  if (pid > 0) {
    ssize_t n;
    do {
      n = read(report[0], &exec_errno, sizeof exec_errno);
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(sizeof exec_errno)) {
      exec_errno = 0;
    } else {
      waitpid(pid, nullptr, 0);  // it exited with 127 right after the report
    }
  }
  close(report[0]);
  const int rc = pid < 0 ? fork_errno : exec_errno;
  if (rc != 0) {
    return make_error(ErrorKind::kUpstream, "upstream \"" + p.name + "\": cannot start `" +
                                                joined(p.spawn.command) + "`: " + strerror(rc) +
                                                " (a command with '/' is relative to the "
                                                "gateway's working directory)");
  }
  {
    std::lock_guard lock(mu_);
    p.pid = pid;
    p.state = ProcessState::kStarting;
  }
  p.started_ms = now;
  p.next_probe_ms = now;
  std::fprintf(stderr, "cutline-gateway: upstream \"%s\": started pid %d: %s\n", p.name.c_str(),
               static_cast<int>(pid), joined(p.spawn.command).c_str());
  return {};
}

bool Supervisor::healthy(const Proc& p) const {
  proto::ClientRequest req;
  req.host = p.host;
  req.port = p.port;
  req.target = "/healthz";
  auto r = proto::http_fetch(req, options_.probe_timeout_ms);
  return r.ok() && r->status == 200;
}

void Supervisor::on_exit(Proc& p, int wait_status, int64_t now) {
  const std::string how = describe_exit(wait_status);
  const int64_t uptime_ms = now - p.started_ms;
  std::lock_guard lock(mu_);
  const bool was_ready = p.state == ProcessState::kReady;
  p.pid = 0;
  p.last_exit = how;
  metrics_.set_upstream_ready(p.name, false);
  if (startup_ && !was_ready) {
    p.state = ProcessState::kFailed;
    p.failure = "upstream \"" + p.name + "\": `" + joined(p.spawn.command) + "` " + how +
                " before GET /healthz answered 200";
    cv_.notify_all();
    return;
  }
  if (was_ready && uptime_ms >= options_.stable_after_ms)
    p.backoff_ms = options_.backoff_initial_ms;
  p.restart_at_ms = now + p.backoff_ms;
  std::fprintf(stderr,
               "cutline-gateway: upstream \"%s\": process %s after %lld ms; restarting in %lld ms "
               "(restart %lld)\n",
               p.name.c_str(), how.c_str(), static_cast<long long>(uptime_ms),
               static_cast<long long>(p.backoff_ms), static_cast<long long>(p.restarts + 1));
  p.backoff_ms = std::min(p.backoff_ms * 2, options_.backoff_max_ms);
  p.state = ProcessState::kRestarting;
  ++p.restarts;
  metrics_.upstream_process_restarted(p.name);
}

void Supervisor::step(Proc& p, int64_t now) {
  if (p.pid > 0) {
    int st = 0;
    if (waitpid(p.pid, &st, WNOHANG) == p.pid) {
      on_exit(p, st, now);
      return;
    }
  }
  switch (p.state) {
    case ProcessState::kStarting: {
      if (p.pid <= 0 || now < p.next_probe_ms) return;
      if (healthy(p)) {
        std::lock_guard lock(mu_);
        p.state = ProcessState::kReady;
        metrics_.set_upstream_ready(p.name, true);
        std::fprintf(stderr, "cutline-gateway: upstream \"%s\": ready after %lld ms\n",
                     p.name.c_str(), static_cast<long long>(now_ms() - p.started_ms));
        cv_.notify_all();
        return;
      }
      const int64_t after = now_ms();
      p.next_probe_ms = after + options_.health_interval_ms;
      if (after - p.started_ms < p.spawn.ready_timeout_ms) return;
      // Not ready in time: at start-up that fails the gateway; later it is one more restart.
      const std::string why = "no 200 from GET http://" + p.host + ":" + std::to_string(p.port) +
                              "/healthz within " + std::to_string(p.spawn.ready_timeout_ms) +
                              " ms (" + p.spawn.ref.path + ".ready_timeout)";
      signal_child(p.pid, SIGKILL);
      int st = 0;
      waitpid(p.pid, &st, 0);
      bool at_startup = false;
      {
        std::lock_guard lock(mu_);
        at_startup = startup_;
        if (at_startup) {
          p.pid = 0;
          p.state = ProcessState::kFailed;
          p.failure = "upstream \"" + p.name + "\": " + why;
          cv_.notify_all();
        }
      }
      if (!at_startup) {
        std::fprintf(stderr, "cutline-gateway: upstream \"%s\": %s; killed\n", p.name.c_str(),
                     why.c_str());
        on_exit(p, st, after);
      }
      return;
    }
    case ProcessState::kRestarting:
      if (now < p.restart_at_ms) return;
      if (Status s = spawn(p, now); !s.ok()) {
        std::fprintf(stderr, "cutline-gateway: %s\n", s.error().message.c_str());
        std::lock_guard lock(mu_);
        p.restart_at_ms = now + p.backoff_ms;
        p.backoff_ms = std::min(p.backoff_ms * 2, options_.backoff_max_ms);
      }
      return;
    case ProcessState::kReady:
    case ProcessState::kFailed:
    case ProcessState::kStopped:
      return;
  }
}

void Supervisor::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    const int64_t now = now_ms();
    for (auto& p : procs_) step(*p, now);
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(options_.poll_interval_ms),
                 [this] { return stopping_; });
  }
}

Status Supervisor::start() {
  if (procs_.empty()) return {};
  const int64_t now = now_ms();
  for (auto& p : procs_) {
    metrics_.set_upstream_ready(p->name, false);
    if (Status s = spawn(*p, now); !s.ok()) {
      stop();
      return s;
    }
  }
  thread_ = std::thread([this] { run(); });
  std::string failure;
  {
    std::unique_lock lock(mu_);
    auto settled = [this] {
      bool all_ready = true;
      for (const auto& p : procs_) {
        if (p->state == ProcessState::kFailed) return true;
        if (p->state != ProcessState::kReady) all_ready = false;
      }
      return all_ready;
    };
    // cutline-gateway blocks SIGINT/SIGTERM for its signalfd: a Ctrl-C while a model loads is
    // seen here as a pending signal and ends the wait.
    while (!cv_.wait_for(lock, std::chrono::milliseconds(100), settled)) {
      sigset_t pending;
      sigemptyset(&pending);
      if (sigpending(&pending) == 0 &&
          (sigismember(&pending, SIGINT) == 1 || sigismember(&pending, SIGTERM) == 1)) {
        failure = "interrupted while waiting for the upstream processes to become ready";
        break;
      }
    }
    for (const auto& p : procs_) {
      if (p->state == ProcessState::kFailed) failure = p->failure;
    }
    startup_ = false;
  }
  if (!failure.empty()) {
    stop();
    return make_error(ErrorKind::kUpstream, failure);
  }
  return {};
}

void Supervisor::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // SIGTERM to every process group at once, then wait for all of them up to the grace period.
  for (auto& p : procs_) {
    if (p->pid > 0) signal_child(p->pid, SIGTERM);
  }
  const int64_t kill_at = now_ms() + options_.stop_grace_ms;
  for (;;) {
    bool running = false;
    for (auto& p : procs_) {
      if (p->pid <= 0) continue;
      int st = 0;
      if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
        std::fprintf(stderr, "cutline-gateway: upstream \"%s\": stopped (%s)\n", p->name.c_str(),
                     describe_exit(st).c_str());
        std::lock_guard lock(mu_);
        p->pid = 0;
        p->last_exit = describe_exit(st);
      } else {
        running = true;
      }
    }
    if (!running) break;
    if (now_ms() >= kill_at) {
      for (auto& p : procs_) {
        if (p->pid <= 0) continue;
        std::fprintf(stderr,
                     "cutline-gateway: upstream \"%s\": no exit %lld ms after SIGTERM; "
                     "SIGKILL\n",
                     p->name.c_str(), static_cast<long long>(options_.stop_grace_ms));
        signal_child(p->pid, SIGKILL);
        int st = 0;
        waitpid(p->pid, &st, 0);
        std::lock_guard lock(mu_);
        p->pid = 0;
        p->last_exit = describe_exit(st);
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.poll_interval_ms));
  }
  std::lock_guard lock(mu_);
  for (auto& p : procs_) {
    if (p->state != ProcessState::kFailed) p->state = ProcessState::kStopped;
    metrics_.set_upstream_ready(p->name, false);
  }
}

std::vector<ProcessStatus> Supervisor::statuses() const {
  std::lock_guard lock(mu_);
  std::vector<ProcessStatus> out;
  for (const auto& p : procs_) {
    out.push_back(
        ProcessStatus{p->name, p->state, static_cast<int>(p->pid), p->restarts, p->last_exit});
  }
  return out;
}

}  // namespace cutline::gateway
