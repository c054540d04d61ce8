// The host/device block math (quant_blocks.h, what the CUDA kernels dequantize with) gives
// bit-identical floats to the reference dequantize_row for Q8_0, Q4_K and Q6_K blocks: random
// bytes, extreme and non-finite scales, and every 6-bit scale and min of Q4_K at every position.
#include "cutline/device/quant_blocks.h"

#include <gtest/gtest.h>

#include <cpuid.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cutline/device/quant.h"

namespace cutline::device {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Bit for bit, except that any NaN equals any NaN: which operand's NaN an x86 multiply passes on
// (and so its sign) follows the operand order the compiler chose.
testing::AssertionResult same_bits(float a, float b) {
  if ((std::isnan(a) && std::isnan(b)) || bits(a) == bits(b)) return testing::AssertionSuccess();
  return testing::AssertionFailure()
         << a << " (0x" << std::hex << bits(a) << ") vs " << b << " (0x" << bits(b) << ")";
}

// F16 scales a block may carry: zero, the smallest subnormal, the smallest normal, one, the
// largest finite (both signs), infinity and NaN.
constexpr uint16_t kExtremeHalves[] = {0x0000, 0x0001, 0x0400, 0x3C00,
                                       0x7BFF, 0xFBFF, 0x7C00, 0x7E00};

// Every element of `nb` blocks of `type` at `row`, through the per-element function and the
// 8-element chunk function, against dequantize_row, bit for bit (same_bits).
void expect_identical(DType type, const std::vector<uint8_t>& row, int64_t n,
                      float (*value)(const uint8_t*, int),
                      void (*chunk)(const uint8_t*, int64_t, float*)) {
  std::vector<float> ref(n);
  dequantize_row(type, row.data(), ref.data(), n);
  const int64_t per = block_elems(type), bytes = block_bytes(type);
  for (int64_t k = 0; k < n; ++k) {
    const float v = value(row.data() + (k / per) * bytes, static_cast<int>(k % per));
    ASSERT_TRUE(same_bits(v, ref[k])) << dtype_name(type) << " element " << k;
  }
  for (int64_t k0 = 0; k0 < n; k0 += qblock::kChunk) {
    float w[qblock::kChunk];
    chunk(row.data(), k0, w);
    for (int i = 0; i < qblock::kChunk; ++i) {
      ASSERT_TRUE(same_bits(w[i], ref[k0 + i]))
          << dtype_name(type) << " chunk at " << k0 << " element " << i;
    }
  }
}

std::vector<uint8_t> random_bytes(size_t n, std::mt19937& rng) {
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

void put_half(uint8_t* p, uint16_t h) {
  p[0] = static_cast<uint8_t>(h & 0xFF);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// The processor's own conversion (F16C), independent of the code under test.
__attribute__((target("f16c"))) float hardware_half_to_float(uint16_t h) { return _cvtsh_ss(h); }

TEST(QuantBlocks, HalfToFloatMatchesTheProcessorForEveryBitPattern) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  ASSERT_TRUE(__get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float ours = qblock::half_to_float(static_cast<uint16_t>(h));
    const float ref = hardware_half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(ref)) {  // the processor quiets a signaling NaN; any NaN is a NaN
      ASSERT_TRUE(std::isnan(ours)) << "half " << h;
      ASSERT_EQ(std::signbit(ours), std::signbit(ref)) << "half " << h;
      continue;
    }
    ASSERT_EQ(bits(ours), bits(ref)) << "half " << h;
    ASSERT_EQ(bits(f16_to_f32(static_cast<f16_t>(h))), bits(ref)) << "half " << h;
  }
}

TEST(QuantBlocks, BlockSizesMatchTheLayouts) {
  EXPECT_EQ(qblock::kQ8_0Bytes, block_bytes(DType::kQ8_0));
  EXPECT_EQ(qblock::kQ8_0Elems, block_elems(DType::kQ8_0));
  EXPECT_EQ(qblock::kQ4_KBytes, block_bytes(DType::kQ4_K));
  EXPECT_EQ(qblock::kQ4_KElems, block_elems(DType::kQ4_K));
  EXPECT_EQ(qblock::kQ6_KBytes, block_bytes(DType::kQ6_K));
  EXPECT_EQ(qblock::kQ6_KElems, block_elems(DType::kQ6_K));
}

TEST(QuantBlocks, Q8_0RandomAndExtremeScalesAreBitIdentical) {
  std::mt19937 rng(31);
  const int64_t nb = 64, n = nb * qblock::kQ8_0Elems;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<uint8_t> row = random_bytes(nb * qblock::kQ8_0Bytes, rng);
    if (trial % 2 == 1) {  // every other row: each block an extreme scale
      for (int64_t b = 0; b < nb; ++b)
        put_half(row.data() + b * qblock::kQ8_0Bytes, kExtremeHalves[b % 8]);
    }
    expect_identical(DType::kQ8_0, row, n, &qblock::q8_0_value, &qblock::q8_0_chunk);
  }
}

TEST(QuantBlocks, Q6_KRandomAndExtremeScalesAreBitIdentical) {
  std::mt19937 rng(33);
  const int64_t nb = 16, n = nb * qblock::kQ6_KElems;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<uint8_t> row = random_bytes(nb * qblock::kQ6_KBytes, rng);
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* block = row.data() + b * qblock::kQ6_KBytes;
      if (trial % 2 == 1) put_half(block + 208, kExtremeHalves[b % 8]);
      if (b == 0) {  // the extreme 8-bit scales
        for (int g = 0; g < 16; ++g) block[192 + g] = g % 2 ? 0x80 : 0x7F;
      }
    }
    expect_identical(DType::kQ6_K, row, n, &qblock::q6_k_value, &qblock::q6_k_chunk);
  }
}

// Packs the 6-bit scale and min of sub-block j as quant.h lays them out (q4_k_scale_min).
void pack_q4_k(uint8_t* scales, int j, int sc, int m) {
  if (j < 4) {
    scales[j] = static_cast<uint8_t>((scales[j] & 0xC0) | sc);
    scales[j + 4] = static_cast<uint8_t>((scales[j + 4] & 0xC0) | m);
  } else {
    scales[j + 4] = static_cast<uint8_t>((sc & 0xF) | ((m & 0xF) << 4));
    scales[j - 4] = static_cast<uint8_t>((scales[j - 4] & 0x3F) | ((sc >> 4) << 6));
    scales[j] = static_cast<uint8_t>((scales[j] & 0x3F) | ((m >> 4) << 6));
  }
}

TEST(QuantBlocks, Q4_KEveryScaleAndMinPatternIsBitIdentical) {
  std::mt19937 rng(35);
  const int64_t nb = 16, n = nb * qblock::kQ4_KElems;
  // 4096 (scale, min) pairs, each at all 8 sub-block positions, 16 blocks a row.
  for (int first = 0; first < 64 * 64; first += nb) {
    std::vector<uint8_t> row = random_bytes(nb * qblock::kQ4_KBytes, rng);
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* block = row.data() + b * qblock::kQ4_KBytes;
      const int pair = first + static_cast<int>(b);
      for (int j = 0; j < 8; ++j) {
        const int p = (pair + 517 * j) % 4096;  // a different pair at each position
        pack_q4_k(block + 4, j, p % 64, p / 64);
        int sc = 0, m = 0;
        qblock::q4_k_scale_min(block + 4, j, &sc, &m);
        ASSERT_EQ(sc, p % 64);
        ASSERT_EQ(m, p / 64);
      }
      if (first % 32 == 16) {  // extreme d and dmin
        put_half(block, kExtremeHalves[b % 8]);
        put_half(block + 2, kExtremeHalves[(b + 3) % 8]);
      }
    }
    expect_identical(DType::kQ4_K, row, n, &qblock::q4_k_value, &qblock::q4_k_chunk);
  }
}

}  // namespace
}  // namespace cutline::device
