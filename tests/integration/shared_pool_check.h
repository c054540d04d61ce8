#pragma once
// The check two scale-out suites share: gateway replicas with one global token pool in Redis
// never give out more than the pool holds, wherever the requests arrive.

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
