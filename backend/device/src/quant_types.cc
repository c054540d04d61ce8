// Reference codecs of Q4_1, Q5_0, Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS (quant_types.h). The
// dequantizers follow ggml-quants.c's formulas exactly, element for element; the quantizers are
// plain min/max fits whose output any ggml reader decodes to the same values.
#include "quant_types.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace cutline::device::ref {
namespace {

int nearest_int(float v) { return static_cast<int>(std::lrintf(v)); }

// Index of the table value nearest to v (kIq4nlValues is sorted).
int iq4_index(float v) {
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (v < kIq4nlValues[mid] ? hi : lo) = mid;
  }
  return v - kIq4nlValues[lo] <= kIq4nlValues[hi] - v ? lo : hi;
}

// The IQ4 scale for n values: of d = -amax / 127 (the largest magnitude on the table's -127 end)
// and d = amax / 113 (on its +113 end), with amax the signed value of largest magnitude, the
// one with the smaller squared error.
float iq4_fit(const float* x, int n) {
  float amax = 0, vmax = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      vmax = x[i];
    }
  }
  if (amax == 0) return 0;
  float best = 0, best_err = INFINITY;
  for (float d : {vmax / -127.0f, vmax / 113.0f}) {
    const float id = 1.0f / d;
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float e = x[i] - d * kIq4nlValues[iq4_index(x[i] * id)];
      err += e * e;
    }
    if (err < best_err) {
      best_err = err;
      best = d;
    }
  }
  return best;
}

// Packs 16 6-bit unsigned scales as Q3_K stores them (the inverse of q3_k_scales + 32).
void pack_q3_k_scales(const uint8_t u[16], uint8_t packed[12]) {
  std::memset(packed, 0, 12);
  for (int j = 0; j < 16; ++j) {
    packed[j < 8 ? j : j - 8] |= static_cast<uint8_t>((u[j] & 0xF) << (j < 8 ? 0 : 4));
    packed[8 + j % 4] |= static_cast<uint8_t>((u[j] >> 4) << (2 * (j / 4)));
  }
}

// Packs the 6-bit scale and min of sub-block j as Q4_K/Q5_K store them (q4_k_scale_min).
void pack_k4_scale_min(int j, int ls, int lm, uint8_t* scales) {
  if (j < 4) {
    scales[j] = static_cast<uint8_t>(ls);
    scales[j + 4] = static_cast<uint8_t>(lm);
  } else {
    scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
    scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
    scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
  }
}

// Fits x = d * sc_j * q - dmin * m_j over sub-blocks of `sub` elements with q in 0..qmax and
// sc_j, m_j in 0..smax: levels L (n elements), scale and min levels ls, lm; returns (d, dmin)
// already rounded to F16.
void fit_scale_min(const float* x, int n, int sub, int qmax, int smax, uint8_t* L, int* ls, int* lm,
                   f16_t* d_out, f16_t* dmin_out) {
  const int nsub = n / sub;
  float scales[16], mins[16];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < nsub; ++j) {
    float mn = 0, mx = x[j * sub];
    for (int l = 0; l < sub; ++l) {
      mn = std::min(mn, x[j * sub + l]);
      mx = std::max(mx, x[j * sub + l]);
    }
    scales[j] = (mx - mn) / static_cast<float>(qmax);
    mins[j] = -mn;
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float d = max_scale / static_cast<float>(smax), dmin = max_min / static_cast<float>(smax);
  *d_out = f32_to_f16(d);
  *dmin_out = f32_to_f16(dmin);
  const float dq = f16_to_f32(*d_out), dminq = f16_to_f32(*dmin_out);
  for (int j = 0; j < nsub; ++j) {
    ls[j] = dq > 0 ? std::clamp(nearest_int(scales[j] / dq), 0, smax) : 0;
    lm[j] = dminq > 0 ? std::clamp(nearest_int(mins[j] / dminq), 0, smax) : 0;
    const float sd = dq * ls[j], sm = dminq * lm[j];
    for (int l = 0; l < sub; ++l) {
      const int q = sd > 0 ? nearest_int((x[j * sub + l] + sm) / sd) : 0;
      L[j * sub + l] = static_cast<uint8_t>(std::clamp(q, 0, qmax));
    }
  }
}

}  // namespace

void dequant_q4_1(const BlockQ4_1& b, float* y) {
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  for (int j = 0; j < 16; ++j) {
    y[j] = (b.qs[j] & 0xF) * d + m;
    y[j + 16] = (b.qs[j] >> 4) * d + m;
  }
}

void dequant_q5_0(const BlockQ5_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int j = 0; j < 16; ++j) {
    const int x0 = ((b.qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16;
    const int x1 = ((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
    y[j] = x0 * d;
    y[j + 16] = x1 * d;
  }
}

void dequant_q2_k(const BlockQ2_K& b, float* y) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  for (int e = 0; e < kQK_K; ++e) {
    const uint8_t sc = b.scales[e / 16];
    const int q = (b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    y[e] = d * (sc & 0xF) * q - dmin * (sc >> 4);
  }
}

void dequant_q3_k(const BlockQ3_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  int8_t sc[16];
  q3_k_scales(b.scales, sc);
  for (int e = 0; e < kQK_K; ++e) {
    const int lo = (b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    const int hbit = (b.hmask[e % 32] >> (e / 32)) & 1;
    y[e] = d * sc[e / 16] * (lo - (hbit ? 0 : 4));
  }
}

void dequant_q5_k(const BlockQ5_K& b, float* y) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  for (int c = 0; c < 4; ++c) {
    uint8_t sc, m;
    q4_k_scale_min(2 * c, b.scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    q4_k_scale_min(2 * c + 1, b.scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    const uint8_t* ql = b.qs + 32 * c;
    for (int l = 0; l < 32; ++l)
      y[64 * c + l] = d1 * ((ql[l] & 0xF) + (((b.qh[l] >> (2 * c)) & 1) << 4)) - m1;
    for (int l = 0; l < 32; ++l)
      y[64 * c + 32 + l] = d2 * ((ql[l] >> 4) + (((b.qh[l] >> (2 * c + 1)) & 1) << 4)) - m2;
  }
}

void dequant_iq4_nl(const BlockIQ4_NL& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * kIq4nlValues[b.qs[j] & 0xF];
    y[j + 16] = d * kIq4nlValues[b.qs[j] >> 4];
  }
}

void dequant_iq4_xs(const BlockIQ4_XS& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const float dl = d * static_cast<float>(iq4_xs_scale(b, ib));
    const uint8_t* qs = b.qs + 16 * ib;
    for (int j = 0; j < 16; ++j) {
      y[32 * ib + j] = dl * kIq4nlValues[qs[j] & 0xF];
      y[32 * ib + j + 16] = dl * kIq4nlValues[qs[j] >> 4];
    }
  }
}

void quant_q4_1(const float* x, BlockQ4_1& b) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < 32; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
  b.d = f32_to_f16((mx - mn) / 15.0f);
  b.m = f32_to_f16(mn);
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::clamp(nearest_int((x[j] - m) * id), 0, 15);
    const int q1 = std::clamp(nearest_int((x[j + 16] - m) * id), 0, 15);
    b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

void quant_q5_0(const float* x, BlockQ5_0& b) {
  float amax = 0, max = 0;
  for (int i = 0; i < 32; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  b.d = f32_to_f16(max / -16.0f);
  const float d = f16_to_f32(b.d);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::clamp(nearest_int(x[j] * id) + 16, 0, 31);
    const int q1 = std::clamp(nearest_int(x[j + 16] * id) + 16, 0, 31);
    b.qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
    qh |= static_cast<uint32_t>(q0 >> 4) << j;
    qh |= static_cast<uint32_t>(q1 >> 4) << (j + 16);
  }
  std::memcpy(b.qh, &qh, 4);
}

void quant_q2_k(const float* x, BlockQ2_K& b) {
  uint8_t L[kQK_K];
  int ls[16], lm[16];
  fit_scale_min(x, kQK_K, 16, 3, 15, L, ls, lm, &b.d, &b.dmin);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(ls[j] | (lm[j] << 4));
  std::memset(b.qs, 0, sizeof(b.qs));
  for (int e = 0; e < kQK_K; ++e)
    b.qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(L[e] << (2 * ((e % 128) / 32)));
}

void quant_q3_k(const float* x, BlockQ3_K& b) {
  // As quant_q6_k: each sub-block's largest magnitude maps to q = -4, the largest sub-block
  // scale to -32.
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int j = 0; j < 16; ++j) {
    float amax = 0, v = 0;
    for (int l = 0; l < 16; ++l) {
      if (std::fabs(x[16 * j + l]) > amax) {
        amax = std::fabs(x[16 * j + l]);
        v = x[16 * j + l];
      }
    }
    scales[j] = v / -4.0f;
    if (std::fabs(scales[j]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  std::memset(&b, 0, sizeof(b));
  uint8_t u[16], L[kQK_K];
  if (max_abs_scale == 0) {
    for (int j = 0; j < 16; ++j) u[j] = 32;
    for (int e = 0; e < kQK_K; ++e) L[e] = 4;
  } else {
    const float iscale = -32.0f / max_scale;
    b.d = f32_to_f16(1.0f / iscale);
    const float dq = f16_to_f32(b.d);
    for (int j = 0; j < 16; ++j) {
      const int ls = std::clamp(nearest_int(iscale * scales[j]), -32, 31);
      u[j] = static_cast<uint8_t>(ls + 32);
      const float sd = dq * ls;
      for (int l = 0; l < 16; ++l) {
        const int q = sd != 0 ? nearest_int(x[16 * j + l] / sd) : 0;
        L[16 * j + l] = static_cast<uint8_t>(std::clamp(q, -4, 3) + 4);
      }
    }
  }
  pack_q3_k_scales(u, b.scales);
  for (int e = 0; e < kQK_K; ++e) {
    b.qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((L[e] & 3) << (2 * ((e % 128) / 32)));
    b.hmask[e % 32] |= static_cast<uint8_t>((L[e] >> 2) << (e / 32));
  }
}

void quant_q5_k(const float* x, BlockQ5_K& b) {
  uint8_t L[kQK_K];
  int ls[8], lm[8];
  fit_scale_min(x, kQK_K, 32, 31, 63, L, ls, lm, &b.d, &b.dmin);
  std::memset(b.scales, 0, sizeof(b.scales));
  for (int j = 0; j < 8; ++j) pack_k4_scale_min(j, ls[j], lm[j], b.scales);
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t lo = L[64 * c + l], hi = L[64 * c + 32 + l];
      b.qs[32 * c + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      b.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
    }
  }
}

void quant_iq4_nl(const float* x, BlockIQ4_NL& b) {
  b.d = f32_to_f16(iq4_fit(x, 32));
  const float d = f16_to_f32(b.d);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < 16; ++j) {
    b.qs[j] = static_cast<uint8_t>(iq4_index(x[j] * id) | (iq4_index(x[j + 16] * id) << 4));
  }
}

void quant_iq4_xs(const float* x, BlockIQ4_XS& b) {
  float scales[8];
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < 8; ++ib) {
    scales[ib] = iq4_fit(x + 32 * ib, 32);
    if (std::fabs(scales[ib]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  std::memset(&b, 0, sizeof(b));
  // The largest sub-block scale maps to ls - 32 = -32.
  b.d = f32_to_f16(max_scale / -32.0f);
  const float d = f16_to_f32(b.d);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = std::clamp(nearest_int(scales[ib] * id), -32, 31) + 32;
    b.scales_l[ib / 2] |= static_cast<uint8_t>((ls & 0xF) << (4 * (ib % 2)));
    b.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * ib));
    const float dl = d * static_cast<float>(ls - 32);
    const float idl = dl != 0 ? 1.0f / dl : 0.0f;
    const float* xb = x + 32 * ib;
    for (int j = 0; j < 16; ++j) {
      b.qs[16 * ib + j] =
          static_cast<uint8_t>(iq4_index(xb[j] * idl) | (iq4_index(xb[j + 16] * idl) << 4));
    }
  }
}

}  // namespace cutline::device::ref
