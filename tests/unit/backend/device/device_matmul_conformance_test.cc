// Matmul conformance on every device present (device_conformance.h): every weight type against
// dequantize-then-F32 in double, NaN propagation, and the CUDA device's two paths for weights
// that stay quantized (Q8_0, Q4_K, Q6_K: the in-register kernel up to 8 activation rows, the F16
// dequantize-then-GEMM beyond); batch invariance of matmul on the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "cutline/device/device.h"
#include "device_conformance.h"

namespace cutline::device {
namespace {

// Tolerances of y against the double-precision reference, relative to sum|w*x| (plus 1e-6):
// CPU 1e-5 (F32 accumulation), except Q8_0 on AVX-512 without VNNI and Q8_0, Q4_K on AVX2,
// whose integer kernels quantize the activations to int16 per 256 elements: 2e-5 (measured below
// 5e-6); Q4_K and Q6_K on AVX-512, whose kernels read them as int8 per 256 elements (as
// llama.cpp's K-quant kernels do): 1e-3 (measured below 2e-4 for Q4_K, against the 4-bit
// weights' own error of several percent, and below 3e-4 for Q6_K), and likewise Q4_1, Q5_0, Q2_K,
// Q3_K, Q5_K, IQ4_NL and IQ4_XS on AVX-512 and AVX2 (int8 activations, 1e-3; scalar: the reference
// dequantizer and F32 dot products, 1e-5); Q8_0 on AVX-512 with VNNI, whose kernel reads them as
// int8 per 32 elements (as llama.cpp's Q8_0 kernels do): 2e-3 (each rounding error is independent,
// the sum about 0.005 / sqrt(k) of sum|w*x|, the size of the Q8_0 weights' own error; the largest
// here is 9.7e-4, at k = 288). CUDA: Q8_0, Q4_K and Q6_K at up to 8 activation rows 2e-5 (the
// blocks dequantized in registers bit-identically to the reference, F32 dot products in another
// order); every other case 3e-3 (weights and activations rounded to F16 for cuBLAS).
class MatmulConformance : public DeviceConformance {
 protected:
  double tolerance(DType type, int64_t batch) const {
    if (cuda_) {
      const bool quantized = type == DType::kQ8_0 || type == DType::kQ4_K || type == DType::kQ6_K;
      return quantized && batch <= 8 ? 2e-5 : 3e-3;
    }
    const std::string& isa = GetParam().isa;
    const bool int16_x = (isa == "avx512" && type == DType::kQ8_0) ||
                         (isa == "avx2" && (type == DType::kQ8_0 || type == DType::kQ4_K));
    if (type == DType::kQ8_0 && reads_int8(isa, type)) return 2e-3;
    return reads_int8(isa, type) ? 1e-3 : int16_x ? 2e-5 : 1e-5;
  }

  // `batch` random activation rows times a random [rows][cols] weight of `type` on the device,
  // against the dequantized weight in double: every output, or only weight rows `only` if given.
  void expect_matches_reference(DType type, int64_t rows, int64_t cols, int64_t batch,
                                const std::vector<int64_t>& only = {}) {
    const int64_t rb = row_bytes(type, cols);
    const std::vector<float> wf = random_vec(rows * cols, 1);
    std::vector<uint8_t> wq(rb * rows);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(type, wf.data() + r * cols, wq.data() + r * rb, cols);
    const std::vector<float> x = random_vec(batch * cols, 2);
    auto w = dev_->load_weight(wq.data(), type, rows, cols, nullptr);
    ASSERT_TRUE(w.ok()) << w.error().message;
    Buffer dx = put(x), dy = zeros(batch * rows);
    dev_->matmul(dx.as<float>(), batch, *w, dy.as<float>());
    const std::vector<float> y = get(dy, batch * rows);
    const double rel = tolerance(type, batch);
    std::vector<int64_t> check = only;
    for (int64_t r = 0; only.empty() && r < rows; ++r) check.push_back(r);
    std::vector<float> wd(cols);
    for (const int64_t r : check) {
      dequantize_row(type, wq.data() + r * rb, wd.data(), cols);
      for (int64_t b = 0; b < batch; ++b) {
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < cols; ++k) {
          ref += double(wd[k]) * x[b * cols + k];
          mag += std::fabs(double(wd[k]) * x[b * cols + k]);
        }
        ASSERT_NEAR(y[b * rows + r], ref, rel * mag + 1e-6) << "row " << b << " col " << r;
      }
    }
  }
};

// Every type, 24 weight rows of 512 and of 288 elements (not whole 256-element activation
// blocks: Q8_0's integer path pads the last one), 5 activation rows.
TEST_P(MatmulConformance, MatmulEveryTypeMatchesDequantizedReference) {
  for (const int64_t cols : {512, 288})
    for (DType type : kAllTypes) {
      if (cols % block_elems(type) != 0) continue;
      SCOPED_TRACE(std::string(dtype_name(type)) + " cols " + std::to_string(cols));
      expect_matches_reference(type, 24, cols, 5);
    }
}

// F16, BF16 and F32 weights in whole blocks of 16 rows (held interleaved by the AVX-512 CPU device)
// at decode batches and prefill batches that end in whole and partial 8-row tiles of activations,
// rows of 601 (602 for BF16, interleaved by pairs of positions) elements (the last
// 256-element chain partial, not whole 16-position steps of the interleaving nor 8-element steps
// of the activations' packing) and of 2048, and 176 rows (11 blocks).
TEST_P(MatmulConformance, InterleavedTypesInWholeSixteenRowBlocks) {
  for (const DType type : {DType::kF16, DType::kBF16, DType::kF32})
    for (const int64_t cols : {type == DType::kBF16 ? 602 : 601, 2048})
      for (const int64_t batch : {1, 3, 8, 13, 47}) {
        SCOPED_TRACE(std::string(dtype_name(type)) + " cols " + std::to_string(cols) + " batch " +
                     std::to_string(batch));
        expect_matches_reference(type, 176, cols, batch);
      }
}

// Device::matmuls (one input, several weights: the Q, K and V projections, the FFN's gate and up)
// gives the bits of one matmul call per weight: F16 weights of 48, 16 and 176 rows (which the
// AVX-512 CPU device runs in one pass of its threads, small enough at batch 1 to run on the
// caller), and an F16 weight beside a Q8_0 one (separate calls), at decode and prefill batches.
// Quantized weights whose kernels read x in one layout (Q4_K with Q6_K, as in a Q4_K_M file's
// Q, K and V; Q8_0 with Q8_0), which the CPU device quantizes x for once at decode batches and
// runs in one pass, and types that read x in different layouts (Q2_K, Q8_0, Q5_K).
TEST_P(MatmulConformance, MatmulsOfOneInputEqualOneMatmulPerWeight) {
  struct Case {
    std::vector<DType> types;
    std::vector<int64_t> rows;
    int64_t cols;
  };
  const Case cases[] = {{{DType::kF16, DType::kF16, DType::kF16}, {48, 16, 176}, 601},
                        {{DType::kF16, DType::kQ8_0}, {48, 32}, 512},
                        {{DType::kQ4_K, DType::kQ4_K, DType::kQ6_K}, {512, 64, 64}, 512},
                        {{DType::kQ8_0, DType::kQ8_0}, {512, 128}, 512},
                        {{DType::kQ2_K, DType::kQ8_0, DType::kQ5_K}, {96, 32, 64}, 512}};
  for (const Case& c : cases)
    for (const int64_t batch : {1, 8, 47}) {
      SCOPED_TRACE(std::to_string(c.types.size()) + " weights, batch " + std::to_string(batch));
      std::vector<std::vector<uint8_t>> host(c.types.size());  // weights may be read in place
      std::vector<Weight> ws;
      std::vector<Buffer> together, alone;
      const Buffer dx = put(random_vec(batch * c.cols, 3));
      for (size_t i = 0; i < c.types.size(); ++i) {
        const int64_t rb = row_bytes(c.types[i], c.cols);
        const std::vector<float> wf = random_vec(c.rows[i] * c.cols, 10 + i);
        std::vector<uint8_t>& wq = host[i];
        wq.resize(rb * c.rows[i]);
        for (int64_t r = 0; r < c.rows[i]; ++r)
          quantize_row(c.types[i], wf.data() + r * c.cols, wq.data() + r * rb, c.cols);
        auto w = dev_->load_weight(wq.data(), c.types[i], c.rows[i], c.cols, nullptr);
        ASSERT_TRUE(w.ok()) << w.error().message;
        ws.push_back(std::move(w).value());
        together.push_back(zeros(batch * c.rows[i]));
        alone.push_back(zeros(batch * c.rows[i]));
      }
      std::vector<Device::MatmulTarget> targets;
      for (size_t i = 0; i < ws.size(); ++i) targets.push_back({&ws[i], together[i].as<float>()});
      dev_->matmuls(dx.as<float>(), batch, targets.data(), static_cast<int>(targets.size()));
      for (size_t i = 0; i < ws.size(); ++i) {
        dev_->matmul(dx.as<float>(), batch, ws[i], alone[i].as<float>());
        const std::vector<float> a = get(together[i], batch * c.rows[i]);
        const std::vector<float> b = get(alone[i], batch * c.rows[i]);
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "weight " << i;
        // And not trivially: the outputs are the products, not zeros.
        EXPECT_TRUE(std::any_of(a.begin(), a.end(), [](float v) { return v != 0.0f; }));
      }
    }
}

// Q8_0, Q4_K and Q6_K (the types that stay quantized on a GPU) at a decode batch (1), a small
// batch (4) and a prefill batch (64): on CUDA the in-register kernel, then the F16
// dequantize-then-GEMM path. 37 weight rows (not a multiple of the kernel's 4 rows per thread
// block) of 512 elements; Q8_0 also of 288 (a row that ends inside a warp's 256-element step).
TEST_P(MatmulConformance, QuantizedWeightsAtBatch1And4And64) {
  for (DType type : {DType::kQ8_0, DType::kQ4_K, DType::kQ6_K})
    for (const int64_t cols : {512, 288}) {
      if (cols % block_elems(type) != 0) continue;
      for (const int64_t batch : {1, 4, 64}) {
        SCOPED_TRACE(std::string(dtype_name(type)) + " cols " + std::to_string(cols) + " batch " +
                     std::to_string(batch));
        expect_matches_reference(type, 37, cols, batch);
      }
    }
}

// CUDA only: a prefill matmul by a Q4_K weight of more elements (16400 x 4096) than the F16
// dequantization scratch holds (64 Mi = 16384 rows of 4096) is done in two slices of rows; the
// rows on both sides of the boundary match the reference.
TEST_P(MatmulConformance, QuantizedWeightLargerThanTheDequantizationScratch) {
  if (!cuda_) GTEST_SKIP() << "the CPU device has no dequantization scratch";
  expect_matches_reference(DType::kQ4_K, 16400, 4096, 16, {0, 1, 8191, 16383, 16384, 16399});
}

// A NaN in an activation row makes that row's outputs NaN for every weight type (the model
// reports non-finite logits instead of sampling them); the other rows stay finite.
TEST_P(MatmulConformance, MatmulPropagatesNaN) {
  const int64_t rows = 8, cols = 512;
  for (DType type : kAllTypes) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    const std::vector<float> wf = random_vec(rows * cols, 20);
    std::vector<uint8_t> wq(row_bytes(type, cols) * rows);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(type, wf.data() + r * cols, wq.data() + r * row_bytes(type, cols), cols);
    std::vector<float> x = random_vec(2 * cols, 21);
    x[cols + 300] = NAN;
    auto w = dev_->load_weight(wq.data(), type, rows, cols, nullptr);
    ASSERT_TRUE(w.ok());
    Buffer dx = put(x), dy = zeros(2 * rows);
    dev_->matmul(dx.as<float>(), 2, *w, dy.as<float>());
    const std::vector<float> y = get(dy, 2 * rows);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(std::isfinite(y[r])) << "col " << r;
      EXPECT_TRUE(std::isnan(y[rows + r])) << "col " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDevices, MatmulConformance, testing::ValuesIn(configs()), config_name);

void expect_rows_alone_equal_rows_in_batch(int64_t rows, int64_t cols,
                                           std::span<const DType> types = kAllTypes) {
  for (const char* isa : {"scalar", "avx2", "avx512"}) {
    auto d1 = make_device({.kind = DeviceKind::kCpu, .cpu_threads = 1, .cpu_isa = isa});
    auto d3 = make_device({.kind = DeviceKind::kCpu, .cpu_threads = 3, .cpu_isa = isa});
    ASSERT_TRUE(d1.ok() && d3.ok());
    for (DType type : types) {
      if (cols % block_elems(type) != 0) continue;
      SCOPED_TRACE(std::string(isa) + " " + std::string(dtype_name(type)));
      const std::vector<float> wf = random_vec(rows * cols, 12);
      std::vector<uint8_t> wq(row_bytes(type, cols) * rows);
      for (int64_t r = 0; r < rows; ++r)
        quantize_row(type, wf.data() + r * cols, wq.data() + r * row_bytes(type, cols), cols);
      const std::vector<float> x = random_vec(71 * cols, 13);
      auto w3 = (*d3)->load_weight(wq.data(), type, rows, cols, nullptr);
      auto w1 = (*d1)->load_weight(wq.data(), type, rows, cols, nullptr);
      for (int64_t batch : {8, 9, 12, 13, 70, 71}) {
        std::vector<float> out(batch * rows), alone(rows);
        (*d3)->matmul(x.data(), batch, *w3, out.data());
        for (int b = 0; b < batch; ++b) {
          (*d1)->matmul(x.data() + b * cols, 1, *w1, alone.data());
          ASSERT_EQ(0, std::memcmp(alone.data(), out.data() + b * rows, rows * 4))
              << "batch " << batch << " row " << b;
        }
      }
    }
  }
}

// Batch invariance on the CPU device: a row's matmul result is bitwise the same alone, at every
// offset in batches of 8 to 71 (register tiles of up to 8 rows, 64-row batch blocks, the packed
// prefill path's 6-row tiles with every remainder), with weight-row counts that leave 1, 2 and 3
// rows after the last tile of 4, with 1 or 3 threads, for every type; and rows of 288 elements
// (9 Q8_0 blocks: the int8 kernel's last group of 4 blocks has 1).
TEST(CpuBatchInvariance, MatmulRowAloneEqualsRowInBatch) {
  for (const int64_t rows : {37, 42, 43}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    expect_rows_alone_equal_rows_in_batch(rows, 768);
  }
  SCOPED_TRACE("rows 37 of 288");
  expect_rows_alone_equal_rows_in_batch(37, 288);
}

// F16, BF16 and F32 weights in whole blocks of 16 rows, which the AVX-512 CPU device holds
// interleaved (cpu_kernels.h dot_interleaved): 3 blocks (fewer than a decode tile takes) and 11
// (a tile of 8, then 3 alone; in prefill, tasks of whole 3-block tiles and the 2 left over), rows
// of 601 (602 for BF16) elements (two whole 256-element chains and a partial one; not whole
// 8-element packing steps) and of 2048.
TEST(CpuBatchInvariance, InterleavedRowAloneEqualsRowInBatch) {
  for (const DType type : {DType::kF16, DType::kBF16, DType::kF32}) {
    const DType types[] = {type};
    for (const int64_t rows : {48, 176})
      for (const int64_t cols : {type == DType::kBF16 ? 602 : 601, 2048}) {
        SCOPED_TRACE(std::string(dtype_name(type)) + " rows " + std::to_string(rows) + " of " +
                     std::to_string(cols));
        expect_rows_alone_equal_rows_in_batch(rows, cols, types);
      }
  }
}

}  // namespace
}  // namespace cutline::device
