// The packed prefill path of the AVX-512 kernels (cpu_kernels.h pack_x, pack_w, dot_packed). A
// packed activation row holds, for j = 0..3, the 16-element chunks j, j + 4, j + 8, ... of the
// row one after the other; a packed panel holds tiles of 4 weight rows (the last one may have
// fewer), each tile with, for j = 0..3 and each chunk c of stripe j, its rows' chunks side by
// side. Each accumulator then runs over the whole row in one sequential pass, with no partial
// sums to save and reload between segments; the activation rows' stripe stays in L1 for every
// tile of the panel. The weight elements are copied raw (F32, F16, BF16) and converted by the
// same loaders as in place (cpu_kernels_avx512_f32.h), so every pair gets the operations of
// dot_rows (cpu_kernels_avx512.cc) in the same order.
#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's AVX-512 intrinsic headers
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "cpu_kernels.h"
#include "cpu_kernels_avx512_f32.h"

#define TARGET CUTLINE_AVX512_TARGET

namespace cutline::device::cpu::avx512 {
namespace {

// Bytes per weight element in a packed panel (the types whose blocks are single elements); 0
// when the type has no packed kernel.
TARGET int64_t packed_elem_bytes(DType type) {
  const bool packed = type == DType::kF32 || type == DType::kF16 || type == DType::kBF16;
  return packed ? block_bytes(type) : 0;
}

// The next panel's rows go to L2: the kernel reads the packed copy, pack_w these rows.
using L2Lines = LineStream<2>;

// Accumulator j of W x NR pairs over the whole row: w points at the tile's stripe j, x[r] at
// row r's. A pair's accumulators combine as dot_rows' do, (s0 + s1) + (s2 + s3): its two slots
// in `part` (at (p * 2 + slot) * 16, p = a * NR + r) keep s0, then s0 + s1, beside s2, and
// stripe 3 finishes the pair into out[r * ldo + a] while its accumulators are in registers.
template <int W, int NR, __m512 (*Load)(const void*, int64_t)>
TARGET inline void packed_stripe(const void* w, const float* const* x, int64_t n_chunks, int j,
                                 float* part, float* out, int64_t ldo, L2Lines& pf) {
  __m512 acc[W * NR];
#pragma GCC unroll 32
  for (int p = 0; p < W * NR; ++p) acc[p] = _mm512_setzero_ps();
  for (int64_t c = 0; c < n_chunks; ++c) {
    pf.step();
    __m512 wv[W];
#pragma GCC unroll 4
    for (int a = 0; a < W; ++a) wv[a] = Load(w, (c * W + a) * 16);
#pragma GCC unroll 8
    for (int r = 0; r < NR; ++r) {
      const __m512 xv = _mm512_loadu_ps(x[r] + c * 16);
#pragma GCC unroll 4
      for (int a = 0; a < W; ++a) acc[a * NR + r] = _mm512_fmadd_ps(wv[a], xv, acc[a * NR + r]);
    }
  }
  if (j == 0 || j == 2) {
#pragma GCC unroll 32
    for (int p = 0; p < W * NR; ++p) _mm512_store_ps(part + (p * 2 + j / 2) * 16, acc[p]);
  } else if (j == 1) {
#pragma GCC unroll 32
    for (int p = 0; p < W * NR; ++p) {
      float* s01 = part + p * 2 * 16;
      _mm512_store_ps(s01, _mm512_add_ps(_mm512_load_ps(s01), acc[p]));
    }
  } else {
#pragma GCC unroll 4
    for (int a = 0; a < W; ++a) {
#pragma GCC unroll 8
      for (int r = 0; r < NR; ++r) {
        const int p = a * NR + r;
        const float tail = 0;
        const __m512 s23 = _mm512_add_ps(_mm512_load_ps(part + (p * 2 + 1) * 16), acc[p]);
        const __m512 sum = _mm512_add_ps(_mm512_load_ps(part + p * 2 * 16), s23);
        out[r * ldo + a] = _mm512_reduce_add_ps(sum) + tail;
      }
    }
  }
}

template <int NR, __m512 (*Load)(const void*, int64_t)>
TARGET void packed_stripe_w(int wt, const void* w, const float* const* x, int64_t n_chunks, int j,
                            float* part, float* out, int64_t ldo, L2Lines& pf) {
  switch (wt) {
    case 1:
      return packed_stripe<1, NR, Load>(w, x, n_chunks, j, part, out, ldo, pf);
    case 2:
      return packed_stripe<2, NR, Load>(w, x, n_chunks, j, part, out, ldo, pf);
    case 3:
      return packed_stripe<3, NR, Load>(w, x, n_chunks, j, part, out, ldo, pf);
    default:
      return packed_stripe<4, NR, Load>(w, x, n_chunks, j, part, out, ldo, pf);
  }
}

// NR activation rows (packed) against a packed panel of nw weight rows.
template <int NR, __m512 (*Load)(const void*, int64_t)>
TARGET void dot_packed_nr(const uint8_t* wp, int nw, const float* const* xps, int64_t k, float* out,
                          int64_t ldo, int64_t eb, L2Lines& pf) {
  alignas(64) float part[kPackPanelW * NR * 2 * 16];
  const int64_t n_chunks = k / 64;
  for (int j = 0; j < 4; ++j) {
    const float* x[NR];
    for (int r = 0; r < NR; ++r) x[r] = xps[r] + j * (k / 4);
    for (int t0 = 0; t0 < nw; t0 += 4) {
      const int wt = std::min(4, nw - t0);
      const uint8_t* tile = wp + t0 * k * eb;
      packed_stripe_w<NR, Load>(wt, tile + j * wt * (k / 4) * eb, x, n_chunks, j,
                                part + t0 * NR * 2 * 16, out + t0, ldo, pf);
    }
  }
}

// Tiles of 6 activation rows: 24 accumulators, 4 weight vectors and one activation vector fill
// the 32 registers, and each loaded vector serves 4 or 6 multiply-adds.
template <__m512 (*Load)(const void*, int64_t)>
TARGET void dot_packed_load(const uint8_t* wp, int nw, const float* const* xps, int nr, int64_t k,
                            float* out, int64_t ldo, int64_t eb, const PrefetchRows& next) {
  // The next panel's rows are prefetched into L2 over the last few activation tiles only: the
  // activation rows streaming through L2 would evict them if fetched earlier.
  constexpr int kPrefetchTiles = 8;
  const int n_tiles = (nr + 5) / 6, first = std::max(0, n_tiles - kPrefetchTiles);
  L2Lines pf(next, int64_t{n_tiles - first} * 4 * ((nw + 3) / 4) * (k / 64));
  L2Lines none;
  for (int r = 0; r < nr; r += 6) {
    L2Lines& now = r / 6 >= first ? pf : none;
    using Tile = void (*)(const uint8_t*, int, const float* const*, int64_t, float*, int64_t,
                          int64_t, L2Lines&);
    static constexpr Tile kByRows[] = {dot_packed_nr<1, Load>, dot_packed_nr<2, Load>,
                                       dot_packed_nr<3, Load>, dot_packed_nr<4, Load>,
                                       dot_packed_nr<5, Load>, dot_packed_nr<6, Load>};
    kByRows[std::min(6, nr - r) - 1](wp, nw, xps + r, k, out + r * ldo, ldo, eb, now);
  }
}

}  // namespace

TARGET int64_t packed_bytes(DType type, int64_t k) {
  return k % 64 == 0 ? packed_elem_bytes(type) * k : 0;
}

TARGET void pack_x(const float* x, int64_t k, float* dst) {
  for (int j = 0; j < 4; ++j)
    for (int64_t i = 16 * j; i < k; i += 64, dst += 16)
      _mm512_storeu_ps(dst, _mm512_loadu_ps(x + i));
}

// Reads each weight row once, front to back, 64 elements (4 chunks, one per stripe) at a time,
// with the next row's lines prefetched: on this path the weights are read from memory here
// only, the kernel reads the packed copy from L2.
TARGET void pack_w(DType type, const void* w, int64_t w_stride, int nw, int64_t k, void* dst) {
  const int64_t eb = packed_elem_bytes(type), chunk = 16 * eb;
  const auto* src = static_cast<const uint8_t*>(w);
  auto* out = static_cast<uint8_t*>(dst);
  for (int t0 = 0; t0 < nw; t0 += 4) {
    const int wt = std::min(4, nw - t0);
    uint8_t* tile = out + t0 * k * eb;
    const int64_t stripe = wt * (k / 4) * eb;
    for (int a = 0; a < wt; ++a) {
      const uint8_t* row = src + (t0 + a) * w_stride;
      const bool ahead = t0 + a + 1 < nw;
      for (int64_t c = 0; c < k / 64; ++c) {
        const uint8_t* from = row + c * 4 * chunk;
        if (ahead) {
          for (int64_t l = 0; l < 4 * chunk; l += 64)
            _mm_prefetch(reinterpret_cast<const char*>(from + w_stride + l), _MM_HINT_T0);
        }
        uint8_t* to = tile + (c * wt + a) * chunk;
        for (int j = 0; j < 4; ++j, to += stripe) {
          if (eb == 4) {
            _mm512_storeu_si512(to, _mm512_loadu_si512(from + j * chunk));
          } else {
            _mm256_storeu_si256(
                reinterpret_cast<__m256i*>(to),
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + j * chunk)));
          }
        }
      }
    }
  }
}

TARGET void dot_packed(DType type, const void* wp, int nw, const float* const* xps, int nr,
                       int64_t k, float* out, int64_t ldo, const PrefetchRows& next) {
  const auto* w = static_cast<const uint8_t*>(wp);
  const int64_t eb = packed_elem_bytes(type);
  switch (type) {
    case DType::kF32:
      return dot_packed_load<load_w16_f32>(w, nw, xps, nr, k, out, ldo, eb, next);
    case DType::kF16:
      return dot_packed_load<load_w16_f16>(w, nw, xps, nr, k, out, ldo, eb, next);
    case DType::kBF16:
      return dot_packed_load<load_w16_bf16>(w, nw, xps, nr, k, out, ldo, eb, next);
    default:
      return;
  }
}

}  // namespace cutline::device::cpu::avx512
#endif
