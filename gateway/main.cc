// cutline-gateway: the labeling OpenAI-compatible gateway.
//
//   cutline-gateway --config FILE [--workers N] [--port P] [--admin-port P] [--ready-file F]
//                   [--drain-timeout DUR]      (--help lists them, --version says the build)
//
// --port / --admin-port override the policy's listen and admin ports (0 = any free port).
// --ready-file: once serving, writes {"port":P,"ports":[P,...],"admin_port":A} there (tests and
// scripts read it; "ports" lists every listen[] entry's port in order).
// SIGUSR1 reopens the access log file (after logrotate renamed it; README has a snippet).
// Reloads the policy on SIGHUP and whenever the file changes (inotify on its directory, so
// editors that replace the file are seen, and so is a Kubernetes ConfigMap update, which swaps
// the directory's "..data" link); an invalid file keeps the policy in force.
//
// SIGINT / SIGTERM: graceful shutdown. The client listener closes at once, streams in flight may
// finish for --drain-timeout (default 30s), the rest end with cause gateway_deadline (rule
// "shutdown.drain_timeout"), then the spawned upstream processes get SIGTERM (SIGKILL 10 s
// later). A second SIGINT / SIGTERM during the drain skips the rest of it.

#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <chrono>

#include "cutline/cli/cli.h"
#include "cutline/gateway/gateway.h"
#include "cutline/gateway/supervisor.h"
#include "cutline/proto/net/descriptor_limit.h"

namespace {

// SIGUSR1: logrotate has renamed the access log; write to a new file at the configured path.
void reopen_logs(cutline::gateway::Gateway& gateway) {
  if (auto s = gateway.reopen_logs(); !s.ok()) {
    std::fprintf(stderr, "cutline-gateway: SIGUSR1: %s (still writing to the old file)\n",
                 s.error().message.c_str());
  } else {
    std::fprintf(stderr, "cutline-gateway: SIGUSR1: access log reopened\n");
  }
}

// What is up once start() returned: each listener, the admin listener, each upstream and each
// spawned process (one line each, so an operator sees at a glance what answered).
void print_started(const cutline::gateway::Gateway& gateway) {
  auto policy = gateway.policy();
  const std::vector<uint16_t> ports = gateway.ports();
  for (size_t i = 0; i < policy->listen.size() && i < ports.size(); ++i) {
    const auto& l = policy->listen[i];
    std::fprintf(stderr, "cutline-gateway: up: listener %s:%u (%s)\n", l.host.c_str(), ports[i],
                 l.tls ? "TLS, HTTP/1.1 and HTTP/2" : "HTTP/1.1 and h2c");
  }
  if (policy->admin) {
    std::fprintf(stderr, "cutline-gateway: up: admin %s:%u%s\n", policy->admin->host.c_str(),
                 gateway.admin_port(), policy->admin->token ? " (bearer token)" : "");
  }
  for (const auto& u : policy->upstreams) {
    std::string models;
    for (const auto& m : u.models) models += (models.empty() ? "" : ",") + m;
    std::fprintf(stderr, "cutline-gateway: up: upstream %s %s models [%s]\n", u.name.c_str(),
                 u.url.c_str(), models.c_str());
  }
  if (const auto* sup = gateway.supervisor()) {
    for (const auto& st : sup->statuses()) {
      std::fprintf(stderr, "cutline-gateway: up: process for %s pid %d %s\n", st.upstream.c_str(),
                   st.pid, std::string(cutline::gateway::to_string(st.state)).c_str());
    }
  }
}

// The command line: the gateway's options plus what main() itself does with the process.
struct Args {
  cutline::gateway::GatewayOptions options;
  std::string ready_file;
  int64_t drain_timeout_ms = 30000;
};

// Fills `args`; an exit code when main() should return at once (--help, --version, a bad flag).
std::optional<int> parse_args(int argc, char** argv, Args& args) {
  namespace cli = cutline::cli;
  cutline::gateway::GatewayOptions& options = args.options;
  auto app = cli::make_app("cutline-gateway",
                           "The labeling OpenAI-compatible gateway: applies the policy in --config "
                           "to every request and labels every cut.");
  app->add_option("-c,--config", options.config_path, "Policy file (YAML)")
      ->required()
      ->check(cli::kReadableFile);
  app->add_option("--workers", options.workers, "Event-loop worker threads")
      ->check(CLI::Range(1, 1024));
  app->add_option("--port", options.port_override,
                  "Client listen port, overriding the policy's (0 = any free port)")
      ->check(CLI::Range(0, 65535));
  app->add_option("--admin-port", options.admin_port_override,
                  "Admin listen port, overriding the policy's (0 = any free port)")
      ->check(CLI::Range(0, 65535));
  app->add_option("--ready-file", args.ready_file,
                  "Once serving, write {\"port\":P,\"ports\":[...],\"admin_port\":A} here");
  app->add_flag("--upstream-error-detail", options.upstream_error_detail,
                "Tell clients the gateway's own upstream connect errors whole (addresses, DNS "
                "names); by default only their kind");
  cli::add_duration(*app, "--drain-timeout", args.drain_timeout_ms,
                    "On SIGINT/SIGTERM, let streams finish this long");
  return cli::parse(*app, argc, argv);
}

// {"port":P,"ports":[...],"admin_port":A}, written beside the path and renamed over it so that a
// reader never sees half of it.
void write_ready_file(const std::string& ready_file, const cutline::gateway::Gateway& gateway) {
  const std::string tmp = ready_file + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return;
  // "port" first and "admin_port" last: scripts and tests read them by position too.
  std::string ports;
  for (uint16_t p : gateway.ports()) ports += (ports.empty() ? "" : ",") + std::to_string(p);
  std::fprintf(f, "{\"port\":%u,\"ports\":[%s],\"admin_port\":%u}\n", gateway.port(), ports.c_str(),
               gateway.admin_port());
  std::fclose(f);
  std::rename(tmp.c_str(), ready_file.c_str());
}

// The policy file's directory under inotify (fd < 0 when inotify is unavailable): editors that
// replace the file are seen, and so is a ConfigMap update.
struct ConfigWatch {
  int fd = -1;
  std::string base;  // the file's name within the directory
};

ConfigWatch watch_config(const std::string& config_path) {
  ConfigWatch w;
  w.fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  std::string dir = ".";
  w.base = config_path;
  if (auto slash = config_path.rfind('/'); slash != std::string::npos) {
    dir = config_path.substr(0, slash == 0 ? 1 : slash);
    w.base = config_path.substr(slash + 1);
  }
  if (w.fd >= 0) inotify_add_watch(w.fd, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE);
  return w;
}

// Reads every pending event; true when one concerns the policy file.
bool config_changed(const ConfigWatch& w) {
  alignas(inotify_event) char buf[4096];
  bool changed = false;
  ssize_t n;
  while ((n = read(w.fd, buf, sizeof buf)) > 0) {
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<inotify_event*>(p);
      // The file itself, or Kubernetes' "..data" symlink: a mounted ConfigMap is updated by
      // renaming a new "..data" over the old one, and the file is a link through it.
      if (ev->len > 0 && (w.base == ev->name || std::strcmp(ev->name, "..data") == 0)) {
        changed = true;
      }
      p += sizeof(inotify_event) + ev->len;
    }
  }
  return changed;
}

// Until SIGINT / SIGTERM: SIGHUP and a changed policy file reload, SIGUSR1 reopens the log.
void serve_until_stopped(cutline::gateway::Gateway& gateway, int sfd, const ConfigWatch& watch) {
  for (bool running = true; running;) {
    pollfd fds[2] = {{sfd, POLLIN, 0}, {watch.fd, POLLIN, 0}};
    if (poll(fds, watch.fd >= 0 ? 2 : 1, -1) < 0) continue;
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo si{};
      if (read(sfd, &si, sizeof si) == sizeof si) {
        if (si.ssi_signo == SIGHUP) {
          (void)gateway.reload();
        } else if (si.ssi_signo == SIGUSR1) {
          reopen_logs(gateway);
        } else {
          running = false;
        }
      }
    }
    if (watch.fd >= 0 && (fds[1].revents & POLLIN) && config_changed(watch)) {
      (void)gateway.reload();
    }
  }
}

// Graceful shutdown: stop accepting, let streams finish up to the drain timeout, cut the rest.
void drain(cutline::gateway::Gateway& gateway, int sfd, int64_t drain_timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const auto drain_start = Clock::now();
  gateway.begin_drain();
  size_t open = gateway.open_streams();
  std::fprintf(stderr, "cutline-gateway: shutting down; draining %zu stream(s) for up to %lld ms\n",
               open, static_cast<long long>(drain_timeout_ms));
  auto drained_ms = [&] {
    return std::chrono::duration<double, std::milli>(Clock::now() - drain_start).count();
  };
  while (open > 0 && drained_ms() < static_cast<double>(drain_timeout_ms)) {
    pollfd fd{sfd, POLLIN, 0};
    if (poll(&fd, 1, 50) > 0 && (fd.revents & POLLIN)) {
      signalfd_siginfo si{};
      if (read(sfd, &si, sizeof si) == sizeof si) {
        if (si.ssi_signo == SIGUSR1) {
          reopen_logs(gateway);
        } else if (si.ssi_signo != SIGHUP) {
          break;
        }
      }
    }
    open = gateway.open_streams();
  }
  if (open > 0) {
    std::fprintf(stderr,
                 "cutline-gateway: ending %zu stream(s) still open (gateway_deadline, "
                 "shutdown.drain_timeout)\n",
                 open);
    gateway.cut_remaining(drain_timeout_ms, drained_ms());
    // Let the workers flush the labeled last chunks before the connections close.
    for (int i = 0; i < 100 && gateway.open_streams() > 0; ++i) {
      poll(nullptr, 0, 10);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (auto rc = parse_args(argc, argv, args)) return *rc;

  // Signals are taken synchronously through a signalfd: block them before any thread starts.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGHUP);
  sigaddset(&mask, SIGUSR1);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);

  cutline::proto::raise_descriptor_limit_and_log("cutline-gateway");  // soft -> hard, logged
  // Watched before the policy is first read, so that no edit falls between the read and the
  // watch (a test, or a ConfigMap update, may change the file as soon as the gateway is ready).
  const ConfigWatch watch = watch_config(args.options.config_path);
  auto created = cutline::gateway::Gateway::create(args.options);
  if (!created.ok()) {
    std::fprintf(stderr, "cutline-gateway: %s\n", created.error().message.c_str());
    return 1;
  }
  auto gateway = std::move(created).value();
  if (auto s = gateway->start(); !s.ok()) {
    std::fprintf(stderr, "cutline-gateway: %s\n", s.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "cutline-gateway: serving on port %u, admin on port %u\n", gateway->port(),
               gateway->admin_port());
  print_started(*gateway);
  if (!args.ready_file.empty()) write_ready_file(args.ready_file, *gateway);

  const int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
  serve_until_stopped(*gateway, sfd, watch);
  drain(*gateway, sfd, args.drain_timeout_ms);
  gateway->stop();
  return 0;
}
