// Block codecs: Q4_K scale unpacking (the word-at-a-time q4_k_scales_mins the kernels use against
// the reference q4_k_scale_min); hand-built blocks of each type decoded as ggml lays them out;
// quantize -> dequantize round trips with a bound per type.
#include "cutline/device/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace cutline::device {
namespace {

TEST(Q4KScales, AllEightPairsMatchTheReferenceUnpacking) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20000; ++trial) {
    uint8_t packed[12];
    for (uint8_t& b : packed) b = static_cast<uint8_t>(trial < 256 ? trial : rng());
    uint8_t sc[8], mn[8];
    q4_k_scales_mins(packed, sc, mn);
    for (int j = 0; j < 8; ++j) {
      uint8_t ref_sc = 0, ref_m = 0;
      q4_k_scale_min(j, packed, &ref_sc, &ref_m);
      ASSERT_EQ(sc[j], ref_sc) << "trial " << trial << " j " << j;
      ASSERT_EQ(mn[j], ref_m) << "trial " << trial << " j " << j;
    }
  }
}

TEST(Q3KScales, WordUnpackingMatchesTheReference) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 20000; ++trial) {
    uint8_t packed[12];
    for (uint8_t& b : packed) b = static_cast<uint8_t>(trial < 256 ? trial : rng());
    int8_t ref[16];
    uint8_t u[16];
    q3_k_scales(packed, ref);
    q3_k_scales_u6(packed, u);
    for (int j = 0; j < 16; ++j) ASSERT_EQ(u[j] - 32, ref[j]) << "trial " << trial << " j " << j;
  }
}

constexpr f16_t kOne = 0x3C00;  // 1.0 as F16

template <typename Block>
std::vector<float> decode(DType type, const Block& b) {
  std::vector<float> y(block_elems(type));
  dequantize_row(type, &b, y.data(), block_elems(type));
  return y;
}

TEST(BlockLayout, Q4_1AndQ5_0) {
  BlockQ4_1 a{};
  a.d = kOne;
  a.m = f32_to_f16(-8.0f);
  a.qs[0] = 0x21;  // element 0: 1, element 16: 2
  std::vector<float> y = decode(DType::kQ4_1, a);
  EXPECT_EQ(y[0], -7.0f);
  EXPECT_EQ(y[16], -6.0f);
  EXPECT_EQ(y[1], -8.0f);

  BlockQ5_0 b{};
  b.d = kOne;
  b.qs[0] = 0x21;
  b.qh[0] = 0x01;  // bit 0: element 0's fifth bit
  b.qh[2] = 0x01;  // bit 16: element 16's
  b.qh[3] = 0x80;  // bit 31: element 31's
  y = decode(DType::kQ5_0, b);
  EXPECT_EQ(y[0], 1.0f);    // (1 | 16) - 16
  EXPECT_EQ(y[16], 2.0f);   // (2 | 16) - 16
  EXPECT_EQ(y[31], 0.0f);   // (0 | 16) - 16
  EXPECT_EQ(y[1], -16.0f);  // (0 | 0) - 16
}

TEST(BlockLayout, Q2_KAndQ3_K) {
  BlockQ2_K a{};
  a.d = kOne;
  a.dmin = kOne;
  a.scales[5] = 0x32;  // sub-block 5 (elements 80..95): scale 2, min 3
  a.qs[16] = 3 << 4;   // element 80: half 0, shift 2 * 2, byte 16
  std::vector<float> y = decode(DType::kQ2_K, a);
  EXPECT_EQ(y[80], 3.0f);   // 2 * 3 - 3
  EXPECT_EQ(y[81], -3.0f);  // 2 * 0 - 3
  EXPECT_EQ(y[0], 0.0f);

  BlockQ3_K b{};
  b.d = kOne;
  b.scales[0] = 0x21;        // scale 0 low bits 1, scale 8 low bits 2
  b.scales[8] = 0b11100100;  // high bits: scale 0: 0, scale 4: 1, scale 8: 2, scale 12: 3
  int8_t sc[16];
  q3_k_scales(b.scales, sc);
  EXPECT_EQ(sc[0], 1 - 32);
  EXPECT_EQ(sc[4], 16 - 32);
  EXPECT_EQ(sc[8], 34 - 32);
  EXPECT_EQ(sc[12], 48 - 32);
  b.qs[0] = 0b10;        // element 0: low bits 2
  b.hmask[0] = 0x1;      // element 0: high bit set (no -4)
  b.qs[32] = 0b01 << 2;  // element 128 + 32: half 1, shift 2, low bits 1
  b.hmask[0] |= 1 << 5;  // element 160's high bit: bit 160 / 32
  y = decode(DType::kQ3_K, b);
  EXPECT_EQ(y[0], -62.0f);    // -31 * 2
  EXPECT_EQ(y[1], 124.0f);    // -31 * (0 - 4)
  EXPECT_EQ(y[160], -32.0f);  // sub-block 10's scale is 0 - 32, value 1
}

TEST(BlockLayout, Q5_KAndIq4) {
  BlockQ5_K a{};
  a.d = kOne;
  a.scales[0] = 1;  // sub-block 0 scale 1
  a.scales[2] = 2;  // sub-block 2 scale 2
  a.qs[0] = 0x0F;
  a.qh[0] = 0b101;  // element 0's fifth bit (bit 0), element 64's (bit 2)
  a.qs[32] = 0x03;
  std::vector<float> y = decode(DType::kQ5_K, a);
  EXPECT_EQ(y[0], 31.0f);
  EXPECT_EQ(y[64], 38.0f);  // 2 * (3 + 16)
  EXPECT_EQ(y[32], 0.0f);   // sub-block 1 has scale 0

  BlockIQ4_NL b{};
  b.d = kOne;
  b.qs[0] = 0xF0;
  y = decode(DType::kIQ4_NL, b);
  EXPECT_EQ(y[0], -127.0f);
  EXPECT_EQ(y[16], 113.0f);

  BlockIQ4_XS c{};
  c.d = kOne;
  c.scales_l[0] = 0x21;  // sub-block 0 low bits 1, sub-block 1 low bits 2
  c.scales_h = 0x2;      // sub-block 0 high bits 2: ls 33
  c.qs[0] = 0x0F;
  c.qs[16] = 0x08;
  y = decode(DType::kIQ4_XS, c);
  EXPECT_EQ(y[0], 113.0f);    // (33 - 32) * 113
  EXPECT_EQ(y[16], -127.0f);  // (33 - 32) * -127
  EXPECT_EQ(y[32], -30.0f);   // (2 - 32) * 1
}

// Uniform [-1, 1) values through each type and back: the largest error stays within the type's
// step, and the RMS error falls with each bit added (every 4-bit type above every 5-bit one).
TEST(QuantRoundTrip, ErrorWithinEachTypesStep) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(4096);
  for (float& v : x) v = dist(rng);
  struct Case {
    DType type;
    int bits;
    double max_err;  // bound, from the step (measured value in the comment)
  };
  const Case cases[] = {
      // 4 levels over a 16-element range of ~2: half a step 0.33, plus the 4-bit scale (0.38)
      {DType::kQ2_K, 2, 0.45},
      // 8 levels, step amax / 4: a value opposite the sub-block's extreme clamps to +3, one
      // step (0.27)
      {DType::kQ3_K, 3, 0.30},
      {DType::kQ4_1, 4, 0.07},    // 16 levels over the block's range: half of 2 / 15 (0.067)
      {DType::kIQ4_NL, 4, 0.12},  // table spacing up to 24 / 127 of amax: 0.095 (0.107)
      {DType::kIQ4_XS, 4, 0.13},  // IQ4_NL with 6-bit sub-block scales
      {DType::kQ5_0, 5, 0.07},    // step amax / 16; the value opposite the extreme clamps (0.060)
      {DType::kQ5_K, 5, 0.05},    // 32 levels over a 32-element range, 6-bit scales and mins
  };
  double rms_by_bits[6][2] = {};  // min, max RMS error per bit width
  for (auto& m : rms_by_bits) m[0] = 1e9;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.type)));
    std::vector<uint8_t> q(row_bytes(c.type, 4096));
    std::vector<float> back(4096);
    quantize_row(c.type, x.data(), q.data(), 4096);
    dequantize_row(c.type, q.data(), back.data(), 4096);
    double max_err = 0, ss = 0;
    for (int i = 0; i < 4096; ++i) {
      const double e = std::fabs(double(back[i]) - x[i]);
      max_err = std::max(max_err, e);
      ss += e * e;
    }
    const double rms = std::sqrt(ss / 4096);
    EXPECT_LT(max_err, c.max_err);
    EXPECT_GT(rms, 0.0);
    rms_by_bits[c.bits][0] = std::min(rms_by_bits[c.bits][0], rms);
    rms_by_bits[c.bits][1] = std::max(rms_by_bits[c.bits][1], rms);
  }
  EXPECT_GT(rms_by_bits[2][0], rms_by_bits[3][1]);
  EXPECT_GT(rms_by_bits[3][0], rms_by_bits[4][1]);
  EXPECT_GT(rms_by_bits[4][0], rms_by_bits[5][1]);
}

// All-zero and constant blocks quantize without dividing by zero and decode exactly (a zero row
// of a real model, e.g. padding, stays zero).
TEST(QuantRoundTrip, ZeroAndConstantRows) {
  for (DType type : {DType::kQ4_1, DType::kQ5_0, DType::kQ2_K, DType::kQ3_K, DType::kQ5_K,
                     DType::kIQ4_NL, DType::kIQ4_XS}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    std::vector<float> zero(256, 0.0f), back(256, 1.0f);
    std::vector<uint8_t> q(row_bytes(type, 256));
    quantize_row(type, zero.data(), q.data(), 256);
    dequantize_row(type, q.data(), back.data(), 256);
    for (float v : back) ASSERT_EQ(v, 0.0f);
    std::vector<float> half(256, 0.5f);
    quantize_row(type, half.data(), q.data(), 256);
    dequantize_row(type, q.data(), back.data(), 256);
    for (float v : back) ASSERT_NEAR(v, 0.5f, 0.5f * 0.02f);
  }
}

}  // namespace
}  // namespace cutline::device
