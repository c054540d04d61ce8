#pragma once
// A private redis-server for tests of the shared token pools: a free loopback port, no
// persistence (--save '' --appendonly no), its working directory in a fresh temp dir, started
// and stopped by the test. Tests skip (GTEST_SKIP) when redis-server is not installed;
// deploy/setup.sh installs it, so CI runs them.

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "free_port.h"
#include "wait_for.h"

namespace cutline::test {

// The path of redis-server on PATH, or "" when it is not installed.
inline std::string find_redis_server() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  dirs += ":/usr/sbin:/sbin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = dirs.substr(start, end - start) + "/redis-server";
    if (end > start && access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

struct RedisReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RedisReplyPtr = std::unique_ptr<redisReply, RedisReplyDeleter>;

// TLS for RedisServer::start(): the server's certificate and key, the CA its clients' certificates
// are checked against, and whether a client must present one (tls-auth-clients).
struct RedisTls {
  std::string cert_file;
  std::string key_file;
  std::string ca_file;
  bool require_client_cert = false;
};

class RedisServer {
 public:
  RedisServer() = default;
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  ~RedisServer() {
    stop();
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }

  // Starts redis-server on `port` (0: a free one) and waits until it answers PING. False with
  // error() when it is not installed or did not come up. With `tls`, it also listens for TLS on
  // tls_port() (the plain port stays, for the test's own commands).
  bool start(uint16_t port = 0, const RedisTls* tls = nullptr) {
    const std::string bin = find_redis_server();
    if (bin.empty()) {
      error_ = "redis-server is not installed (apt-get install redis-server)";
      return false;
    }
    if (dir_.empty()) {
      std::string tmpl = "/tmp/cutline-redis-XXXXXX";
      if (mkdtemp(tmpl.data()) == nullptr) {
        error_ = "mkdtemp failed";
        return false;
      }
      dir_ = tmpl;
    }
    // A port picked free may be taken by someone else before redis binds it: try a few.
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = port != 0 ? port : free_port();
      std::vector<std::string> argv = {bin,
                                       "--port",
                                       std::to_string(port_),
                                       "--bind",
                                       "127.0.0.1",
                                       "--save",
                                       "",
                                       "--appendonly",
                                       "no",
                                       "--dir",
                                       dir_,
                                       "--logfile",
                                       dir_ + "/redis.log",
                                       "--protected-mode",
                                       "no"};
      if (tls != nullptr) {
        tls_port_ = free_port();
        for (const std::string& a :
             {std::string("--tls-port"), std::to_string(tls_port_), std::string("--tls-cert-file"),
              tls->cert_file, std::string("--tls-key-file"), tls->key_file,
              std::string("--tls-ca-cert-file"), tls->ca_file, std::string("--tls-auth-clients"),
              std::string(tls->require_client_cert ? "yes" : "no")}) {
          argv.push_back(a);
        }
      }
      pid_ = fork();
      if (pid_ == 0) {
        // Never outlive the test (a crashed test must not leave a server behind), and keep
        // the test's stdout/stderr to itself (ctest waits for every holder of its pipe).
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        const int null_fd = open("/dev/null", O_RDWR);
        dup2(null_fd, 1);
        dup2(null_fd, 2);
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        execv(args[0], args.data());
        _exit(127);
      }
      if (wait_ready()) return true;
      stop();
    }
    error_ = "redis-server did not answer PING on 127.0.0.1:" + std::to_string(port_);
    return false;
  }

  // SIGKILL and wait (the way tests make Redis unreachable at once).
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  uint16_t port() const { return port_; }
  uint16_t tls_port() const { return tls_port_; }
  const std::string& error() const { return error_; }

  // Keeps Redis busy for `ms` (a Lua script runs alone: every other client waits), the latency
  // `DEBUG SLEEP` would inject without enable-debug-command (off by default in Redis 7). Returns
  // when the script has finished.
  void stall(int ms) const {
    command({"EVAL",
             "local t = redis.call('TIME'); local s = t[1] * 1000000 + t[2]\n"
             "while true do\n"
             "  local n = redis.call('TIME')\n"
             "  if n[1] * 1000000 + n[2] - s > tonumber(ARGV[1]) * 1000 then break end\n"
             "end\n"
             "return 1",
             "0", std::to_string(ms)});
  }

  // One command on a fresh connection (argv form); null when Redis did not answer.
  RedisReplyPtr command(const std::vector<std::string>& args) const {
    timeval tv{1, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (c == nullptr) return nullptr;
    if (c->err) {
      redisFree(c);
      return nullptr;
    }
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.c_str());
      lens.push_back(a.size());
    }
    RedisReplyPtr r(static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
    redisFree(c);
    return r;
  }

 private:
  // Until the server answers PING (true), exits (port taken?) or 10 s pass.
  bool wait_ready() {
    bool exited = false;
    const bool answered = wait_for(
        [&] {
          int status = 0;
          exited = waitpid(pid_, &status, WNOHANG) == pid_;
          if (exited) return true;
          auto r = command({"PING"});
          return r && r->type == REDIS_REPLY_STATUS;
        },
        10000, 10);
    if (exited) pid_ = -1;
    return answered && !exited;
  }

  std::string dir_;
  std::string error_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  uint16_t tls_port_ = 0;
};

}  // namespace cutline::test
