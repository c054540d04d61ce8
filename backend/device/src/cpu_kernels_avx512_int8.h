#pragma once
// Internal to the AVX-512 int8 kernels (cpu_kernels_avx512_quant.cc for Q4_K, Q6_K and Q8_0,
// cpu_kernels_avx512_lowbit.cc for the other 256-element super-blocks,
// cpu_kernels_avx512_blocks32.cc for the 32-element blocks): the helpers they share, and the
// 32-element blocks' entry point.
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

// vpshufb control for the scale bytes of a sub-block pair, the same bytes in every 128-bit lane:
// int16 lanes 0-15 take byte `first` zero-extended, lanes 16-31 byte `first + 1`.
CUTLINE_AVX512_TARGET inline __m512i sub_block_scales(int first) {
  const __m256i lo = _mm256_set1_epi16(static_cast<int16_t>(0xFF00 | first));
  const __m256i hi = _mm256_set1_epi16(static_cast<int16_t>(0xFF00 | (first + 1)));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// The head of a Q4_K or Q5_K super-block, both of which start with d, dmin (F16) and the 12
// bytes of packed 6-bit scales and mins, decoded in vector registers: every 128-bit lane of sc
// holds the eight scales (q4_k_scales_mins' sc) in bytes 0-7 and the mins in bytes 8-15, for
// vpshufb with sub_block_scales; mf holds the mins times dmin as F32, d the block's F32 scale.
// One 16-byte load; two byte shuffles line up each 6-bit field's low and high bits, as
// q4_k_scales_mins does with word operations: in scales bytes s[0..11], sc[j] = s[j] & 63 and
// m[j] = s[j + 4] & 63 for j < 4, and for j >= 4 the low nibble of s[j + 4] (sc) or its high
// nibble (m) with the top two bits of s[j - 4] (sc) or s[j] (m).
struct KScalesMins {
  __m512i sc;
  __m256 mf;
  float d;
};

CUTLINE_AVX512_TARGET inline KScalesMins k4_scales_mins(const void* block) {
  const __m128i head = _mm_loadu_si128(static_cast<const __m128i*>(block));
  const __m128 dd = _mm_cvtph_ps(head);  // lane 0: d, lane 1: dmin
  // Bytes 0-3: sc[0..3]'s s[0..3]; 4-7: sc[4..7]'s s[8..11]; 8-11: m[0..3]'s s[4..7]; 12-15:
  // m[4..7]'s s[8..11], shifted down a nibble (int16 lanes 6 and 7). The scales start at byte 4.
  __m128i low = _mm_shuffle_epi8(head, _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15,  //
                                                     8, 9, 10, 11, 12, 13, 14, 15));
  low =
      _mm_and_si128(_mm_mask_srli_epi16(low, 0xC0, low, 4),
                    _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15));
  // The top two bits of s[0..3] (for sc[4..7]) and s[4..7] (for m[4..7]) to bits 4 and 5.
  const __m128i high = _mm_and_si128(
      _mm_srli_epi16(_mm_shuffle_epi8(head, _mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7,  //
                                                          -1, -1, -1, -1, 8, 9, 10, 11)),
                     2),
      _mm_set1_epi8(0x30));
  const __m128i scm = _mm_or_si128(low, high);
  const __m256 mins = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(scm, scm)));
  return {.sc = _mm512_broadcast_i32x4(scm),
          .mf = _mm256_mul_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(dd)), mins),
          .d = _mm_cvtss_f32(dd)};
}

// int16 lanes 8-15 and 24-31: the second and fourth 128-bit lanes.
constexpr __mmask32 kOddLanes16 = 0xFF00FF00u;

// |w| * (sign(w) * x) pairwise: the signed weight bytes w (|w| <= 127) times the int8 x.
CUTLINE_AVX512_TARGET inline __m512i mul_signed(__m512i w, __m512i x) {
  const __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
  return _mm512_maddubs_epi16(_mm512_abs_epi8(w), sx);
}

// nw weight rows (w_stride bytes apart) times nr activation rows, 8 (where a kernel for 8 is
// given), then 4, then 2, then 1 row at a time: out[r * ldo + a] for weight row a and activation
// row r.
template <typename Block, void (*Fn1)(const Block*, const QuantRow*, int64_t, float*, int64_t),
          void (*Fn2)(const Block*, const QuantRow*, int64_t, float*, int64_t),
          void (*Fn4)(const Block*, const QuantRow*, int64_t, float*, int64_t),
          void (*Fn8)(const Block*, const QuantRow*, int64_t, float*, int64_t) = Fn4>
CUTLINE_AVX512_TARGET void rows(const void* w, int64_t w_stride, int nw, const QuantRow* xs, int nr,
                                int64_t nb, float* out, int64_t ldo) {
  for (int a = 0; a < nw; ++a) {
    const Block* wb = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + a * w_stride);
    int r = 0;
    if constexpr (Fn8 != Fn4) {
      for (; r + 8 <= nr; r += 8) Fn8(wb, xs + r, nb, out + r * ldo + a, ldo);
    }
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
