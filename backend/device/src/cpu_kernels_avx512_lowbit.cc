// AVX-512 integer kernels for Q5_K, Q3_K, Q2_K, IQ4_XS (256-element super-blocks; Q4_0, Q4_1,
// Q5_0 and IQ4_NL, 32-element blocks, in cpu_kernels_avx512_blocks32.cc) times int8 activations
// (cpu_kernels.h QuantRow q8, d8, sums8, sums16), as llama.cpp's CPU dot products do it: per 64
// elements the weights' integer codes as bytes times the int8 activations pairwise into 32 int16
// lanes (vpmaddubsw), then times the sub-blocks' integer scales (or ones) pairwise into 16 int32
// lanes. The codes are unsigned (a type's offset, e.g. Q5_0's -16 or Q3_K's -4, is taken out
// afterwards with the activation sums, exactly in integers or with the int8 row's own sums) except
// the IQ4 table values, which go through vpmaddubsw as |w| times sign(w) * x. No int16 lane can
// saturate: the largest pair sum is 2 * 127 * 127 (IQ4). IQ4_XS with VNNI takes another route,
// vpdpbusd on the values shifted into unsigned bytes, one sub-block per 128-bit lane, and so does
// Q2_K with VNNI and VBMI, vpdpbusd on code times scale from a byte table; Q3_K with VNNI and
// GFNI makes its codes with gf2p8affineqb (below).
// Each output's sequence of operations depends on the weight row and the activation row only,
// never on how many rows one call takes (batch invariance).
#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's AVX-512 intrinsic headers
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "cpu_kernels_avx512_int8.h"

#define TARGET CUTLINE_AVX512_TARGET
#define TARGET_VNNI CUTLINE_AVX512_VNNI_TARGET

namespace cutline::device::cpu::avx512 {
namespace {

// Upper 256 bits of a 512-bit register, as int16 and as byte lane masks.
constexpr __mmask32 kHi16 = 0xFFFF0000u;

// vpermw indices: lane i takes scale `first + i / per` (per = 16 for 32-element sub-blocks, 8 for
// 16-element ones).
TARGET inline __m512i scale_index(int first, int per) {
  alignas(64) int16_t idx[32];
  for (int i = 0; i < 32; ++i) idx[i] = static_cast<int16_t>(first + i / per);
  return _mm512_load_si512(idx);
}

// QuantRow::q8h's order: byte i of register j (64 bytes of a super-block's activations) is
// element 128 * (i / 32) + 32j + i % 32, of 16-element sub-block q8h_sub_block(j, i).
constexpr int q8h_sub_block(int j, int i) { return 8 * (i / 32) + 2 * j + (i % 32) / 16; }

// vpermw indices by which int16 lane i (bytes 2i, 2i + 1) of register j takes the scale of its
// sub-block.
TARGET inline __m512i q8h_scale_index(int j) {
  alignas(64) int16_t idx[32];
  for (int i = 0; i < 32; ++i) idx[i] = static_cast<int16_t>(q8h_sub_block(j, 2 * i));
  return _mm512_load_si512(idx);
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
  __m512i scale_sel[4], hsel[4];
  for (int c = 0; c < 4; ++c) {
    scale_sel[c] = sub_block_scales(2 * c);
    hsel[c] = high_bit_select(c);
  }
  for (int64_t bi = 0; bi < nb; ++bi) {
    const BlockQ5_K& b = w[bi];
    const auto [sc, mf, d] = k4_scales_mins(&b);
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
      const __m512i scv = _mm512_shuffle_epi8(sc, scale_sel[c]);
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

// Q2_K with VNNI and VBMI: each code times its sub-block's scale comes from a 64-byte table,
// T[4s + u] = u * scale_s (<= 45, an unsigned byte), by vpermb on the index u | 4s, and goes
// straight into vpdpbusd with the activations: no int16 step and no per-chunk scale vector.
// One 64-byte load holds all 256 codes; its int16 lanes shifted right by 2j give codes j of
// both 128-element halves (elements 32j + (0..31) and 128 + 32j + (0..31), QuantRow::q8h's
// order), and one ternary-logic op keeps the code's two bits and sets the sub-block bits. The
// table is one vpermb (each scale to the low byte of two int16 lanes) and one vpmullw by
// 256 | 770, which writes (0, s) and (2s, 3s) as byte pairs. Mins as in dot_q2_k_t.
template <int NR>
CUTLINE_AVX512_VBMI_TARGET void dot_q2_k_vbmi_t(const BlockQ2_K* w, const QuantRow* xs, int64_t nb,
                                                float* out, int64_t ldo) {
  __m512 facc[NR];
  __m256 fmin[NR];
  for (int r = 0; r < NR; ++r) {
    facc[r] = _mm512_setzero_ps();
    fmin[r] = _mm256_setzero_ps();
  }
  // Byte i of register j: its sub-block's table offset, 4 * q8h_sub_block(j, i).
  alignas(64) uint8_t sub_bytes[4][64];
  alignas(64) uint8_t spread_bytes[64];
  alignas(64) int16_t mul_words[32];
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 64; ++i) sub_bytes[j][i] = static_cast<uint8_t>(4 * q8h_sub_block(j, i));
  for (int i = 0; i < 64; ++i) spread_bytes[i] = static_cast<uint8_t>(i / 4);
  for (int i = 0; i < 32; ++i) mul_words[i] = static_cast<int16_t>(i % 2 == 0 ? 256 : 770);
  __m512i sub[4];
  for (int j = 0; j < 4; ++j) sub[j] = _mm512_load_si512(sub_bytes[j]);
  const __m512i spread = _mm512_load_si512(spread_bytes), mul = _mm512_load_si512(mul_words);
  const __m512i low2 = _mm512_set1_epi8(3);
  constexpr __mmask64 kEvenBytes = 0x5555555555555555ull;
  for (int64_t bi = 0; bi < nb; ++bi) {
    const BlockQ2_K& b = w[bi];
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    const __m256i m16 = _mm256_srli_epi16(_mm256_cvtepu8_epi16(packed), 4);
    const __m512i table = _mm512_mullo_epi16(
        _mm512_maskz_permutexvar_epi8(
            kEvenBytes, spread, _mm512_castsi128_si512(_mm_and_si128(packed, _mm_set1_epi8(0xF)))),
        mul);
    uint32_t dbits;
    static_assert(offsetof(BlockQ2_K, dmin) == offsetof(BlockQ2_K, d) + 2);
    std::memcpy(&dbits, reinterpret_cast<const uint8_t*>(&b) + offsetof(BlockQ2_K, d), 4);
    const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dbits)));  // d, dmin
    const __m512i v = _mm512_loadu_si512(b.qs);
    __m512i wq[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512i c = j == 0 ? v : _mm512_srli_epi16(v, 2 * j);
      // (c & 3) | sub
      wq[j] = _mm512_permutexvar_epi8(_mm512_ternarylogic_epi32(c, low2, sub[j], 0xEA), table);
    }
    for (int r = 0; r < NR; ++r) {
      const int8_t* x = xs[r].q8h + bi * kQK_K;
      __m512i acc = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc = _mm512_dpbusd_epi32(acc, wq[j], load64(x + 64 * j));
      const __m128 ddx = _mm_mul_ps(dd, _mm_set1_ps(xs[r].d8[bi]));
      const __m256i mi = _mm256_madd_epi16(
          m16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs[r].sums16 + 16 * bi)));
      facc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_broadcastss_ps(ddx), facc[r]);
      fmin[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mi), _mm256_broadcastss_ps(_mm_movehdup_ps(ddx)),
                                fmin[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = _mm512_reduce_add_ps(facc[r]) - hsum256(fmin[r]);
}

// Q3_K: codes u = low2 | hbit << 2 (0..7; the weight is u - 4) times the signed 6-bit scales per
// 16 elements. The 256 low-bit codes come from one 64-byte load in QuantRow::q8h's order, as
// dot_q2_k_vbmi_t's: register j holds codes j of both 128-element halves, and its 128-bit lane k
// sub-block 8 * (k / 2) + 2j + k % 2. The high bits: hmask's 32 bytes in both halves, the upper
// half shifted down a nibble, so that byte i of register j finds its bit at bit j. Without GFNI a
// register's codes are a shift, an and, a byte test and a masked add of 4. With GFNI (and VNNI)
// they are one gf2p8affineqb (a bit matrix per byte): two vectors per super-block hold every code
// bit, p (codes 0 and 1 of each byte position, the code bytes' low nibbles, with the high bits
// in bits 4-7) and q (codes 2 and 3, the high nibbles, with the same high bits), and register j's
// matrix moves code j's two bits to bits 0-1 and its high bit to bit 2 and clears the rest. The
// -4 goes into the same exact integer sum, as -4 * scale times the int8 row's 16-element sums.
// Compiled with GFNI for every instance; those with kGfni false use no GFNI instruction.
template <int NR, bool kVnni, bool kGfni>
CUTLINE_AVX512_GFNI_TARGET void dot_q3_k_t(const BlockQ3_K* w, const QuantRow* xs, int64_t nb,
                                           float* out, int64_t ldo) {
  static_assert(kVnni || !kGfni);
  constexpr int kAcc = NR <= 2 ? 2 : 1;
  __m512 facc[NR];
  for (int r = 0; r < NR; ++r) facc[r] = _mm512_setzero_ps();
  const __m512i bit2 = _mm512_set1_epi8(4), low2 = _mm512_set1_epi8(3),
                low4 = _mm512_set1_epi8(0xF);
  __m512i scale_idx[4], bits[4];
  for (int j = 0; j < 4; ++j) {
    scale_idx[j] = q8h_scale_index(j);
    // gf2p8affineqb's output bit i is the parity of input & byte 7 - i: bits 0-1 from the code's
    // two bits (2 (j % 2), + 1 of p or q), bit 2 from the high bit (4 + j).
    const uint64_t lo = 1ull << (2 * (j % 2)), hi = 1ull << (4 + j);
    bits[j] =
        _mm512_set1_epi64(static_cast<long long>((lo << 56) | ((lo << 1) << 48) | (hi << 40)));
  }
  for (int64_t bi = 0; bi < nb; ++bi) {
    const BlockQ3_K& b = w[bi];
    const __m256i u6 = q3_k_scales16(b);
    const __m512i sc512 = _mm512_castsi256_si512(_mm256_sub_epi16(u6, _mm256_set1_epi16(32)));
    // -4 * (u6 - 32), within int16.
    const __m256i off16 = _mm256_slli_epi16(_mm256_sub_epi16(_mm256_set1_epi16(32), u6), 2);
    const float d = _cvtsh_ss(b.d);
    const __m512i hm =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask)));
    const __m512i h = _mm512_mask_srli_epi16(hm, kHi16, hm, 4);
    const __m512i v = _mm512_loadu_si512(b.qs);
    __m512i p = v, q = v;
    if constexpr (kGfni) {
      // (codes & 0xF) | (high bits << 4), the high bits' other bits cleared first.
      const __m512i h4 = _mm512_slli_epi16(_mm512_and_si512(h, low4), 4);
      p = _mm512_ternarylogic_epi32(v, h4, low4, 0xE4);
      q = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), h4, low4, 0xE4);
    }
    __m512i iacc[NR][kAcc];
    for (int r = 0; r < NR; ++r) {
      iacc[r][0] = _mm512_zextsi256_si512(_mm256_madd_epi16(
          off16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs[r].sums16 + 16 * bi))));
      for (int a = 1; a < kAcc; ++a) iacc[r][a] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      __m512i wq;
      if constexpr (kGfni) {
        wq = _mm512_gf2p8affine_epi64_epi8(j < 2 ? p : q, bits[j], 0);
      } else {
        const __m512i lo = _mm512_and_si512(j == 0 ? v : _mm512_srli_epi16(v, 2 * j), low2);
        wq = _mm512_mask_add_epi8(
            lo, _mm512_test_epi8_mask(h, _mm512_set1_epi8(static_cast<char>(1 << j))), lo, bit2);
      }
      const __m512i scv = _mm512_permutexvar_epi16(scale_idx[j], sc512);
      for (int r = 0; r < NR; ++r) {
        const __m512i x = load64(xs[r].q8h + bi * kQK_K + 64 * j);
        iacc[r][j % kAcc] = madd_acc<kVnni>(iacc[r][j % kAcc], _mm512_maddubs_epi16(wq, x), scv);
      }
    }
    for (int r = 0; r < NR; ++r) {
      __m512i sum = iacc[r][0];
      for (int a = 1; a < kAcc; ++a) sum = _mm512_add_epi32(sum, iacc[r][a]);
      facc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(d * xs[r].d8[bi]), facc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = _mm512_reduce_add_ps(facc[r]);
}

// IQ4_XS with VNNI, one sub-block per 128-bit lane: a 64-byte load holds sub-blocks 4h..4h + 3
// (h = 0, 1), 16 bytes each, so its low nibbles (elements 0-15 of each) and its high nibbles
// (16-31) keep every sub-block in its own lane. The table values shifted by 128 into unsigned
// bytes (v ^ 0x80 = v + 128) go through vpdpbusd with the activations in the same order
// (QuantRow::q8p), two vpdpbusd per load into int32 lanes, no saturation; then one vpmulld by
// the sub-blocks' signed scales per 128 weights instead of a scale step per 64. The 128 that the
// shift adds comes off exactly in integers: 128 * scale_j times sub-block j's sum of activations
// (two of the row's 16-element sums, one vpmaddwd with the scale in both halves of each int32
// lane).
template <int NR>
TARGET_VNNI void dot_iq4_xs_vnni_t(const BlockIQ4_XS* w, const QuantRow* xs, int64_t nb, float* out,
                                   int64_t ldo) {
  __m512 facc[NR];
  for (int r = 0; r < NR; ++r) facc[r] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0xF);
  const __m512i shifted = _mm512_broadcast_i32x4(_mm_xor_si128(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)), _mm_set1_epi8(-128)));
  // vpermd indices: 128-bit lane m takes scale m (first half) or 4 + m (second).
  const __m512i scale_idx[2] = {_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7)};
  for (int64_t bi = 0; bi < nb; ++bi) {
    const BlockIQ4_XS& b = w[bi];
    const __m128i sc = iq4_xs_scales(b);
    const __m512i sc32 = _mm512_castsi256_si512(_mm256_cvtepi16_epi32(sc));
    // Scale j in both int16 halves of int32 lane j, times 128.
    const __m256i u = _mm256_cvtepu16_epi32(sc);
    const __m256i sdup = _mm256_slli_epi16(_mm256_or_si256(u, _mm256_slli_epi32(u, 16)), 7);
    const float d = _cvtsh_ss(b.d);
    __m512i wq[2][2];  // [half][low, high nibbles] as shifted table values
    for (int h = 0; h < 2; ++h) {
      const __m512i v = _mm512_loadu_si512(b.qs + 64 * h);
      wq[h][0] = _mm512_shuffle_epi8(shifted, _mm512_and_si512(v, low4));
      wq[h][1] = _mm512_shuffle_epi8(shifted, _mm512_and_si512(_mm512_srli_epi16(v, 4), low4));
    }
    const __m512i sc_half[2] = {_mm512_permutexvar_epi32(scale_idx[0], sc32),
                                _mm512_permutexvar_epi32(scale_idx[1], sc32)};
    for (int r = 0; r < NR; ++r) {
      const int8_t* x = xs[r].q8p + bi * kQK_K;
      // -128 * scale_j * (sum of sub-block j's activations), lanes 0-7.
      __m512i sum = _mm512_zextsi256_si512(_mm256_sub_epi32(
          _mm256_setzero_si256(),
          _mm256_madd_epi16(
              sdup, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs[r].sums16 + 16 * bi)))));
      for (int h = 0; h < 2; ++h) {
        // Elements 128h + 32m + (0..15) and + (16..31) in lane m (QuantRow::q8p).
        const __m512i xlo = load64(x + 128 * h), xhi = load64(x + 128 * h + 64);
        const __m512i p = _mm512_dpbusd_epi32(
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq[h][0], xlo), wq[h][1], xhi);
        sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(p, sc_half[h]));
      }
      facc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(d * xs[r].d8[bi]), facc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = _mm512_reduce_add_ps(facc[r]);
}

// IQ4_XS without VNNI: table values times the signed 6-bit scales per 32 elements. The values go
// through vpmaddubsw as |value| (vpshufb on a table of magnitudes) times the activations negated
// where the value is negative: the table's first 8 entries, so where the nibble's bit 3 is clear.
template <int NR>
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
        iacc[r][c % kAcc] = madd_acc<false>(iacc[r][c % kAcc], p, scv);
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

}  // namespace

bool reads_x8_lowbit(DType type) {
  switch (type) {
    case DType::kQ4_0:
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
      if (kVnni && has_extension(Avx512Extension::kVbmi)) {
        rows<BlockQ2_K, dot_q2_k_vbmi_t<1>, dot_q2_k_vbmi_t<2>, dot_q2_k_vbmi_t<4>>(
            w, w_stride, nw, xs, nr, nb, out, ldo);
      } else {
        rows<BlockQ2_K, dot_q2_k_t<1, kVnni>, dot_q2_k_t<2, kVnni>, dot_q2_k_t<4, kVnni>>(
            w, w_stride, nw, xs, nr, nb, out, ldo);
      }
      break;
    case DType::kQ3_K:
      if constexpr (kVnni) {
        if (has_extension(Avx512Extension::kGfni)) {
          rows<BlockQ3_K, dot_q3_k_t<1, true, true>, dot_q3_k_t<2, true, true>,
               dot_q3_k_t<4, true, true>>(w, w_stride, nw, xs, nr, nb, out, ldo);
          break;
        }
      }
      rows<BlockQ3_K, dot_q3_k_t<1, kVnni, false>, dot_q3_k_t<2, kVnni, false>,
           dot_q3_k_t<4, kVnni, false>>(w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    case DType::kIQ4_XS:
      if constexpr (kVnni) {
        rows<BlockIQ4_XS, dot_iq4_xs_vnni_t<1>, dot_iq4_xs_vnni_t<2>, dot_iq4_xs_vnni_t<4>>(
            w, w_stride, nw, xs, nr, nb, out, ldo);
      } else {
        rows<BlockIQ4_XS, dot_iq4_xs_t<1>, dot_iq4_xs_t<2>, dot_iq4_xs_t<4>>(w, w_stride, nw, xs,
                                                                             nr, nb, out, ldo);
      }
      break;
    default:  // Q4_0, Q4_1, Q5_0, IQ4_NL
      dot_blocks32<kVnni>(type, w, w_stride, nw, xs, nr, nb, out, ldo);
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
