// Scale-out in front of real Cutline backends: two cutline-gateway replicas share one
// redis-server and an upstream pool of two cutline-backend processes and one OpenAI-compatible
// upstream that is no Cutline backend (the scripted fake reporting as a vLLM server does: its
// gauges at /metrics, 404 at /v1/cutline/state). With `load_report: auto` the replicas read each
// endpoint's load in the format it answers. Each backend holds one of two synthesized models
// resident (room for one only), reported in its /v1/cutline/state: a request for model-b goes to
// the backend where model-b is resident; the backend killed mid-stream ends its stream
// upstream_disconnect (labeled, not retried) and the next requests go elsewhere; and the global
// token pool is never overspent across the two replicas. Without load reports, prompts that
// share a system prompt land on one backend from either replica, whose prefix cache then hits,
// and concurrent streams spread over the pool by requests in flight. Fails under CI=true when
// redis-server is missing.

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend_harness.h"
#include "gateway_harness.h"
#include "scale_out_harness.h"
#include "support/ci.h"
#include "support/redis_server.h"

namespace cutline::test {
namespace {

std::string label_of(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

std::string chat_body(const std::string& model, const std::string& prompt, bool stream,
                      int max_tokens) {
  return R"({"model":")" + model + R"(","max_tokens":)" + std::to_string(max_tokens) +
         R"(,"ignore_eos":true,"stream":)" + (stream ? "true" : "false") +
         R"(,"messages":[{"role":"user","content":")" + prompt + R"("}]})";
}

class GatewayScaleOutBackends : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!redis_.start()) {
      if (running_in_ci()) FAIL() << "CI=true but redis-server could not start: " << redis_.error();
      GTEST_SKIP() << redis_.error();
    }
    // Two models of one shape (other weights), large enough that a 1000-token stream lasts a
    // while; each backend's weights budget holds one of them.
    model::SynthOptions o;
    o.layers = 4;
    o.dim = 256;
    o.heads = 4;
    o.kv_heads = 2;
    const std::string a = synth_model(backends_[0].dir(), "model-a", o);
    o.seed = 2;
    const std::string b = synth_model(backends_[0].dir(), "model-b", o);
    ASSERT_FALSE(a.empty() || b.empty());
    std::error_code ec;
    const std::string budget = std::to_string(std::filesystem::file_size(a, ec) + 100 * 1024);
    // The first --model is the one loaded at start-up: model-a on backend 0, model-b on 1.
    ASSERT_TRUE(backends_[0].start(
        {"--model", "model-a=" + a, "--model", "model-b=" + b, "--weights-memory", budget}))
        << backends_[0].stderr_text();
    ASSERT_TRUE(backends_[1].start(
        {"--model", "model-b=" + b, "--model", "model-a=" + a, "--weights-memory", budget}))
        << backends_[1].stderr_text();
    const std::string dir = backends_[0].dir();
    other_port_ = start_fake_upstream(other_, dir, "other", {"--vllm-metrics"});
    ASSERT_NE(other_port_, 0) << read_file(dir + "/other.err");
  }

  // Both replicas on one policy: pool "pool" of the three endpoints (least_request, residency
  // from the backends' reports, the fake's vLLM gauges, health checks, outlier ejection),
  // `budget` as the rule's section.
  // `balance` replaces the load reports (then nothing is known of residency).
  bool start_gateways(const std::string& budget, const std::string& balance = "") {
    const std::string endpoints = "[\"http://" + label_of(backends_[0].port()) + "\", \"http://" +
                                  label_of(backends_[1].port()) + "\", \"http://" +
                                  label_of(other_port_) + "\"]";
    auto yaml = [&](uint16_t, const std::string& log) {
      return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\n"
             "access_log: " +
             log + "\nbudget_store: redis://127.0.0.1:" + std::to_string(redis_.port()) +
             "\nupstreams:\n  - name: pool\n    models: [\"model-*\"]\n    endpoints: " +
             endpoints +
             (balance.empty()
                  ? "\n    load_report: {from: auto, interval: 100ms, stale_after: 2s}\n"
                  : "\n" + balance) +
             "    health: {path: /healthz, interval: 200ms, timeout: 150ms}\n"
             "    outlier: {consecutive_failures: 1, base_ejection: 5s}\n"
             "policies:\n  - name: default\n    match: {}\n" +
             budget;
    };
    // Both replicas have both backends' reports (the other upstream has none to give).
    return start_replicas(a_, b_, yaml, balance.empty() ? 2 : 0, error_);
  }

  // A backend's prefix-cache lookups that reused at least one KV block, from its /metrics.
  int64_t prefix_hits(const Backend& backend) {
    auto r =
        proto::http_fetch("http://" + label_of(backend.port()) + "/metrics", "GET", {}, "", 5000);
    if (!r.ok()) return -1;
    return static_cast<int64_t>(metric_value(r->body, "cutline_backend_prefix_cache_hits_total"));
  }

  // True when `label` is ejected or failing health checks in both replicas.
  bool avoided_by_both(const std::string& label) {
    for (auto* g : {&a_, &b_}) {
      auto r = proto::http_fetch(g->admin_url("/v1/cutline/upstreams"), "GET", {}, "", 2000);
      if (!r.ok()) return false;
      const size_t at = r->body.find("\"address\":\"" + label + "\"");
      if (at == std::string::npos) return false;
      const size_t end = r->body.find("\"address\"", at + 1);
      const std::string entry = r->body.substr(at, end == std::string::npos ? end : end - at);
      if (entry.find("\"ejected\":true") == std::string::npos &&
          entry.find("\"healthy\":false") == std::string::npos) {
        return false;
      }
    }
    return true;
  }

  std::string ask(GatewayEnv& g, const std::string& model, const std::string& prompt) {
    auto r = proto::http_fetch(g.url("/v1/chat/completions"), "POST",
                               {{"Content-Type", "application/json"}},
                               chat_body(model, prompt, false, 4), 20000);
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r.ok() ? r->status : 0, 200) << (r.ok() ? r->body : "");
    return r.ok() ? r->body : std::string();
  }

  RedisServer redis_;
  Backend backends_[2];
  Process other_;
  uint16_t other_port_ = 0;
  GatewayEnv a_, b_;
  std::string error_;
};

TEST_F(GatewayScaleOutBackends, ResidentModelChoosesTheBackendAndAKilledOneIsLeft) {
  ASSERT_TRUE(start_gateways("")) << error_;
  const std::string holder = label_of(backends_[1].port());  // model-b resident there
  for (int i = 0; i < 4; ++i) {
    const std::string body = ask(i % 2 ? b_ : a_, "model-b", "b " + std::to_string(i));
    EXPECT_NE(endpoints_of(body).find(holder), std::string::npos) << body;
    EXPECT_NE(body.find("\"routed_cold\":false"), std::string::npos) << body;
    EXPECT_NE(body.find("\"model_state\":\"resident\""), std::string::npos) << body;
    const std::string a = ask(i % 2 ? a_ : b_, "model-a", "a " + std::to_string(i));
    EXPECT_NE(endpoints_of(a).find(label_of(backends_[0].port())), std::string::npos) << a;
  }

  // A long model-b stream relays from its backend; the backend dies under it.
  RawClient stream(a_.port);
  ASSERT_TRUE(stream.connected());
  stream.post("/v1/chat/completions", chat_body("model-b", "a long answer", true, 1000));
  ASSERT_NE(stream.read_until("\"content\":\"", 20000).find("\"content\":\""), std::string::npos);
  backends_[1].signal(SIGKILL);
  const std::string got = stream.read_until("[DONE]", 20000);
  ASSERT_NE(got.find("[DONE]"), std::string::npos) << got.substr(0, 400);
  const size_t record = got.rfind("\"cutline\":");
  ASSERT_NE(record, std::string::npos) << got.substr(got.size() > 600 ? got.size() - 600 : 0);
  const std::string tail = got.substr(record);
  EXPECT_NE(tail.find("\"cause\":\"upstream_disconnect\""), std::string::npos) << tail;
  EXPECT_NE(tail.find("\"attempts\":1"), std::string::npos) << tail;  // never retried after tokens
  EXPECT_NE(endpoints_of(tail).find(holder), std::string::npos) << tail;

  // Both replicas stop sending to it; model-b is resident nowhere now, so its requests go
  // elsewhere, marked routed_cold until the surviving backend has loaded it (evicting model-a)
  // and reported it resident.
  ASSERT_TRUE(wait_for([&] { return avoided_by_both(holder); }, 5000));
  int cold = 0, survivor = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string body = ask(i % 2 ? b_ : a_, "model-b", "after " + std::to_string(i));
    EXPECT_EQ(endpoints_of(body).find(holder), std::string::npos) << body;
    EXPECT_NE(body.find("\"attempts\":1"), std::string::npos) << body;
    if (body.find("\"routed_cold\":true") != std::string::npos) ++cold;
    if (endpoints_of(body).find(label_of(backends_[0].port())) != std::string::npos) ++survivor;
  }
  std::printf("model-b after the kill: %d of 8 routed cold, %d to the surviving backend\n", cold,
              survivor);
  EXPECT_GE(cold, 1);
  a_.stop();
  b_.stop();
}

// One pool, two report formats: both replicas show the backends' state (resident models) and
// the vLLM-style endpoint's gauges, each read from where that endpoint publishes it.
TEST_F(GatewayScaleOutBackends, EachEndpointReportsInItsOwnFormat) {
  ASSERT_TRUE(start_gateways("")) << error_;
  const std::string fake = "\"address\":\"" + label_of(other_port_) + "\"";
  for (auto* g : {&a_, &b_}) {
    std::string body;
    const bool seen = wait_for(
        [&] {
          auto r = proto::http_fetch(g->admin_url("/v1/cutline/upstreams"), "GET", {}, "", 2000);
          if (!r.ok()) return false;
          body = r->body;
          const size_t at = body.find(fake);
          if (at == std::string::npos) return false;
          const size_t end = body.find("\"address\"", at + 1);
          const std::string entry = body.substr(at, end == std::string::npos ? end : end - at);
          return entry.find("\"kv_usage\":0.1") != std::string::npos &&
                 entry.find("\"resident_models\"") == std::string::npos;
        },
        5000);
    EXPECT_TRUE(seen) << "the fake's vLLM gauges never showed: " << body;
    size_t models = 0;
    for (size_t at = body.find("\"resident_models\""); at != std::string::npos;
         at = body.find("\"resident_models\"", at + 1)) {
      ++models;
    }
    EXPECT_EQ(models, 2u) << "both backends' states: " << body;
  }
}

TEST_F(GatewayScaleOutBackends, SharedPrefixesLandOnOneBackendWhosePrefixCacheHits) {
  ASSERT_TRUE(start_gateways("", "    prefix_affinity: {bytes: 256}\n")) << error_;
  // A long system prompt (many KV blocks) and different questions. The ring decides where a
  // prefix lives; take the first of a few system prompts whose home is a Cutline backend (the
  // third endpoint has no prefix cache to show).
  std::string system, home;
  Backend* backend = nullptr;
  for (int attempt = 0; attempt < 12 && backend == nullptr; ++attempt) {
    system = "You are assistant number " + std::to_string(attempt) + ". ";
    while (system.size() < 600) system += "Answer briefly and cite the policy you follow. ";
    home = endpoints_of(ask(a_, "model-a", system + "first question"));
    for (Backend& b : backends_) {
      if (home.find(label_of(b.port())) != std::string::npos) backend = &b;
    }
  }
  ASSERT_NE(backend, nullptr) << "no system prompt of 12 had a backend as its home";
  Backend& other = backend == &backends_[0] ? backends_[1] : backends_[0];
  const int64_t hits_before = prefix_hits(*backend);
  const int64_t other_before = prefix_hits(other);
  ASSERT_GE(hits_before, 0);
  for (int i = 0; i < 6; ++i) {
    const std::string body =
        ask(i % 2 ? b_ : a_, "model-a", system + "question " + std::to_string(i));
    EXPECT_EQ(endpoints_of(body), home) << body;
  }
  // Every one of the six found the system prompt's blocks already there; the other backend saw
  // none of them.
  EXPECT_GE(prefix_hits(*backend) - hits_before, 6);
  EXPECT_EQ(prefix_hits(other), other_before);
  a_.stop();
  b_.stop();
}

TEST_F(GatewayScaleOutBackends, ConcurrentStreamsSpreadByRequestsInFlight) {
  ASSERT_TRUE(start_gateways("", "    balance: least_request\n")) << error_;
  // Six streams held open at once (each client reads its first token, then nothing until all
  // six started), alternately through each replica. least_request compares two endpoints by
  // requests in flight, so a replica's second stream never joins its first one's endpoint, and
  // no endpoint takes more than two of a replica's three. The fake answers as long a stream as
  // the backends (its script; the backends ignore the header), or its five tokens would be sent
  // before the next stream starts.
  std::vector<std::unique_ptr<RawClient>> streams;
  for (int i = 0; i < 6; ++i) {
    GatewayEnv& g = i % 2 ? b_ : a_;
    streams.push_back(std::make_unique<RawClient>(g.port));
    ASSERT_TRUE(streams.back()->connected());
    streams.back()->post("/v1/chat/completions",
                         chat_body("model-a", "stream " + std::to_string(i), true, 1000),
                         "X-Fake-Script: tokens=1000,interval_ms=2\r\n");
    ASSERT_NE(streams.back()->read_until("\"content\":\"", 20000).find("\"content\":\""),
              std::string::npos);
  }
  std::vector<std::string> where;
  std::map<std::string, int> per_endpoint;
  for (auto& s : streams) {
    const std::string got = s->read_until("[DONE]", 60000);
    ASSERT_NE(got.find("[DONE]"), std::string::npos) << got.substr(0, 300);
    EXPECT_NE(got.rfind("\"cutline\":"), std::string::npos) << got.substr(0, 300);
    where.push_back(endpoints_of(got));
    ++per_endpoint[where.back()];
  }
  std::string spread;
  for (const auto& [endpoints, n] : per_endpoint) {
    spread += endpoints + "]: " + std::to_string(n) + "  ";
  }
  std::printf("six concurrent streams: %s\n", spread.c_str());
  EXPECT_NE(where[0], where[2]) << spread;  // replica a's first two
  EXPECT_NE(where[1], where[3]) << spread;  // replica b's first two
  EXPECT_GE(per_endpoint.size(), 2u) << spread;
  for (const auto& [endpoints, n] : per_endpoint) EXPECT_LE(n, 4) << spread;
  a_.stop();
  b_.stop();
}

TEST_F(GatewayScaleOutBackends, TheGlobalPoolIsNeverOverspentAcrossReplicas) {
  // 600 tokens per minute, 100 per request (ignore_eos: all used): about 6 requests.
  ASSERT_TRUE(
      start_gateways("    budget:\n      max_output_tokens: 100\n"
                     "      global_tokens_per_minute: 600\n"
                     "      on_pool_exhausted: reject\n"))
      << error_;
  expect_global_pool_held(
      a_, b_, 16,
      [](int i) {
        return chat_body(i % 4 < 2 ? "model-a" : "model-b", "pool " + std::to_string(i), false,
                         100);
      },
      {{"Content-Type", "application/json"}}, 30000);
  a_.stop();
  b_.stop();
}

}  // namespace
}  // namespace cutline::test
