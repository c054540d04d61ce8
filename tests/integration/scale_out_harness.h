#pragma once
// What the two scale-out suites share: starting two gateway replicas in front of one upstream pool,
// and the check that replicas with one global token pool in Redis never give out more than the
// pool holds, wherever the requests arrive; and reading which endpoints an answer went to.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gateway_harness.h"

namespace cutline::test {

// The record's "endpoints" list in an answer (stream or body): the text between its brackets.
inline std::string endpoints_of(const std::string& answer) {
  const size_t at = answer.rfind("\"endpoints\":[");
  if (at == std::string::npos) return "";
  return answer.substr(at, answer.find(']', at) - at);
}

// Starts replicas `a` and `b` on the policy `yaml` writes, with --upstream-error-detail (answers
// name the endpoints they were sent to; the tests read them), and waits until each lists
// `reports` resident-model reports in /v1/cutline/upstreams. False, with `error` set, when a
// replica did not start or the reports did not come within 10 s.
inline bool start_replicas(GatewayEnv& a, GatewayEnv& b,
                           const std::function<std::string(uint16_t, const std::string&)>& yaml,
                           size_t reports, std::string& error) {
  for (GatewayEnv* g : {&a, &b}) {
    g->gateway_args = {"--upstream-error-detail"};
    if (!g->start(yaml)) {
      error = g->error;
      return false;
    }
  }
  const bool reported = wait_for(
      [&] {
        for (GatewayEnv* g : {&a, &b}) {
          auto r = proto::http_fetch(g->admin_url("/v1/cutline/upstreams"), "GET", {}, "", 2000);
          if (!r.ok()) return false;
          size_t n = 0;
          for (size_t at = r->body.find("\"resident_models\""); at != std::string::npos;
               at = r->body.find("\"resident_models\"", at + 1)) {
            ++n;
          }
          if (n < reports) return false;
        }
        return true;
      },
      10000);
  if (!reported) error = "the replicas did not get " + std::to_string(reports) + " reports";
  return reported;
}

// Sends `requests` concurrent non-streaming chat requests, alternately to replicas `a` and `b`,
// whose rule has `global_tokens_per_minute: 600` (refilled at 10 per second), max_output_tokens
// 100 and `on_pool_exhausted: reject`, each answer using all 100 tokens. Request i has body
// `body(i)` and `headers`. Every request must be served or refused by the pool (429
// global_tokens_per_minute), some must be served (the pool is shared, not refused wholesale), and
// neither the requests served (100 tokens reserved each) nor the tokens they used may exceed what
// the bucket could give meanwhile.
inline void expect_global_pool_held(GatewayEnv& a, GatewayEnv& b, int requests,
                                    const std::function<std::string(int)>& body,
                                    const proto::HttpHeaders& headers, int timeout_ms) {
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<int> served{0}, refused{0}, other{0};
  std::atomic<int64_t> tokens{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < requests; ++i) {
    clients.emplace_back([&, i] {
      GatewayEnv& g = i % 2 ? b : a;
      auto r =
          proto::http_fetch(g.url("/v1/chat/completions"), "POST", headers, body(i), timeout_ms);
      if (!r.ok()) {
        ++other;
      } else if (r->status == 200) {
        ++served;
        const size_t at = r->body.find("\"output_tokens\":");
        if (at != std::string::npos) tokens += std::atoll(r->body.c_str() + at + 16);
      } else if (r->status == 429 &&
                 r->body.find("global_tokens_per_minute") != std::string::npos) {
        ++refused;
      } else {
        ++other;
      }
    });
  }
  for (auto& t : clients) t.join();
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // What the bucket can have given: its 600 plus the refill (10 per second) meanwhile.
  const double budget = 600 + 10 * elapsed_s;
  std::printf("%d served (%lld tokens), %d refused in %.1f s; the pool could give %.0f\n",
              served.load(), static_cast<long long>(tokens.load()), refused.load(), elapsed_s,
              budget);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(served + refused, requests);
  EXPECT_GE(served.load(), 5);  // the pool was shared, not refused wholesale
  EXPECT_LE(served * 100, budget) << served << " served in " << elapsed_s << " s";
  EXPECT_LE(static_cast<double>(tokens.load()), budget);
}

}  // namespace cutline::test
