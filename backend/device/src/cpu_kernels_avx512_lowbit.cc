// AVX-512 integer kernels for Q5_K, Q3_K, Q2_K, IQ4_XS (256-element super-blocks) and Q4_1,
// Q5_0, IQ4_NL (32-element blocks) times int8 activations (cpu_kernels.h QuantRow q8, d8, sums8,
// sums16), as llama.cpp's CPU dot products do it: per 64 elements the weights' integer codes as
// bytes times the int8 activations pairwise into 32 int16 lanes (vpmaddubsw), then times the
// sub-blocks' integer scales (or ones) pairwise into 16 int32 lanes. The codes are unsigned
// (a type's offset, e.g. Q5_0's -16 or Q3_K's -4, is taken out afterwards with the activation
// sums, exactly in integers or with the int8 row's own sums) except the IQ4 table values, which
// go through vpmaddubsw as |w| times sign(w) * x. No int16 lane can saturate: the largest pair
// sum is 2 * 127 * 127 (IQ4). With VNNI, the 32-element blocks' codes go through vpdpbusd straight
// into int32 lanes, IQ4_NL's shifted by 128 into unsigned bytes (its offset, as Q5_0's). Each
// output's sequence of operations depends on the weight row and the activation row only, never on
// how many rows one call takes (batch invariance).
#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's AVX-512 intrinsic headers
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>

#include "cpu_kernels_avx512_quant.h"

#define TARGET CUTLINE_AVX512_TARGET
#define TARGET_VNNI CUTLINE_AVX512_VNNI_TARGET

namespace cutline::device::cpu::avx512 {
namespace {

TARGET inline float hsum256(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

TARGET inline __m512i load64(const int8_t* p) { return _mm512_loadu_si512(p); }

// Upper 256 bits of a 512-bit register, as int16 and as byte lane masks.
constexpr __mmask32 kHi16 = 0xFFFF0000u;
// int16 lanes 8-15 and 24-31: the second and fourth 128-bit lanes.
constexpr __mmask32 kOddLanes16 = 0xFF00FF00u;

// vpermw indices: lane i takes scale `first + i / per` (per = 16 for 32-element sub-blocks, 8 for
// 16-element ones).
TARGET inline __m512i scale_index(int first, int per) {
  alignas(64) int16_t idx[32];
  for (int i = 0; i < 32; ++i) idx[i] = static_cast<int16_t>(first + i / per);
  return _mm512_load_si512(idx);
}

// |w| * (sign(w) * x) pairwise: the signed weight bytes w (|w| <= 127) times the int8 x.
TARGET inline __m512i mul_signed(__m512i w, __m512i x) {
  const __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
  return _mm512_maddubs_epi16(_mm512_abs_epi8(w), sx);
}

// A Q3_K block's 16 6-bit scales (q3_k_scales_u6) as int16 lanes, in vector registers: lane j
// takes its low 4 bits from packed byte j % 8 (shifted by 4 for j >= 8) and its high 2 from byte
// 8 + j % 4 (shifted by 2 * (j / 4)). One shuffle puts both bytes in the lane, two variable
// shifts line the fields up. The 16 bytes read end at the scales, inside the block.
TARGET inline __m256i q3_k_scales16(const BlockQ3_K& b) {
  constexpr int kBack = 4;  // the 16 bytes read start 4 bytes before the 12 scale bytes
  static_assert(offsetof(BlockQ3_K, scales) >= kBack);
  const __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
      reinterpret_cast<const uint8_t*>(&b) + offsetof(BlockQ3_K, scales) - kBack)));
  const __m256i pairs = _mm256_shuffle_epi8(
      raw, _mm256_setr_epi8(4, 12, 5, 13, 6, 14, 7, 15, 8, 12, 9, 13, 10, 14, 11, 15,  //
                            4, 12, 5, 13, 6, 14, 7, 15, 8, 12, 9, 13, 10, 14, 11, 15));
  const __m256i low = _mm256_and_si256(
      _mm256_srlv_epi16(pairs, _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4)),
      _mm256_set1_epi16(0xF));
  const __m256i high = _mm256_srlv_epi16(
      pairs, _mm256_setr_epi16(4, 4, 4, 4, 6, 6, 6, 6, 8, 8, 8, 8, 10, 10, 10, 10));
  // low | (high & 0x30)
  return _mm256_ternarylogic_epi32(low, high, _mm256_set1_epi16(0x30), 0xF8);
}

// The 8 signed scales (ls - 32) of an IQ4_XS block as int16 lanes: ls's low 4 bits from nibble ib
// of scales_l, its high 2 from bits 2ib of scales_h.
TARGET inline __m128i iq4_xs_scales(const BlockIQ4_XS& b) {
  uint32_t l;
  std::memcpy(&l, b.scales_l, 4);
  const __m128i bytes =
      _mm_shuffle_epi8(_mm_cvtsi32_si128(static_cast<int>(l)),
                       _mm_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1));
  const __m128i lo = _mm_and_si128(_mm_srlv_epi16(bytes, _mm_setr_epi16(0, 4, 0, 4, 0, 4, 0, 4)),
                                   _mm_set1_epi16(0xF));
  const __m128i hi = _mm_and_si128(_mm_srlv_epi16(_mm_set1_epi16(static_cast<int16_t>(b.scales_h)),
                                                  _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
                                   _mm_set1_epi16(3));
  return _mm_sub_epi16(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi16(32));
}

// ---- 256-element super-blocks: per block, 16 int32 lanes summed exactly, then one F32 scale ----

// acc + p * scv pairwise into int32 lanes: one vpdpwssd with VNNI.
template <bool kVnni>
TARGET_VNNI inline __m512i madd_acc(__m512i acc, __m512i p, __m512i scv) {
  if constexpr (kVnni) {
    return _mm512_dpwssd_epi32(acc, p, scv);
  } else {
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, scv));
  }
}

// Byte masks for the high bit of chunk c (elements 64c..64c+63) of a Q3_K hmask or Q5_K qh: byte
// l holds bit 2c for element 64c + l (the low half) and bit 2c + 1 for element 64c + 32 + l (the
// high half).
TARGET inline __m512i high_bit_select(int c) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_set1_epi8(static_cast<char>(1 << (2 * c)))),
      _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1))), 1);
}

// Q5_K: as Q4_K (cpu_kernels_avx512_quant.cc) with the fifth bit from qh, added by a byte test
// and a masked add; mins from the int8 row's 32-element sums.
template <int NR, bool kVnni>
TARGET_VNNI void dot_q5_k_t(const BlockQ5_K* w, const QuantRow* xs, int64_t nb, float* out,
                            int64_t ldo) {
  constexpr int kAcc = NR <= 2 ? 2 : 1;
  __m512 facc[NR];
  __m256 fmin[NR];
  for (int r = 0; r < NR; ++r) {
    facc[r] = _mm512_setzero_ps();
    fmin[r] = _mm256_setzero_ps();
  }
  const __m512i low4 = _mm512_set1_epi8(0xF), bit4 = _mm512_set1_epi8(0x10);
  __m512i scale_idx[4], hsel[4];
  for (int c = 0; c < 4; ++c) {
    scale_idx[c] = scale_index(2 * c, 16);
    hsel[c] = high_bit_select(c);
  }
  for (int64_t bi = 0; bi < nb; ++bi) {
    const BlockQ5_K& b = w[bi];
    alignas(16) uint8_t sc[8], mn[8];
    q4_k_scales_mins(b.scales, sc, mn);
    const float d = _cvtsh_ss(b.d), dmin = _cvtsh_ss(b.dmin);
    const __m256 mf = _mm256_mul_ps(_mm256_set1_ps(dmin),
                                    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                                        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn)))));
    const __m512i sc16 = _mm512_castsi128_si512(
        _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
    const __m512i h =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
    __m512i iacc[NR][kAcc];
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < kAcc; ++j) iacc[r][j] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c)));
      const __m512i lo = _mm512_and_si512(_mm512_mask_srli_epi16(v, kHi16, v, 4), low4);
      const __m512i wq = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(h, hsel[c]), lo, bit4);
      const __m512i scv = _mm512_permutexvar_epi16(scale_idx[c], sc16);
      for (int r = 0; r < NR; ++r) {
        const __m512i p = _mm512_maddubs_epi16(wq, load64(xs[r].q8 + bi * kQK_K + 64 * c));
        iacc[r][c % kAcc] = madd_acc<kVnni>(iacc[r][c % kAcc], p, scv);
      }
    }
    for (int r = 0; r < NR; ++r) {
      __m512i sum = iacc[r][0];
      for (int j = 1; j < kAcc; ++j) sum = _mm512_add_epi32(sum, iacc[r][j]);
      facc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(d * xs[r].d8[bi]), facc[r]);
      fmin[r] = _mm256_fmadd_ps(mf, _mm256_loadu_ps(xs[r].sums8 + 8 * bi), fmin[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = _mm512_reduce_add_ps(facc[r]) - hsum256(fmin[r]);
}

// The 2-bit codes of a Q2_K/Q3_K block come 128 elements per 32 bytes: byte l of qs[32 * (c / 2)..]
// holds element 128 * (c / 2) + 32 * j + l at bits 2j. Chunk c (elements 64c..64c+63) is that
// load broadcast to both halves, each int16 lane shifted right by low2_shift(c % 2) (2j for the
// low half's j = 2 * (c % 2), 2j + 2 for the high half's), masked to 2 bits: one variable shift
// and one and per chunk.
TARGET inline __m512i low2_shift(int odd) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_set1_epi16(static_cast<int16_t>(4 * odd))),
      _mm256_set1_epi16(static_cast<int16_t>(4 * odd + 2)), 1);
}

TARGET inline __m512i low2_codes(const uint8_t* qs, int c, __m512i shift) {
  const __m512i v = _mm512_broadcast_i64x4(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (c / 2))));
  return _mm512_and_si512(_mm512_srlv_epi16(v, shift), _mm512_set1_epi8(3));
}

// Q2_K: codes 0..3 times 4-bit scales per 16 elements; mins dmin * m_j * sum_j(x) exactly in
// integers from the int8 row's 16-element sums. Integer sums are exact in any order: one or two
// rows spread their products over two accumulators to keep the multiply-add latency off a
// single chain.
template <int NR, bool kVnni>
TARGET_VNNI void dot_q2_k_t(const BlockQ2_K* w, const QuantRow* xs, int64_t nb, float* out,
                            int64_t ldo) {
  constexpr int kAcc = NR <= 2 ? 2 : 1;
  __m512 facc[NR];
  __m256 fmin[NR];
  for (int r = 0; r < NR; ++r) {
    facc[r] = _mm512_setzero_ps();
    fmin[r] = _mm256_setzero_ps();
  }
  __m512i scale_idx[4];
  for (int c = 0; c < 4; ++c) scale_idx[c] = scale_index(4 * c, 8);
  const __m512i shift[2] = {low2_shift(0), low2_shift(1)};
  for (int64_t bi = 0; bi < nb; ++bi) {
    const BlockQ2_K& b = w[bi];
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m256i m16 =
        _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0xF)));
    const __m512i sc512 =
        _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(packed, _mm_set1_epi8(0xF))));
    const float d = _cvtsh_ss(b.d), dmin = _cvtsh_ss(b.dmin);
    __m512i iacc[NR][kAcc];
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < kAcc; ++j) iacc[r][j] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m512i wq = low2_codes(b.qs, c, shift[c % 2]);
      const __m512i scv = _mm512_permutexvar_epi16(scale_idx[c], sc512);
      for (int r = 0; r < NR; ++r) {
        const __m512i p = _mm512_maddubs_epi16(wq, load64(xs[r].q8 + bi * kQK_K + 64 * c));
        iacc[r][c % kAcc] = madd_acc<kVnni>(iacc[r][c % kAcc], p, scv);
      }
    }
    for (int r = 0; r < NR; ++r) {
      __m512i sum = iacc[r][0];
      for (int j = 1; j < kAcc; ++j) sum = _mm512_add_epi32(sum, iacc[r][j]);
      const float dx = xs[r].d8[bi];
      const __m256i mi = _mm256_madd_epi16(
          m16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs[r].sums16 + 16 * bi)));
      facc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(d * dx), facc[r]);
      fmin[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mi), _mm256_set1_ps(dmin * dx), fmin[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = _mm512_reduce_add_ps(facc[r]) - hsum256(fmin[r]);
}

// Q3_K: codes u = low2 | hbit << 2 (0..7; the weight is u - 4) times the signed 6-bit scales per
// 16 elements. The high bit is a byte test of hmask and a masked add of 4. The -4 goes into the
// same exact integer sum, as -4 * scale times the int8 row's 16-element sums.
template <int NR, bool kVnni>
TARGET_VNNI void dot_q3_k_t(const BlockQ3_K* w, const QuantRow* xs, int64_t nb, float* out,
                            int64_t ldo) {
  constexpr int kAcc = NR <= 2 ? 2 : 1;
  __m512 facc[NR];
  for (int r = 0; r < NR; ++r) facc[r] = _mm512_setzero_ps();
  const __m512i bit2 = _mm512_set1_epi8(4);
  __m512i scale_idx[4], hsel[4];
  for (int c = 0; c < 4; ++c) {
    scale_idx[c] = scale_index(4 * c, 8);
    hsel[c] = high_bit_select(c);
  }
  const __m512i shift[2] = {low2_shift(0), low2_shift(1)};
  for (int64_t bi = 0; bi < nb; ++bi) {
    const BlockQ3_K& b = w[bi];
    const __m256i u6 = q3_k_scales16(b);
    const __m512i sc512 = _mm512_castsi256_si512(_mm256_sub_epi16(u6, _mm256_set1_epi16(32)));
    // -4 * (u6 - 32), within int16.
    const __m256i off16 = _mm256_slli_epi16(_mm256_sub_epi16(_mm256_set1_epi16(32), u6), 2);
    const float d = _cvtsh_ss(b.d);
    const __m512i h =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask)));
    __m512i iacc[NR][kAcc];
    for (int r = 0; r < NR; ++r) {
      iacc[r][0] = _mm512_zextsi256_si512(_mm256_madd_epi16(
          off16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs[r].sums16 + 16 * bi))));
      for (int j = 1; j < kAcc; ++j) iacc[r][j] = _mm512_setzero_si512();
    }
    for (int c = 0; c < 4; ++c) {
      const __m512i lo = low2_codes(b.qs, c, shift[c % 2]);
      const __m512i wq = _mm512_mask_add_epi8(lo, _mm512_test_epi8_mask(h, hsel[c]), lo, bit2);
      const __m512i scv = _mm512_permutexvar_epi16(scale_idx[c], sc512);
      for (int r = 0; r < NR; ++r) {
        const __m512i p = _mm512_maddubs_epi16(wq, load64(xs[r].q8 + bi * kQK_K + 64 * c));
        iacc[r][c % kAcc] = madd_acc<kVnni>(iacc[r][c % kAcc], p, scv);
      }
    }
    for (int r = 0; r < NR; ++r) {
      __m512i sum = iacc[r][0];
      for (int j = 1; j < kAcc; ++j) sum = _mm512_add_epi32(sum, iacc[r][j]);
      facc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(d * xs[r].d8[bi]), facc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = _mm512_reduce_add_ps(facc[r]);
}

// IQ4_XS: table values times the signed 6-bit scales per 32 elements. The values go through
// vpmaddubsw as |value| (vpshufb on a table of magnitudes) times the activations negated where
// the value is negative: the table's first 8 entries, so where the nibble's bit 3 is clear.
template <int NR, bool kVnni>
TARGET_VNNI void dot_iq4_xs_t(const BlockIQ4_XS* w, const QuantRow* xs, int64_t nb, float* out,
                              int64_t ldo) {
  constexpr int kAcc = NR <= 2 ? 2 : 1;
  __m512 facc[NR];
  for (int r = 0; r < NR; ++r) facc[r] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0xF), bit3 = _mm512_set1_epi8(8);
  const __m512i magnitudes = _mm512_broadcast_i32x4(
      _mm_abs_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues))));
  __m512i scale_idx[4];
  for (int c = 0; c < 4; ++c) scale_idx[c] = scale_index(2 * c, 16);
  for (int64_t bi = 0; bi < nb; ++bi) {
    const BlockIQ4_XS& b = w[bi];
    const __m512i sc512 = _mm512_castsi128_si512(iq4_xs_scales(b));
    const float d = _cvtsh_ss(b.d);
    __m512i iacc[NR][kAcc];
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < kAcc; ++j) iacc[r][j] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      // Sub-blocks 2c and 2c + 1: 16 bytes each, low nibbles (elements 0-15) then high (16-31).
      const __m512i v = _mm512_castsi256_si512(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c)));
      const __m512i v2 = _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(1, 1, 0, 0));
      const __m512i nib = _mm512_and_si512(_mm512_mask_srli_epi16(v2, kOddLanes16, v2, 4), low4);
      const __m512i mag = _mm512_shuffle_epi8(magnitudes, nib);
      const __mmask64 negative = _mm512_testn_epi8_mask(nib, bit3);
      const __m512i scv = _mm512_permutexvar_epi16(scale_idx[c], sc512);
      for (int r = 0; r < NR; ++r) {
        const __m512i x = load64(xs[r].q8 + bi * kQK_K + 64 * c);
        const __m512i p =
            _mm512_maddubs_epi16(mag, _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x));
        iacc[r][c % kAcc] = madd_acc<kVnni>(iacc[r][c % kAcc], p, scv);
      }
    }
    for (int r = 0; r < NR; ++r) {
      __m512i sum = iacc[r][0];
      for (int j = 1; j < kAcc; ++j) sum = _mm512_add_epi32(sum, iacc[r][j]);
      facc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(d * xs[r].d8[bi]), facc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = _mm512_reduce_add_ps(facc[r]);
}

// ---- 32-element blocks: two blocks per 64 elements, each with its own F32 scale ----

// The nibbles of two 16-byte blocks in element order: [lo(a), hi(a), lo(b), hi(b)].
TARGET inline __m512i nibbles2(const uint8_t* a, const uint8_t* b) {
  const __m256i va =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
  const __m256i vb =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(va), vb, 1);
  return _mm512_and_si512(_mm512_mask_srli_epi16(v, kOddLanes16, v, 4), _mm512_set1_epi8(0xF));
}

// vpermt2w indices (lanes 0-7) that pick the F16 field at byte kAt of each of 8 consecutive
// kSize-byte blocks: from the group's first 128 bytes (two vectors) for fields that lie there,
// from its last 128 bytes for the others (kSecond true: those lanes, indexed from there).
template <size_t kSize, size_t kAt, bool kSecond>
constexpr std::array<int16_t, 32> field_index() {
  std::array<int16_t, 32> idx{};
  for (size_t i = 0; i < 8; ++i) {
    const size_t byte = kSize * i + kAt;
    const bool second = byte >= 128;
    if (second == kSecond)
      idx[i] = static_cast<int16_t>((second ? byte - (8 * kSize - 128) : byte) / 2);
  }
  return idx;
}

// The F16 field at byte kAt of each of n <= 8 consecutive blocks (the scale d at 0, Q4_1's m at
// 2), zero past n. A full group is read as two or four vectors and the fields picked by one or two
// word permutes (element inserts cost two instructions per field, 20 % of IQ4_NL's batch-1
// kernel; copying the fields into a buffer read as a vector stalls on store forwarding, and a
// gather measured slower than the inserts). Only a row's partial last group takes the buffer.
template <size_t kAt, typename Block>
TARGET inline __m128i block_halves(const Block* w, int n) {
  constexpr size_t kSize = sizeof(Block);
  static_assert(kSize % 2 == 0 && kAt % 2 == 0 && kSize <= 32 && kAt + 2 <= kSize);
  if (n < 8) {
    alignas(16) uint16_t h[8] = {};
    for (int i = 0; i < n; ++i)
      std::memcpy(&h[i], reinterpret_cast<const uint8_t*>(&w[i]) + kAt, 2);
    return _mm_load_si128(reinterpret_cast<const __m128i*>(h));
  }
  const auto* p = reinterpret_cast<const uint8_t*>(w);
  static constexpr std::array<int16_t, 32> kFirst = field_index<kSize, kAt, false>();
  __m512i v = _mm512_permutex2var_epi16(_mm512_loadu_si512(p), _mm512_loadu_si512(kFirst.data()),
                                        _mm512_loadu_si512(p + 64));
  constexpr __mmask32 kSecondLanes = [] {
    __mmask32 m = 0;
    for (size_t i = 0; i < 8; ++i)
      if (kSize * i + kAt >= 128) m |= __mmask32{1} << i;
    return m;
  }();
  if constexpr (kSecondLanes != 0) {
    static constexpr std::array<int16_t, 32> kLast = field_index<kSize, kAt, true>();
    const uint8_t* q = p + 8 * kSize - 128;  // the group's last 128 bytes
    v = _mm512_mask_mov_epi16(
        v, kSecondLanes,
        _mm512_permutex2var_epi16(_mm512_loadu_si512(q), _mm512_loadu_si512(kLast.data()),
                                  _mm512_loadu_si512(q + 64)));
  }
  return _mm512_castsi512_si128(v);
}

// One step of dot_blocks32_t: blocks bi and b (bi + 1 or bi itself) with scales
// (d8v[p], d8v[p + 1]) as chosen by pair_idx, into each row's partial sum. With VNNI one vpdpbusd
// takes the unsigned codes times x into the 16 int32 lanes (the same integers as vpmaddubsw and
// vpmaddwd by ones, which cannot saturate here).
template <typename Traits, int NR>
TARGET_VNNI inline void blocks_pair(const typename Traits::Block* w, int64_t bi,
                                    const typename Traits::Block& b, const QuantRow* xs,
                                    __m512i pair_idx, __m512 d8v, __m512* part) {
  const __m512i wq = Traits::codes(w[bi], b);
  const __m512 dw = _mm512_permutexvar_ps(pair_idx, d8v);
  for (int r = 0; r < NR; ++r) {
    const __m512i x = load64(xs[r].q8 + bi * 32);
    __m512i p32;
    if constexpr (Traits::kVnni) {
      static_assert(!Traits::kSigned);
      p32 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq, x);
    } else if constexpr (Traits::kSigned) {
      p32 = _mm512_madd_epi16(mul_signed(wq, x), _mm512_set1_epi16(1));
    } else {
      p32 = _mm512_madd_epi16(_mm512_maddubs_epi16(wq, x), _mm512_set1_epi16(1));
    }
    part[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p32), dw, part[r]);
  }
}

// Per 256 activations (8 blocks): each pair of blocks' 16 int32 lanes (block a in lanes 0-7, b in
// 8-15) scaled by (d_a, d_b) into one F32 partial sum, then by d8 into the row's accumulator.
// The 8 blocks' scales are converted once (vcvtph2ps) and handed to each pair by vpermps; the
// offsets (Q4_1's m, Q5_0's -16) are each block's `offset` times the row's 32-element sums, 8
// blocks per F32 multiply-add, subtracted at the end. Traits: Block, codes(a, b) -> 64 code
// bytes, signed (IQ4) or not, and the offset as the F16 field at byte kOffsetAt of a block times
// kOffsetScale. Traits::kVnni: the codes go through vpdpbusd (compiled with VNNI for both).
template <typename Traits, int NR>
TARGET_VNNI void dot_blocks32_t(const typename Traits::Block* w, const QuantRow* xs, int64_t nb,
                                float* out, int64_t ldo) {
  constexpr int64_t kPer = kQBlock / 32;
  __m512 facc[NR];
  __m256 foff[NR];
  for (int r = 0; r < NR; ++r) {
    facc[r] = _mm512_setzero_ps();
    foff[r] = _mm256_setzero_ps();
  }
  __m512i pair_idx[4];
  for (int p = 0; p < 4; ++p)
    pair_idx[p] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(2 * p)),
                                     _mm256_set1_epi32(2 * p + 1), 1);
  for (int64_t b0 = 0; b0 < nb; b0 += kPer) {
    const int64_t b1 = std::min(nb, b0 + kPer);
    const int n = static_cast<int>(b1 - b0);
    const __m128i dh = block_halves<0>(w + b0, n);
    const __m512 d8v = _mm512_castps256_ps512(_mm256_cvtph_ps(dh));
    __m512 part[NR];
    for (int r = 0; r < NR; ++r) part[r] = _mm512_setzero_ps();
    if (n == kPer) {
      for (int p = 0; p < kPer / 2; ++p)
        blocks_pair<Traits, NR>(w, b0 + 2 * p, w[b0 + 2 * p + 1], xs, pair_idx[p], d8v, part);
    } else {
      // An odd last block pairs with itself: its second half meets the row's zero padding and a
      // zero scale.
      for (int64_t bi = b0; bi < b1; bi += 2)
        blocks_pair<Traits, NR>(w, bi, w[bi + 1 < b1 ? bi + 1 : bi], xs, pair_idx[(bi - b0) / 2],
                                d8v, part);
    }
    if constexpr (Traits::kOffset) {
      // The row's sums are zero past its end (padding), the offsets past b1 zero too.
      const __m256 ov = _mm256_mul_ps(
          _mm256_set1_ps(Traits::kOffsetScale),
          _mm256_cvtph_ps(Traits::kOffsetAt == 0 ? dh
                                                 : block_halves<Traits::kOffsetAt>(w + b0, n)));
      for (int r = 0; r < NR; ++r)
        foff[r] = _mm256_fmadd_ps(ov, _mm256_loadu_ps(xs[r].sums8 + b0), foff[r]);
    }
    for (int r = 0; r < NR; ++r)
      facc[r] = _mm512_fmadd_ps(part[r], _mm512_set1_ps(xs[r].d8[b0 / kPer]), facc[r]);
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = _mm512_reduce_add_ps(facc[r]) - hsum256(foff[r]);
}

template <bool kVnniCodes>
struct Q4_1Traits {
  using Block = BlockQ4_1;
  static constexpr bool kVnni = kVnniCodes, kSigned = false, kOffset = true;
  TARGET static __m512i codes(const Block& a, const Block& b) { return nibbles2(a.qs, b.qs); }
  // x = d * q + m: the m term is m * sum(x), subtracted as -m.
  static constexpr float kOffsetScale = -1.0f;
  static constexpr size_t kOffsetAt = offsetof(Block, m);
};

template <bool kVnniCodes>
struct Q5_0Traits {
  using Block = BlockQ5_0;
  static constexpr bool kVnni = kVnniCodes, kSigned = false, kOffset = true;
  TARGET static __m512i codes(const Block& a, const Block& b) {
    uint32_t ha, hb;
    std::memcpy(&ha, a.qh, 4);
    std::memcpy(&hb, b.qh, 4);
    const __mmask64 high = static_cast<__mmask64>(ha) | (static_cast<__mmask64>(hb) << 32);
    return _mm512_or_si512(nibbles2(a.qs, b.qs),
                           _mm512_maskz_mov_epi8(high, _mm512_set1_epi8(0x10)));
  }
  // x = d * (q - 16): the -16 term is 16 * d * sum(x).
  static constexpr float kOffsetScale = 16.0f;
  static constexpr size_t kOffsetAt = offsetof(Block, d);
};

// kIq4nlValues + 128: the IQ4_NL table as unsigned bytes (1..241) for vpdpbusd.
struct ShiftedTable {
  uint8_t v[16];
};
constexpr ShiftedTable shifted_iq4nl() {
  ShiftedTable t{};
  for (int i = 0; i < 16; ++i) t.v[i] = static_cast<uint8_t>(kIq4nlValues[i] + 128);
  return t;
}
constexpr ShiftedTable kIq4nlShifted = shifted_iq4nl();

// Without VNNI the signed table values go through vpmaddubsw as |w| times sign(w) * x (w + 128
// could saturate its int16 pair sums). With VNNI they are shifted by 128 into unsigned bytes for
// vpdpbusd, which sums into int32 lanes, and the 128 * d * sum(x) that adds is taken out as an
// offset, as Q5_0's 16: one instruction per pair of blocks and activation row instead of five.
template <bool kVnniCodes>
struct Iq4NlTraits {
  using Block = BlockIQ4_NL;
  static constexpr bool kVnni = kVnniCodes, kSigned = !kVnniCodes, kOffset = kVnniCodes;
  TARGET static __m512i codes(const Block& a, const Block& b) {
    const void* values = kVnniCodes ? static_cast<const void*>(kIq4nlShifted.v)
                                    : static_cast<const void*>(kIq4nlValues);
    const __m512i table =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
    return _mm512_shuffle_epi8(table, nibbles2(a.qs, b.qs));
  }
  static constexpr float kOffsetScale = kVnniCodes ? 128.0f : 0.0f;
  static constexpr size_t kOffsetAt = offsetof(Block, d);
};

template <typename Block, void (*Fn1)(const Block*, const QuantRow*, int64_t, float*, int64_t),
          void (*Fn2)(const Block*, const QuantRow*, int64_t, float*, int64_t),
          void (*Fn4)(const Block*, const QuantRow*, int64_t, float*, int64_t)>
TARGET void rows(const void* w, int64_t w_stride, int nw, const QuantRow* xs, int nr, int64_t nb,
                 float* out, int64_t ldo) {
  for (int a = 0; a < nw; ++a) {
    const Block* wb = reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + a * w_stride);
    int r = 0;
    for (; r + 4 <= nr; r += 4) Fn4(wb, xs + r, nb, out + r * ldo + a, ldo);
    for (; r + 2 <= nr; r += 2) Fn2(wb, xs + r, nb, out + r * ldo + a, ldo);
    for (; r < nr; ++r) Fn1(wb, xs + r, nb, out + r * ldo + a, ldo);
  }
}

template <typename T>
TARGET_VNNI void rows32(const void* w, int64_t w_stride, int nw, const QuantRow* xs, int nr,
                        int64_t nb, float* out, int64_t ldo) {
  rows<typename T::Block, dot_blocks32_t<T, 1>, dot_blocks32_t<T, 2>, dot_blocks32_t<T, 4>>(
      w, w_stride, nw, xs, nr, nb, out, ldo);
}

}  // namespace

bool reads_x8_lowbit(DType type) {
  switch (type) {
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ5_K:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
      return true;
    default:
      return false;
  }
}

namespace {

// The kernels with VNNI (kVnni) or without.
template <bool kVnni>
TARGET void dot_lowbit(DType type, const void* w, int64_t w_stride, int nw, const QuantRow* xs,
                       int nr, int64_t nb, float* out, int64_t ldo) {
  switch (type) {
    case DType::kQ5_K:
      rows<BlockQ5_K, dot_q5_k_t<1, kVnni>, dot_q5_k_t<2, kVnni>, dot_q5_k_t<4, kVnni>>(
          w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    case DType::kQ2_K:
      rows<BlockQ2_K, dot_q2_k_t<1, kVnni>, dot_q2_k_t<2, kVnni>, dot_q2_k_t<4, kVnni>>(
          w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    case DType::kQ3_K:
      rows<BlockQ3_K, dot_q3_k_t<1, kVnni>, dot_q3_k_t<2, kVnni>, dot_q3_k_t<4, kVnni>>(
          w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    case DType::kIQ4_XS:
      rows<BlockIQ4_XS, dot_iq4_xs_t<1, kVnni>, dot_iq4_xs_t<2, kVnni>, dot_iq4_xs_t<4, kVnni>>(
          w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    case DType::kQ4_1:
      rows32<Q4_1Traits<kVnni>>(w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    case DType::kQ5_0:
      rows32<Q5_0Traits<kVnni>>(w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    case DType::kIQ4_NL:
      rows32<Iq4NlTraits<kVnni>>(w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    default:
      break;
  }
}

}  // namespace

TARGET bool dot_block_q_lowbit(DType type, const void* w, int64_t w_stride, int nw,
                               const QuantRow* xs, int nr, int64_t k, float* out, int64_t ldo) {
  if (!reads_x8_lowbit(type)) return false;
  if (nr == 0) return true;
  const int64_t nb = k / block_elems(type);
  if (has_vnni()) {
    dot_lowbit<true>(type, w, w_stride, nw, xs, nr, nb, out, ldo);
  } else {
    dot_lowbit<false>(type, w, w_stride, nw, xs, nr, nb, out, ldo);
  }
  return true;
}

}  // namespace cutline::device::cpu::avx512
#endif
