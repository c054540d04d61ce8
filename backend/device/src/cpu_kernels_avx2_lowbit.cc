// AVX2 integer kernels for Q5_K, Q3_K, Q2_K, IQ4_XS, Q4_0, Q4_1, Q5_0 and IQ4_NL times int8
// activations: the algorithm of cpu_kernels_avx512_lowbit.cc (codes as bytes times int8
// activations pairwise into int16 with vpmaddubsw, then times the sub-block scales into int32)
// on 32 elements per instruction, with 8 int32 / F32 lanes, so other lane groupings and other
// rounding than AVX-512. Also the int8 activation quantizer they read (QuantRow q8, d8, sums8).
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cpu_kernels_avx2_lowbit.h"

#define TARGET __attribute__((target("avx2,fma,f16c")))

namespace cutline::device::cpu::avx2 {
namespace {

TARGET inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

TARGET inline __m256i load32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// Scales a and b for int16 lanes 0-7 and 8-15 (two 16-element sub-blocks of 32 elements).
TARGET inline __m256i scale_pair(int a, int b) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(b)),
                          _mm_set1_epi16(static_cast<int16_t>(a)));
}

// |w| * (sign(w) * x) pairwise for signed weight bytes (|w| <= 127).
TARGET inline __m256i mul_signed(__m256i w, __m256i x) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

// Q5_K: per 32 elements the 4-bit codes with the fifth bit from qh, times the 6-bit scale;
// mins from the 32-element sums.
template <int NR>
TARGET void dot_q5_k_t(const BlockQ5_K* w, const QuantRow* xs, int64_t nb, float* out,
                       int64_t ldo) {
  __m256 facc[NR], fmin[NR];
  for (int r = 0; r < NR; ++r) facc[r] = fmin[r] = _mm256_setzero_ps();
  const __m256i low4 = _mm256_set1_epi8(0xF), bit4 = _mm256_set1_epi8(0x10);
  for (int64_t bi = 0; bi < nb; ++bi) {
    const BlockQ5_K& b = w[bi];
    alignas(16) uint8_t sc[8], mn[8];
    q4_k_scales_mins(b.scales, sc, mn);
    const float d = _cvtsh_ss(b.d), dmin = _cvtsh_ss(b.dmin);
    const __m256 mf = _mm256_mul_ps(_mm256_set1_ps(dmin),
                                    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                                        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn)))));
    __m256i h = load32(b.qh);
    __m256i iacc[NR];
    for (int r = 0; r < NR; ++r) iacc[r] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i v = load32(b.qs + 32 * c);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, low4),
                                         _mm256_and_si256(_mm256_slli_epi16(h, 4), bit4));
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4),
                                         _mm256_and_si256(_mm256_slli_epi16(h, 3), bit4));
      h = _mm256_srli_epi16(h, 2);
      const __m256i s_lo = _mm256_set1_epi16(sc[2 * c]), s_hi = _mm256_set1_epi16(sc[2 * c + 1]);
      for (int r = 0; r < NR; ++r) {
        const int8_t* x = xs[r].q8 + bi * kQK_K + 64 * c;
        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load32(x)), s_lo);
        const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load32(x + 32)), s_hi);
        iacc[r] = _mm256_add_epi32(iacc[r], _mm256_add_epi32(p0, p1));
      }
    }
    for (int r = 0; r < NR; ++r) {
      facc[r] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[r]), _mm256_set1_ps(d * xs[r].d8[bi]), facc[r]);
      fmin[r] = _mm256_fmadd_ps(mf, _mm256_loadu_ps(xs[r].sums8 + 8 * bi), fmin[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = hsum(facc[r]) - hsum(fmin[r]);
}

// Q2_K (kQ3 = false) and Q3_K (kQ3 = true): 2-bit codes (plus Q3_K's high bit as bit 2) per 32
// elements times the two 16-element sub-blocks' scales. Q2_K's mins and Q3_K's -4 offset come
// out exactly in integers from the 16-element sums (QuantRow::sums16).
template <bool kQ3, int NR>
TARGET void dot_q23_k_t(const void* wv, const QuantRow* xs, int64_t nb, float* out, int64_t ldo) {
  using Block = std::conditional_t<kQ3, BlockQ3_K, BlockQ2_K>;
  const Block* w = static_cast<const Block*>(wv);
  __m256 facc[NR], foff[NR];
  for (int r = 0; r < NR; ++r) facc[r] = foff[r] = _mm256_setzero_ps();
  const __m256i low2 = _mm256_set1_epi8(3), bit2 = _mm256_set1_epi8(4);
  for (int64_t bi = 0; bi < nb; ++bi) {
    const Block& b = w[bi];
    alignas(32) int16_t sc[16], off[16];
    float d, doff;
    if constexpr (kQ3) {
      uint8_t u6[16];
      q3_k_scales_u6(b.scales, u6);
      for (int j = 0; j < 16; ++j) sc[j] = off[j] = static_cast<int16_t>(u6[j] - 32);
      d = _cvtsh_ss(b.d);
      doff = 4.0f * d;
    } else {
      for (int j = 0; j < 16; ++j) {
        sc[j] = b.scales[j] & 0xF;
        off[j] = b.scales[j] >> 4;
      }
      d = _cvtsh_ss(b.d);
      doff = _cvtsh_ss(b.dmin);
    }
    const __m256i off16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(off));
    __m256i h = _mm256_setzero_si256();
    if constexpr (kQ3) h = load32(b.hmask);
    __m256i iacc[NR];
    for (int r = 0; r < NR; ++r) iacc[r] = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      __m256i q = load32(b.qs + 32 * half);
      for (int j = 0; j < 4; ++j) {  // elements 128 * half + 32 * j + l: bits 2j of byte l
        __m256i wq = _mm256_and_si256(q, low2);
        q = _mm256_srli_epi16(q, 2);
        if constexpr (kQ3) {
          wq = _mm256_or_si256(wq, _mm256_and_si256(_mm256_slli_epi16(h, 2), bit2));
          h = _mm256_srli_epi16(h, 1);
        }
        const int s = 8 * half + 2 * j;
        const __m256i scv = scale_pair(sc[s], sc[s + 1]);
        for (int r = 0; r < NR; ++r) {
          const __m256i p =
              _mm256_maddubs_epi16(wq, load32(xs[r].q8 + bi * kQK_K + 128 * half + 32 * j));
          iacc[r] = _mm256_add_epi32(iacc[r], _mm256_madd_epi16(p, scv));
        }
      }
    }
    for (int r = 0; r < NR; ++r) {
      const float dx = xs[r].d8[bi];
      const __m256i oi = _mm256_madd_epi16(off16, load32(xs[r].sums16 + 16 * bi));
      facc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[r]), _mm256_set1_ps(d * dx), facc[r]);
      foff[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(oi), _mm256_set1_ps(doff * dx), foff[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = hsum(facc[r]) - hsum(foff[r]);
}

// 16 nibble bytes in element order: [lo(q), hi(q)].
TARGET inline __m256i nibbles(const uint8_t* q) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
  return _mm256_and_si256(both, _mm256_set1_epi8(0xF));
}

TARGET inline __m256i iq4_table() {
  return _mm256_broadcastsi128_si256(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
}

// IQ4_XS: table values times the signed 6-bit scale per 32 elements.
template <int NR>
TARGET void dot_iq4_xs_t(const BlockIQ4_XS* w, const QuantRow* xs, int64_t nb, float* out,
                         int64_t ldo) {
  __m256 facc[NR];
  for (int r = 0; r < NR; ++r) facc[r] = _mm256_setzero_ps();
  const __m256i table = iq4_table();
  for (int64_t bi = 0; bi < nb; ++bi) {
    const BlockIQ4_XS& b = w[bi];
    const float d = _cvtsh_ss(b.d);
    __m256i iacc[NR];
    for (int r = 0; r < NR; ++r) iacc[r] = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const __m256i vals = _mm256_shuffle_epi8(table, nibbles(b.qs + 16 * ib));
      const __m256i scv = _mm256_set1_epi16(static_cast<int16_t>(iq4_xs_scale(b, ib)));
      for (int r = 0; r < NR; ++r) {
        const __m256i p = mul_signed(vals, load32(xs[r].q8 + bi * kQK_K + 32 * ib));
        iacc[r] = _mm256_add_epi32(iacc[r], _mm256_madd_epi16(p, scv));
      }
    }
    for (int r = 0; r < NR; ++r)
      facc[r] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[r]), _mm256_set1_ps(d * xs[r].d8[bi]), facc[r]);
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = hsum(facc[r]);
}

struct Q4_0Traits {
  using Block = BlockQ4_0;
  static constexpr bool kSigned = false;
  TARGET static __m256i codes(const Block& a) { return nibbles(a.qs); }
  TARGET static float offset(const Block& a) { return 8.0f * _cvtsh_ss(a.d); }  // x = d * (q - 8)
};
struct Q4_1Traits {
  using Block = BlockQ4_1;
  static constexpr bool kSigned = false;
  TARGET static __m256i codes(const Block& a) { return nibbles(a.qs); }
  TARGET static float offset(const Block& a) { return -_cvtsh_ss(a.m); }  // x = d * q + m
};

struct Q5_0Traits {
  using Block = BlockQ5_0;
  static constexpr bool kSigned = false;
  TARGET static __m256i codes(const Block& a) {
    uint32_t h;
    std::memcpy(&h, a.qh, 4);
    // Byte i gets bit i of qh: spread the 32 bits to bytes, test each byte's own bit.
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(static_cast<int>(h)),
        _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
    const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_or_si256(nibbles(a.qs), _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
  }
  TARGET static float offset(const Block& a) { return 16.0f * _cvtsh_ss(a.d); }  // x = d * (q - 16)
};

struct Iq4NlTraits {
  using Block = BlockIQ4_NL;
  static constexpr bool kSigned = true;
  TARGET static __m256i codes(const Block& a) {
    return _mm256_shuffle_epi8(iq4_table(), nibbles(a.qs));
  }
  TARGET static float offset(const Block&) { return 0.0f; }
};

// 32-element blocks: per block 8 int32 lanes scaled by the block's d into one of two F32 partial
// sums (block parity) per 256 activations, then by d8; the offsets (Q4_1's m, Q5_0's -16) from
// the 32-element sums, subtracted at the end.
template <typename Traits, int NR>
TARGET void dot_blocks32_t(const void* wv, const QuantRow* xs, int64_t nb, float* out,
                           int64_t ldo) {
  const auto* w = static_cast<const typename Traits::Block*>(wv);
  constexpr int64_t kPer = kQBlock / 32;
  __m256 facc[NR];
  float off[NR];
  for (int r = 0; r < NR; ++r) {
    facc[r] = _mm256_setzero_ps();
    off[r] = 0;
  }
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t b0 = 0; b0 < nb; b0 += kPer) {
    const int64_t b1 = std::min(nb, b0 + kPer);
    __m256 part[2][NR];
    for (int r = 0; r < NR; ++r) part[0][r] = part[1][r] = _mm256_setzero_ps();
    for (int64_t bi = b0; bi < b1; ++bi) {
      const auto& a = w[bi];
      const __m256i wq = Traits::codes(a);
      const __m256 dw = _mm256_set1_ps(_cvtsh_ss(a.d));
      const float oa = Traits::offset(a);
      for (int r = 0; r < NR; ++r) {
        const __m256i x = load32(xs[r].q8 + bi * 32);
        __m256i p;
        if constexpr (Traits::kSigned) {
          p = mul_signed(wq, x);
        } else {
          p = _mm256_maddubs_epi16(wq, x);
        }
        __m256& acc = part[(bi - b0) & 1][r];
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)), dw, acc);
        off[r] += oa * xs[r].sums8[bi];
      }
    }
    for (int r = 0; r < NR; ++r)
      facc[r] = _mm256_fmadd_ps(_mm256_add_ps(part[0][r], part[1][r]),
                                _mm256_set1_ps(xs[r].d8[b0 / kPer]), facc[r]);
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = hsum(facc[r]) - off[r];
}

using DotFn = void (*)(const void*, const QuantRow*, int64_t, float*, int64_t);

template <DotFn Fn1, DotFn Fn2, DotFn Fn4>
TARGET void rows(const void* w, int64_t w_stride, int nw, const QuantRow* xs, int nr, int64_t nb,
                 float* out, int64_t ldo) {
  for (int a = 0; a < nw; ++a) {
    const void* wb = static_cast<const uint8_t*>(w) + a * w_stride;
    int r = 0;
    for (; r + 4 <= nr; r += 4) Fn4(wb, xs + r, nb, out + r * ldo + a, ldo);
    for (; r + 2 <= nr; r += 2) Fn2(wb, xs + r, nb, out + r * ldo + a, ldo);
    for (; r < nr; ++r) Fn1(wb, xs + r, nb, out + r * ldo + a, ldo);
  }
}

template <typename Block, void (*Fn)(const Block*, const QuantRow*, int64_t, float*, int64_t)>
TARGET void erase(const void* w, const QuantRow* xs, int64_t nb, float* out, int64_t ldo) {
  Fn(static_cast<const Block*>(w), xs, nb, out, ldo);
}

}  // namespace

TARGET void quantize_row_x8(const float* x, int64_t k, int8_t* q8, float* d8, float* sums8) {
  const int64_t kp = qrow_padded(k);
  alignas(32) float tail[kQBlock];
  const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(3.4028235e38f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b0 = 0; b0 < kp; b0 += kQBlock) {
    const float* xb = x + b0;
    if (k - b0 < kQBlock) {  // the last, partial block: zero-padded copy
      std::memset(tail, 0, sizeof tail);
      std::memcpy(tail, xb, (k - b0) * 4);
      xb = tail;
    }
    __m256 amax = _mm256_setzero_ps();
    int non_finite = 0;
    for (int64_t i = 0; i < kQBlock; i += 8) {
      const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + i));
      non_finite |= _mm256_movemask_ps(_mm256_cmp_ps(a, big, _CMP_NLE_UQ));  // NaN or Inf
      amax = _mm256_max_ps(amax, a);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float mx = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    // NaN or Inf: a NaN scale makes every dot product reading the block NaN.
    const float db = non_finite != 0 ? std::numeric_limits<float>::quiet_NaN() : mx / 127.0f;
    const __m256 id = _mm256_set1_ps(non_finite == 0 && mx > 0 ? 127.0f / mx : 0.0f);
    d8[b0 / kQBlock] = db;
    for (int64_t g = 0; g < kQBlock; g += kQGroup) {
      __m256i v[4];
      for (int j = 0; j < 4; ++j)
        v[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + g + 8 * j), id));
      const __m256i gs =
          _mm256_add_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3]));
      const __m256i packed = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3])),
          order);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q8 + b0 + g), packed);
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(gs), _mm256_extracti128_si256(gs, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
      sums8[(b0 + g) / kQGroup] = db * static_cast<float>(_mm_cvtsi128_si32(s4));
    }
  }
}

bool reads_x8(DType type) {
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

TARGET bool dot_block_q_lowbit(DType type, const void* w, int64_t w_stride, int nw,
                               const QuantRow* xs, int nr, int64_t k, float* out, int64_t ldo) {
  if (!reads_x8(type)) return false;
  if (nr == 0) return true;
  const int64_t nb = k / block_elems(type);
  switch (type) {
    case DType::kQ5_K:
      rows<erase<BlockQ5_K, dot_q5_k_t<1>>, erase<BlockQ5_K, dot_q5_k_t<2>>,
           erase<BlockQ5_K, dot_q5_k_t<4>>>(w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    case DType::kQ2_K:
      rows<dot_q23_k_t<false, 1>, dot_q23_k_t<false, 2>, dot_q23_k_t<false, 4>>(w, w_stride, nw, xs,
                                                                                nr, nb, out, ldo);
      break;
    case DType::kQ3_K:
      rows<dot_q23_k_t<true, 1>, dot_q23_k_t<true, 2>, dot_q23_k_t<true, 4>>(w, w_stride, nw, xs,
                                                                             nr, nb, out, ldo);
      break;
    case DType::kIQ4_XS:
      rows<erase<BlockIQ4_XS, dot_iq4_xs_t<1>>, erase<BlockIQ4_XS, dot_iq4_xs_t<2>>,
           erase<BlockIQ4_XS, dot_iq4_xs_t<4>>>(w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    case DType::kQ4_0:
      rows<dot_blocks32_t<Q4_0Traits, 1>, dot_blocks32_t<Q4_0Traits, 2>,
           dot_blocks32_t<Q4_0Traits, 4>>(w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    case DType::kQ4_1:
      rows<dot_blocks32_t<Q4_1Traits, 1>, dot_blocks32_t<Q4_1Traits, 2>,
           dot_blocks32_t<Q4_1Traits, 4>>(w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    case DType::kQ5_0:
      rows<dot_blocks32_t<Q5_0Traits, 1>, dot_blocks32_t<Q5_0Traits, 2>,
           dot_blocks32_t<Q5_0Traits, 4>>(w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    case DType::kIQ4_NL:
      rows<dot_blocks32_t<Iq4NlTraits, 1>, dot_blocks32_t<Iq4NlTraits, 2>,
           dot_blocks32_t<Iq4NlTraits, 4>>(w, w_stride, nw, xs, nr, nb, out, ldo);
      break;
    default:
      return false;
  }
  return true;
}

}  // namespace cutline::device::cpu::avx2
#endif
