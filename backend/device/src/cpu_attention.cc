// Causal paged attention on the CPU (see cpu_attention.h).
#include "cpu_attention.h"

#include <algorithm>
#include <cmath>

namespace cutline::device::cpu {

void paged_attention(const AttentionArgs& a, ThreadPool& pool, const Kernels& kernels,
                     std::vector<std::vector<float>>& scratch_per_thread) {
  auto scratch = [&](int32_t thread, int64_t floats) {
    std::vector<float>& s = scratch_per_thread[thread];
    if (static_cast<int64_t>(s.size()) < floats) s.resize(floats);
    return s.data();
  };
  const int32_t group = a.n_heads / a.n_kv_heads;
  const int64_t q_dim = static_cast<int64_t>(a.n_heads) * a.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(a.n_kv_heads) * a.head_dim;
  constexpr int kHeads = 4;  // query heads served by one pass over a KV head's rows
  const int32_t n_sub = (group + kHeads - 1) / kHeads;
  // One task per (token, KV head, up to kHeads of its query heads): each K and V row is read once
  // for all those heads. Every head's softmax still runs over positions 0..pos in order with the
  // same per-head operations (dot_rows and axpy_rows give each row the same bits whatever nr
  // is), so a head's result depends only on its query and the cache, never on the call.
  pool.run(
      static_cast<int64_t>(a.n_tokens) * a.n_kv_heads * n_sub, [&](int64_t task, int32_t thread) {
        const int64_t t = task / (int64_t{a.n_kv_heads} * n_sub);
        const int32_t kvh = static_cast<int32_t>(task / n_sub % a.n_kv_heads);
        const int32_t h0 = kvh * group + static_cast<int32_t>(task % n_sub) * kHeads;
        const int nh = std::min<int32_t>(kHeads, kvh * group + group - h0);
        const AttentionToken tok = a.tokens[t];
        const int64_t n_ctx = static_cast<int64_t>(tok.pos) + 1;
        float* scores = scratch(thread, kHeads * (n_ctx + a.head_dim));
        const float* qs[kHeads];
        float* accs[kHeads];
        for (int i = 0; i < nh; ++i) {
          qs[i] = a.q + t * q_dim + static_cast<int64_t>(h0 + i) * a.head_dim;
          accs[i] = scores + kHeads * n_ctx + i * a.head_dim;
        }
        const int64_t head_off = static_cast<int64_t>(kvh) * a.head_dim;
        const int32_t* table = a.block_tables + tok.table_begin;
        auto row = [&](int64_t j) {
          return static_cast<int64_t>(table[j / a.block_size]) * a.block_size + j % a.block_size;
        };
        float mx[kHeads], sum[kHeads], s[kHeads];
        for (int i = 0; i < nh; ++i) mx[i] = -INFINITY;
        for (int64_t j = 0; j < n_ctx; ++j) {
          const float* kr = a.k_cache + row(j) * kv_dim + head_off;
          for (int i = 0; i < nh; i += kernels.dot_tile)
            kernels.dot_rows(kr, qs + i, std::min(kernels.dot_tile, nh - i), a.head_dim, s + i);
          for (int i = 0; i < nh; ++i) {
            scores[i * n_ctx + j] = s[i] * a.scale;
            mx[i] = std::max(mx[i], scores[i * n_ctx + j]);
          }
        }
        for (int i = 0; i < nh; ++i) {
          float* sc = scores + i * n_ctx;
          sum[i] = 0;
          for (int64_t j = 0; j < n_ctx; ++j) {
            sc[j] = std::exp(sc[j] - mx[i]);
            sum[i] += sc[j];
          }
          std::fill(accs[i], accs[i] + a.head_dim, 0.0f);
        }
        float p[kHeads];
        for (int64_t j = 0; j < n_ctx; ++j) {
          const float* vr = a.v_cache + row(j) * kv_dim + head_off;
          for (int i = 0; i < nh; ++i) p[i] = scores[i * n_ctx + j];
          if (kernels.axpy_rows != nullptr) {
            kernels.axpy_rows(vr, p, nh, a.head_dim, accs);
          } else {
            for (int i = 0; i < nh; ++i)
              for (int32_t d = 0; d < a.head_dim; ++d) accs[i][d] += p[i] * vr[d];
          }
        }
        for (int i = 0; i < nh; ++i) {
          const float inv = 1.0f / sum[i];
          float* out = a.out + t * q_dim + static_cast<int64_t>(h0 + i) * a.head_dim;
          for (int32_t d = 0; d < a.head_dim; ++d) out[d] = accs[i][d] * inv;
        }
      });
}

}  // namespace cutline::device::cpu
