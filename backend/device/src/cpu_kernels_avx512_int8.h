#pragma once
// Internal to the AVX-512 int8 kernels (cpu_kernels_avx512_lowbit.cc for the 256-element
// super-blocks, cpu_kernels_avx512_blocks32.cc for the 32-element blocks): the helpers both use,
// and the 32-element blocks' entry point.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "cpu_kernels_avx512_quant.h"

namespace cutline::device::cpu::avx512 {

// The sum of the 8 lanes.
CUTLINE_AVX512_TARGET inline float hsum256(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

CUTLINE_AVX512_TARGET inline __m512i load64(const int8_t* p) { return _mm512_loadu_si512(p); }

// int16 lanes 8-15 and 24-31: the second and fourth 128-bit lanes.
constexpr __mmask32 kOddLanes16 = 0xFF00FF00u;

// |w| * (sign(w) * x) pairwise: the signed weight bytes w (|w| <= 127) times the int8 x.
CUTLINE_AVX512_TARGET inline __m512i mul_signed(__m512i w, __m512i x) {
  const __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
  return _mm512_maddubs_epi16(_mm512_abs_epi8(w), sx);
}

// nw weight rows (w_stride bytes apart) times nr activation rows, 4, then 2, then 1 row at a time:
// out[r * ldo + a] for weight row a and activation row r.
template <typename Block, void (*Fn1)(const Block*, const QuantRow*, int64_t, float*, int64_t),
          void (*Fn2)(const Block*, const QuantRow*, int64_t, float*, int64_t),
          void (*Fn4)(const Block*, const QuantRow*, int64_t, float*, int64_t)>
CUTLINE_AVX512_TARGET void rows(const void* w, int64_t w_stride, int nw, const QuantRow* xs, int nr,
                                int64_t nb, float* out, int64_t ldo) {
  for (int a = 0; a < nw; ++a) {
    const Block* wb = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + a * w_stride);
    int r = 0;
    for (; r + 4 <= nr; r += 4) Fn4(wb, xs + r, nb, out + r * ldo + a, ldo);
    for (; r + 2 <= nr; r += 2) Fn2(wb, xs + r, nb, out + r * ldo + a, ldo);
    for (; r < nr; ++r) Fn1(wb, xs + r, nb, out + r * ldo + a, ldo);
  }
}

// Q4_1, Q5_0 and IQ4_NL (cpu_kernels_avx512_blocks32.cc), nb 32-element blocks per row, with
// VNNI (kVnni) or without; other types do nothing.
template <bool kVnni>
CUTLINE_AVX512_VNNI_TARGET void dot_blocks32(DType type, const void* w, int64_t w_stride, int nw,
                                             const QuantRow* xs, int nr, int64_t nb, float* out,
                                             int64_t ldo);

}  // namespace cutline::device::cpu::avx512
#endif
