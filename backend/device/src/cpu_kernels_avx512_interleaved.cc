// The interleaved F16, BF16 and F32 path of the AVX-512 kernels (cpu_kernels.h interleaved_bytes,
// interleave, dot_interleaved). An interleaved weight holds blocks of kInterleaveRows rows, each
// block k-major: element i of the block's rows 0..15 side by side (32 bytes, F32 64), then
// element i + 1; BF16 by pairs of positions, each row's elements i and i + 1 in one 32-bit lane
// (64 bytes per pair), so that one shift and one and make the pair's two F32 vectors. One 16-lane
// vector then holds 16 output features at one input position, so a multiply-add by one broadcast
// activation advances 16 dot products at once: no horizontal reduction per output, and one weight
// vector serves every activation row of a tile.
//
// The activations come packed in tiles of kInterleaveTileRows rows (pack_interleaved_x), each
// tile k-major: the tile's rows at position i side by side. The broadcasts of one position then
// read one cache line instead of one line per row; measured on one core, that took tiles of 2
// and 1 row blocks x 8 rows from 120-144 and 100 to 185 and 156 GFLOP/s (3 blocks: 190 to 204).
//
// The order of a dot product (the same on every path, hence batch invariance): for each block of
// kInterleaveKBlock input positions, one F32 multiply-add chain from zero in position order; the
// blocks' sums are added in block order (out = b0, then out + b1, ...).
#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's AVX-512 intrinsic headers
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu_kernels.h"
#include "cpu_kernels_avx512_f32.h"

#define TARGET CUTLINE_AVX512_TARGET

namespace cutline::device::cpu::avx512 {
namespace {

constexpr int kRows = kInterleaveRows;

// Position i's weights times the NT broadcast activations into acc.
template <int RB, int NT>
TARGET inline void position(const __m512 (&wv)[RB], const float* xp, __m512 (&acc)[RB][NT]) {
#pragma GCC unroll 12
  for (int t = 0; t < NT; ++t) {
    const __m512 xv = _mm512_set1_ps(xp[t]);
#pragma GCC unroll 8
    for (int b = 0; b < RB; ++b) acc[b][t] = _mm512_fmadd_ps(wv[b], xv, acc[b][t]);
  }
}

// The weight types held interleaved, and the bytes of one element.
enum class Kind { kF16, kBf16, kF32 };
constexpr int64_t elem_bytes(Kind kind) { return kind == Kind::kF32 ? 4 : 2; }

// RB row blocks (w: the first; block b at element b * k * kRows) x NT activation rows packed
// k-major (xp[i * NT + t]). The tile's outputs: out[t * ldo + b * kRows + lane].
template <Kind kKind, int RB, int NT>
TARGET void tile(const uint8_t* w, int64_t k, const float* xp, float* out, int64_t ldo) {
  constexpr int64_t kEs = elem_bytes(kKind);
  for (int64_t k0 = 0; k0 < k; k0 += kInterleaveKBlock) {
    const int64_t k1 = std::min(k, k0 + kInterleaveKBlock);
    __m512 acc[RB][NT];
#pragma GCC unroll 8
    for (int b = 0; b < RB; ++b)
#pragma GCC unroll 12
      for (int t = 0; t < NT; ++t) acc[b][t] = _mm512_setzero_ps();
    if constexpr (kKind == Kind::kBf16) {
      // k is even (interleaved_bytes), so is k0: positions i and i + 1 from one 64-byte load.
      const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
      for (int64_t i = k0; i < k1; i += 2) {
        __m512 lo[RB], hi[RB];
#pragma GCC unroll 8
        for (int b = 0; b < RB; ++b) {
          const __m512i v = _mm512_loadu_si512(w + (b * k + i) * kRows * kEs);
          lo[b] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
          hi[b] = _mm512_castsi512_ps(_mm512_and_si512(v, high));
        }
        position<RB, NT>(lo, xp + i * NT, acc);
        position<RB, NT>(hi, xp + (i + 1) * NT, acc);
      }
    } else {
      for (int64_t i = k0; i < k1; ++i) {
        __m512 wv[RB];
#pragma GCC unroll 8
        for (int b = 0; b < RB; ++b) {
          const uint8_t* p = w + (b * k + i) * kRows * kEs;
          if constexpr (kKind == Kind::kF32) {
            wv[b] = _mm512_loadu_ps(p);
          } else {
            wv[b] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
          }
        }
        position<RB, NT>(wv, xp + i * NT, acc);
      }
    }
#pragma GCC unroll 8
    for (int b = 0; b < RB; ++b) {
#pragma GCC unroll 12
      for (int t = 0; t < NT; ++t) {
        float* o = out + t * ldo + b * kRows;
        _mm512_storeu_ps(o, k0 == 0 ? acc[b][t] : _mm512_add_ps(_mm512_loadu_ps(o), acc[b][t]));
      }
    }
  }
}

// v[i] lane j becomes v[j] lane i: unpack pairs, then 4-lane groups, then 128-bit quarters.
TARGET inline void transpose16(__m512 v[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    v[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    v[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    v[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    v[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(v[i], v[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(v[i], v[i + 4], 0xDD);
    t[i + 8] = _mm512_shuffle_f32x4(v[i + 8], v[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(v[i + 8], v[i + 12], 0xDD);
  }
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    v[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    v[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    v[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xDD);
  }
}

// The most row blocks a tile of NT activation rows takes: RB * NT accumulators, RB weight
// vectors and one activation vector within the 32 registers.
constexpr int blocks_for(int nt) { return std::min(8, 31 / (nt + 1)); }

// The last nb < RB + 1 row blocks: one tile of RB if there are that many, then smaller ones.
template <Kind kKind, int RB, int NT>
TARGET void rest(const uint8_t* w, int64_t k, int nb, const float* xp, float* out, int64_t ldo) {
  if constexpr (RB > 0) {
    if (nb >= RB) {
      tile<kKind, RB, NT>(w, k, xp, out, ldo);
      w += RB * k * kRows * elem_bytes(kKind);
      out += RB * kRows;
      nb -= RB;
    }
    rest<kKind, RB - 1, NT>(w, k, nb, xp, out, ldo);
  }
}

// All nb row blocks against NT activation rows: tiles of blocks_for(NT) blocks, then what is
// left in one smaller tile (or two).
template <Kind kKind, int NT>
TARGET void rows_nt(const uint8_t* w, int64_t k, int nb, const float* xp, float* out, int64_t ldo) {
  constexpr int kRb = blocks_for(NT);
  const int64_t block_bytes = k * kRows * elem_bytes(kKind);
  int b = 0;
  for (; b + kRb <= nb; b += kRb)
    tile<kKind, kRb, NT>(w + b * block_bytes, k, xp, out + b * kRows, ldo);
  rest<kKind, kRb - 1, NT>(w + b * block_bytes, k, nb - b, xp, out + b * kRows, ldo);
}

// Activation rows per tile: 8 rows x 3 blocks measured faster for prefill than 12 x 2 or 6 x 4.
constexpr int kMaxTileRows = kInterleaveTileRows;
static_assert(blocks_for(kMaxTileRows) == kInterleaveTileBlocks);

// The 8 x 8 block v[r] (row r, positions 0..7) to v[i] = position i, rows 0..7.
TARGET inline void transpose8(__m256 v[8]) {
  __m256 t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    v[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    v[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    v[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    v[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_permute2f128_ps(v[i], v[i + 4], 0x20);
    t[i + 4] = _mm256_permute2f128_ps(v[i], v[i + 4], 0x31);
  }
  for (int i = 0; i < 8; ++i) v[i] = t[i];
}

}  // namespace

TARGET int64_t interleaved_bytes(DType type, int64_t rows, int64_t k) {
  if (type != DType::kF16 && type != DType::kBF16 && type != DType::kF32) return 0;
  if (rows <= 0 || rows % kRows != 0 || k <= 0 || (type == DType::kBF16 && k % 2 != 0)) return 0;
  return rows * k * (type == DType::kF32 ? 4 : 2);
}

TARGET void interleave(DType type, const void* w, int64_t k, int64_t block_begin, int64_t block_end,
                       void* dst) {
  if (interleaved_bytes(type, kRows, k) == 0) return;
  const int64_t es = type == DType::kF32 ? 4 : 2;
  const auto* src = static_cast<const uint8_t*>(w);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t blk = block_begin; blk < block_end; ++blk) {
    const uint8_t* rows = src + blk * kRows * k * es;
    uint8_t* to = out + blk * kRows * k * es;
    // 16 x 16 tiles transposed in registers (16-bit elements widened to 32 bits and narrowed
    // back): 16 loads of one row's 16 positions become stores of 16 rows' positions.
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
      __m512 v[16];
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* p = rows + (r * k + i) * es;
        v[r] = type == DType::kF32 ? _mm512_loadu_ps(p)
                                   : _mm512_castsi512_ps(_mm512_cvtepu16_epi32(
                                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
      }
      transpose16(v);
      uint8_t* at = to + i * kRows * es;
      if (type == DType::kF32) {
        for (int j = 0; j < 16; ++j) _mm512_storeu_ps(at + j * kRows * es, v[j]);
      } else if (type == DType::kBF16) {
        // Positions i + j and i + j + 1 as the low and high halves of each row's 32-bit lane.
        for (int j = 0; j < 16; j += 2) {
          const __m512i pair = _mm512_or_si512(
              _mm512_castps_si512(v[j]), _mm512_slli_epi32(_mm512_castps_si512(v[j + 1]), 16));
          _mm512_storeu_si512(at + j * kRows * es, pair);
        }
      } else {
        for (int j = 0; j < 16; ++j) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(at + j * kRows * es),
                              _mm512_cvtepi32_epi16(_mm512_castps_si512(v[j])));
        }
      }
    }
    for (; i < k; ++i)
      for (int r = 0; r < kRows; ++r)
        std::memcpy(to + interleaved_index(type, k, r, i) * es, rows + (r * k + i) * es, es);
  }
}

TARGET void pack_interleaved_x(const float* x, int nt, int64_t k, float* xp) {
  if (nt == 1) {
    std::copy(x, x + k, xp);
    return;
  }
  // 8 x 8 blocks transposed in registers; rows past nt read as zero and are not stored.
  const __mmask8 keep = static_cast<__mmask8>((1u << nt) - 1);
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    __m256 v[8];
    for (int r = 0; r < 8; ++r)
      v[r] = r < nt ? _mm256_loadu_ps(x + r * k + i) : _mm256_setzero_ps();
    transpose8(v);
    for (int j = 0; j < 8; ++j) _mm256_mask_storeu_ps(xp + (i + j) * nt, keep, v[j]);
  }
  for (; i < k; ++i)
    for (int r = 0; r < nt; ++r) xp[i * nt + r] = x[r * k + i];
}

TARGET void dot_interleaved(DType type, const void* wi, int64_t k, int nb, const float* xp, int nr,
                            float* out, int64_t ldo) {
  if (type != DType::kF16 && type != DType::kBF16 && type != DType::kF32) return;
  const auto* w = static_cast<const uint8_t*>(wi);
  using Rows = void (*)(const uint8_t*, int64_t, int, const float*, float*, int64_t);
  static constexpr Rows kF16[kMaxTileRows] = {rows_nt<Kind::kF16, 1>, rows_nt<Kind::kF16, 2>,
                                              rows_nt<Kind::kF16, 3>, rows_nt<Kind::kF16, 4>,
                                              rows_nt<Kind::kF16, 5>, rows_nt<Kind::kF16, 6>,
                                              rows_nt<Kind::kF16, 7>, rows_nt<Kind::kF16, 8>};
  static constexpr Rows kBf16[kMaxTileRows] = {rows_nt<Kind::kBf16, 1>, rows_nt<Kind::kBf16, 2>,
                                               rows_nt<Kind::kBf16, 3>, rows_nt<Kind::kBf16, 4>,
                                               rows_nt<Kind::kBf16, 5>, rows_nt<Kind::kBf16, 6>,
                                               rows_nt<Kind::kBf16, 7>, rows_nt<Kind::kBf16, 8>};
  static constexpr Rows kF32[kMaxTileRows] = {rows_nt<Kind::kF32, 1>, rows_nt<Kind::kF32, 2>,
                                              rows_nt<Kind::kF32, 3>, rows_nt<Kind::kF32, 4>,
                                              rows_nt<Kind::kF32, 5>, rows_nt<Kind::kF32, 6>,
                                              rows_nt<Kind::kF32, 7>, rows_nt<Kind::kF32, 8>};
  const Rows* by_rows = type == DType::kBF16 ? kBf16 : type == DType::kF32 ? kF32 : kF16;
  for (int t = 0; t < nr; t += kMaxTileRows) {
    const int nt = std::min(kMaxTileRows, nr - t);
    by_rows[nt - 1](w, k, nb, xp + t * k, out + t * ldo, ldo);
  }
}

}  // namespace cutline::device::cpu::avx512
#endif
