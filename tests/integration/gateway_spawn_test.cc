// What a process the gateway spawns (upstreams[i].spawn, the co-located backend) inherits from
// it: not the secrets the policy reads from the environment (env:NAME API keys), not the
// gateway's descriptors (an upstream connection open while the backend restarts), and not a
// life of its own (SIGKILL on the gateway ends it: PR_SET_PDEATHSIG).
//
// The spawned command is a shell that records its environment, its open descriptors and its pid,
// then execs cutline-fake-upstream (which answers /healthz, so the gateway sees it ready).

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gateway_harness.h"

namespace cutline::test {
namespace {

// The descriptors in an `ls -l /proc/self/fd` listing, but the one ls opened to read that
// directory.
std::vector<int> descriptors(const std::string& listing) {
  std::vector<int> fds;
  std::istringstream in(listing);
  for (std::string line; std::getline(in, line);) {
    const size_t arrow = line.find(" -> ");
    if (arrow == std::string::npos) continue;
    if (line.compare(arrow + 4, 6, "/proc/") == 0) continue;
    const size_t name = line.rfind(' ', arrow - 1);
    fds.push_back(std::atoi(line.c_str() + name + 1));
  }
  std::sort(fds.begin(), fds.end());
  return fds;
}

// A process is gone when kill(pid, 0) fails or it is a zombie nobody reaped yet.
bool gone(int pid) {
  if (kill(pid, 0) != 0) return true;
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || (paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

TEST(GatewaySpawn, BackendGetsNoSecretsNoDescriptorsAndDiesWithTheGateway) {
  // The gateway (a child of this test) inherits these: one is a tenant's key, one is not.
  setenv("CUTLINE_SPAWN_TEST_KEY", "sk-spawn-test-secret", 1);
  setenv("CUTLINE_SPAWN_TEST_PLAIN", "inherited", 1);
  GatewayEnv env;
  const uint16_t backend_port = free_port();
  std::string dir;
  ASSERT_TRUE(env.start([&](uint16_t fake_port, const std::string& log) {
    dir = log.substr(0, log.rfind('/'));
    const std::string script =
        "env > " + dir + "/env.txt; ls -l /proc/self/fd > " + dir + "/fds.txt; echo $$ > " + dir +
        "/pid.txt; exec " + CUTLINE_FAKE_UPSTREAM_BIN + " --port " + std::to_string(backend_port);
    return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
           "access_log: " +
           log +
           "\n"
           "tenants:\n  - name: alice\n    api_keys: [\"env:CUTLINE_SPAWN_TEST_KEY\"]\n"
           "upstreams:\n"
           "  - name: fake\n    url: http://127.0.0.1:" +
           std::to_string(fake_port) +
           "\n    models: [\"fake-*\"]\n"
           "  - name: spawned\n    url: http://127.0.0.1:" +
           std::to_string(backend_port) +
           "\n    models: [\"local-*\"]\n"
           "    spawn:\n      command: [/bin/sh, -c, \"" +
           script +
           "\"]\n      env: {CUTLINE_SPAWN_TEST_GIVEN: given}\n"
           "      ready_timeout: 20s\n"
           "policies:\n  - name: default\n";
  })) << env.error;
  unsetenv("CUTLINE_SPAWN_TEST_KEY");
  unsetenv("CUTLINE_SPAWN_TEST_PLAIN");

  const std::string first_env = read_file(dir + "/env.txt");
  EXPECT_EQ(first_env.find("CUTLINE_SPAWN_TEST_KEY"), std::string::npos) << first_env;
  EXPECT_EQ(first_env.find("sk-spawn-test-secret"), std::string::npos);
  EXPECT_NE(first_env.find("CUTLINE_SPAWN_TEST_PLAIN=inherited"), std::string::npos);
  EXPECT_NE(first_env.find("CUTLINE_SPAWN_TEST_GIVEN=given"), std::string::npos);
  EXPECT_EQ(descriptors(read_file(dir + "/fds.txt")), (std::vector<int>{0, 1, 2}));

  // A stream to the other upstream holds an upstream connection open in the gateway while the
  // backend is killed and restarted.
  auto stream = std::async(std::launch::async, [&] {
    return proto::http_fetch(
        env.url("/v1/chat/completions"), "POST",
        {{"Content-Type", "application/json"}, {"Authorization", "Bearer sk-spawn-test-secret"}},
        R"({"model":"fake-tokens=40,interval_ms=100","messages":[{"role":"user","content":"hi"}],)"
        R"("stream":true})",
        20000);
  });
  ASSERT_TRUE(wait_for(
      [&] {
        auto r = proto::http_fetch(env.fake_url("/fake/requests"), "GET", {}, {}, 2000);
        return r.ok() && r->body.find("fake-tokens=40") != std::string::npos;
      },
      10000));
  const int first_pid = std::atoi(read_file(dir + "/pid.txt").c_str());
  ASSERT_GT(first_pid, 0);
  std::remove((dir + "/fds.txt").c_str());
  kill(first_pid, SIGKILL);
  ASSERT_TRUE(wait_for(
      [&] {
        const std::string fds = read_file(dir + "/fds.txt");
        return !fds.empty() && fds.back() == '\n' &&
               std::atoi(read_file(dir + "/pid.txt").c_str()) != first_pid;
      },
      15000))
      << read_file(dir + "/gateway.err");
  EXPECT_EQ(descriptors(read_file(dir + "/fds.txt")), (std::vector<int>{0, 1, 2}))
      << "the restarted backend inherited the gateway's descriptors (upstream connection open)";
  auto streamed = stream.get();
  ASSERT_TRUE(streamed.ok());
  EXPECT_EQ(streamed->status, 200);

  // The gateway dies without a chance to stop its backend: the backend goes with it.
  ASSERT_TRUE(wait_for(
      [&] {
        auto r = proto::http_fetch(env.admin_url("/readyz"), "GET", {}, {}, 2000);
        return r.ok() && r->status == 200;
      },
      15000));
  const int backend_pid = std::atoi(read_file(dir + "/pid.txt").c_str());
  ASSERT_FALSE(gone(backend_pid));
  env.gateway.signal(SIGKILL);
  EXPECT_TRUE(wait_for([&] { return gone(backend_pid); }, 10000))
      << "the spawned backend outlived a SIGKILLed gateway";
  if (!gone(backend_pid)) kill(backend_pid, SIGKILL);
  env.stop();
}

}  // namespace
}  // namespace cutline::test
