#pragma once
// What every integration test needs to run the real binaries: a child process with its output in
// files, polling for a condition with a timeout (no sleeps to wait for events), reading a file,
// a fresh temp dir, a free loopback port, and a raw loopback client for the clients that
// misbehave (disconnect mid-stream, read slowly). Used by gateway_harness.h and
// backend_harness.h.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/free_port.h"
#include "support/wait_for.h"
namespace cutline::test {

inline std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The value of the sample `series` (name and labels as exposed, "name{labels}") in a Prometheus
// text exposition; -1 if absent.
inline double metric_value(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::atof(text.c_str() + at + series.size() + 2);
}

// A new directory /tmp/<prefix>-XXXXXX.
inline std::string make_temp_dir(const std::string& prefix = "cutline-test") {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  const char* d = mkdtemp(tmpl.data());
  return d ? std::string(d) : std::string("/tmp");
}

// Runs argv (argv[0] is a path) to its exit, stdout and stderr to files, `env` entries
// ("NAME=value") added to its environment. Its exit status (127: it could not be started), or -1
// when a signal ended it or `timeout_ms` passed (then it is killed).
inline int run_to_exit(const std::vector<std::string>& argv, const std::string& out,
                       const std::string& err, int timeout_ms = 120000,
                       const std::vector<std::string>& env = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (!wait_for([&] { return waitpid(pid, &status, WNOHANG) == pid; }, timeout_ms)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A child process running argv (argv[0] is a path), stdout and stderr to files. The destructor
// stops it.
class Process {
 public:
  void start(const std::vector<std::string>& argv, const std::string& stdout_path,
             const std::string& stderr_path) {
    pid_ = fork();
    if (pid_ == 0) {
      int out = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(out, 1);
      dup2(err, 2);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  bool running() const { return pid_ > 0; }
  void signal(int sig) const {
    if (pid_ > 0) kill(pid_, sig);
  }
  // SIGTERM, then SIGKILL after `timeout_ms`. Returns the exit status, or -1 when it was killed,
  // died of a signal, or was not running.
  int stop(int timeout_ms = 2000) {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    const bool exited =
        wait_for([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, timeout_ms);
    if (!exited) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      pid_ = -1;
      return -1;
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  ~Process() { stop(); }

 private:
  pid_t pid_ = -1;
};

// An HTTP/1.1 POST with a JSON body, as bytes for RawClient::send_all.
inline std::string http_post_raw(const std::string& path, const std::string& body,
                                 const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A raw loopback connection for clients that misbehave: disconnect mid-stream (close()), read
// slowly (a small `rcvbuf` and no reads), or send bytes no HTTP library would.
class RawClient {
 public:
  // Connects at once; `rcvbuf` > 0 sets SO_RCVBUF first (a slow reader's small window).
  explicit RawClient(uint16_t port, int rcvbuf = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  // Sends every byte (stops early if the peer is gone).
  void send_all(const std::string& data) {
    size_t off = 0;
    while (fd_ >= 0 && off < data.size()) {
      ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<size_t>(n);
    }
  }
  // POSTs a JSON body (http_post_raw).
  void post(const std::string& path, const std::string& body,
            const std::string& extra_headers = "") {
    send_all(http_post_raw(path, body, extra_headers));
  }
  // Reads until `needle` appears in everything received so far, the peer closes, or
  // `timeout_ms` passes; returns everything received on this connection.
  std::string read_until(const std::string& needle, int timeout_ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    timeval tv{0, 20000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    // Only what arrived since the last look is searched: a multi-megabyte answer read 4 KiB at a
    // time would otherwise be scanned from its start on every read (quadratic: tens of seconds
    // on a loaded machine).
    size_t searched = 0;
    const auto found = [&] {
      const bool hit = received_.find(needle, searched) != std::string::npos;
      if (received_.size() >= needle.size()) searched = received_.size() - needle.size() + 1;
      return hit;
    };
    while (fd_ >= 0 && std::chrono::steady_clock::now() < end && !found()) {
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0) break;
      if (n > 0) received_.append(buf, static_cast<size_t>(n));
    }
    return received_;
  }
  // As read_until, for an answer whose length the test does not know (what a gateway held
  // back for a client that was not reading): reads for as long as bytes keep arriving, and gives
  // up only when none arrived for `stall_ms`, or after `max_ms` in all. What it asserts is that
  // the bytes flow, not how fast a loaded machine moves them.
  std::string read_until_flowing(const std::string& needle, int stall_ms, int max_ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(max_ms);
    size_t seen = received_.size();
    for (;;) {
      read_until(needle, stall_ms);
      const bool found = received_.find(needle) != std::string::npos;
      if (found || fd_ < 0 || received_.size() == seen || std::chrono::steady_clock::now() >= end)
        return received_;
      seen = received_.size();
    }
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
};

}  // namespace cutline::test
