#include "synth_quant.h"

#include <cmath>
#include <cstring>

namespace cutline::model {

uint16_t f32_to_f16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7FFFFFFF;
  if (abs > 0x7F800000) return static_cast<uint16_t>(sign | 0x7E00);   // NaN
  if (abs >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // overflow -> inf
  if (abs < 0x38800000) {
    // Subnormal or zero in f16: scale into the 2^-24 grid and round to nearest even.
    float a;
    std::memcpy(&a, &abs, 4);
    float scaled = a * 16777216.0f;  // exact: multiplying by a power of two
    auto q = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even.
  uint32_t mant = abs & 0x007FFFFF;
  uint32_t exp = (abs >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // may carry into the exponent: fine
  return static_cast<uint16_t>(sign | h);
}

namespace {

void put_f16(uint8_t* p, float v) {
  uint16_t h = f32_to_f16_bits(v);
  std::memcpy(p, &h, 2);
}

// ggml quantize_row_q8_0_ref: d = amax / 127, q = round(x / d).
void quantize_q8_0(const float* x, uint8_t* out, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += kQK8_0, out += 34) {
    float amax = 0;
    for (int i = 0; i < kQK8_0; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(out, d);
    for (int i = 0; i < kQK8_0; ++i) {
      out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[i] * id)));
    }
  }
}

// ggml quantize_row_q4_0_ref: d = max / -8 (max = the value of largest magnitude),
// q = min(15, (int)(x / d + 8.5)); element j in the low nibble of byte j, j + 16 in the high.
void quantize_q4_0(const float* x, uint8_t* out, int64_t n) {
  for (int64_t b = 0; b < n / kQK4_0; ++b, x += kQK4_0, out += 18) {
    float amax = 0, max = 0;
    for (int i = 0; i < kQK4_0; ++i) {
      if (std::fabs(x[i]) > amax) {
        amax = std::fabs(x[i]);
        max = x[i];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(out, d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      int lo = static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f));
      int hi = static_cast<int>(static_cast<int8_t>(x[j + kQK4_0 / 2] * id + 8.5f));
      lo = lo < 15 ? lo : 15;
      hi = hi < 15 ? hi : 15;
      out[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

}  // namespace

void quantize_row(TensorType type, const float* in, uint8_t* out, int64_t n) {
  switch (type) {
    case TensorType::kF32:
      std::memcpy(out, in, static_cast<size_t>(n) * 4);
      return;
    case TensorType::kF16:
      for (int64_t i = 0; i < n; ++i) put_f16(out + 2 * i, in[i]);
      return;
    case TensorType::kQ8_0:
      quantize_q8_0(in, out, n);
      return;
    case TensorType::kQ4_0:
      quantize_q4_0(in, out, n);
      return;
    default:
      return;  // the synthesizer validates its types before writing
  }
}

}  // namespace cutline::model
