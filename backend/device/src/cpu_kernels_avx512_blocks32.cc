// AVX-512 integer kernels for Q4_0, Q4_1, Q5_0 and IQ4_NL (32-element blocks, each with its own
// F16 scale) times int8 activations (cpu_kernels.h QuantRow q8, q8p, d8, sums8): the codes as
// bytes times the activations pairwise into 32 int16 lanes (vpmaddubsw), then summed pairwise into
// 16 int32 lanes, or with VNNI both at once (vpdpbusd). Q4_0, Q4_1 and IQ4_NL take four blocks
// per step, one per 128-bit lane (low nibbles in one register, high nibbles in another, against
// the activations in QuantRow::q8p's order), so that one conversion and one multiply-add by the
// blocks' scales serve 128 weights; so does Q5_0 with VNNI and BITALG (its fifth bits picked by
// vpshufbitqmb), else it takes two blocks per 64 elements in element order. The codes are
// unsigned (Q4_0's -8, Q5_0's -16 and Q4_1's m are taken out afterwards with the row's 32-element
// sums) except IQ4_NL's table values: without VNNI they go through vpmaddubsw as |w| times
// sign(w) * x, with VNNI shifted by 128 into unsigned bytes (an offset, as Q5_0's). Each output's
// sequence of operations depends on the weight row and the activation row only, never on how
// many rows one call takes (batch invariance).
#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's AVX-512 intrinsic headers
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "cpu_kernels_avx512_int8.h"

#define TARGET CUTLINE_AVX512_TARGET
#define TARGET_VNNI CUTLINE_AVX512_VNNI_TARGET
// The kernels' templates, compiled with BITALG too for Q5_0's quads (vpshufbitqmb), which run
// only where the CPU has it (has_extension(kBitalg)); the other instances use no BITALG
// instruction.
#define TARGET_Q \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512vnni,avx512bitalg")))

namespace cutline::device::cpu::avx512 {
namespace {

// The nibbles of two 16-byte blocks in element order: [lo(a), hi(a), lo(b), hi(b)].
TARGET inline __m512i nibbles2(const uint8_t* a, const uint8_t* b) {
  const __m256i va =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
  const __m256i vb =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(va), vb, 1);
  return _mm512_and_si512(_mm512_mask_srli_epi16(v, kOddLanes16, v, 4), _mm512_set1_epi8(0xF));
}

// Four blocks' codes, one block per 128-bit lane: lo holds elements 0-15 of each (the low
// nibbles of its 16 code bytes), hi elements 16-31 (the high nibbles).
struct QuadCodes {
  __m512i lo, hi;
};

template <typename Block>
TARGET inline QuadCodes quad_nibbles(const Block& a, const Block& b, const Block& c,
                                     const Block& d) {
  auto bytes = [](const Block& x)
                   TARGET { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs)); };
  __m512i v = _mm512_castsi128_si512(bytes(a));
  v = _mm512_inserti32x4(v, bytes(b), 1);
  v = _mm512_inserti32x4(v, bytes(c), 2);
  v = _mm512_inserti32x4(v, bytes(d), 3);
  const __m512i low4 = _mm512_set1_epi8(0xF);
  return {_mm512_and_si512(v, low4), _mm512_and_si512(_mm512_srli_epi16(v, 4), low4)};
}

// vpermt2w indices that pick, for each word lane i < 32 with kMap(i) >= 0, the word at byte kMap(i)
// of a group of 8 consecutive kSize-byte blocks: from the group's first 128 bytes (two vectors)
// for words that lie there, from its last 128 bytes for the others (kSecond true: those lanes,
// indexed from there).
template <size_t kSize, bool kSecond, auto kMap>
constexpr std::array<int16_t, 32> word_index() {
  // Signed, so that -1 reads as no word (an unsigned -1 would count as a byte past 128).
  static_assert(std::is_same_v<decltype(kMap(0)), int>);
  std::array<int16_t, 32> idx{};
  for (int i = 0; i < 32; ++i) {
    const int byte = kMap(i);
    if (byte < 0) continue;
    const bool second = byte >= 128;
    if (second == kSecond)
      idx[i] =
          static_cast<int16_t>((second ? byte - (8 * static_cast<int>(kSize) - 128) : byte) / 2);
  }
  return idx;
}

// The words at bytes kMap(i) of a full group of 8 blocks into word lanes i (the other lanes
// unspecified): one vpermt2w from the group's first 128 bytes, and one more from its last 128 bytes
// where some word lies there.
template <size_t kSize, auto kMap>
TARGET inline __m512i group_words(const uint8_t* p) {
  static constexpr std::array<int16_t, 32> kFirst = word_index<kSize, false, kMap>();
  __m512i v = _mm512_permutex2var_epi16(_mm512_loadu_si512(p), _mm512_loadu_si512(kFirst.data()),
                                        _mm512_loadu_si512(p + 64));
  constexpr __mmask32 kSecondLanes = [] {
    __mmask32 m = 0;
    for (int i = 0; i < 32; ++i)
      if (kMap(i) >= 128) m |= __mmask32{1} << i;
    return m;
  }();
  if constexpr (kSecondLanes != 0) {
    static constexpr std::array<int16_t, 32> kLast = word_index<kSize, true, kMap>();
    const uint8_t* q = p + 8 * kSize - 128;  // the group's last 128 bytes
    v = _mm512_mask_mov_epi16(
        v, kSecondLanes,
        _mm512_permutex2var_epi16(_mm512_loadu_si512(q), _mm512_loadu_si512(kLast.data()),
                                  _mm512_loadu_si512(q + 64)));
  }
  return v;
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
  constexpr auto kMap = [](int i) -> int {
    return i < 8 ? static_cast<int>(kSize) * i + static_cast<int>(kAt) : -1;
  };
  return _mm512_castsi512_si128(group_words<kSize, kMap>(reinterpret_cast<const uint8_t*>(w)));
}

// One step of dot_blocks32_t for Q5_0: blocks bi and b (bi + 1 or bi itself) with scales
// (d8v[p], d8v[p + 1]) as chosen by pair_idx, into each row's partial sum. With VNNI one vpdpbusd
// takes the unsigned codes times x into the 16 int32 lanes (the same integers as vpmaddubsw and
// vpmaddwd by ones, which cannot saturate here).
template <typename Traits, int NR>
TARGET_Q inline void blocks_pair(const typename Traits::Block* w, int64_t bi,
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

// One step of dot_blocks32_t for Q4_1 and IQ4_NL: four blocks (the row's blocks bi..bi + 3, or for
// a row's last blocks, the ones it has, repeated, with zero scales), one per 128-bit lane, with
// scales (d8v[4s..4s + 3]) as chosen by quad_idx, into each row's partial sum. The low nibbles
// (elements 0-15 of each block) and the high ones (16-31) meet the activations in the same
// order (QuantRow::q8p); with VNNI two vpdpbusd take the unsigned codes times x into the 16
// int32 lanes (the same integers as vpmaddubsw and vpmaddwd by ones, which cannot saturate here),
// then one conversion and one multiply-add per four blocks.
template <typename Traits, int NR>
TARGET_Q inline void blocks_quad(const typename Traits::Block& a, const typename Traits::Block& b,
                                 const typename Traits::Block& c, const typename Traits::Block& d,
                                 int64_t bi, const QuantRow* xs, __m512i quad_idx, __m512 d8v,
                                 __m512i high, int quad, __m512* part) {
  QuadCodes q;
  if constexpr (Traits::kHighBits) {
    q = Traits::codes(a, b, c, d, high, quad);
  } else {
    q = Traits::codes(a, b, c, d);
  }
  const auto [lo, hi] = q;
  const __m512 dw = _mm512_permutexvar_ps(quad_idx, d8v);
  for (int r = 0; r < NR; ++r) {
    const __m512i xlo = load64(xs[r].q8p + bi * 32), xhi = load64(xs[r].q8p + bi * 32 + 64);
    __m512i p32;
    if constexpr (Traits::kVnni) {
      static_assert(!Traits::kSigned);
      p32 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xlo), hi, xhi);
    } else if constexpr (Traits::kSigned) {
      p32 = _mm512_add_epi32(_mm512_madd_epi16(mul_signed(lo, xlo), _mm512_set1_epi16(1)),
                             _mm512_madd_epi16(mul_signed(hi, xhi), _mm512_set1_epi16(1)));
    } else {
      p32 =
          _mm512_add_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(lo, xlo), _mm512_set1_epi16(1)),
                           _mm512_madd_epi16(_mm512_maddubs_epi16(hi, xhi), _mm512_set1_epi16(1)));
    }
    part[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p32), dw, part[r]);
  }
}

// Per 256 activations (8 blocks): each quad's (or pair's) 16 int32 lanes scaled by its blocks'
// d into one F32 partial sum, then by d8 into the row's accumulator. The 8 blocks' scales are
// converted once (vcvtph2ps) and handed to each step by vpermps; the offsets (Q4_1's m, Q5_0's
// -16) are each block's `offset` times the row's 32-element sums, 8 blocks per F32 multiply-add,
// subtracted at the end. Traits: Block; kQuads and codes(a, b, c, d) -> QuadCodes (with
// kHighBits, codes(a, b, c, d, high, quad) with the group's group_high(w, n)), or codes(a, b) ->
// 64 code bytes in element order; signed (IQ4) or not; and the offset as the F16 field at byte
// kOffsetAt of a block times kOffsetScale. Traits::kVnni: the codes go through vpdpbusd
// (compiled with VNNI for both).
template <typename Traits, int NR>
TARGET_Q void dot_blocks32_t(const typename Traits::Block* w, const QuantRow* xs, int64_t nb,
                             float* out, int64_t ldo) {
  constexpr int64_t kPer = kQBlock / 32;
  __m512 facc[NR];
  __m256 foff[NR];
  for (int r = 0; r < NR; ++r) {
    facc[r] = _mm512_setzero_ps();
    foff[r] = _mm256_setzero_ps();
  }
  // vpermps indices: 128-bit lane m takes the scale of block 4s + m.
  const __m512i quad_idx[2] = {_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                               _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7)};
  // For Q5_0's pairs: lanes 0-7 take the scale of block 2p, lanes 8-15 of block 2p + 1.
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
    if constexpr (Traits::kQuads) {
      __m512i high = _mm512_setzero_si512();
      if constexpr (Traits::kHighBits) high = Traits::group_high(w + b0, n);
      if (n == kPer) {
        for (int s = 0; s < 2; ++s) {
          const typename Traits::Block* q4 = w + b0 + 4 * s;
          blocks_quad<Traits, NR>(q4[0], q4[1], q4[2], q4[3], b0 + 4 * s, xs, quad_idx[s], d8v,
                                  high, s, part);
        }
      } else {
        // Past the row's last block: that block again, with a zero scale (dh is zero past n) and
        // the row's zero padding for activations.
        for (int s = 0; 4 * s < n; ++s) {
          auto at = [&](int m) -> const typename Traits::Block& {
            return w[b0 + std::min(4 * s + m, n - 1)];
          };
          blocks_quad<Traits, NR>(at(0), at(1), at(2), at(3), b0 + 4 * s, xs, quad_idx[s], d8v,
                                  high, s, part);
        }
      }
    } else {
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
  static constexpr bool kVnni = kVnniCodes, kSigned = false, kOffset = true, kQuads = true,
                        kHighBits = false;
  TARGET static QuadCodes codes(const Block& a, const Block& b, const Block& c, const Block& d) {
    return quad_nibbles(a, b, c, d);
  }
  // x = d * q + m: the m term is m * sum(x), subtracted as -m.
  static constexpr float kOffsetScale = -1.0f;
  static constexpr size_t kOffsetAt = offsetof(Block, m);
};

// Q4_0: Q4_1 without m; x = d * (q - 8), the -8 term 8 * d * sum(x), as Q5_0's 16.
template <bool kVnniCodes>
struct Q4_0Traits {
  using Block = BlockQ4_0;
  static constexpr bool kVnni = kVnniCodes, kSigned = false, kOffset = true, kQuads = true,
                        kHighBits = false;
  TARGET static QuadCodes codes(const Block& a, const Block& b, const Block& c, const Block& d) {
    return quad_nibbles(a, b, c, d);
  }
  static constexpr float kOffsetScale = 8.0f;
  static constexpr size_t kOffsetAt = offsetof(Block, d);
};

template <bool kVnniCodes>
struct Q5_0Traits {
  using Block = BlockQ5_0;
  static constexpr bool kVnni = kVnniCodes, kSigned = false, kOffset = true;
  // Pairs of blocks, not quads: without BITALG the fifth bits of four blocks in the quads' order
  // cost more than the quads saved (measured 7 % slower on one core).
  static constexpr bool kQuads = false, kHighBits = false;
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

// Q5_0 in quads, with VNNI and BITALG: the fifth bits of a group's 8 blocks go into one register
// whose 128-bit lane m holds qh of blocks m and 4 + m in each 64-bit half (two word permutes of
// the loads that also give the scales); one vpshufbitqmb per 64 codes then picks, for each code
// byte, its bit from that lane (bit t or 16 + t of block 4s + m's qh for element t of the low
// or high nibbles), and a masked add puts 16 in.
struct Q5_0QuadTraits {
  using Block = BlockQ5_0;
  static constexpr bool kVnni = true, kSigned = false, kOffset = true, kQuads = true,
                        kHighBits = true;
  static constexpr size_t kQh = offsetof(Block, qh);
  // Word lane i: lane i / 8, dword (i % 8) / 2 of it: block i / 8 + 4 * (dword % 2), half i % 2.
  static constexpr int high_byte(int i) {
    const int block = i / 8 + 4 * ((i % 8) / 2 % 2);
    return static_cast<int>(sizeof(Block)) * block + static_cast<int>(kQh) + 2 * (i % 2);
  }
  // A row's last, partial group: as the quads read it, block min(p, n - 1) at position p.
  TARGET static __m512i group_high(const Block* w, int n) {
    if (n == 8) return group_words<sizeof(Block), high_byte>(reinterpret_cast<const uint8_t*>(w));
    alignas(64) uint32_t h[16];
    for (int i = 0; i < 16; ++i) {
      const int block = std::min(i / 4 + 4 * (i % 2), n - 1);
      std::memcpy(&h[i], w[block].qh, 4);
    }
    return _mm512_load_si512(h);
  }
  TARGET_Q static QuadCodes codes(const Block& a, const Block& b, const Block& c, const Block& d,
                                  __m512i high, int quad) {
    // Byte j of the low nibbles picks bit 32 * quad + j % 16 of its 64-bit half, the high
    // nibbles bit 32 * quad + 16 + j % 16.
    alignas(64) static constexpr std::array<std::array<uint8_t, 64>, 4> kBits = [] {
      std::array<std::array<uint8_t, 64>, 4> t{};
      for (int q = 0; q < 2; ++q)
        for (int half = 0; half < 2; ++half)
          for (int j = 0; j < 64; ++j)
            t[2 * q + half][j] = static_cast<uint8_t>(32 * q + 16 * half + j % 16);
      return t;
    }();
    const QuadCodes q = quad_nibbles(a, b, c, d);
    const __m512i sixteen = _mm512_set1_epi8(16);
    const __mmask64 klo =
        _mm512_bitshuffle_epi64_mask(high, _mm512_load_si512(kBits[2 * quad].data()));
    const __mmask64 khi =
        _mm512_bitshuffle_epi64_mask(high, _mm512_load_si512(kBits[2 * quad + 1].data()));
    return {_mm512_mask_add_epi8(q.lo, klo, q.lo, sixteen),
            _mm512_mask_add_epi8(q.hi, khi, q.hi, sixteen)};
  }
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
  static constexpr bool kVnni = kVnniCodes, kSigned = !kVnniCodes, kOffset = kVnniCodes,
                        kQuads = true, kHighBits = false;
  TARGET static QuadCodes codes(const Block& a, const Block& b, const Block& c, const Block& d) {
    const void* values = kVnniCodes ? static_cast<const void*>(kIq4nlShifted.v)
                                    : static_cast<const void*>(kIq4nlValues);
    const __m512i table =
        _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values)));
    const QuadCodes q = quad_nibbles(a, b, c, d);
    return {_mm512_shuffle_epi8(table, q.lo), _mm512_shuffle_epi8(table, q.hi)};
  }
  static constexpr float kOffsetScale = kVnniCodes ? 128.0f : 0.0f;
  static constexpr size_t kOffsetAt = offsetof(Block, d);
};

template <typename T>
TARGET_Q void rows32(const void* w, int64_t w_stride, int nw, const QuantRow* xs, int nr,
                     int64_t nb, float* out, int64_t ldo) {
  rows<typename T::Block, dot_blocks32_t<T, 1>, dot_blocks32_t<T, 2>, dot_blocks32_t<T, 4>>(
      w, w_stride, nw, xs, nr, nb, out, ldo);
}

}  // namespace

template <bool kVnni>
TARGET_VNNI void dot_blocks32(DType type, const void* w, int64_t w_stride, int nw,
                              const QuantRow* xs, int nr, int64_t nb, float* out, int64_t ldo) {
  switch (type) {
    case DType::kQ4_0:
      rows32<Q4_0Traits<kVnni>>(w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    case DType::kQ4_1:
      rows32<Q4_1Traits<kVnni>>(w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    case DType::kQ5_0:
      if (kVnni && has_extension(Avx512Extension::kBitalg)) {
        rows32<Q5_0QuadTraits>(w, w_stride, nw, xs, nr, nb, out, ldo);
      } else {
        rows32<Q5_0Traits<kVnni>>(w, w_stride, nw, xs, nr, nb, out, ldo);
      }
      break;
    case DType::kIQ4_NL:
      rows32<Iq4NlTraits<kVnni>>(w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    default:
      break;
  }
}

template void dot_blocks32<true>(DType, const void*, int64_t, int, const QuantRow*, int, int64_t,
                                 float*, int64_t);
template void dot_blocks32<false>(DType, const void*, int64_t, int, const QuantRow*, int, int64_t,
                                  float*, int64_t);

}  // namespace cutline::device::cpu::avx512
#endif
