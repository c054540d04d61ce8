#pragma once
// What every integration test needs to run the real binaries: a child process with its output in
// files, polling for a condition with a timeout (no sleeps to wait for events), reading a file,
// and a fresh temp dir. Used by gateway_harness.h and backend_harness.h.

#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace cutline::test {

// Polls `cond` every few ms until it holds or `timeout_ms` passes.
inline bool wait_for(const std::function<bool()>& cond, int timeout_ms = 5000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A new directory /tmp/<prefix>-XXXXXX.
inline std::string make_temp_dir(const std::string& prefix = "cutline-test") {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  const char* d = mkdtemp(tmpl.data());
  return d ? std::string(d) : std::string("/tmp");
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

}  // namespace cutline::test
