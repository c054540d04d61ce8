#pragma once
// Test harness for gateway integration tests: starts the real cutline-fake-upstream and
// cutline-gateway binaries on loopback (free ports), writes the policy file, and offers a client
// the way a user would have one (blocking http_fetch, or process_harness.h's RawClient for
// disconnects and slow reads), plus readers for the SSE bodies.

#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cutline/proto/http/http_fetch.h"
#include "cutline/proto/wire/openai_chunk.h"
#include "cutline/proto/wire/stop_record.h"
#include "process_harness.h"
#include "sse_events.h"

namespace cutline::test {

// The last SSE data payload before [DONE] (the chunk carrying the stop record).
inline std::string last_chunk(const std::string& sse_body) {
  proto::SseParser p;
  std::string_view in = sse_body;
  std::string last;
  for (;;) {
    auto s = p.next(in);
    if (s != proto::SseParser::Step::kEvent) break;
    if (!p.event().done) last = std::string(p.event().data);
  }
  return last;
}

// Starts a cutline-fake-upstream on a free port (with `extra_args`, e.g. --resident or
// --vllm-metrics), its output in DIR/NAME.out and .err; returns the port, 0 when it did not
// start.
inline uint16_t start_fake_upstream(Process& fake, const std::string& dir, const std::string& name,
                                    const std::vector<std::string>& extra_args = {}) {
  const std::string out = dir + "/" + name + ".out";
  std::vector<std::string> args = {CUTLINE_FAKE_UPSTREAM_BIN, "--port", "0"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  fake.start(args, out, dir + "/" + name + ".err");
  if (!wait_for([&] {
        const std::string text = read_file(out);
        return text.rfind("PORT ", 0) == 0 && text.find('\n') != std::string::npos;
      })) {
    return 0;
  }
  return static_cast<uint16_t>(std::atoi(read_file(out).c_str() + 5));
}

// A fake upstream and a gateway in front of it, in a fresh temp dir. `yaml` writes the policy
// given the fake's port and the access-log path.
struct GatewayEnv {
  std::string dir;
  Process fake;
  Process gateway;
  uint16_t fake_port = 0;
  uint16_t port = 0;
  uint16_t admin_port = 0;
  std::string log_path;
  std::string config_path;
  std::string error;                      // why start() failed
  std::vector<std::string> gateway_args;  // more command-line arguments (e.g. --workers 1)
  std::vector<std::string> fake_args;     // the fake upstream's (e.g. --lenient-routes)

  bool start(const std::function<std::string(uint16_t, const std::string&)>& yaml) {
    dir = make_temp_dir();
    fake_port = start_fake_upstream(fake, dir, "fake", fake_args);
    if (fake_port == 0) {
      error = "fake upstream did not start: " + read_file(dir + "/fake.err");
      return false;
    }
    log_path = dir + "/access.log";
    config_path = dir + "/cutline.yaml";
    std::ofstream(config_path) << yaml(fake_port, log_path);
    std::vector<std::string> argv = {CUTLINE_GATEWAY_BIN, "--config", config_path, "--ready-file",
                                     dir + "/ready.json"};
    argv.insert(argv.end(), gateway_args.begin(), gateway_args.end());
    gateway.start(argv, dir + "/gateway.out", dir + "/gateway.err");
    if (!wait_for([&] { return !read_file(dir + "/ready.json").empty(); })) {
      error = "gateway did not start: " + read_file(dir + "/gateway.err");
      return false;
    }
    const std::string ready = read_file(dir + "/ready.json");
    port = static_cast<uint16_t>(std::atoi(ready.c_str() + ready.find(':') + 1));
    admin_port = static_cast<uint16_t>(std::atoi(ready.c_str() + ready.rfind(':') + 1));
    return true;
  }
  void stop() {
    gateway.stop();
    fake.stop();
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port) + path;
  }
  std::string admin_url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(admin_port) + path;
  }
  std::string fake_url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(fake_port) + path;
  }
};

}  // namespace cutline::test
