#pragma once
// Dequantization math of the Q8_0, Q4_K and Q6_K blocks (layouts in quant.h) on raw bytes, for
// the host and for CUDA kernels alike: CUTLINE_HD is __host__ __device__ under nvcc. C++17, no
// library calls: the CUDA device (cuda/cuda_device.cu, compiled as C++17) dequantizes weights
// that stay quantized in GPU memory with these functions.
//
// Blocks are read byte by byte: Q8_0 (34 bytes) and Q6_K (210) blocks are only 2-byte aligned in a
// row, so no wide loads. Every float operation is a separate rounded multiply or subtract
// (mul_rn, sub_rn: no fused multiply-add on the device either), in the order quant.cc's
// dequantize_row uses, so the results are bit-identical to it (quant_blocks_test.cc checks that).
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define CUTLINE_HD __host__ __device__
#else
#define CUTLINE_HD
#endif

namespace cutline::device::qblock {

constexpr int kQ8_0Elems = 32;
constexpr int kQ8_0Bytes = 34;  // f16 d, int8 qs[32]
constexpr int kQ4_KElems = 256;
constexpr int kQ4_KBytes = 144;  // f16 d, f16 dmin, scales[12], qs[128]
constexpr int kQ6_KElems = 256;
constexpr int kQ6_KBytes = 210;  // ql[128], qh[64], int8 scales[16], f16 d
// The unit the kernels dequantize at once: 8 consecutive elements of a row, never crossing a
// block or a scale group (Q8_0 blocks of 32, Q4_K groups of 32, Q6_K groups of 16).
constexpr int kChunk = 8;

CUTLINE_HD inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
CUTLINE_HD inline float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// IEEE binary16 bits to float (exact; subnormals, infinities and NaNs included).
CUTLINE_HD inline float half_to_float(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits = sign;
  if (exp == 0 && mant != 0) {  // subnormal: normalize
    exp = 127 - 15 + 1;
    while ((mant & 0x400) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3FF) << 13);
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

// The little-endian F16 at p (any alignment).
CUTLINE_HD inline float load_half(const uint8_t* p) {
  return half_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

// Q8_0: x = d * qs[i].
CUTLINE_HD inline float q8_0_value(const uint8_t* block, int i) {
  return mul_rn(load_half(block), static_cast<float>(static_cast<int8_t>(block[2 + i])));
}

// Q4_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
CUTLINE_HD inline void q4_k_scale_min(const uint8_t* scales, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Q4_K sub-block j's multiplier d * sc and offset dmin * m: x = mult * q - offset.
struct GroupScale {
  float mult;
  float offset;
};
CUTLINE_HD inline GroupScale q4_k_group(const uint8_t* block, int j) {
  int sc = 0, m = 0;
  q4_k_scale_min(block + 4, j, &sc, &m);
  return {mul_rn(load_half(block), static_cast<float>(sc)),
          mul_rn(load_half(block + 2), static_cast<float>(m))};
}
// The 4-bit quant of element e (0..255): sub-block pairs share 32 bytes, low nibble first.
CUTLINE_HD inline int q4_k_quant(const uint8_t* block, int e) {
  const int j = e / 32;
  return (block[16 + 32 * (j / 2) + e % 32] >> (4 * (j % 2))) & 0xF;
}
CUTLINE_HD inline float q4_k_value(const uint8_t* block, int e) {
  const GroupScale g = q4_k_group(block, e / 32);
  return sub_rn(mul_rn(g.mult, static_cast<float>(q4_k_quant(block, e))), g.offset);
}

// Q6_K group g's multiplier d * scales[g] (16 groups of 16 elements: group of element e is e / 16).
CUTLINE_HD inline float q6_k_group(const uint8_t* block, int g) {
  return mul_rn(load_half(block + 208), static_cast<float>(static_cast<int8_t>(block[192 + g])));
}
// The signed 6-bit quant (q - 32) of element e: in each half of 128, quarter k = (e % 128) / 32
// takes nibble k / 2 of ql[64 * half + 32 * (k % 2) + l] and bits 2k of qh[32 * half + l].
CUTLINE_HD inline int q6_k_quant(const uint8_t* block, int e) {
  const int half = e / 128, k = (e % 128) / 32, l = e % 32;
  const int lo = (block[64 * half + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xF;
  const int hi = (block[128 + 32 * half + l] >> (2 * k)) & 3;
  return (lo | (hi << 4)) - 32;
}
CUTLINE_HD inline float q6_k_value(const uint8_t* block, int e) {
  return mul_rn(q6_k_group(block, e / 16), static_cast<float>(q6_k_quant(block, e)));
}

// Elements [k0, k0 + 8) of a row (k0 a multiple of 8) into w: one scale lookup per chunk.
CUTLINE_HD inline void q8_0_chunk(const uint8_t* row, int64_t k0, float* w) {
  const uint8_t* block = row + (k0 / kQ8_0Elems) * kQ8_0Bytes;
  const float d = load_half(block);
  const uint8_t* qs = block + 2 + k0 % kQ8_0Elems;
  for (int i = 0; i < kChunk; ++i) w[i] = mul_rn(d, static_cast<float>(static_cast<int8_t>(qs[i])));
}
CUTLINE_HD inline void q4_k_chunk(const uint8_t* row, int64_t k0, float* w) {
  const uint8_t* block = row + (k0 / kQ4_KElems) * kQ4_KBytes;
  const int e = static_cast<int>(k0 % kQ4_KElems), j = e / 32;
  const GroupScale g = q4_k_group(block, j);
  const uint8_t* qs = block + 16 + 32 * (j / 2) + e % 32;
  const int shift = 4 * (j % 2);
  for (int i = 0; i < kChunk; ++i)
    w[i] = sub_rn(mul_rn(g.mult, static_cast<float>((qs[i] >> shift) & 0xF)), g.offset);
}
CUTLINE_HD inline void q6_k_chunk(const uint8_t* row, int64_t k0, float* w) {
  const uint8_t* block = row + (k0 / kQ6_KElems) * kQ6_KBytes;
  const int e = static_cast<int>(k0 % kQ6_KElems);
  const int half = e / 128, k = (e % 128) / 32, l = e % 32;
  const float mult = q6_k_group(block, e / 16);
  const uint8_t* ql = block + 64 * half + 32 * (k % 2) + l;
  const uint8_t* qh = block + 128 + 32 * half + l;
  for (int i = 0; i < kChunk; ++i) {
    const int q = (((ql[i] >> (4 * (k / 2))) & 0xF) | (((qh[i] >> (2 * k)) & 3) << 4)) - 32;
    w[i] = mul_rn(mult, static_cast<float>(q));
  }
}

}  // namespace cutline::device::qblock
