// Scale-out with real processes: two cutline-gateway replicas share one redis-server and an
// upstream pool of three fake upstreams that report load and resident models as a Cutline
// backend does (`--resident`, GET /v1/cutline/state). Load spreads by outstanding requests; a
// backend killed mid-run is ejected, its in-flight streams end upstream_disconnect and new
// requests avoid it until it is healthy again; a request for a model goes where that model is
// resident (routed_cold otherwise); requests sharing a prompt prefix land on one endpoint; and
// the global token pool is never overspent across the two replicas. Fails under CI=true when
// redis-server is missing.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gateway_harness.h"
#include "scale_out_harness.h"
#include "support/ci.h"
#include "support/redis_server.h"

namespace cutline::test {
namespace {

// One fake upstream on a fixed port (so it can be restarted there), reporting `resident`.
struct Backend {
  std::string dir;
  std::string resident;
  uint16_t port = 0;
  Process process;

  bool start() {
    process.start(
        {CUTLINE_FAKE_UPSTREAM_BIN, "--port", std::to_string(port), "--resident", resident},
        dir + "/fake" + std::to_string(port) + ".out",
        dir + "/fake" + std::to_string(port) + ".err");
    return wait_for([&] {
      auto r = proto::http_fetch(url("/v1/cutline/state"), "GET", {}, "", 1000);
      return r.ok() && r->status == 200;
    });
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port) + path;
  }
  std::string label() const { return "127.0.0.1:" + std::to_string(port); }
};

std::string chat_body(const std::string& model, const std::string& prompt, bool stream,
                      int max_tokens = 50) {
  return R"({"model":")" + model + R"(","max_tokens":)" + std::to_string(max_tokens) +
         R"(,"stream":)" + (stream ? "true" : "false") +
         R"(,"messages":[{"role":"user","content":")" + prompt + R"("}]})";
}

class GatewayScaleOut : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!redis_.start()) {
      if (running_in_ci()) FAIL() << "CI=true but redis-server could not start: " << redis_.error();
      GTEST_SKIP() << redis_.error();
    }
    dir_ = make_temp_dir();
    const char* resident[3] = {"shared,model-a", "shared,model-b", "shared,model-a"};
    for (int i = 0; i < 3; ++i) {
      backends_[i] = std::make_unique<Backend>();
      backends_[i]->dir = dir_;
      backends_[i]->resident = resident[i];
      backends_[i]->port = free_port();
      ASSERT_TRUE(backends_[i]->start()) << "backend " << i << " did not start";
    }
  }

  // Both replicas on the same policy: one pool "pool" (least_request, residency from the load
  // reports, health checks, outlier ejection) for shared and model-*, the same endpoints as
  // "affine" with prefix affinity for prefix-*, and `budget` as the rule's budget section.
  bool start_gateways(const std::string& budget) {
    std::string endpoints;
    for (const auto& b : backends_) {
      endpoints += std::string(endpoints.empty() ? "" : ", ") + "\"http://" + b->label() + "\"";
    }
    const std::string pool_keys =
        "    endpoints: [" + endpoints +
        "]\n"
        "    load_report: {from: cutline, interval: 100ms, stale_after: 2s}\n"
        "    health: {path: /healthz, interval: 200ms, timeout: 150ms}\n"
        "    outlier: {consecutive_failures: 1, base_ejection: 2s}\n";
    auto yaml = [&](uint16_t, const std::string& log) {
      return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
             "access_log: " +
             log + "\nbudget_store: redis://127.0.0.1:" + std::to_string(redis_.port()) +
             "\nupstreams:\n  - name: pool\n    models: [\"shared\", \"model-*\"]\n" + pool_keys +
             "  - name: affine\n    models: [\"prefix-*\"]\n" + pool_keys +
             "    prefix_affinity: {bytes: 96}\n"
             "policies:\n  - name: default\n    match: {}\n" +
             budget;
    };
    // Every endpoint reports its resident models to both replicas: 3 in each of the 2 pools.
    return start_replicas(a_, b_, yaml, 6, error_);
  }

  // True when `label` is ejected or unhealthy in both replicas' pool "pool".
  bool avoided_by_both(const std::string& label, bool want_avoided) {
    for (auto* g : {&a_, &b_}) {
      auto r = proto::http_fetch(g->admin_url("/v1/cutline/upstreams"), "GET", {}, "", 2000);
      if (!r.ok()) return false;
      const size_t at = r->body.find("\"address\":\"" + label + "\"");
      if (at == std::string::npos) return false;
      const size_t end = r->body.find("\"address\"", at + 1);
      const std::string entry = r->body.substr(at, end == std::string::npos ? end : end - at);
      const bool avoided = entry.find("\"ejected\":true") != std::string::npos ||
                           entry.find("\"healthy\":false") != std::string::npos;
      if (avoided != want_avoided) return false;
    }
    return true;
  }

  RedisServer redis_;
  std::string dir_;
  std::unique_ptr<Backend> backends_[3];
  GatewayEnv a_, b_;
  std::string error_;
};

TEST_F(GatewayScaleOut, LoadSpreadsAndAKilledBackendIsEjectedUntilHealthy) {
  ASSERT_TRUE(start_gateways("")) << error_;
  // Nine long streams through replica a, distinct prompts.
  std::vector<std::unique_ptr<RawClient>> streams;
  for (int i = 0; i < 9; ++i) {
    auto c = std::make_unique<RawClient>(a_.port);
    ASSERT_TRUE(c->connected());
    c->post("/v1/chat/completions", chat_body("shared", "stream " + std::to_string(i), true, 400),
            "X-Fake-Script: tokens=300,interval_ms=20\r\n");
    ASSERT_NE(c->read_until("\"content\":\"", 10000).find("\"content\":\""), std::string::npos);
    streams.push_back(std::move(c));
  }
  // Spread by outstanding requests: every backend holds some of the nine, none most of them.
  for (const auto& b : backends_) {
    auto r = proto::http_fetch(b->url("/fake/requests"), "GET", {}, "", 2000);
    ASSERT_TRUE(r.ok());
    // Chat requests received and not completed: the streams it holds now (probes answer at once).
    int in_flight = 0;
    const std::string chat = "\"path\":\"/v1/chat/completions\"";
    for (size_t at = r->body.find(chat); at != std::string::npos; at = r->body.find(chat, at + 1)) {
      const size_t next = r->body.find("\"method\"", at);
      const size_t done = r->body.find("\"completed\":false", at);
      if (done != std::string::npos && (next == std::string::npos || done < next)) ++in_flight;
    }
    std::printf("%s holds %d of the 9 streams\n", b->label().c_str(), in_flight);
    EXPECT_GE(in_flight, 1) << b->label();
    EXPECT_LE(in_flight, 5) << b->label();
  }

  // Backend 2 dies mid-stream.
  Backend& victim = *backends_[2];
  victim.process.signal(SIGKILL);
  victim.process.stop();
  int cut = 0;
  for (auto& c : streams) {
    const std::string got = c->read_until("[DONE]", 20000);
    ASSERT_NE(got.find("[DONE]"), std::string::npos) << got.substr(0, 400);
    if (endpoints_of(got).find(victim.label()) != std::string::npos) {
      ++cut;
      EXPECT_NE(got.find("\"cause\":\"upstream_disconnect\""), std::string::npos)
          << got.substr(got.size() > 600 ? got.size() - 600 : 0);
      EXPECT_NE(got.find("\"attempts\":1"), std::string::npos);  // never retried after tokens
    } else {
      EXPECT_NE(got.find("\"cause\":\"eos\""), std::string::npos)
          << got.substr(got.size() > 600 ? got.size() - 600 : 0);
    }
  }
  EXPECT_GE(cut, 1);

  // Both replicas stop sending to it (ejected after the disconnects, unhealthy by the checks).
  ASSERT_TRUE(wait_for([&] { return avoided_by_both(victim.label(), true); }, 5000));
  for (int i = 0; i < 12; ++i) {
    GatewayEnv& g = i % 2 ? b_ : a_;
    auto r =
        proto::http_fetch(g.url("/v1/chat/completions"), "POST",
                          {{"Content-Type", "application/json"}, {"X-Fake-Script", "tokens=3"}},
                          chat_body("shared", "after " + std::to_string(i), false), 10000);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(endpoints_of(r->body).find(victim.label()), std::string::npos) << r->body;
    EXPECT_NE(r->body.find("\"attempts\":1"), std::string::npos) << r->body;
  }
  // Back on its port: healthy again for both replicas once its back-off has passed.
  ASSERT_TRUE(victim.start());
  EXPECT_TRUE(wait_for([&] { return avoided_by_both(victim.label(), false); }, 8000));
  a_.stop();
  b_.stop();
}

TEST_F(GatewayScaleOut, ResidentModelsAndSharedPrefixesChooseTheEndpoint) {
  ASSERT_TRUE(start_gateways("")) << error_;
  auto ask = [&](GatewayEnv& g, const std::string& model, const std::string& prompt) {
    auto r =
        proto::http_fetch(g.url("/v1/chat/completions"), "POST",
                          {{"Content-Type", "application/json"}, {"X-Fake-Script", "tokens=3"}},
                          chat_body(model, prompt, false), 10000);
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r.ok() ? r->status : 0, 200) << (r.ok() ? r->body : "");
    return r.ok() ? r->body : std::string();
  };
  // model-b is resident on backend 1 only: every request for it goes there, warm.
  for (int i = 0; i < 4; ++i) {
    const std::string body = ask(i % 2 ? b_ : a_, "model-b", "b " + std::to_string(i));
    EXPECT_NE(endpoints_of(body).find(backends_[1]->label()), std::string::npos) << body;
    EXPECT_NE(body.find("\"routed_cold\":false"), std::string::npos) << body;
  }
  // model-z is resident nowhere: it goes somewhere, and the record says it paid a load.
  EXPECT_NE(ask(a_, "model-z", "z").find("\"routed_cold\":true"), std::string::npos);
  // A shared 96-byte prefix (a system prompt) and different questions: one endpoint, on either
  // replica (the ring is the same everywhere).
  const std::string system(120, 's');
  std::string home;
  for (int i = 0; i < 6; ++i) {
    const std::string body =
        ask(i % 2 ? b_ : a_, "prefix-x", system + " question " + std::to_string(i));
    const std::string e = endpoints_of(body);
    if (home.empty()) home = e;
    EXPECT_EQ(e, home) << body;
  }
  EXPECT_FALSE(home.empty());
  a_.stop();
  b_.stop();
}

TEST_F(GatewayScaleOut, TheGlobalPoolIsNeverOverspentAcrossReplicas) {
  // 600 tokens per minute, 100 per request (all used): about 6 requests, wherever they arrive.
  ASSERT_TRUE(
      start_gateways("    budget:\n      max_output_tokens: 100\n"
                     "      global_tokens_per_minute: 600\n"
                     "      on_pool_exhausted: reject\n"))
      << error_;
  expect_global_pool_held(
      a_, b_, 20,
      [](int i) { return chat_body("shared", "pool " + std::to_string(i), false, 100); },
      {{"Content-Type", "application/json"}, {"X-Fake-Script", "tokens=100,interval_ms=5"}}, 20000);
  a_.stop();
  b_.stop();
}

}  // namespace
}  // namespace cutline::test
