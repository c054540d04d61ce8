// AVX2 + FMA + F16C variants of the CPU kernels; chosen at run time.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "cpu_kernels.h"

#define CUTLINE_KQ_TARGET __attribute__((target("avx2,fma,f16c")))
#define TARGET CUTLINE_KQ_TARGET

namespace cutline::device::cpu {

#include "cpu_kquant_inl.h"

namespace {

TARGET inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// Each row keeps 4 accumulators of 8 lanes; 8-element chunk c goes to accumulator c % 4; a
// scalar tail follows. The order depends only on k, never on nr.
template <int NR>
TARGET void dot_rows_t(const float* w, const float* const* xs, int64_t k, float* out) {
  __m256 acc[NR][4];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    for (int j = 0; j < 4; ++j) {
      const __m256 wv = _mm256_loadu_ps(w + i + 8 * j);
      for (int r = 0; r < NR; ++r)
        acc[r][j] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xs[r] + i + 8 * j), acc[r][j]);
    }
  }
  for (; i + 8 <= k; i += 8) {
    const int j = static_cast<int>((i / 8) & 3);
    const __m256 wv = _mm256_loadu_ps(w + i);
    for (int r = 0; r < NR; ++r)
      acc[r][j] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xs[r] + i), acc[r][j]);
  }
  for (int r = 0; r < NR; ++r) {
    float tail = 0;
    for (int64_t t = i; t < k; ++t) tail += w[t] * xs[r][t];
    out[r] = hsum(_mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]),
                                _mm256_add_ps(acc[r][2], acc[r][3]))) +
             tail;
  }
}

TARGET void dot_rows(const float* w, const float* const* xs, int nr, int64_t k, float* out) {
  if (nr == 1) return dot_rows_t<1>(w, xs, k, out);
  return dot_rows_t<2>(w, xs, k, out);
}

TARGET void dequant(DType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i,
                         _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
      for (; i < n; ++i) dst[i] = _cvtsh_ss(h[i]);
      return;
    }
    case DType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        const __m256i v =
            _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
      }
      for (; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    }
    case DType::kQ8_0: {
      const auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < n / kQK8_0; ++i, dst += kQK8_0) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[i].d));
        for (int h = 0; h < 4; ++h) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + 8 * h));
          _mm256_storeu_ps(dst + 8 * h,
                           _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
        }
      }
      return;
    }
    case DType::kQ4_0: {
      const auto* b = static_cast<const BlockQ4_0*>(src);
      const __m128i mask = _mm_set1_epi8(0xF);
      const __m256i eight = _mm256_set1_epi32(8);
      for (int64_t i = 0; i < n / kQK4_0; ++i, dst += kQK4_0) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[i].d));
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs));
        const __m128i lo = _mm_and_si128(q, mask);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
        const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        for (int p = 0; p < 4; ++p) {
          const __m256i v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(parts[p]), eight);
          _mm256_storeu_ps(dst + 8 * p, _mm256_mul_ps(d, _mm256_cvtepi32_ps(v)));
        }
      }
      return;
    }
    case DType::kQ4_K:
      kq_dequant_q4_k(static_cast<const BlockQ4_K*>(src), dst, n / kQK_K);
      return;
    case DType::kQ6_K:
      kq_dequant_q6_k(static_cast<const BlockQ6_K*>(src), dst, n / kQK_K);
      return;
  }
}

}  // namespace

const Kernels& avx2_kernels() {
  static const Kernels k{Isa::kAvx2, 2, &dot_rows, &dequant};
  return k;
}

}  // namespace cutline::device::cpu
#else
#include "cpu_kernels.h"
namespace cutline::device::cpu {
const Kernels& avx2_kernels() { return scalar_kernels(); }
}  // namespace cutline::device::cpu
#endif
