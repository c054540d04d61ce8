// AVX2 + FMA + F16C variants of the CPU kernels; chosen at run time.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "cpu_kernels.h"
#include "cpu_kernels_avx2_lowbit.h"

#define CUTLINE_KQ_TARGET __attribute__((target("avx2,fma,f16c")))
#define TARGET CUTLINE_KQ_TARGET

namespace cutline::device::cpu {

#include "cpu_kquant_inl.h"

namespace {

TARGET inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// Each row keeps 4 accumulators of 8 lanes; 8-element chunk c goes to accumulator c % 4; a
// scalar tail follows. The order depends only on k, never on nr.
template <int NR>
TARGET void dot_rows_t(const float* w, const float* const* xs, int64_t k, float* out) {
  __m256 acc[NR][4];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    for (int j = 0; j < 4; ++j) {
      const __m256 wv = _mm256_loadu_ps(w + i + 8 * j);
      for (int r = 0; r < NR; ++r)
        acc[r][j] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xs[r] + i + 8 * j), acc[r][j]);
    }
  }
  for (; i + 8 <= k; i += 8) {
    const int j = static_cast<int>((i / 8) & 3);
    const __m256 wv = _mm256_loadu_ps(w + i);
    for (int r = 0; r < NR; ++r)
      acc[r][j] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xs[r] + i), acc[r][j]);
  }
  for (int r = 0; r < NR; ++r) {
    float tail = 0;
    for (int64_t t = i; t < k; ++t) tail += w[t] * xs[r][t];
    out[r] = hsum(_mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]),
                                _mm256_add_ps(acc[r][2], acc[r][3]))) +
             tail;
  }
}

TARGET void dot_rows(const float* w, const float* const* xs, int nr, int64_t k, float* out) {
  if (nr == 1) return dot_rows_t<1>(w, xs, k, out);
  return dot_rows_t<2>(w, xs, k, out);
}

TARGET void dequant(DType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i,
                         _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
      for (; i < n; ++i) dst[i] = _cvtsh_ss(h[i]);
      return;
    }
    case DType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        const __m256i v =
            _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
      }
      for (; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    }
    case DType::kQ8_0: {
      const auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < n / kQK8_0; ++i, dst += kQK8_0) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[i].d));
        for (int h = 0; h < 4; ++h) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + 8 * h));
          _mm256_storeu_ps(dst + 8 * h,
                           _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
        }
      }
      return;
    }
    case DType::kQ4_0: {
      const auto* b = static_cast<const BlockQ4_0*>(src);
      const __m128i mask = _mm_set1_epi8(0xF);
      const __m256i eight = _mm256_set1_epi32(8);
      for (int64_t i = 0; i < n / kQK4_0; ++i, dst += kQK4_0) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(b[i].d));
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs));
        const __m128i lo = _mm_and_si128(q, mask);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
        const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        for (int p = 0; p < 4; ++p) {
          const __m256i v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(parts[p]), eight);
          _mm256_storeu_ps(dst + 8 * p, _mm256_mul_ps(d, _mm256_cvtepi32_ps(v)));
        }
      }
      return;
    }
    case DType::kQ4_K:
      kq_dequant_q4_k(static_cast<const BlockQ4_K*>(src), dst, n / kQK_K);
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

// ---- Integer kernels (cpu_kernels.h QuantRow), as in cpu_kernels_avx512.cc with 8-lane int32
// accumulators: the same integers and scales, other lane groupings, so other rounding. ----

TARGET void quantize_row_x(const float* x, int64_t k, int16_t* q, float* d, float* sums) {
  const int64_t kp = qrow_padded(k);
  alignas(32) float tail[kQBlock];
  const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(3.4028235e38f);
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
    // NaN or Inf: a NaN scale makes every dot product reading the block NaN (see avx512).
    const float db = non_finite != 0 ? std::numeric_limits<float>::quiet_NaN() : mx / 32767.0f;
    const __m256 id = _mm256_set1_ps(non_finite == 0 && mx > 0 ? 32767.0f / mx : 0.0f);
    d[b0 / kQBlock] = db;
    for (int64_t g = 0; g < kQBlock; g += kQGroup) {
      __m256i gs = _mm256_setzero_si256();
      for (int64_t i = g; i < g + kQGroup; i += 16) {
        const __m256i v0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + i), id));
        const __m256i v1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + i + 8), id));
        gs = _mm256_add_epi32(gs, _mm256_add_epi32(v0, v1));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b0 + i),
                            _mm256_permute4x64_epi64(_mm256_packs_epi32(v0, v1), 0xD8));
      }
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(gs), _mm256_extracti128_si256(gs, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
      sums[(b0 + g) / kQGroup] = db * static_cast<float>(_mm_cvtsi128_si32(s4));
    }
  }
}

// Q8_0: per block, two pair-product halves into 8 int32 lanes, scaled by d_w into one of two
// F32 partial sums (block parity) per kQBlock, then by d_x.
template <int NR>
TARGET void dot_q8_0_t(const BlockQ8_0* w, const QuantRow* xs, int64_t nb, float* out,
                       int64_t ldo) {
  constexpr int64_t kPer = kQBlock / kQK8_0;
  __m256 facc[NR];
  for (int r = 0; r < NR; ++r) facc[r] = _mm256_setzero_ps();
  for (int64_t b0 = 0; b0 < nb; b0 += kPer) {
    const int64_t b1 = std::min(nb, b0 + kPer);
    __m256 even[NR], odd[NR];
    for (int r = 0; r < NR; ++r) even[r] = odd[r] = _mm256_setzero_ps();
    auto block = [&](int64_t bi, __m256* part) TARGET {
      const __m256i w0 =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[bi].qs)));
      const __m256i w1 =
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[bi].qs + 16)));
      const __m256 dw = _mm256_set1_ps(_cvtsh_ss(w[bi].d));
      for (int r = 0; r < NR; ++r) {
        const int16_t* xq = xs[r].q + bi * kQK8_0;
        const __m256i p = _mm256_add_epi32(
            _mm256_madd_epi16(w0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq))),
            _mm256_madd_epi16(w1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 16))));
        part[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), dw, part[r]);
      }
    };
    int64_t bi = b0;
    for (; bi + 2 <= b1; bi += 2) {
      block(bi, even);
      block(bi + 1, odd);
    }
    if (bi < b1) block(bi, even);
    for (int r = 0; r < NR; ++r)
      facc[r] = _mm256_fmadd_ps(_mm256_add_ps(even[r], odd[r]), _mm256_set1_ps(xs[r].d[b0 / kPer]),
                                facc[r]);
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = hsum(facc[r]);
}

// Q4_K: (q * sc) as int16 x the activations, summed exactly per 256-element block in 8 int32
// lanes (32 products per lane: 32 * 945 * 32767 < 2^31), mins from the group sums.
template <int NR>
TARGET void dot_q4_k_t(const BlockQ4_K* w, const QuantRow* xs, int64_t nb, float* out,
                       int64_t ldo) {
  __m256 facc[NR], fmin[NR];
  for (int r = 0; r < NR; ++r) facc[r] = fmin[r] = _mm256_setzero_ps();
  const __m128i mask = _mm_set1_epi8(0xF);
  for (int64_t bi = 0; bi < nb; ++bi) {
    const BlockQ4_K& b = w[bi];
    alignas(16) uint8_t sc[8], mn[8];
    q4_k_scales_mins(b.scales, sc, mn);
    const float d = _cvtsh_ss(b.d), dmin = _cvtsh_ss(b.dmin);
    const __m256 mf = _mm256_mul_ps(_mm256_set1_ps(dmin),
                                    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                                        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn)))));
    __m256i iacc[NR];
    for (int r = 0; r < NR; ++r) iacc[r] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i s_lo = _mm256_set1_epi16(sc[2 * c]), s_hi = _mm256_set1_epi16(sc[2 * c + 1]);
      for (int h = 0; h < 2; ++h) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 32 * c + 16 * h));
        const __m256i lo = _mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm_and_si128(v, mask)), s_lo);
        const __m256i hi = _mm256_mullo_epi16(
            _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), mask)), s_hi);
        for (int r = 0; r < NR; ++r) {
          const int16_t* xq = xs[r].q + bi * kQK_K + 64 * c + 16 * h;
          iacc[r] = _mm256_add_epi32(
              iacc[r],
              _mm256_add_epi32(
                  _mm256_madd_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq))),
                  _mm256_madd_epi16(
                      hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32)))));
        }
      }
    }
    for (int r = 0; r < NR; ++r) {
      facc[r] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[r]), _mm256_set1_ps(d * xs[r].d[bi]), facc[r]);
      fmin[r] = _mm256_fmadd_ps(mf, _mm256_loadu_ps(xs[r].sums + 8 * bi), fmin[r]);
    }
  }
  for (int r = 0; r < NR; ++r) out[r * ldo] = hsum(facc[r]) - hsum(fmin[r]);
}

template <typename Block, void (*Fn1)(const Block*, const QuantRow*, int64_t, float*, int64_t),
          void (*Fn2)(const Block*, const QuantRow*, int64_t, float*, int64_t),
          void (*Fn4)(const Block*, const QuantRow*, int64_t, float*, int64_t)>
TARGET void dot_block_q_rows(const uint8_t* w, int64_t w_stride, int nw, const QuantRow* xs, int nr,
                             int64_t nb, float* out, int64_t ldo) {
  for (int a = 0; a < nw; ++a) {
    const Block* wb = reinterpret_cast<const Block*>(w + a * w_stride);
    int r = 0;
    for (; r + 4 <= nr; r += 4) Fn4(wb, xs + r, nb, out + r * ldo + a, ldo);
    for (; r + 2 <= nr; r += 2) Fn2(wb, xs + r, nb, out + r * ldo + a, ldo);
    for (; r < nr; ++r) Fn1(wb, xs + r, nb, out + r * ldo + a, ldo);
  }
}

TARGET bool dot_block_q(DType type, const void* w, int64_t w_stride, int nw, const QuantRow* xs,
                        int nr, int64_t k, float* out, int64_t ldo) {
  const auto* wb = static_cast<const uint8_t*>(w);
  switch (type) {
    case DType::kQ4_K:
      if (nr > 0)
        dot_block_q_rows<BlockQ4_K, dot_q4_k_t<1>, dot_q4_k_t<2>, dot_q4_k_t<4>>(
            wb, w_stride, nw, xs, nr, k / kQK_K, out, ldo);
      return true;
    case DType::kQ8_0:
      if (nr > 0)
        dot_block_q_rows<BlockQ8_0, dot_q8_0_t<1>, dot_q8_0_t<2>, dot_q8_0_t<4>>(
            wb, w_stride, nw, xs, nr, k / kQK8_0, out, ldo);
      return true;
    default:
      return avx2::dot_block_q_lowbit(type, w, w_stride, nw, xs, nr, k, out, ldo);
  }
}

}  // namespace

const Kernels& avx2_kernels() {
  static const Kernels k{.isa = Isa::kAvx2,
                         .dot_tile = 2,
                         .dot_rows = &dot_rows,
                         .dequant = &dequant,
                         .quantize_row_x = &quantize_row_x,
                         .reads_x8 = &avx2::reads_x8,
                         .quantize_row_x8 = &avx2::quantize_row_x8,
                         .dot_block_q = &dot_block_q};
  return k;
}

}  // namespace cutline::device::cpu
#else
#include "cpu_kernels.h"
namespace cutline::device::cpu {
const Kernels& avx2_kernels() { return scalar_kernels(); }
}  // namespace cutline::device::cpu
#endif
