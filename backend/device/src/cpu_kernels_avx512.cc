// AVX-512 (F, BW, VL, DQ) + FMA + F16C variants of the CPU kernels; chosen at run time.
#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "cpu_kernels.h"

#define CUTLINE_KQ_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define TARGET CUTLINE_KQ_TARGET

namespace cutline::device::cpu {

#include "cpu_kquant_inl.h"

namespace {

// Each row keeps 4 accumulators of 16 lanes; 16-element chunk c goes to accumulator c % 4; a
// scalar tail follows. The order depends only on k, never on nr.
template <int NR>
TARGET void dot_rows_t(const float* w, const float* const* xs, int64_t k, float* out) {
  __m512 acc[NR][4];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    for (int j = 0; j < 4; ++j) {
      const __m512 wv = _mm512_loadu_ps(w + i + 16 * j);
      for (int r = 0; r < NR; ++r)
        acc[r][j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xs[r] + i + 16 * j), acc[r][j]);
    }
  }
  for (; i + 16 <= k; i += 16) {
    const int j = static_cast<int>((i / 16) & 3);
    const __m512 wv = _mm512_loadu_ps(w + i);
    for (int r = 0; r < NR; ++r)
      acc[r][j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xs[r] + i), acc[r][j]);
  }
  for (int r = 0; r < NR; ++r) {
    float tail = 0;
    for (int64_t t = i; t < k; ++t) tail += w[t] * xs[r][t];
    const __m512 sum =
        _mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]), _mm512_add_ps(acc[r][2], acc[r][3]));
    out[r] = _mm512_reduce_add_ps(sum) + tail;
  }
}

TARGET void dot_rows(const float* w, const float* const* xs, int nr, int64_t k, float* out) {
  switch (nr) {
    case 1:
      return dot_rows_t<1>(w, xs, k, out);
    case 2:
      return dot_rows_t<2>(w, xs, k, out);
    case 3:
      return dot_rows_t<3>(w, xs, k, out);
    default:
      return dot_rows_t<4>(w, xs, k, out);
  }
}

TARGET void dequant(DType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      int64_t i = 0;
      for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(
            dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
      for (; i < n; ++i) dst[i] = _cvtsh_ss(h[i]);
      return;
    }
    case DType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      int64_t i = 0;
      for (; i + 16 <= n; i += 16) {
        const __m512i v =
            _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i)));
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
      }
      for (; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    }
    case DType::kQ8_0: {
      const auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < n / kQK8_0; ++i, dst += kQK8_0) {
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(b[i].d));
        for (int h = 0; h < 2; ++h) {
          const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs + 16 * h));
          _mm512_storeu_ps(dst + 16 * h,
                           _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q))));
        }
      }
      return;
    }
    case DType::kQ4_0: {
      const auto* b = static_cast<const BlockQ4_0*>(src);
      const __m128i mask = _mm_set1_epi8(0xF);
      const __m512i eight = _mm512_set1_epi32(8);
      for (int64_t i = 0; i < n / kQK4_0; ++i, dst += kQK4_0) {
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(b[i].d));
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs));
        const __m128i lo = _mm_and_si128(q, mask);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
        const __m512i l32 = _mm512_sub_epi32(_mm512_cvtepu8_epi32(lo), eight);
        const __m512i h32 = _mm512_sub_epi32(_mm512_cvtepu8_epi32(hi), eight);
        _mm512_storeu_ps(dst, _mm512_mul_ps(d, _mm512_cvtepi32_ps(l32)));
        _mm512_storeu_ps(dst + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(h32)));
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

const Kernels& avx512_kernels() {
  static const Kernels k{Isa::kAvx512, 4, &dot_rows, &dequant};
  return k;
}

}  // namespace cutline::device::cpu
#else
#include "cpu_kernels.h"
namespace cutline::device::cpu {
const Kernels& avx512_kernels() { return scalar_kernels(); }
}  // namespace cutline::device::cpu
#endif
