// Reference (plain-loop) conversions between F32 and the GGML block types. Layouts and the
// dequantization formulas follow ggml-quants.c; see quant.h.
#include "cutline/device/quant.h"
#include "cutline/device/quant_blocks.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "quant_types.h"

namespace cutline::device {

std::optional<DType> dtype_from_ggml(uint32_t ggml_type) {
  switch (ggml_type) {
    case 0:
      return DType::kF32;
    case 1:
      return DType::kF16;
    case 2:
      return DType::kQ4_0;
    case 3:
      return DType::kQ4_1;
    case 6:
      return DType::kQ5_0;
    case 8:
      return DType::kQ8_0;
    case 10:
      return DType::kQ2_K;
    case 11:
      return DType::kQ3_K;
    case 12:
      return DType::kQ4_K;
    case 13:
      return DType::kQ5_K;
    case 14:
      return DType::kQ6_K;
    case 20:
      return DType::kIQ4_NL;
    case 23:
      return DType::kIQ4_XS;
    case 30:
      return DType::kBF16;
    default:
      return std::nullopt;
  }
}

std::string_view dtype_name(DType type) {
  switch (type) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kQ4_0:
      return "q4_0";
    case DType::kQ8_0:
      return "q8_0";
    case DType::kQ4_K:
      return "q4_k";
    case DType::kQ6_K:
      return "q6_k";
    case DType::kQ4_1:
      return "q4_1";
    case DType::kQ5_0:
      return "q5_0";
    case DType::kQ2_K:
      return "q2_k";
    case DType::kQ3_K:
      return "q3_k";
    case DType::kQ5_K:
      return "q5_k";
    case DType::kIQ4_NL:
      return "iq4_nl";
    case DType::kIQ4_XS:
      return "iq4_xs";
    case DType::kBF16:
      return "bf16";
  }
  return "unknown";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (uint32_t id = 0; id <= 30; ++id) {
    if (auto t = dtype_from_ggml(id); t && dtype_name(*t) == name) return t;
  }
  return std::nullopt;
}

int64_t block_elems(DType type) {
  switch (type) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return 1;
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ8_0:
    case DType::kIQ4_NL:
      return 32;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ4_XS:
      return kQK_K;
  }
  return 1;
}

int64_t block_bytes(DType type) {
  switch (type) {
    case DType::kF32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kQ4_0:
      return sizeof(BlockQ4_0);
    case DType::kQ8_0:
      return sizeof(BlockQ8_0);
    case DType::kQ4_K:
      return sizeof(BlockQ4_K);
    case DType::kQ6_K:
      return sizeof(BlockQ6_K);
    case DType::kQ4_1:
      return sizeof(BlockQ4_1);
    case DType::kQ5_0:
      return sizeof(BlockQ5_0);
    case DType::kQ2_K:
      return sizeof(BlockQ2_K);
    case DType::kQ3_K:
      return sizeof(BlockQ3_K);
    case DType::kQ5_K:
      return sizeof(BlockQ5_K);
    case DType::kIQ4_NL:
      return sizeof(BlockIQ4_NL);
    case DType::kIQ4_XS:
      return sizeof(BlockIQ4_XS);
  }
  return 0;
}

int64_t row_bytes(DType type, int64_t n) { return n / block_elems(type) * block_bytes(type); }

float f16_to_f32(f16_t h) { return qblock::half_to_float(h); }

f16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7FFFFFFF;
  if (abs >= 0x7F800000) {  // inf or nan
    return static_cast<f16_t>(sign | 0x7C00 | (abs > 0x7F800000 ? 0x200 : 0));
  }
  if (abs >= 0x477FF000) return static_cast<f16_t>(sign | 0x7C00);  // rounds to >= 65520: inf
  if (abs < 0x38800000) {  // below the smallest normal half: subnormal or zero
    if (abs < 0x33000000) return static_cast<f16_t>(sign);  // < 2^-25 rounds to 0
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7FFFFF) | 0x800000;
    const uint32_t shift = 126 - exp;  // 14 + (113 - exp) - ... : mant >> (shift) gives half mant
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1))) ++half;
    return static_cast<f16_t>(sign | half);
  }
  uint32_t half = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t rem = abs & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return static_cast<f16_t>(sign | half);
}

bf16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return static_cast<bf16_t>((x >> 16) | 0x40);  // quiet nan
  x += 0x7FFF + ((x >> 16) & 1);
  return static_cast<bf16_t>(x >> 16);
}

namespace {

// Applies a per-block codec to nb consecutive blocks.
template <typename Block>
void dequant_blocks(void (*fn)(const Block&, float*), const void* src, float* dst, int64_t nb,
                    int64_t per) {
  for (int64_t i = 0; i < nb; ++i) fn(static_cast<const Block*>(src)[i], dst + i * per);
}
template <typename Block>
void quant_blocks(void (*fn)(const float*, Block&), const float* src, void* dst, int64_t nb,
                  int64_t per) {
  for (int64_t i = 0; i < nb; ++i) fn(src + i * per, static_cast<Block*>(dst)[i]);
}

int nearest_int(float v) { return static_cast<int>(std::lrintf(v)); }

void dequant_q4_k(const BlockQ4_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  const uint8_t* q = b.qs;
  for (int j = 0, is = 0; j < kQK_K; j += 64, is += 2, q += 32) {
    uint8_t sc, m;
    q4_k_scale_min(is, b.scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    q4_k_scale_min(is + 1, b.scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
  }
}

void dequant_q6_k(const BlockQ6_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const uint8_t* ql = b.ql;
  const uint8_t* qh = b.qh;
  const int8_t* sc = b.scales;
  for (int n = 0; n < kQK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = d * sc[is + 0] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
  }
}

void quant_q8_0(const float* x, BlockQ8_0& b) {
  float amax = 0;
  for (int i = 0; i < kQK8_0; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  // Ties round away from zero, as ggml's quantize_row_q8_0_ref (roundf) does, so that files we
  // write are byte-identical to ggml's.
  for (int i = 0; i < kQK8_0; ++i) b.qs[i] = static_cast<int8_t>(std::round(x[i] * id));
}

void quant_q4_0(const float* x, BlockQ4_0& b) {
  float amax = 0, max = 0;
  for (int i = 0; i < kQK4_0; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  for (int j = 0; j < kQK4_0 / 2; ++j) {
    const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
    const int q1 = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
    b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

void quant_q4_k(const float* x, BlockQ4_K& b) {
  float scales[8], mins[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float mn = 0, mx = x[j * 32];
    for (int l = 0; l < 32; ++l) {
      mn = std::min(mn, x[j * 32 + l]);
      mx = std::max(mx, x[j * 32 + l]);
    }
    scales[j] = (mx - mn) / 15.0f;
    mins[j] = -mn;
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float d = max_scale / 63.0f, dmin = max_min / 63.0f;
  b.d = f32_to_f16(d);
  b.dmin = f32_to_f16(dmin);
  const float dq = f16_to_f32(b.d), dminq = f16_to_f32(b.dmin);
  std::memset(b.scales, 0, sizeof(b.scales));
  uint8_t L[kQK_K];
  for (int j = 0; j < 8; ++j) {
    const int ls = d > 0 ? std::clamp(nearest_int(scales[j] / d), 0, 63) : 0;
    const int lm = dmin > 0 ? std::clamp(nearest_int(mins[j] / dmin), 0, 63) : 0;
    if (j < 4) {
      b.scales[j] = static_cast<uint8_t>(ls);
      b.scales[j + 4] = static_cast<uint8_t>(lm);
    } else {
      b.scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      b.scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      b.scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
    const float sd = dq * ls, sm = dminq * lm;
    for (int l = 0; l < 32; ++l) {
      const int q = sd > 0 ? nearest_int((x[j * 32 + l] + sm) / sd) : 0;
      L[j * 32 + l] = static_cast<uint8_t>(std::clamp(q, 0, 15));
    }
  }
  for (int j = 0; j < kQK_K; j += 64) {
    for (int l = 0; l < 32; ++l) b.qs[j / 2 + l] = L[j + l] | (L[j + l + 32] << 4);
  }
}

void quant_q6_k(const float* x, BlockQ6_K& b) {
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    float amax = 0, v = 0;
    for (int l = 0; l < 16; ++l) {
      if (std::fabs(x[ib * 16 + l]) > amax) {
        amax = std::fabs(x[ib * 16 + l]);
        v = x[ib * 16 + l];
      }
    }
    scales[ib] = v / -32.0f;
    if (std::fabs(scales[ib]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  uint8_t L[kQK_K] = {};
  if (max_abs_scale == 0) {
    std::memset(&b, 0, sizeof(b));
    for (int l = 0; l < kQK_K; ++l) L[l] = 32;
  } else {
    const float iscale = -128.0f / max_scale;
    b.d = f32_to_f16(1.0f / iscale);
    const float dq = f16_to_f32(b.d);
    for (int ib = 0; ib < 16; ++ib) {
      b.scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
      const float sd = dq * b.scales[ib];
      for (int l = 0; l < 16; ++l) {
        const int q = sd != 0 ? nearest_int(x[ib * 16 + l] / sd) : 0;
        L[ib * 16 + l] = static_cast<uint8_t>(std::clamp(q, -32, 31) + 32);
      }
    }
  }
  uint8_t* ql = b.ql;
  uint8_t* qh = b.qh;
  for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
      const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
      ql[l] = q1 | (q3 << 4);
      ql[l + 32] = q2 | (q4 << 4);
      qh[l] = (L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
              ((L[j + l + 96] >> 4) << 6);
    }
  }
}

}  // namespace

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  assert(n % block_elems(type) == 0);
  const int64_t nb = n / block_elems(type);
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(static_cast<const f16_t*>(src)[i]);
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(static_cast<const bf16_t*>(src)[i]);
      return;
    case DType::kQ8_0:
      for (int64_t i = 0; i < nb; ++i) {
        const BlockQ8_0& b = static_cast<const BlockQ8_0*>(src)[i];
        const float d = f16_to_f32(b.d);
        for (int j = 0; j < kQK8_0; ++j) dst[i * kQK8_0 + j] = d * b.qs[j];
      }
      return;
    case DType::kQ4_0:
      for (int64_t i = 0; i < nb; ++i) {
        const BlockQ4_0& b = static_cast<const BlockQ4_0*>(src)[i];
        const float d = f16_to_f32(b.d);
        for (int j = 0; j < kQK4_0 / 2; ++j) {
          dst[i * kQK4_0 + j] = d * ((b.qs[j] & 0xF) - 8);
          dst[i * kQK4_0 + j + 16] = d * ((b.qs[j] >> 4) - 8);
        }
      }
      return;
    case DType::kQ4_K:
      for (int64_t i = 0; i < nb; ++i)
        dequant_q4_k(static_cast<const BlockQ4_K*>(src)[i], dst + i * kQK_K);
      return;
    case DType::kQ6_K:
      for (int64_t i = 0; i < nb; ++i)
        dequant_q6_k(static_cast<const BlockQ6_K*>(src)[i], dst + i * kQK_K);
      return;
    case DType::kQ4_1:
      return dequant_blocks(&ref::dequant_q4_1, src, dst, nb, 32);
    case DType::kQ5_0:
      return dequant_blocks(&ref::dequant_q5_0, src, dst, nb, 32);
    case DType::kQ2_K:
      return dequant_blocks(&ref::dequant_q2_k, src, dst, nb, kQK_K);
    case DType::kQ3_K:
      return dequant_blocks(&ref::dequant_q3_k, src, dst, nb, kQK_K);
    case DType::kQ5_K:
      return dequant_blocks(&ref::dequant_q5_k, src, dst, nb, kQK_K);
    case DType::kIQ4_NL:
      return dequant_blocks(&ref::dequant_iq4_nl, src, dst, nb, 32);
    case DType::kIQ4_XS:
      return dequant_blocks(&ref::dequant_iq4_xs, src, dst, nb, kQK_K);
  }
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  assert(n % block_elems(type) == 0);
  const int64_t nb = n / block_elems(type);
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, n * 4);
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) static_cast<f16_t*>(dst)[i] = f32_to_f16(src[i]);
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) static_cast<bf16_t*>(dst)[i] = f32_to_bf16(src[i]);
      return;
    case DType::kQ8_0:
      for (int64_t i = 0; i < nb; ++i) quant_q8_0(src + i * 32, static_cast<BlockQ8_0*>(dst)[i]);
      return;
    case DType::kQ4_0:
      for (int64_t i = 0; i < nb; ++i) quant_q4_0(src + i * 32, static_cast<BlockQ4_0*>(dst)[i]);
      return;
    case DType::kQ4_K:
      for (int64_t i = 0; i < nb; ++i) quant_q4_k(src + i * kQK_K, static_cast<BlockQ4_K*>(dst)[i]);
      return;
    case DType::kQ6_K:
      for (int64_t i = 0; i < nb; ++i) quant_q6_k(src + i * kQK_K, static_cast<BlockQ6_K*>(dst)[i]);
      return;
    case DType::kQ4_1:
      return quant_blocks(&ref::quant_q4_1, src, dst, nb, 32);
    case DType::kQ5_0:
      return quant_blocks(&ref::quant_q5_0, src, dst, nb, 32);
    case DType::kQ2_K:
      return quant_blocks(&ref::quant_q2_k, src, dst, nb, kQK_K);
    case DType::kQ3_K:
      return quant_blocks(&ref::quant_q3_k, src, dst, nb, kQK_K);
    case DType::kQ5_K:
      return quant_blocks(&ref::quant_q5_k, src, dst, nb, kQK_K);
    case DType::kIQ4_NL:
      return quant_blocks(&ref::quant_iq4_nl, src, dst, nb, 32);
    case DType::kIQ4_XS:
      return quant_blocks(&ref::quant_iq4_xs, src, dst, nb, kQK_K);
  }
}

}  // namespace cutline::device
