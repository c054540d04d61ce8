// cutline-gateway: the labeling OpenAI-compatible gateway.
//
//   cutline-gateway --config FILE [--workers N] [--port P] [--admin-port P] [--ready-file F]
//                   [--drain-timeout DUR]
//
// --port / --admin-port override the policy's listen and admin ports (0 = any free port).
// --ready-file: once serving, writes {"port":P,"ports":[P,...],"admin_port":A} there (tests and
// scripts read it; "ports" lists every listen[] entry's port in order).
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
#include <string>

#include <chrono>

#include "cutline/gateway/gateway.h"
#include "cutline/policy/duration.h"
#include "cutline/proto/descriptor_limit.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: cutline-gateway --config FILE [--workers N] [--port P] [--admin-port P] "
               "[--ready-file F] [--drain-timeout DUR]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  cutline::gateway::GatewayOptions options;
  std::string ready_file;
  int64_t drain_timeout_ms = 30000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--config" && (v = next()))
      options.config_path = v;
    else if (a == "--workers" && (v = next()))
      options.workers = std::atoi(v);
    else if (a == "--port" && (v = next()))
      options.port_override = std::atoi(v);
    else if (a == "--admin-port" && (v = next()))
      options.admin_port_override = std::atoi(v);
    else if (a == "--ready-file" && (v = next()))
      ready_file = v;
    else if (a == "--drain-timeout" && (v = next())) {
      auto ms = cutline::policy::parse_duration_ms(v);
      if (!ms) {
        std::fprintf(stderr, "cutline-gateway: --drain-timeout: not a duration: %s\n", v);
        return 2;
      }
      drain_timeout_ms = *ms;
    } else
      return usage();
  }
  if (options.config_path.empty()) return usage();

  // Signals are taken synchronously through a signalfd: block them before any thread starts.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGHUP);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);

  cutline::proto::raise_descriptor_limit_and_log("cutline-gateway");  // soft -> hard, logged
  auto created = cutline::gateway::Gateway::create(options);
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
  if (!ready_file.empty()) {
    const std::string tmp = ready_file + ".tmp";
    if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
      // "port" first and "admin_port" last: scripts and tests read them by position too.
      std::string ports;
      for (uint16_t p : gateway->ports()) ports += (ports.empty() ? "" : ",") + std::to_string(p);
      std::fprintf(f, "{\"port\":%u,\"ports\":[%s],\"admin_port\":%u}\n", gateway->port(),
                   ports.c_str(), gateway->admin_port());
      std::fclose(f);
      std::rename(tmp.c_str(), ready_file.c_str());
    }
  }

  const int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
  const int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  std::string dir = ".", base = options.config_path;
  if (auto slash = options.config_path.rfind('/'); slash != std::string::npos) {
    dir = options.config_path.substr(0, slash == 0 ? 1 : slash);
    base = options.config_path.substr(slash + 1);
  }
  if (ifd >= 0) inotify_add_watch(ifd, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE);

  for (bool running = true; running;) {
    pollfd fds[2] = {{sfd, POLLIN, 0}, {ifd, POLLIN, 0}};
    if (poll(fds, ifd >= 0 ? 2 : 1, -1) < 0) continue;
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo si{};
      if (read(sfd, &si, sizeof si) == sizeof si) {
        if (si.ssi_signo == SIGHUP)
          (void)gateway->reload();
        else
          running = false;
      }
    }
    if (ifd >= 0 && (fds[1].revents & POLLIN)) {
      alignas(inotify_event) char buf[4096];
      bool changed = false;
      ssize_t n;
      while ((n = read(ifd, buf, sizeof buf)) > 0) {
        for (char* p = buf; p < buf + n;) {
          auto* ev = reinterpret_cast<inotify_event*>(p);
          // The file itself, or Kubernetes' "..data" symlink: a mounted ConfigMap is updated by
          // renaming a new "..data" over the old one, and the file is a link through it.
          if (ev->len > 0 && (base == ev->name || std::strcmp(ev->name, "..data") == 0)) {
            changed = true;
          }
          p += sizeof(inotify_event) + ev->len;
        }
      }
      if (changed) (void)gateway->reload();
    }
  }
  // Graceful shutdown: stop accepting, let streams finish up to the drain timeout, cut the rest.
  using Clock = std::chrono::steady_clock;
  const auto drain_start = Clock::now();
  gateway->begin_drain();
  size_t open = gateway->open_streams();
  std::fprintf(stderr, "cutline-gateway: shutting down; draining %zu stream(s) for up to %lld ms\n",
               open, static_cast<long long>(drain_timeout_ms));
  auto drained_ms = [&] {
    return std::chrono::duration<double, std::milli>(Clock::now() - drain_start).count();
  };
  while (open > 0 && drained_ms() < static_cast<double>(drain_timeout_ms)) {
    pollfd fd{sfd, POLLIN, 0};
    if (poll(&fd, 1, 50) > 0 && (fd.revents & POLLIN)) {
      signalfd_siginfo si{};
      if (read(sfd, &si, sizeof si) == sizeof si && si.ssi_signo != SIGHUP) break;
    }
    open = gateway->open_streams();
  }
  if (open > 0) {
    std::fprintf(stderr,
                 "cutline-gateway: ending %zu stream(s) still open (gateway_deadline, "
                 "shutdown.drain_timeout)\n",
                 open);
    gateway->cut_remaining(drain_timeout_ms, drained_ms());
    // Let the workers flush the labeled last chunks before the connections close.
    for (int i = 0; i < 100 && gateway->open_streams() > 0; ++i) {
      poll(nullptr, 0, 10);
    }
  }
  gateway->stop();
  return 0;
}
