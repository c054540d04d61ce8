// AVX-512 (F, BW, VL, DQ) + FMA + F16C variants of the CPU kernels; chosen at run time. The
// F32 tiles and the dequantizers are here; the packed prefill path in
// cpu_kernels_avx512_packed.cc, the integer kernels in cpu_kernels_avx512_quant.cc.
#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_kernels.h"
#include "cpu_kernels_avx512_f32.h"
#include "cpu_kernels_avx512_quant.h"

#define CUTLINE_KQ_TARGET CUTLINE_AVX512_TARGET
#define TARGET CUTLINE_KQ_TARGET

namespace cutline::device::cpu {

#include "cpu_kquant_inl.h"

namespace {

using avx512::load_w16_bf16;
using avx512::load_w16_f16;
using avx512::load_w16_f32;
using avx512::load_w16_q8_0;
// The panel's prefetch of the caller's next rows goes to L1: the next call reads them first.
using NextLines = avx512::LineStream<3>;

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

// dot_rows_t with the weights read straight from the row's blocks: the same operations in the
// same order on the same F32 weight values as dequant() + dot_rows_t, so the bits are identical;
// it only skips the round trip through the scratch buffer (k is a multiple of 64 here).
template <int NR, __m512 (*Load)(const void*, int64_t)>
TARGET void dot_rows_fused_t(const void* w, const float* const* xs, int64_t k, float* out) {
  __m512 acc[NR][4];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t i = 0; i < k; i += 64) {
    for (int j = 0; j < 4; ++j) {
      const __m512 wv = Load(w, i + 16 * j);
      for (int r = 0; r < NR; ++r)
        acc[r][j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xs[r] + i + 16 * j), acc[r][j]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    const float tail = 0;
    const __m512 sum =
        _mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]), _mm512_add_ps(acc[r][2], acc[r][3]));
    out[r] = _mm512_reduce_add_ps(sum) + tail;
  }
}

template <__m512 (*Load)(const void*, int64_t)>
TARGET void dot_rows_fused(const void* w, const float* const* xs, int nr, int64_t k, float* out) {
  switch (nr) {
    case 1:
      return dot_rows_fused_t<1, Load>(w, xs, k, out);
    case 2:
      return dot_rows_fused_t<2, Load>(w, xs, k, out);
    case 3:
      return dot_rows_fused_t<3, Load>(w, xs, k, out);
    default:
      return dot_rows_fused_t<4, Load>(w, xs, k, out);
  }
}

TARGET bool dot_rows_typed(DType type, const void* w, const float* const* xs, int nr, int64_t k,
                           float* out) {
  if (k % 64 != 0) return false;
  switch (type) {
    case DType::kF16:
      if (nr > 0) dot_rows_fused<load_w16_f16>(w, xs, nr, k, out);
      return true;
    case DType::kQ8_0:
      if (nr > 0) dot_rows_fused<load_w16_q8_0>(w, xs, nr, k, out);
      return true;
    default:
      return false;
  }
}

// Bytes of a weight row per 64 elements, for each in-place loader (k is a multiple of 64).
template <__m512 (*Load)(const void*, int64_t)>
constexpr int64_t kBytesPer64 = 0;
template <>
constexpr int64_t kBytesPer64<load_w16_f32> = 256;
template <>
constexpr int64_t kBytesPer64<load_w16_f16> = 128;
template <>
constexpr int64_t kBytesPer64<load_w16_bf16> = 128;
template <>
constexpr int64_t kBytesPer64<load_w16_q8_0> = 2 * sizeof(BlockQ8_0);

// W weight rows x NR activation rows. The reduction of dot_rows_t (16-element chunk c into
// accumulator c % 4, then (a0 + a1) + (a2 + a3), reduce, + 0 tail) is done one accumulator
// ("stripe" j) at a time, so only W * NR accumulators are live: the same operations on the same
// values in the same order per (row, x) pair, hence the same bits, with each weight vector
// loaded (and converted) once per NR rows and each activation vector once per W weight rows.
// The stripes take turns over segments of kSeg elements (the partial sums wait in `part`
// between turns, one flat array the compiler keeps out of the inner loop), so the rows are read
// in L1-sized pieces, the next piece's weight lines prefetched.
template <int W, int NR, __m512 (*Load)(const void*, int64_t)>
TARGET void dot_tile_t(const uint8_t* w, int64_t w_stride, const float* const* xs, int64_t k,
                       float* out, int64_t ldo) {
  constexpr int64_t kSeg = 512;
  __m512 part[4][W * NR];
  const float* x[NR];
  for (int r = 0; r < NR; ++r) x[r] = xs[r];
  for (int64_t s0 = 0; s0 < k; s0 += kSeg) {
    const int64_t s1 = std::min(k, s0 + kSeg);
    if (s1 < k) {
      constexpr int64_t kPer64 = kBytesPer64<Load>;
      const int64_t b0 = s1 / 64 * kPer64, b1 = std::min(k, s1 + kSeg) / 64 * kPer64;
      for (int a = 0; a < W; ++a)
        for (int64_t l = b0; l < b1; l += 64)
          _mm_prefetch(reinterpret_cast<const char*>(w + a * w_stride + l), _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      __m512 acc[W * NR];
      for (int p = 0; p < W * NR; ++p) acc[p] = s0 == 0 ? _mm512_setzero_ps() : part[j][p];
      for (int64_t i = s0 + 16 * j; i < s1; i += 64) {
        __m512 wv[W];
        for (int a = 0; a < W; ++a) wv[a] = Load(w + a * w_stride, i);
        for (int r = 0; r < NR; ++r) {
          const __m512 xv = _mm512_loadu_ps(x[r] + i);
          for (int a = 0; a < W; ++a) acc[a * NR + r] = _mm512_fmadd_ps(wv[a], xv, acc[a * NR + r]);
        }
      }
      for (int p = 0; p < W * NR; ++p) part[j][p] = acc[p];
    }
  }
  for (int a = 0; a < W; ++a) {
    for (int r = 0; r < NR; ++r) {
      const float tail = 0;
      const int p = a * NR + r;
      const __m512 sum = _mm512_add_ps(_mm512_add_ps(part[0][p], part[1][p]),
                                       _mm512_add_ps(part[2][p], part[3][p]));
      out[r * ldo + a] = _mm512_reduce_add_ps(sum) + tail;
    }
  }
}

// dot_tile_t for NR activation rows against nw = 4 * ng weight rows (ng <= kPanelW / 4), with
// the segments outermost: each group of 4 weight rows takes its turn on a segment (its partial
// sums waiting in `part`), so the NR activation rows' segment is read from L2 once and from L1
// by all ng groups, instead of from L2 by every group. The same per-pair operations in the same
// order as dot_tile_t, hence the same bits.
template <int NR, __m512 (*Load)(const void*, int64_t)>
TARGET void dot_panel_t(const uint8_t* w, int64_t w_stride, int ng, const float* const* xs,
                        int64_t k, float* out, int64_t ldo, NextLines& pf) {
  // A segment of the NR activation rows (NR x 4 KiB at 1024) and of a prefill panel's weight
  // rows (kPrefillPanelW x at most 2 KiB) share L1 with room to spare; F32 weights and the wider
  // decode panels take 512. Longer segments send each stripe's partial sums to `part` less often.
  // (Of the prefill batches only Q8_0's on CPUs without VNNI reach this kernel; F32, F16 and
  // BF16 take the packed path, cpu_kernels_avx512_packed.cc.)
  const int64_t seg = kBytesPer64<Load> <= 128 && ng * 4 <= kPrefillPanelW ? 1024 : 512;
  constexpr int kW = 4;
  __m512 part[kPanelW / kW][4][kW * NR];
  const float* x[NR];
  for (int r = 0; r < NR; ++r) x[r] = xs[r];
  for (int64_t s0 = 0; s0 < k; s0 += seg) {
    const int64_t s1 = std::min(k, s0 + seg);
    for (int g = 0; g < ng; ++g) {
      const uint8_t* wg = w + g * kW * w_stride;
      if (s1 < k) {
        constexpr int64_t kPer64 = kBytesPer64<Load>;
        const int64_t b0 = s1 / 64 * kPer64, b1 = std::min(k, s1 + seg) / 64 * kPer64;
        for (int a = 0; a < kW; ++a)
          for (int64_t l = b0; l < b1; l += 64)
            _mm_prefetch(reinterpret_cast<const char*>(wg + a * w_stride + l), _MM_HINT_T0);
      }
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        __m512 acc[kW * NR];
        for (int p = 0; p < kW * NR; ++p) acc[p] = s0 == 0 ? _mm512_setzero_ps() : part[g][j][p];
        for (int64_t i = s0 + 16 * j; i < s1; i += 64) {
          pf.step();
          __m512 wv[kW];
          for (int a = 0; a < kW; ++a) wv[a] = Load(wg + a * w_stride, i);
          for (int r = 0; r < NR; ++r) {
            const __m512 xv = _mm512_loadu_ps(x[r] + i);
            for (int a = 0; a < kW; ++a)
              acc[a * NR + r] = _mm512_fmadd_ps(wv[a], xv, acc[a * NR + r]);
          }
        }
        for (int p = 0; p < kW * NR; ++p) part[g][j][p] = acc[p];
      }
    }
  }
  for (int g = 0; g < ng; ++g) {
    for (int a = 0; a < kW; ++a) {
      for (int r = 0; r < NR; ++r) {
        const float tail = 0;
        const int p = a * NR + r;
        const __m512 sum = _mm512_add_ps(_mm512_add_ps(part[g][0][p], part[g][1][p]),
                                         _mm512_add_ps(part[g][2][p], part[g][3][p]));
        out[r * ldo + g * kW + a] = _mm512_reduce_add_ps(sum) + tail;
      }
    }
  }
}

// Up to 4 activation rows against up to kPanelW weight rows: the panel for whole groups of 4,
// then one weight row at a time. The panel prefetches the rows the caller reads next (`next`).
template <int NR, __m512 (*Load)(const void*, int64_t)>
TARGET void dot_panel_nr(const uint8_t* w, int64_t w_stride, int nw, const float* const* xs,
                         int64_t k, float* out, int64_t ldo, const PrefetchRows& next) {
  const int ng = nw / 4;
  NextLines pf(next, int64_t{ng} * 4 * (k / 64));
  if (ng > 0) dot_panel_t<NR, Load>(w, w_stride, ng, xs, k, out, ldo, pf);
  for (int a = 4 * ng; a < nw; ++a)
    dot_tile_t<1, NR, Load>(w + a * w_stride, w_stride, xs, k, out + a, ldo);
}

// Each pass of up to 4 activation rows reads the panel; the first from memory, the others from
// L2. The last pass prefetches the caller's next rows, so that the next call's first pass finds
// them in the cache instead of waiting on memory with each load (matmul_bench, one thread,
// weights streamed from memory: 1.15-1.45x the multiply-adds per second for F16 and BF16 at 4
// and 8 rows, 1.1-1.3x for F32).
template <__m512 (*Load)(const void*, int64_t)>
TARGET void dot_panel(const uint8_t* w, int64_t w_stride, int nw, const float* const* xs, int nr,
                      int64_t k, float* out, int64_t ldo, const PrefetchRows& next) {
  const PrefetchRows none;
  for (int r = 0; r < nr; r += 4) {
    const PrefetchRows& pf = r + 4 >= nr ? next : none;
    switch (std::min(4, nr - r)) {
      case 1:
        dot_panel_nr<1, Load>(w, w_stride, nw, xs + r, k, out + r * ldo, ldo, pf);
        break;
      case 2:
        dot_panel_nr<2, Load>(w, w_stride, nw, xs + r, k, out + r * ldo, ldo, pf);
        break;
      case 3:
        dot_panel_nr<3, Load>(w, w_stride, nw, xs + r, k, out + r * ldo, ldo, pf);
        break;
      default:
        dot_panel_nr<4, Load>(w, w_stride, nw, xs + r, k, out + r * ldo, ldo, pf);
        break;
    }
  }
}

// The same per-pair operations as dot_tile_t with all 4 accumulators live and the row read in
// one sequential pass: for 1-2 activation rows (decode), where the weight stream from memory is
// what costs and 4 * W * NR accumulators still fit.
template <int W, int NR, __m512 (*Load)(const void*, int64_t)>
TARGET void dot_tile_flat_t(const uint8_t* w, int64_t w_stride, const float* const* xs, int64_t k,
                            float* out, int64_t ldo) {
  __m512 acc[W][NR][4];
  for (int a = 0; a < W; ++a)
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < 4; ++j) acc[a][r][j] = _mm512_setzero_ps();
  for (int64_t i = 0; i < k; i += 64) {
    for (int j = 0; j < 4; ++j) {
      for (int a = 0; a < W; ++a) {
        const __m512 wv = Load(w + a * w_stride, i + 16 * j);
        for (int r = 0; r < NR; ++r)
          acc[a][r][j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xs[r] + i + 16 * j), acc[a][r][j]);
      }
    }
  }
  for (int a = 0; a < W; ++a) {
    for (int r = 0; r < NR; ++r) {
      const float tail = 0;
      const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[a][r][0], acc[a][r][1]),
                                       _mm512_add_ps(acc[a][r][2], acc[a][r][3]));
      out[r * ldo + a] = _mm512_reduce_add_ps(sum) + tail;
    }
  }
}

// Picks W by NR so that W * NR accumulators, W weight vectors and one activation vector fit
// the 32 registers.
template <int NR, __m512 (*Load)(const void*, int64_t)>
TARGET void dot_tile_nr(const uint8_t* w, int64_t w_stride, int nw, const float* const* xs,
                        int64_t k, float* out, int64_t ldo) {
  constexpr int kW = 4;
  int a = 0;
  if constexpr (NR <= 2) {
    // One weight row at a time: interleaving rows measured slower for batch-1 decode.
    for (; a < nw; ++a)
      dot_tile_flat_t<1, NR, Load>(w + a * w_stride, w_stride, xs, k, out + a, ldo);
    return;
  }
  for (; a + kW <= nw; a += kW)
    dot_tile_t<kW, NR, Load>(w + a * w_stride, w_stride, xs, k, out + a, ldo);
  for (; a < nw; ++a) dot_tile_t<1, NR, Load>(w + a * w_stride, w_stride, xs, k, out + a, ldo);
}

template <__m512 (*Load)(const void*, int64_t)>
TARGET void dot_tile_load(const uint8_t* w, int64_t w_stride, int nw, const float* const* xs,
                          int nr, int64_t k, float* out, int64_t ldo, const PrefetchRows& next) {
  // More than 4 rows go as two tiles of at most 4: the 4 x 4 tile's 16 accumulators measured
  // 1.5-1.7x less CPU per row than a 3 x 8 tile's 24, even with the weights loaded twice.
  if (nr > 2 && nw > kTileW) return dot_panel<Load>(w, w_stride, nw, xs, nr, k, out, ldo, next);
  if (nr > 4) {
    dot_tile_load<Load>(w, w_stride, nw, xs, 4, k, out, ldo, next);
    return dot_tile_load<Load>(w, w_stride, nw, xs + 4, nr - 4, k, out + 4 * ldo, ldo, next);
  }
  switch (nr) {
    case 1:
      return dot_tile_nr<1, Load>(w, w_stride, nw, xs, k, out, ldo);
    case 2:
      return dot_tile_nr<2, Load>(w, w_stride, nw, xs, k, out, ldo);
    case 3:
      return dot_tile_nr<3, Load>(w, w_stride, nw, xs, k, out, ldo);
    default:
      return dot_tile_nr<4, Load>(w, w_stride, nw, xs, k, out, ldo);
  }
}

TARGET bool dot_tile(DType type, const void* w, int64_t w_stride, int nw, const float* const* xs,
                     int nr, int64_t k, float* out, int64_t ldo, const PrefetchRows& next) {
  if (k % 64 != 0) return false;
  const auto* wb = static_cast<const uint8_t*>(w);
  switch (type) {
    case DType::kF32:
      if (nr > 0) dot_tile_load<load_w16_f32>(wb, w_stride, nw, xs, nr, k, out, ldo, next);
      return true;
    case DType::kF16:
      if (nr > 0) dot_tile_load<load_w16_f16>(wb, w_stride, nw, xs, nr, k, out, ldo, next);
      return true;
    case DType::kBF16:
      if (nr > 0) dot_tile_load<load_w16_bf16>(wb, w_stride, nw, xs, nr, k, out, ldo, next);
      return true;
    case DType::kQ8_0:
      if (nr > 0) dot_tile_load<load_w16_q8_0>(wb, w_stride, nw, xs, nr, k, out, ldo, next);
      return true;
    default:
      return false;
  }
}

// acc[r][i] += p[r] * v[i]: one FMA per element, 16 lanes at a time, scalar tail.
TARGET void axpy_rows(const float* v, const float* p, int nr, int64_t n, float* const* acc) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 vv = _mm512_loadu_ps(v + i);
    for (int r = 0; r < nr; ++r)
      _mm512_storeu_ps(acc[r] + i,
                       _mm512_fmadd_ps(_mm512_set1_ps(p[r]), vv, _mm512_loadu_ps(acc[r] + i)));
  }
  for (; i < n; ++i)
    for (int r = 0; r < nr; ++r) acc[r][i] = std::fma(p[r], v[i], acc[r][i]);
}

// Q4_K: per pair of 32-element sub-blocks, low nibbles use (d1, m1), high nibbles (d2, m2);
// y = d * q - m as in the reference (multiply, then subtract).
TARGET void dequant_q4_k(const BlockQ4_K* blocks, float* y, int64_t nb) {
  const __m128i mask = _mm_set1_epi8(0xF);
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ4_K& b = blocks[i];
    const float d = _cvtsh_ss(b.d), dmin = _cvtsh_ss(b.dmin);
    const uint8_t* q = b.qs;
    for (int j = 0, is = 0; j < kQK_K; j += 64, is += 2, q += 32, y += 64) {
      uint8_t sc, m;
      q4_k_scale_min(is, b.scales, &sc, &m);
      const __m512 d1 = _mm512_set1_ps(d * sc), m1 = _mm512_set1_ps(dmin * m);
      q4_k_scale_min(is + 1, b.scales, &sc, &m);
      const __m512 d2 = _mm512_set1_ps(d * sc), m2 = _mm512_set1_ps(dmin * m);
      for (int h = 0; h < 2; ++h) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * h));
        const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(v, mask)));
        const __m512 hi =
            _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(v, 4), mask)));
        _mm512_storeu_ps(y + 16 * h, _mm512_sub_ps(_mm512_mul_ps(d1, lo), m1));
        _mm512_storeu_ps(y + 32 + 16 * h, _mm512_sub_ps(_mm512_mul_ps(d2, hi), m2));
      }
    }
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
      dequant_q4_k(static_cast<const BlockQ4_K*>(src), dst, n / kQK_K);
      return;
    case DType::kQ6_K:
      kq_dequant_q6_k(static_cast<const BlockQ6_K*>(src), dst, n / kQK_K);
      return;
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ5_K:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
      // Embedding rows only: their matmuls read the blocks in place (dot_block_q).
      dequantize_row(type, src, dst, n);
      return;
  }
}

}  // namespace

const Kernels& avx512_kernels() {
  static const Kernels k{.isa = Isa::kAvx512,
                         .dot_tile = 4,
                         .dot_rows = &dot_rows,
                         .dequant = &dequant,
                         .dot_rows_typed = &dot_rows_typed,
                         .dot_block = &dot_tile,
                         .quantize_row_x = &avx512::quantize_row_x,
                         .reads_x8 = &avx512::reads_x8,
                         .quantize_row_x8 = &avx512::quantize_row_x8,
                         .reads_xg = &avx512::reads_xg,
                         .quantize_row_xg = &avx512::quantize_row_xg,
                         .dot_block_q = &avx512::dot_block_q,
                         .packed_q_bytes = &avx512::packed_q_bytes,
                         .pack_wq = &avx512::pack_wq,
                         .dot_packed_q = &avx512::dot_packed_q,
                         .packed_bytes = &avx512::packed_bytes,
                         .pack_x = &avx512::pack_x,
                         .pack_w = &avx512::pack_w,
                         .dot_packed = &avx512::dot_packed,
                         .interleaved_bytes = &avx512::interleaved_bytes,
                         .interleave = &avx512::interleave,
                         .pack_interleaved_x = &avx512::pack_interleaved_x,
                         .dot_interleaved = &avx512::dot_interleaved,
                         .axpy_rows = &axpy_rows};
  return k;
}

}  // namespace cutline::device::cpu
#else
#include "cpu_kernels.h"
namespace cutline::device::cpu {
const Kernels& avx512_kernels() { return scalar_kernels(); }
}  // namespace cutline::device::cpu
#endif
