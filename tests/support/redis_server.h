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

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "free_port.h"
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
  bool wait_ready() {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;  // exited (port taken?)
        return false;
      }
      auto r = command({"PING"});
      if (r && r->type == REDIS_REPLY_STATUS) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  std::string dir_;
  std::string error_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  uint16_t tls_port_ = 0;
};

}  // namespace cutline::test
