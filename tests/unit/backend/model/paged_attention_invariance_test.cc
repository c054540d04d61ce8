// The CPU paged attention the forward pass calls (cpu_attention.cc) is batch invariant: a query
// row gives the same bits whether its sequence's prompt is attended in one call, token by token,
// or in chunks of any size, and whatever other sequences share the call, for every instruction
// set and thread count; and it matches a double-precision reference. The shapes exercise the
// kernel's edges: a GQA group of 3, head_dim 20 (16 + a scalar tail), positions past several
// 16-key tiles, block_size 8 with a scattered block table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cutline/device/device.h"

namespace cutline::device {
namespace {

struct Case {
  int32_t n_heads = 6, n_kv_heads = 2, head_dim = 20, block_size = 8;
  int32_t len_a = 45, len_b = 19;  // positions cached for sequences a and b
  std::vector<int32_t> tables = {5, 0, 9, 2, 7, 11, /*b:*/ 3, 10, 1};
  int32_t begin_b = 6;
  int32_t n_blocks = 12;
  std::vector<float> kc, vc, qa, qb;
  int64_t kv_dim() const { return int64_t{n_kv_heads} * head_dim; }
  int64_t q_dim() const { return int64_t{n_heads} * head_dim; }
};

Case make_case() {
  Case c;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  auto fill = [&](std::vector<float>& v, int64_t n) {
    v.resize(n);
    for (float& x : v) x = u(rng);
  };
  fill(c.kc, int64_t{c.n_blocks} * c.block_size * c.kv_dim());
  fill(c.vc, int64_t{c.n_blocks} * c.block_size * c.kv_dim());
  fill(c.qa, c.len_a * c.q_dim());
  fill(c.qb, c.len_b * c.q_dim());
  return c;
}

// Attends sequence a's positions [p0, p1) plus, when with_b, sequence b's last position, in one
// call; returns a's rows.
std::vector<float> run(Device& dev, const Case& c, int32_t p0, int32_t p1, bool with_b) {
  std::vector<AttentionToken> toks;
  std::vector<float> q;
  if (with_b) {
    toks.push_back({c.len_b - 1, c.begin_b});
    q.insert(q.end(), c.qb.end() - c.q_dim(), c.qb.end());
  }
  for (int32_t p = p0; p < p1; ++p) {
    toks.push_back({p, 0});
    q.insert(q.end(), c.qa.begin() + p * c.q_dim(), c.qa.begin() + (p + 1) * c.q_dim());
  }
  std::vector<float> out(toks.size() * c.q_dim());
  AttentionArgs a{.q = q.data(),
                  .out = out.data(),
                  .k_cache = c.kc.data(),
                  .v_cache = c.vc.data(),
                  .block_tables = c.tables.data(),
                  .tokens = toks.data(),
                  .n_tokens = static_cast<int32_t>(toks.size()),
                  .n_heads = c.n_heads,
                  .n_kv_heads = c.n_kv_heads,
                  .head_dim = c.head_dim,
                  .block_size = c.block_size,
                  .max_pos = c.len_a - 1,
                  .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  dev.paged_attention(a);
  if (with_b) out.erase(out.begin(), out.begin() + c.q_dim());
  return out;
}

std::vector<double> reference(const Case& c, int32_t pos, int32_t h) {
  const int32_t kvh = h / (c.n_heads / c.n_kv_heads);
  auto slot = [&](int32_t j) {
    return int64_t{c.tables[j / c.block_size]} * c.block_size + j % c.block_size;
  };
  std::vector<double> s(pos + 1), out(c.head_dim, 0.0);
  double mx = -1e300, sum = 0;
  for (int32_t j = 0; j <= pos; ++j) {
    double d = 0;
    for (int32_t i = 0; i < c.head_dim; ++i)
      d += double(c.qa[pos * c.q_dim() + h * c.head_dim + i]) *
           c.kc[slot(j) * c.kv_dim() + kvh * c.head_dim + i];
    s[j] = d / std::sqrt(double(c.head_dim));
    mx = std::max(mx, s[j]);
  }
  for (double& x : s) sum += (x = std::exp(x - mx));
  for (int32_t j = 0; j <= pos; ++j)
    for (int32_t i = 0; i < c.head_dim; ++i)
      out[i] += s[j] / sum * c.vc[slot(j) * c.kv_dim() + kvh * c.head_dim + i];
  return out;
}

TEST(PagedAttentionInvariance, RowsAreIdenticalAloneInChunksAndAmongOthers) {
  const Case c = make_case();
  const int64_t row = c.q_dim();
  for (const char* isa : {"scalar", "avx2", "avx512"}) {
    for (int32_t threads : {1, 3}) {
      SCOPED_TRACE(std::string(isa) + " threads " + std::to_string(threads));
      auto dev = make_device({.kind = DeviceKind::kCpu, .cpu_threads = threads, .cpu_isa = isa});
      ASSERT_TRUE(dev.ok());
      const std::vector<float> whole = run(**dev, c, 0, c.len_a, false);
      for (int32_t p = 0; p < c.len_a; ++p) {
        for (int32_t h = 0; h < c.n_heads; ++h) {
          const std::vector<double> ref = reference(c, p, h);
          for (int32_t i = 0; i < c.head_dim; ++i)
            ASSERT_NEAR(whole[p * row + h * c.head_dim + i], ref[i], 1e-5)
                << "pos " << p << " head " << h;
        }
      }
      for (int32_t chunk : {1, 5, 16, 17}) {
        for (bool with_b : {false, true}) {
          for (int32_t p0 = 0; p0 < c.len_a; p0 += chunk) {
            const int32_t p1 = std::min(c.len_a, p0 + chunk);
            const std::vector<float> part = run(**dev, c, p0, p1, with_b);
            ASSERT_EQ(0, std::memcmp(part.data(), whole.data() + p0 * row, part.size() * 4))
                << "chunk " << chunk << " at " << p0 << (with_b ? " with another sequence" : "");
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace cutline::device
