#pragma once
// Tensor element types and their block layouts, exactly as ggml/GGUF defines them, with reference
// (plain-loop) dequantizers and quantizers. The CPU kernels read these blocks directly; the CUDA
// device reads Q8_0, Q4_K and Q6_K blocks in GPU memory (quant_blocks.h) and dequantizes the other
// types at load; the model synthesizer (cutline model synth) quantizes with them; tests use them as
// the ground truth.
//
// DType values are the GGML type ids stored in GGUF tensor infos.

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace cutline::device {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kIQ4_NL = 20,
  kIQ4_XS = 23,
  kBF16 = 30,
};

// The DType for a GGML type id, or nullopt when Cutline does not support it.
std::optional<DType> dtype_from_ggml(uint32_t ggml_type);
std::string_view dtype_name(DType type);  // "f32", "f16", "q4_0", ...
// The DType whose dtype_name is `name`, or nullopt.
std::optional<DType> parse_dtype(std::string_view name);
// Elements per block (1 for F32/F16/BF16, 32 for Q8_0/Q4_0/Q4_1/Q5_0/IQ4_NL, 256 for the
// K-quants and IQ4_XS).
int64_t block_elems(DType type);
int64_t block_bytes(DType type);
// Bytes of a row of `n` elements; n must be a multiple of block_elems(type).
int64_t row_bytes(DType type, int64_t n);

constexpr int kQK8_0 = 32;
constexpr int kQK4_0 = 32;
constexpr int kQK_K = 256;
constexpr int kKScaleBytes = 12;

using f16_t = uint16_t;   // IEEE binary16 bits
using bf16_t = uint16_t;  // bfloat16 bits

struct BlockQ8_0 {
  f16_t d;            // scale
  int8_t qs[kQK8_0];  // x[i] = d * qs[i]
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  f16_t d;                 // scale
  uint8_t qs[kQK4_0 / 2];  // x[j] = d * ((qs[j] & 15) - 8), x[j + 16] = d * ((qs[j] >> 4) - 8)
};
static_assert(sizeof(BlockQ4_0) == 18);

// 8 sub-blocks of 32 with 6-bit scales and mins: x = d * sc * q - dmin * m.
struct BlockQ4_K {
  f16_t d;
  f16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// 16 sub-blocks of 16 with 8-bit signed scales: x = d * sc * (q - 32), q 6 bits (4 low + 2 high).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  f16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// x[j] = d * q[j] + m, q 4 bits (element j in the low nibble of qs[j], j + 16 in the high one).
struct BlockQ4_1 {
  f16_t d;
  f16_t m;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20);

// x[j] = d * (q[j] - 16), q 5 bits: low 4 as in Q4_0, bit 4 of element j in bit j of qh (LE).
struct BlockQ5_0 {
  f16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22);

// 16 sub-blocks of 16: x = d * (scales[j] & 15) * q - dmin * (scales[j] >> 4), q 2 bits.
// Element e: half h = e / 128, shift 2 * ((e % 128) / 32), byte qs[32 * h + e % 32].
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  f16_t d;
  f16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// 16 sub-blocks of 16 with 6-bit scales s (q3_k_scales): x = d * (s - 32) * (q - 4 * !hbit),
// q the 2 low bits laid out as in Q2_K, hbit bit (e / 32) of hmask[e % 32].
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[kKScaleBytes];
  f16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// Q4_K with a fifth bit: element 64c + l (l < 32) has bit 2c of qh[l], 64c + 32 + l bit 2c + 1.
struct BlockQ5_K {
  f16_t d;
  f16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// Non-linear 4-bit: x[j] = d * kIq4nlValues[nibble j] (nibbles as in Q4_0).
constexpr int kQK4_NL = 32;
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
struct BlockIQ4_NL {
  f16_t d;
  uint8_t qs[kQK4_NL / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// 8 sub-blocks of 32 as IQ4_NL with 6-bit scales ls (iq4_xs_scale): x = d * (ls - 32) * value.
struct BlockIQ4_XS {
  f16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// The 16 signed scales (s - 32, in -32..31) of a Q3_K block.
inline void q3_k_scales(const uint8_t* packed, int8_t out[16]) {
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? (packed[j] & 0xF) : (packed[j - 8] >> 4);
    const int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

// The 16 unsigned 6-bit scales (s, 0..63) of a Q3_K block with word operations: out[j] - 32
// equals q3_k_scales(packed)[j].
inline void q3_k_scales_u6(const uint8_t* packed, uint8_t out[16]) {
  constexpr uint32_t kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  uint32_t a[3];
  std::memcpy(a, packed, 12);
  const uint32_t w[4] = {(a[0] & kLow4) | ((a[2] & kLow2) << 4),
                         (a[1] & kLow4) | (((a[2] >> 2) & kLow2) << 4),
                         ((a[0] >> 4) & kLow4) | (((a[2] >> 4) & kLow2) << 4),
                         ((a[1] >> 4) & kLow4) | (((a[2] >> 6) & kLow2) << 4)};
  std::memcpy(out, w, 16);
}

// The signed scale (ls - 32, in -32..31) of sub-block ib (0..7) of an IQ4_XS block.
inline int iq4_xs_scale(const BlockIQ4_XS& b, int ib) {
  const int ls =
      ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4);
  return ls - 32;
}

float f16_to_f32(f16_t h);
f16_t f32_to_f16(float f);  // round to nearest even
inline float bf16_to_f32(bf16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
bf16_t f32_to_bf16(float f);  // round to nearest even

// Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K block.
inline void q4_k_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// All eight (scale, min) pairs of a Q4_K block at once, with word operations instead of eight
// q4_k_scale_min calls: sc[j] and m[j] equal what q4_k_scale_min(j, q, ...) gives.
inline void q4_k_scales_mins(const uint8_t* q, uint8_t sc[8], uint8_t m[8]) {
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  uint32_t u[3];
  std::memcpy(u, q, 12);
  const uint32_t sc_lo = u[0] & kLow6, m_lo = u[1] & kLow6;
  const uint32_t sc_hi = (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4);
  const uint32_t m_hi = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4);
  std::memcpy(sc, &sc_lo, 4);
  std::memcpy(sc + 4, &sc_hi, 4);
  std::memcpy(m, &m_lo, 4);
  std::memcpy(m + 4, &m_hi, 4);
}

// Reference dequantization of `n` elements (a multiple of block_elems(type)) from `src`.
void dequantize_row(DType type, const void* src, float* dst, int64_t n);
// Reference quantization of `n` elements into `dst` (row_bytes(type, n) bytes). Every DType is
// supported; the K-quant and IQ4 quantizers are simple min/max fits (IQ4: the better of two
// scales), not llama.cpp's importance-weighted search.
void quantize_row(DType type, const float* src, void* dst, int64_t n);

}  // namespace cutline::device
