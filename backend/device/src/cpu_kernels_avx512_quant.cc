// AVX-512 integer kernels (cpu_kernels_avx512_quant.h): weights read in their blocks times
// quantized activations (cpu_kernels.h QuantRow): int8 per 256 elements for Q4_K and Q6_K, int8
// per 32 for Q8_0 with VNNI (int16 per 256 without). The F32 tile kernels and the
// dequantizers are in cpu_kernels_avx512.cc.
#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's AVX-512 intrinsic headers
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "cpu_kernels_avx512_quant.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <limits>

#include "cpu_kernels_avx512_int8.h"

#define TARGET CUTLINE_AVX512_TARGET
#define TARGET_VNNI CUTLINE_AVX512_VNNI_TARGET

namespace cutline::device::cpu::avx512 {
namespace {

// One activation row quantized per kQBlock elements to kMax steps (QuantRow: 32767 for q,
// 127 for q8): d = amax / kMax, q = x / d rounded to nearest, sums[g] = d * (sum of q over group
// g). A NaN or Inf makes the block's scale NaN, so that every dot product reading it is NaN as
// with F32 activations (the model reports non-finite logits rather than sampling them).
template <typename Q, int kMax>
TARGET void quantize_row_t(const float* x, int64_t k, Q* q, float* d, float* sums) {
  const int64_t kp = qrow_padded(k);
  auto lanes = [](int64_t left) TARGET {
    left = std::max<int64_t>(0, std::min<int64_t>(16, left));
    return left == 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << left) - 1);
  };
  for (int64_t b0 = 0; b0 < kp; b0 += kQBlock) {
    const int64_t n = std::min<int64_t>(kQBlock, k - b0);
    __m512 amax = _mm512_setzero_ps();
    __mmask16 non_finite = 0;
    for (int64_t i = 0; i < kQBlock; i += 16) {
      const __m512 v = _mm512_maskz_loadu_ps(lanes(n - i), x + b0 + i);
      non_finite |= _mm512_fpclass_ps_mask(v, 0x99);  // NaN or +-Inf
      amax = _mm512_max_ps(amax, _mm512_abs_ps(v));
    }
    const float mx = _mm512_reduce_max_ps(amax);
    const float db =
        non_finite != 0 ? std::numeric_limits<float>::quiet_NaN() : mx / static_cast<float>(kMax);
    const __m512 id =
        _mm512_set1_ps(non_finite == 0 && mx > 0 ? static_cast<float>(kMax) / mx : 0.0f);
    d[b0 / kQBlock] = db;
    for (int64_t g = 0; g < kQBlock; g += kQGroup) {
      __m512i gs = _mm512_setzero_si512();
      for (int64_t i = g; i < g + kQGroup; i += 16) {
        const __m512i v =
            _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(lanes(n - i), x + b0 + i), id));
        gs = _mm512_add_epi32(gs, v);
        if constexpr (sizeof(Q) == 2) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b0 + i), _mm512_cvtsepi32_epi16(v));
        } else {
          _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b0 + i), _mm512_cvtsepi32_epi8(v));
        }
      }
      sums[(b0 + g) / kQGroup] = db * static_cast<float>(_mm512_reduce_add_epi32(gs));
    }
  }
}

// Q4_K x int8 for NR activation rows of one weight row, as llama.cpp's K-quant dot products do
// it: per 64 elements (two 32-element sub-blocks) the 4-bit weights as bytes times the int8
// activations, pairwise into 32 int16 lanes (vpmaddubsw; |.| <= 2 * 15 * 127, no saturation),
// then times the sub-blocks' 6-bit scales pairwise into 16 int32 lanes, summed over the block
// exactly; scaled by d * d8 into 16 F32 lanes. The min terms dmin * m_j * sum_j(x) use the int8
// row's group sums (QuantRow::sums8) and go to 8 F32 lanes. The per-row sequence does not
// depend on NR. This is 6 vector operations per 64 weights for one row against 10 for int16
// activations, which is what batch-1 decode of a Q4_K model is bound by.
template <int NR, bool kVnni>
TARGET_VNNI void dot_q4_k_t(const BlockQ4_K* w, const QuantRow* xs, int64_t nb, float* out,
                            int64_t ldo) {
  __m512 facc[NR];
  __m256 fmin[NR];
  for (int r = 0; r < NR; ++r) {
    facc[r] = _mm512_setzero_ps();
    fmin[r] = _mm256_setzero_ps();
  }
  const __m512i low4 = _mm512_set1_epi8(0xF);
  // int16 lanes 0-15 take scale 2c, lanes 16-31 scale 2c + 1.
  __m512i scale_sel[4];
  for (int c = 0; c < 4; ++c) scale_sel[c] = sub_block_scales(2 * c);
  for (int64_t bi = 0; bi < nb; ++bi) {
    const BlockQ4_K& b = w[bi];
    const auto [sc, mf, d] = k4_scales_mins(&b);
    // Integer sums are exact in any order: one row spreads its products over two accumulators
    // to keep the multiply-add latency off a single chain.
    constexpr int kAcc = NR <= 2 ? 2 : 1;
    __m512i iacc[NR][kAcc];
    for (int r = 0; r < NR; ++r)
      for (int j = 0; j < kAcc; ++j) iacc[r][j] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      // 32 bytes hold elements 64c..64c+31 (low nibbles) and 64c+32..64c+63 (high nibbles):
      // both halves of one register, low nibbles first, to line up with the activations.
      const __m512i v = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c)));
      const __m512i wq = _mm512_and_si512(_mm512_mask_srli_epi16(v, 0xFFFF0000u, v, 4), low4);
      const __m512i scv = _mm512_shuffle_epi8(sc, scale_sel[c]);
      for (int r = 0; r < NR; ++r) {
        const __m512i p =
            _mm512_maddubs_epi16(wq, _mm512_loadu_si512(xs[r].q8 + bi * kQK_K + 64 * c));
        __m512i& acc = iacc[r][c % kAcc];
        if constexpr (kVnni) {
          acc = _mm512_dpwssd_epi32(acc, p, scv);
        } else {
          acc = _mm512_add_epi32(acc, _mm512_madd_epi16(p, scv));
        }
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

// Q6_K x int8 for NR activation rows of one weight row, as llama.cpp's K-quant dot products do
// it: per 64 elements the 6-bit weights q (0..63) as bytes times the int8 activations, pairwise
// into 32 int16 lanes (vpmaddubsw; |.| <= 2 * 63 * 128, no saturation), then times the 16-element
// groups' scales pairwise into 16 int32 lanes, summed over the block exactly; the offset of 32
// comes off in integers as 32 * sum_g scale_g * (sum of the group's activations, sums16). Scaled
// by d * d8 into 16 F32 lanes. The per-row sequence does not depend on NR.
template <int NR, bool kVnni>
TARGET_VNNI void dot_q6_k_x8_t(const BlockQ6_K* w, const QuantRow* xs, int64_t nb, float* out,
                               int64_t ldo) {
  __m512 facc[NR];
  for (int r = 0; r < NR; ++r) facc[r] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0xF), hi2 = _mm512_set1_epi8(0x30);
  // vpermw indices: in the 64 elements 64m.., int16 lane l (elements 2l, 2l + 1) takes the
  // scale of group 4m + l / 8.
  alignas(64) static constexpr auto kScaleIdx = [] {
    std::array<std::array<int16_t, 32>, 4> idx{};
    for (int m = 0; m < 4; ++m)
      for (int l = 0; l < 32; ++l) idx[m][l] = static_cast<int16_t>(4 * m + l / 8);
    return idx;
  }();
  for (int64_t bi = 0; bi < nb; ++bi) {
    const BlockQ6_K& b = w[bi];
    const float d = _cvtsh_ss(b.d);
    const __m256i sc =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    const __m512i sc16 = _mm512_castsi256_si512(sc);
    __m512i iacc[NR];
    for (int r = 0; r < NR; ++r) {
      // -32 * sum_g scale_g * sums16_g, in the first 8 int32 lanes.
      const __m256i off = _mm256_madd_epi16(
          sc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs[r].sums16 + 16 * bi)));
      iacc[r] = _mm512_zextsi256_si512(
          _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5)));
    }
    for (int h = 0; h < 2; ++h) {
      // ql + 64h: elements 128h + 0..31 (low nibbles of the first 32 bytes), 32..63 (low
      // nibbles of the next 32), 64..95 and 96..127 (their high nibbles); qh + 32h: their top
      // two bits at shifts 0, 2, 4 and 6.
      const __m512i l = _mm512_loadu_si512(b.ql + 64 * h);
      const __m512i qb = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h)));
      const __m512i qs = _mm512_mask_srli_epi16(qb, 0xFFFF0000u, qb, 2);
      const __m512i wq[2] = {_mm512_or_si512(_mm512_and_si512(l, low4),
                                             _mm512_and_si512(_mm512_slli_epi16(qs, 4), hi2)),
                             _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4),
                                             _mm512_and_si512(qs, hi2))};
      for (int m = 0; m < 2; ++m) {
        const __m512i scv =
            _mm512_permutexvar_epi16(_mm512_load_si512(kScaleIdx[2 * h + m].data()), sc16);
        for (int r = 0; r < NR; ++r) {
          const __m512i p = _mm512_maddubs_epi16(
              wq[m], _mm512_loadu_si512(xs[r].q8 + bi * kQK_K + 128 * h + 64 * m));
          if constexpr (kVnni) {
            iacc[r] = _mm512_dpwssd_epi32(iacc[r], p, scv);
          } else {
            iacc[r] = _mm512_add_epi32(iacc[r], _mm512_madd_epi16(p, scv));
          }
        }
      }
    }
    for (int r = 0; r < NR; ++r)
      facc[r] =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[r]), _mm512_set1_ps(d * xs[r].d8[bi]), facc[r]);
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = _mm512_reduce_add_ps(facc[r]);
}

// Q8_0 x int16: per 32-element block the int8 weights as int16, multiplied with the activations
// pairwise into 16 int32 lanes (exact), converted and scaled by d_w into one of two F32 partial
// sums (block parity) per kQBlock activation block, which is then scaled by d_x into the row's
// accumulator. The per-row sequence does not depend on NR.
template <int NR>
TARGET void dot_q8_0_t(const BlockQ8_0* w, const QuantRow* xs, int64_t nb, float* out,
                       int64_t ldo) {
  constexpr int64_t kPer = kQBlock / kQK8_0;
  __m512 facc[NR];
  for (int r = 0; r < NR; ++r) facc[r] = _mm512_setzero_ps();
  for (int64_t b0 = 0; b0 < nb; b0 += kPer) {
    const int64_t b1 = std::min(nb, b0 + kPer);
    __m512 even[NR], odd[NR];
    for (int r = 0; r < NR; ++r) even[r] = odd[r] = _mm512_setzero_ps();
    auto block = [&](int64_t bi, __m512* part) TARGET {
      const __m512i w16 =
          _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[bi].qs)));
      const __m512 dw = _mm512_set1_ps(_cvtsh_ss(w[bi].d));
      for (int r = 0; r < NR; ++r) {
        const __m512i p = _mm512_madd_epi16(w16, _mm512_loadu_si512(xs[r].q + bi * kQK8_0));
        part[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), dw, part[r]);
      }
    };
    int64_t bi = b0;
    for (; bi + 2 <= b1; bi += 2) {
      block(bi, even);
      block(bi + 1, odd);
    }
    if (bi < b1) block(bi, even);
    for (int r = 0; r < NR; ++r)
      facc[r] = _mm512_fmadd_ps(_mm512_add_ps(even[r], odd[r]), _mm512_set1_ps(xs[r].d[b0 / kPer]),
                                facc[r]);
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = _mm512_reduce_add_ps(facc[r]);
}

// One activation row as int8 per kQGroup elements plus 128 (QuantRow::qg, dg), a group at a
// time. A NaN or Inf makes its group's scale NaN, as in quantize_row_t.
TARGET void quantize_row_g(const float* x, int64_t k, uint8_t* qg, float* dg) {
  const int64_t kp = qrow_padded(k);
  auto lanes = [](int64_t left) TARGET {
    left = std::max<int64_t>(0, std::min<int64_t>(16, left));
    return left == 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << left) - 1);
  };
  const __m512i bias = _mm512_set1_epi32(128);
  for (int64_t i0 = 0; i0 < kp; i0 += kQGroup) {
    const __m512 a = _mm512_maskz_loadu_ps(lanes(k - i0), x + i0);
    const __m512 b = _mm512_maskz_loadu_ps(lanes(k - i0 - 16), x + i0 + 16);
    const __mmask16 non_finite =
        _mm512_fpclass_ps_mask(a, 0x99) | _mm512_fpclass_ps_mask(b, 0x99);  // NaN or +-Inf
    const float mx = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
    const float d = non_finite != 0 ? std::numeric_limits<float>::quiet_NaN() : mx / 127.0f;
    _mm_storeu_ps(dg + 4 * (i0 / kQGroup), _mm_set1_ps(d));
    const __m512 id = _mm512_set1_ps(non_finite == 0 && mx > 0 ? 127.0f / mx : 0.0f);
    // Group g of a quad: elements 0-15 at bytes 16g, 16-31 at bytes 64 + 16g.
    uint8_t* dst = qg + i0 / (4 * kQGroup) * (4 * kQGroup) + 16 * (i0 / kQGroup % 4);
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(dst),
        _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(a, id)), bias)));
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(dst + 64),
        _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(b, id)), bias)));
  }
}

// Four Q8_0 blocks laid out like the int8 activations (QuantRow::qg): lo holds elements 0-15 of
// the four blocks, hi elements 16-31, so that int32 lane j of both belongs to block j / 4; corr is
// -128 * (the sum of the weights of each lane), dw each block's scale in its 4 lanes.
struct Q8_0Quad {
  __m512i lo, hi, corr;
  __m512 dw;
};

// Blocks bi .. bi + n - 1 (n <= 4; the others count as zero), reading only their bytes.
TARGET_VNNI inline Q8_0Quad q8_0_quad(const BlockQ8_0* w, int64_t bi, int n) {
  const auto half = [&](int off) TARGET_VNNI {
    const auto at = [&](int j) TARGET_VNNI {
      return j < n ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[bi + j].qs + off))
                   : _mm_setzero_si128();
    };
    return _mm512_inserti32x4(
        _mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(at(0)), at(1), 1), at(2), 2),
        at(3), 3);
  };
  Q8_0Quad q;
  q.lo = half(0);
  q.hi = half(16);
  const __m512i k128 = _mm512_set1_epi8(static_cast<char>(0x80));
  q.corr = _mm512_sub_epi32(
      _mm512_setzero_si512(),
      _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), k128, q.lo), k128, q.hi));
  const auto d = [&](int j) { return static_cast<int16_t>(j < n ? w[bi + j].d : 0); };
  const __m128i dh = _mm_setr_epi16(d(0), d(1), d(2), d(3), 0, 0, 0, 0);
  const __m512i spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  q.dw = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_cvtph_ps(dh)));
  return q;
}

// One quad (blocks bi..bi + 3) times NR activation rows, into acc: the quad's weights times the
// activations plus 128 (vpdpbusd: unsigned x signed, 4 products per lane), both halves into one
// sum that starts from corr, so that each lane holds the exact integer dot product of 8 elements
// of one block; converted, and scaled by d_w * d_x of its block.
template <int NR>
TARGET_VNNI inline void q8_0_quad_rows(const Q8_0Quad& q, const QuantRow* xs, int64_t bi,
                                       __m512* acc) {
#pragma GCC unroll 8
  for (int r = 0; r < NR; ++r) {
    const uint8_t* x = xs[r].qg + kQK8_0 * bi;
    __m512i s = _mm512_dpbusd_epi32(q.corr, _mm512_loadu_si512(x), q.lo);
    s = _mm512_dpbusd_epi32(s, _mm512_loadu_si512(x + 64), q.hi);
    const __m512 scale = _mm512_mul_ps(q.dw, _mm512_loadu_ps(xs[r].dg + 4 * bi));
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), scale, acc[r]);
  }
}

// Q8_0 x int8 per 32 (QuantRow::qg, dg) with VNNI, for NR activation rows of one weight row, a
// quad of blocks at a time (q8_0_quad_rows) into one of two F32 accumulators (quad parity): 5
// vector operations per 128 weights per row, against 12 with int16 activations. The per-row
// sequence does not depend on NR, nor on whether the quads come from the blocks in place or from
// a panel prepared by pack_wq.
template <int NR>
TARGET_VNNI void dot_q8_0_g_t(const BlockQ8_0* w, const QuantRow* xs, int64_t nb, float* out,
                              int64_t ldo) {
  __m512 acc[2][NR];
  for (int r = 0; r < NR; ++r) acc[0][r] = acc[1][r] = _mm512_setzero_ps();
  int64_t bi = 0;
  for (; bi + 8 <= nb; bi += 8) {
    q8_0_quad_rows<NR>(q8_0_quad(w, bi, 4), xs, bi, acc[0]);
    q8_0_quad_rows<NR>(q8_0_quad(w, bi + 4, 4), xs, bi + 4, acc[1]);
  }
  for (int p = 0; bi < nb; bi += 4, p ^= 1) {
    const int n = static_cast<int>(std::min<int64_t>(4, nb - bi));
    q8_0_quad_rows<NR>(n == 4 ? q8_0_quad(w, bi, 4) : q8_0_quad(w, bi, n), xs, bi, acc[p]);
  }
  for (int r = 0; r < NR; ++r)
    out[r * ldo] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][r], acc[1][r]));
}

// The same over a prepared row: quads[i] is q8_0_quad of blocks 4i..4i + 3.
template <int NR>
TARGET_VNNI void dot_q8_0_p_t(const Q8_0Quad* quads, const QuantRow* xs, int64_t nb, float* out,
                              int64_t ldo) {
  __m512 acc[2][NR];
  for (int r = 0; r < NR; ++r) acc[0][r] = acc[1][r] = _mm512_setzero_ps();
  const int64_t nq = (nb + 3) / 4;
  int64_t i = 0;
  for (; i + 2 <= nq; i += 2) {
    q8_0_quad_rows<NR>(quads[i], xs, 4 * i, acc[0]);
    q8_0_quad_rows<NR>(quads[i + 1], xs, 4 * i + 4, acc[1]);
  }
  if (i < nq) q8_0_quad_rows<NR>(quads[i], xs, 4 * i, acc[0]);
  for (int r = 0; r < NR; ++r)
    out[r * ldo] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][r], acc[1][r]));
}

}  // namespace

bool has_extension(Avx512Extension ext) {
  static const std::array<bool, 4> yes = [] {
    __builtin_cpu_init();
    auto ok = [](bool cpu, Avx512Extension e) { return cpu && avx512_extension_allowed(e); };
    return std::array<bool, 4>{ok(__builtin_cpu_supports("avx512vnni"), Avx512Extension::kVnni),
                               ok(__builtin_cpu_supports("avx512vbmi"), Avx512Extension::kVbmi),
                               ok(__builtin_cpu_supports("avx512bitalg"), Avx512Extension::kBitalg),
                               ok(__builtin_cpu_supports("gfni"), Avx512Extension::kGfni)};
  }();
  return yes[static_cast<size_t>(ext)];
}

bool has_vnni() { return has_extension(Avx512Extension::kVnni); }

TARGET void quantize_row_x(const float* x, int64_t k, int16_t* q, float* d, float* sums) {
  quantize_row_t<int16_t, 32767>(x, k, q, d, sums);
}

TARGET void quantize_row_x8(const float* x, int64_t k, int8_t* q8, float* d8, float* sums8) {
  quantize_row_t<int8_t, 127>(x, k, q8, d8, sums8);
}

TARGET void quantize_row_xg(const float* x, int64_t k, uint8_t* qg, float* dg) {
  quantize_row_g(x, k, qg, dg);
}

bool reads_xg(DType type) { return type == DType::kQ8_0 && has_vnni(); }

bool reads_x8(DType type) {
  return type == DType::kQ4_K || type == DType::kQ6_K || reads_x8_lowbit(type);
}

int64_t packed_q_bytes(DType type, int64_t k) {
  if (type != DType::kQ8_0 || !has_vnni() || k % kQK8_0 != 0) return 0;
  return (k / kQK8_0 + 3) / 4 * static_cast<int64_t>(sizeof(Q8_0Quad));
}

TARGET void pack_wq(DType type, const void* w, int64_t w_stride, int nw, int64_t k, void* dst) {
  if (packed_q_bytes(type, k) == 0) return;
  const int64_t nb = k / kQK8_0, nq = (nb + 3) / 4;
  auto* out = static_cast<Q8_0Quad*>(dst);
  for (int a = 0; a < nw; ++a) {
    const auto* row =
        reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(w) + a * w_stride);
    for (int64_t i = 0; i < nq; ++i) {
      const int n = static_cast<int>(std::min<int64_t>(4, nb - 4 * i));
      out[a * nq + i] = n == 4 ? q8_0_quad(row, 4 * i, 4) : q8_0_quad(row, 4 * i, n);
    }
  }
}

TARGET void dot_packed_q(DType type, const void* wp, int nw, const QuantRow* xs, int nr, int64_t k,
                         float* out, int64_t ldo) {
  if (packed_q_bytes(type, k) == 0) return;
  const int64_t nb = k / kQK8_0, nq = (nb + 3) / 4;
  for (int a = 0; a < nw; ++a) {
    const Q8_0Quad* quads = static_cast<const Q8_0Quad*>(wp) + a * nq;
    int r = 0;
    for (; r + 8 <= nr; r += 8) dot_q8_0_p_t<8>(quads, xs + r, nb, out + r * ldo + a, ldo);
    for (; r + 4 <= nr; r += 4) dot_q8_0_p_t<4>(quads, xs + r, nb, out + r * ldo + a, ldo);
    for (; r + 2 <= nr; r += 2) dot_q8_0_p_t<2>(quads, xs + r, nb, out + r * ldo + a, ldo);
    for (; r < nr; ++r) dot_q8_0_p_t<1>(quads, xs + r, nb, out + r * ldo + a, ldo);
  }
}

TARGET bool dot_block_q(DType type, const void* w, int64_t w_stride, int nw, const QuantRow* xs,
                        int nr, int64_t k, float* out, int64_t ldo) {
  switch (type) {
    case DType::kQ4_K:
      // Reads QuantRow::q8 (reads_x8). VNNI fuses each multiply-add pair; the integer sums,
      // hence the bits, are the same.
      if (nr > 0 && has_vnni())
        rows<BlockQ4_K, dot_q4_k_t<1, true>, dot_q4_k_t<2, true>, dot_q4_k_t<4, true>>(
            w, w_stride, nw, xs, nr, k / kQK_K, out, ldo);
      else if (nr > 0)
        rows<BlockQ4_K, dot_q4_k_t<1, false>, dot_q4_k_t<2, false>, dot_q4_k_t<4, false>>(
            w, w_stride, nw, xs, nr, k / kQK_K, out, ldo);
      return true;
    case DType::kQ6_K:
      // Reads QuantRow::q8 and sums16 (reads_x8).
      if (nr > 0 && has_vnni())
        rows<BlockQ6_K, dot_q6_k_x8_t<1, true>, dot_q6_k_x8_t<2, true>, dot_q6_k_x8_t<4, true>>(
            w, w_stride, nw, xs, nr, k / kQK_K, out, ldo);
      else if (nr > 0)
        rows<BlockQ6_K, dot_q6_k_x8_t<1, false>, dot_q6_k_x8_t<2, false>, dot_q6_k_x8_t<4, false>>(
            w, w_stride, nw, xs, nr, k / kQK_K, out, ldo);
      return true;
    case DType::kQ8_0:
      // With VNNI the activations are int8 per 32 (reads_xg), otherwise int16 per 256.
      if (nr > 0 && has_vnni())
        rows<BlockQ8_0, dot_q8_0_g_t<1>, dot_q8_0_g_t<2>, dot_q8_0_g_t<4>, dot_q8_0_g_t<8>>(
            w, w_stride, nw, xs, nr, k / kQK8_0, out, ldo);
      else if (nr > 0)
        rows<BlockQ8_0, dot_q8_0_t<1>, dot_q8_0_t<2>, dot_q8_0_t<4>, dot_q8_0_t<8>>(
            w, w_stride, nw, xs, nr, k / kQK8_0, out, ldo);
      return true;
    default:
      return dot_block_q_lowbit(type, w, w_stride, nw, xs, nr, k, out, ldo);
  }
}

}  // namespace cutline::device::cpu::avx512
#endif
