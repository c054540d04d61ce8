// Graceful shutdown and the labeled last chunk (SIGTERM: drain, then cut what is left).
// - A slow HTTP/1.1 reader (4 KiB receive window, not reading) whose answer the upstream has
//   already sent in full when SIGTERM arrives is waited for: it reads its whole stream, labeled
//   last chunk and [DONE] included, and only then does the gateway exit 0.
// - A reader that never reads past the drain timeout is cut, and its stop record still reaches
//   the access log (gateway_deadline, rule shutdown.drain_timeout) though the client never sees
//   it.
// (The HTTP/2 client mid-stream during a drain: gateway_http2_test.cc,
// ShutdownSendsGoawayAndTheStreamInFlightFinishes.)

#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "gateway_harness.h"

namespace cutline::test {
namespace {

// A fake upstream and a gateway with --drain-timeout, in a fresh temp dir.
struct DrainEnv {
  std::string dir = make_temp_dir();
  Process fake, gateway;
  uint16_t port = 0;
  int fake_port = 0;
  std::string log;

  // The fake upstream's record of requests (GET /fake/requests).
  std::string fake_requests() const {
    auto r = proto::http_fetch("http://127.0.0.1:" + std::to_string(fake_port) + "/fake/requests",
                               "GET", {}, "", 2000);
    return r.ok() ? r->body : "";
  }

  bool start(const std::string& drain_timeout) {
    fake.start({CUTLINE_FAKE_UPSTREAM_BIN, "--port", "0"}, dir + "/fake.out", dir + "/fake.err");
    if (!wait_for([&] { return read_file(dir + "/fake.out").find('\n') != std::string::npos; })) {
      return false;
    }
    fake_port = std::atoi(read_file(dir + "/fake.out").c_str() + 5);
    log = dir + "/access.log";
    std::ofstream(dir + "/cutline.yaml")
        << "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\naccess_log: " << log
        << "\nupstreams:\n  - name: fake\n    url: http://127.0.0.1:" << fake_port
        << "\n    models: [\"fake\"]\npolicies:\n  - name: default\n    match: {}\n";
    gateway.start({CUTLINE_GATEWAY_BIN, "--config", dir + "/cutline.yaml", "--ready-file",
                   dir + "/ready.json", "--drain-timeout", drain_timeout},
                  dir + "/gateway.out", dir + "/gateway.err");
    if (!wait_for([&] { return !read_file(dir + "/ready.json").empty(); })) return false;
    const std::string ready = read_file(dir + "/ready.json");
    port = static_cast<uint16_t>(std::atoi(ready.c_str() + ready.find(':') + 1));
    return true;
  }
};

std::string stream_request(const std::string& script) {
  return http_post_raw(
      "/v1/chat/completions",
      R"({"model":"fake","messages":[{"role":"user","content":"hi"}],"stream":true})",
      "X-Fake-Script: " + script + "\r\n");
}

// The stop record's cause and rule in the last data line before [DONE].
std::string last_data_line(const std::string& all) {
  const size_t done = all.rfind("data: [DONE]");
  if (done == std::string::npos) return "";
  const size_t at = all.rfind("data: {", done);
  return at == std::string::npos ? "" : all.substr(at, all.find('\n', at) - at);
}

TEST(GatewayDrain, ASlowReaderStillReceivesItsLabeledLastChunk) {
  DrainEnv env;
  ASSERT_TRUE(env.start("20s")) << read_file(env.dir + "/gateway.err");
  // ~6 MB: more than the client's window and the gateway's socket send buffer hold, so part of
  // the answer is still in the gateway (or its upstream socket) when the drain starts.
  RawClient client(env.port, 4096);
  ASSERT_TRUE(client.connected());
  client.send_all(stream_request("tokens=35000"));
  // The upstream has sent everything: what the client has not read is the gateway's to deliver.
  ASSERT_TRUE(wait_for(
      [&] { return env.fake_requests().find("\"completed\":true") != std::string::npos; }, 15000))
      << env.fake_requests();
  env.gateway.signal(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::string all = client.read_until("data: [DONE]", 40000);
  const std::string last = last_data_line(all);
  ASSERT_FALSE(last.empty()) << all.size() << " bytes, ending: "
                             << all.substr(all.size() > 300 ? all.size() - 300 : 0);
  EXPECT_NE(last.find("\"cause\":\"eos\""), std::string::npos) << last;
  EXPECT_NE(last.find("\"output_tokens\":35000"), std::string::npos) << last;
  EXPECT_EQ(env.gateway.stop(20000), 0) << read_file(env.dir + "/gateway.err");
}

TEST(GatewayDrain, AForcedEndStillWritesTheStopRecordToTheLog) {
  DrainEnv env;
  ASSERT_TRUE(env.start("500ms")) << read_file(env.dir + "/gateway.err");
  RawClient client(env.port, 4096);
  ASSERT_TRUE(client.connected());
  // Never read: the stream is still open (and its output unsent) when the drain times out.
  client.send_all(stream_request("tokens=20000,interval_ms=1"));
  ASSERT_TRUE(wait_for(
      [&] { return env.fake_requests().find("tokens=20000") != std::string::npos; }, 5000));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  env.gateway.signal(SIGTERM);
  env.gateway.stop(20000);
  const std::string log = read_file(env.log);
  const size_t at = log.find("shutdown.drain_timeout");
  ASSERT_NE(at, std::string::npos) << log;
  const size_t start = log.rfind('\n', at) == std::string::npos ? 0 : log.rfind('\n', at) + 1;
  const std::string line = log.substr(start, log.find('\n', at) - start);
  EXPECT_NE(line.find("\"cause\":\"gateway_deadline\""), std::string::npos) << line;
}

}  // namespace
}  // namespace cutline::test
