#pragma once
// What the AVX-512 F32 kernels share: the loaders that read 16 weights of a row in place as F32
// (the tiles in cpu_kernels_avx512.cc, the packed prefill path in cpu_kernels_avx512_packed.cc),
// and the packed and interleaved paths' entry points, which avx512_kernels() puts in its table;
// each does what the Kernels member of the same name describes (cpu_kernels.h).
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

#include "cpu_kernels.h"
#include "cpu_kernels_avx512_quant.h"  // CUTLINE_AVX512_TARGET

namespace cutline::device::cpu::avx512 {

// The lines of the weight rows a kernel's caller reads next (PrefetchRows), prefetched `per`
// lines at a time from inside the kernel's loop, so that reading them overlaps the multiply-adds
// instead of stalling the first loads of the next call. Locality as __builtin_prefetch takes it:
// 3 is _MM_HINT_T0 (into L1), 2 is _MM_HINT_T1 (into L2). Default: none.
template <int Locality>
struct LineStream {
  const uint8_t* p = nullptr;
  const uint8_t* row_end = nullptr;
  int rows_left = 0;
  int per = 0;
  int64_t stride = 0;
  int64_t bytes = 0;

  LineStream() = default;
  // All of next's lines over `steps` calls of step().
  LineStream(const PrefetchRows& next, int64_t steps) {
    if (next.rows <= 0 || steps <= 0) return;
    const int64_t lines = next.rows * ((next.bytes + 63) / 64);
    p = static_cast<const uint8_t*>(next.w);
    row_end = p + next.bytes;
    rows_left = next.rows;
    per = static_cast<int>((lines + steps - 1) / steps);
    stride = next.stride;
    bytes = next.bytes;
  }

  CUTLINE_AVX512_TARGET inline void step() {
    for (int i = 0; i < per && rows_left > 0; ++i) {
      __builtin_prefetch(p, 0, Locality);
      p += 64;
      if (p >= row_end && --rows_left > 0) {
        p = row_end - bytes + stride;
        row_end = p + bytes;
      }
    }
  }
};

// Load 16 weights of a row, from element i, as F32, exactly as dequant() produces them.
CUTLINE_AVX512_TARGET inline __m512 load_w16_f32(const void* w, int64_t i) {
  return _mm512_loadu_ps(static_cast<const float*>(w) + i);
}
CUTLINE_AVX512_TARGET inline __m512 load_w16_f16(const void* w, int64_t i) {
  return _mm512_cvtph_ps(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(w) + i)));
}
CUTLINE_AVX512_TARGET inline __m512 load_w16_bf16(const void* w, int64_t i) {
  const __m512i v = _mm512_cvtepu16_epi32(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(w) + i)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
CUTLINE_AVX512_TARGET inline __m512 load_w16_q8_0(const void* w, int64_t i) {
  const BlockQ8_0& b = static_cast<const BlockQ8_0*>(w)[i / kQK8_0];
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + i % kQK8_0));
  return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(b.d)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
}

CUTLINE_AVX512_TARGET int64_t packed_bytes(DType type, int64_t k);
CUTLINE_AVX512_TARGET void pack_x(const float* x, int64_t k, float* dst);
CUTLINE_AVX512_TARGET void pack_w(DType type, const void* w, int64_t w_stride, int nw, int64_t k,
                                  void* dst);
CUTLINE_AVX512_TARGET void dot_packed(DType type, const void* wp, int nw, const float* const* xps,
                                      int nr, int64_t k, float* out, int64_t ldo,
                                      const PrefetchRows& next);

CUTLINE_AVX512_TARGET int64_t interleaved_bytes(DType type, int64_t rows, int64_t k);
CUTLINE_AVX512_TARGET void interleave(DType type, const void* w, int64_t k, int64_t block_begin,
                                      int64_t block_end, void* dst);
CUTLINE_AVX512_TARGET void pack_interleaved_x(const float* x, int nt, int64_t k, float* xp);
CUTLINE_AVX512_TARGET void dot_interleaved(DType type, const void* wi, int64_t k, int nb,
                                           const float* xp, int nr, float* out, int64_t ldo);

}  // namespace cutline::device::cpu::avx512
#endif
