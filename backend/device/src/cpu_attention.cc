// Causal paged attention on the CPU (see cpu_attention.h): the tokens of a call are cut into
// tasks of up to kTokensPerTask consecutive tokens of one sequence times one KV head, and each
// task runs attend_rows (cpu_attention_inl.h) for all its (token, query head) rows at once, so a
// prefill chunk reads each cached K/V tile once per task instead of once per query token. The
// kernel is compiled three times (AVX-512, AVX2, scalar) and picked by the device's ISA.
#include "cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#if defined(__x86_64__)
// GCC 12 flags its own AVX-512 intrinsics headers (the kernels files silence it the same way).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#endif

namespace cutline::device::cpu {
namespace {

// exp(x) for the attention softmax (Cephes expf: range reduction by ln 2, degree-5 polynomial,
// scaling by 2^n), written once over a lane type so that every ISA computes the same function.
// x is clamped to [-87.3, 88.3]: exp(-inf) gives ~1e-38, never NaN.
constexpr float kExpLo = -87.3f, kExpHi = 88.3f, kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;

// kt[d * 16 + j] = krow[j][off + d] for the tile's keys j < nk; 0 for the others.
inline void transpose_k_generic(const float* const* krow, int nk, int64_t off, int32_t d_head,
                                float* kt) {
  for (int j = 0; j < 16; ++j)
    for (int32_t d = 0; d < d_head; ++d) kt[d * 16 + j] = j < nk ? krow[j][off + d] : 0.0f;
}

// One query row of a task: a (token, query head) pair.
struct AttentionRow {
  const float* q = nullptr;
  float* out = nullptr;
  int32_t pos = 0;
};

namespace scalar {
#define TARGET
struct V16 {
  float v[16];
};
inline V16 zero() { return V16{}; }
inline V16 set1(float f) {
  V16 r;
  for (float& x : r.v) x = f;
  return r;
}
inline V16 load(const float* p) {
  V16 r;
  std::memcpy(r.v, p, sizeof(r.v));
  return r;
}
inline void store(float* p, const V16& a) { std::memcpy(p, a.v, sizeof(a.v)); }
template <typename Op>
inline V16 map2(const V16& a, const V16& b, Op op) {
  V16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = op(a.v[i], b.v[i]);
  return r;
}
inline V16 add(const V16& a, const V16& b) {
  return map2(a, b, [](float x, float y) { return x + y; });
}
inline V16 sub(const V16& a, const V16& b) {
  return map2(a, b, [](float x, float y) { return x - y; });
}
inline V16 mul(const V16& a, const V16& b) {
  return map2(a, b, [](float x, float y) { return x * y; });
}
inline V16 div(const V16& a, const V16& b) {
  return map2(a, b, [](float x, float y) { return x / y; });
}
inline V16 max(const V16& a, const V16& b) {
  return map2(a, b, [](float x, float y) { return x > y ? x : y; });
}
inline V16 fmadd(const V16& a, const V16& b, const V16& c) {
  V16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
  return r;
}
inline float hmax(const V16& a) {
  float m = a.v[0];
  for (int i = 1; i < 16; ++i) m = a.v[i] > m ? a.v[i] : m;
  return m;
}
inline float hsum(const V16& a) {  // pairwise tree, lanes i and i + 8, then i and i + 4, ...
  float t[16];
  std::memcpy(t, a.v, sizeof(t));
  for (int w = 8; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) t[i] = t[i] + t[i + w];
  return t[0];
}
inline V16 keep_first(const V16& a, int n, float fill) {
  V16 r = a;
  for (int i = n; i < 16; ++i) r.v[i] = fill;
  return r;
}
inline V16 exp16(const V16& x) {
  V16 r;
  for (int i = 0; i < 16; ++i) {
    const float xc = std::min(kExpHi, std::max(kExpLo, x.v[i]));
    const float n = std::nearbyint(xc * kLog2e);
    float t = std::fma(n, -kLn2Hi, xc);
    t = std::fma(n, -kLn2Lo, t);
    float y = std::fma(kP0, t, kP1);
    y = std::fma(y, t, kP2);
    y = std::fma(y, t, kP3);
    y = std::fma(y, t, kP4);
    y = std::fma(y, t, kP5);
    y = std::fma(y, t * t, t) + 1.0f;
    r.v[i] = std::ldexp(y, static_cast<int>(n));
  }
  return r;
}
inline void transpose_k(const float* const* krow, int nk, int64_t off, int32_t d_head, float* kt) {
  transpose_k_generic(krow, nk, off, d_head, kt);
}
#include "cpu_attention_inl.h"
#undef TARGET
}  // namespace scalar

#if defined(__x86_64__)
namespace avx2 {
#define TARGET __attribute__((target("avx2,fma")))
struct V16 {
  __m256 lo, hi;
};
TARGET inline V16 zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
TARGET inline V16 set1(float f) { return {_mm256_set1_ps(f), _mm256_set1_ps(f)}; }
TARGET inline V16 load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
TARGET inline void store(float* p, V16 a) {
  _mm256_storeu_ps(p, a.lo);
  _mm256_storeu_ps(p + 8, a.hi);
}
TARGET inline V16 add(V16 a, V16 b) {
  return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}
TARGET inline V16 sub(V16 a, V16 b) {
  return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)};
}
TARGET inline V16 mul(V16 a, V16 b) {
  return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
}
TARGET inline V16 div(V16 a, V16 b) {
  return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)};
}
TARGET inline V16 max(V16 a, V16 b) {
  return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)};
}
TARGET inline V16 fmadd(V16 a, V16 b, V16 c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
TARGET inline float hsum8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}
TARGET inline float hsum(V16 a) { return hsum8(_mm256_add_ps(a.lo, a.hi)); }
TARGET inline float hmax(V16 a) {
  const __m256 m8 = _mm256_max_ps(a.lo, a.hi);
  const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
}
TARGET inline V16 keep_first(V16 a, int n, float fill) {
  const __m256i nv = _mm256_set1_epi32(n);
  const __m256i lo = _mm256_cmpgt_epi32(nv, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i hi = _mm256_cmpgt_epi32(nv, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15));
  const __m256 f = _mm256_set1_ps(fill);
  return {_mm256_blendv_ps(f, a.lo, _mm256_castsi256_ps(lo)),
          _mm256_blendv_ps(f, a.hi, _mm256_castsi256_ps(hi))};
}
TARGET inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_set1_ps(kExpHi), _mm256_max_ps(_mm256_set1_ps(kExpLo), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 t = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), x);
  t = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), t);
  __m256 y = _mm256_fmadd_ps(_mm256_set1_ps(kP0), t, _mm256_set1_ps(kP1));
  y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(kP2));
  y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(kP3));
  y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(kP4));
  y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(kP5));
  y = _mm256_add_ps(_mm256_fmadd_ps(y, _mm256_mul_ps(t, t), t), _mm256_set1_ps(1.0f));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}
TARGET inline V16 exp16(V16 x) { return {exp8(x.lo), exp8(x.hi)}; }
inline void transpose_k(const float* const* krow, int nk, int64_t off, int32_t d_head, float* kt) {
  transpose_k_generic(krow, nk, off, d_head, kt);
}
#include "cpu_attention_inl.h"
#undef TARGET
}  // namespace avx2

namespace avx512 {
#define TARGET __attribute__((target("avx512f,avx512dq,fma")))
using V16 = __m512;
TARGET inline V16 zero() { return _mm512_setzero_ps(); }
TARGET inline V16 set1(float f) { return _mm512_set1_ps(f); }
TARGET inline V16 load(const float* p) { return _mm512_loadu_ps(p); }
TARGET inline void store(float* p, V16 a) { _mm512_storeu_ps(p, a); }
TARGET inline V16 add(V16 a, V16 b) { return _mm512_add_ps(a, b); }
TARGET inline V16 sub(V16 a, V16 b) { return _mm512_sub_ps(a, b); }
TARGET inline V16 mul(V16 a, V16 b) { return _mm512_mul_ps(a, b); }
TARGET inline V16 div(V16 a, V16 b) { return _mm512_div_ps(a, b); }
TARGET inline V16 max(V16 a, V16 b) { return _mm512_max_ps(a, b); }
TARGET inline V16 fmadd(V16 a, V16 b, V16 c) { return _mm512_fmadd_ps(a, b, c); }
TARGET inline float hsum(V16 a) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}
TARGET inline float hmax(V16 a) { return _mm512_reduce_max_ps(a); }
TARGET inline V16 keep_first(V16 a, int n, float fill) {
  return _mm512_mask_blend_ps(static_cast<__mmask16>((1u << n) - 1), _mm512_set1_ps(fill), a);
}
TARGET inline V16 exp16(V16 x) {
  x = _mm512_min_ps(_mm512_set1_ps(kExpHi), _mm512_max_ps(_mm512_set1_ps(kExpLo), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 t = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), x);
  t = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), t);
  __m512 y = _mm512_fmadd_ps(_mm512_set1_ps(kP0), t, _mm512_set1_ps(kP1));
  y = _mm512_fmadd_ps(y, t, _mm512_set1_ps(kP2));
  y = _mm512_fmadd_ps(y, t, _mm512_set1_ps(kP3));
  y = _mm512_fmadd_ps(y, t, _mm512_set1_ps(kP4));
  y = _mm512_fmadd_ps(y, t, _mm512_set1_ps(kP5));
  y = _mm512_add_ps(_mm512_fmadd_ps(y, _mm512_mul_ps(t, t), t), _mm512_set1_ps(1.0f));
  const __m512i e =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(y, _mm512_castsi512_ps(e));
}
// 16 x 16 blocks transposed in registers (unpack ps, unpack pd, two 128-bit lane shuffles).
TARGET inline void transpose_k(const float* const* krow, int nk, int64_t off, int32_t d_head,
                               float* kt) {
  int32_t d0 = 0;
  for (; d0 + 16 <= d_head; d0 += 16) {
    __m512 r[16], t[16];
    for (int j = 0; j < 16; ++j)
      r[j] = j < nk ? _mm512_loadu_ps(krow[j] + off + d0) : _mm512_setzero_ps();
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {
      const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]),
                    c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
      r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
      r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
      r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
      r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int i = 0; i < 2; ++i) {
      for (int k = 0; k < 4; ++k) {
        t[8 * i + k] = _mm512_shuffle_f32x4(r[8 * i + k], r[8 * i + 4 + k], 0x88);
        t[8 * i + 4 + k] = _mm512_shuffle_f32x4(r[8 * i + k], r[8 * i + 4 + k], 0xdd);
      }
    }
    for (int k = 0; k < 8; ++k) {
      _mm512_storeu_ps(kt + (d0 + k) * 16, _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88));
      _mm512_storeu_ps(kt + (d0 + 8 + k) * 16, _mm512_shuffle_f32x4(t[k], t[8 + k], 0xdd));
    }
  }
  for (int j = 0; j < 16; ++j)
    for (int32_t d = d0; d < d_head; ++d) kt[d * 16 + j] = j < nk ? krow[j][off + d] : 0.0f;
}
#include "cpu_attention_inl.h"
#undef TARGET
}  // namespace avx512
#endif

// Query tokens of one sequence per task: enough rows to reuse each K/V tile, small enough that
// a 16-token prefill chunk still spreads over the KV heads.
constexpr int32_t kTokensPerTask = 16;

struct Task {
  int32_t first_token = 0;
  int32_t n_tokens = 0;
  int32_t kv_head_begin = 0;
  int32_t kv_head_end = 0;
};

}  // namespace

void paged_attention(const AttentionArgs& a, ThreadPool& pool, const Kernels& kernels,
                     std::vector<std::vector<float>>& scratch_per_thread) {
  const int32_t group = a.n_heads / a.n_kv_heads;
  const int64_t q_dim = static_cast<int64_t>(a.n_heads) * a.head_dim;
  // Runs of consecutive tokens that share a block table (one sequence's chunk), cut every
  // kTokensPerTask tokens.
  std::vector<std::pair<int32_t, int32_t>> runs;
  for (int32_t t = 0; t < a.n_tokens;) {
    int32_t end = t + 1;
    while (end < a.n_tokens && end - t < kTokensPerTask &&
           a.tokens[end].table_begin == a.tokens[t].table_begin)
      ++end;
    runs.push_back({t, end - t});
    t = end;
  }
  // Each run's KV heads are split into only as many tasks as the threads need: a task reads
  // whole cache rows (all its heads) rather than one head's slice of every row. Results do not
  // depend on the split (attend_rows computes every row the same way).
  const int64_t want = 2 * static_cast<int64_t>(pool.size());
  const int32_t n_groups = static_cast<int32_t>(std::clamp<int64_t>(
      (want + static_cast<int64_t>(runs.size()) - 1) / static_cast<int64_t>(runs.size()), 1,
      a.n_kv_heads));
  std::vector<Task> tasks;
  for (auto [t, n] : runs) {
    for (int32_t g = 0; g < n_groups; ++g) {
      const int32_t h0 = a.n_kv_heads * g / n_groups, h1 = a.n_kv_heads * (g + 1) / n_groups;
      if (h1 > h0) tasks.push_back({t, n, h0, h1});
    }
  }
  // The longest contexts first, so that a long prefill tile does not start last.
  std::stable_sort(tasks.begin(), tasks.end(), [&](const Task& x, const Task& y) {
    return a.tokens[x.first_token + x.n_tokens - 1].pos >
           a.tokens[y.first_token + y.n_tokens - 1].pos;
  });
  auto* attend = &scalar::attend_rows;
#if defined(__x86_64__)
  if (kernels.isa == Isa::kAvx512) attend = &avx512::attend_rows;
  if (kernels.isa == Isa::kAvx2) attend = &avx2::attend_rows;
#endif
  pool.run(static_cast<int64_t>(tasks.size()), [&](int64_t i, int32_t thread) {
    const Task& task = tasks[i];
    const int n_rows = task.n_tokens * group * (task.kv_head_end - task.kv_head_begin);
    const int64_t floats = int64_t{a.head_dim} * (16 + n_rows) + 2 * int64_t{n_rows};
    std::vector<float>& s = scratch_per_thread[thread];
    if (static_cast<int64_t>(s.size()) < floats) s.resize(floats);
    std::vector<AttentionRow> rows;
    rows.reserve(n_rows);
    for (int32_t kvh = task.kv_head_begin; kvh < task.kv_head_end; ++kvh) {
      for (int32_t t = task.first_token; t < task.first_token + task.n_tokens; ++t) {
        for (int32_t h = kvh * group; h < (kvh + 1) * group; ++h) {
          const int64_t off = t * q_dim + static_cast<int64_t>(h) * a.head_dim;
          rows.push_back({a.q + off, a.out + off, a.tokens[t].pos});
        }
      }
    }
    attend(a, a.block_tables + a.tokens[task.first_token].table_begin, task.kv_head_begin,
           task.kv_head_end, rows.data(), n_rows, s.data());
  });
}

void swiglu(const Kernels& kernels, const float* gate, const float* up, int64_t n, float* y) {
#if defined(__x86_64__)
  if (kernels.isa == Isa::kAvx512) return avx512::swiglu_range(gate, up, n, y);
  if (kernels.isa == Isa::kAvx2) return avx2::swiglu_range(gate, up, n, y);
#endif
  scalar::swiglu_range(gate, up, n, y);
}

}  // namespace cutline::device::cpu
