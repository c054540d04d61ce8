// Q4_K scale unpacking: the word-at-a-time q4_k_scales_mins the kernels use gives, for every
// byte pattern of the 12 packed bytes, the pairs the reference q4_k_scale_min gives one by one.
#include "cutline/device/quant.h"

#include <gtest/gtest.h>

#include <random>

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

}  // namespace
}  // namespace cutline::device
