// Conformance: every Device op but matmul (device_matmul_conformance_test.cc) on every device
// present (the CPU device with each instruction set this CPU has, at 1 and 3 threads; the CUDA
// device when a GPU exists at run time) against plain loops, with a tolerance stated per op; batch
// invariance of matmul and attention on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cutline/device/device.h"
#include "device_conformance.h"

namespace cutline::device {
namespace {

// Quantized weights really are quantized: the dequantized reference differs from the F32 source
// by the type's step, and q4 differs more than q8 (guards against a test that compares F32 to F32).
TEST(Quant, RoundTripErrorOrderedByBits) {
  const std::vector<float> x = random_vec(1024, 3);
  double err[7] = {};
  int i = 0;
  for (DType type :
       {DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ6_K, DType::kQ4_K, DType::kQ4_0}) {
    std::vector<uint8_t> q(row_bytes(type, 1024));
    std::vector<float> back(1024);
    quantize_row(type, x.data(), q.data(), 1024);
    dequantize_row(type, q.data(), back.data(), 1024);
    for (int k = 0; k < 1024; ++k) err[i] = std::max(err[i], double(std::fabs(back[k] - x[k])));
    ++i;
  }
  EXPECT_LT(err[0], 1e-3);       // f16
  EXPECT_LT(err[1], 1e-2);       // bf16
  EXPECT_LT(err[2], 1.0 / 127);  // q8_0: half a step of amax/127
  EXPECT_LT(err[3], 0.04);       // q6_k
  EXPECT_LT(err[4], 0.1);        // q4_k
  EXPECT_LT(err[5], 0.15);       // q4_0
  EXPECT_GT(err[5], err[2]);
  EXPECT_GT(err[2], 0);
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(1e6f), 0x7C00);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
}

// The weight bytes a load reports are what the device holds: nothing on the CPU (read in place);
// on CUDA the blocks' own size for Q8_0, Q4_K and Q6_K (they stay quantized), 4 bytes an element
// for F32 and 2 (F16) for every other type.
TEST_P(DeviceConformance, LoadReportsTheBytesTheDeviceHolds) {
  const int64_t rows = 6, cols = 512;
  for (DType type : kAllTypes) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    std::vector<uint8_t> wq(row_bytes(type, cols) * rows);
    const std::vector<float> wf = random_vec(rows * cols, 5);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(type, wf.data() + r * cols, wq.data() + r * row_bytes(type, cols), cols);
    WeightLoadTiming timing;
    auto w = dev_->load_weight(wq.data(), type, rows, cols, &timing);
    ASSERT_TRUE(w.ok()) << w.error().message;
    const bool kept =
        type == DType::kQ8_0 || type == DType::kQ4_K || type == DType::kQ6_K || type == DType::kF32;
    const int64_t expected = !cuda_ ? 0 : kept ? rows * row_bytes(type, cols) : rows * cols * 2;
    EXPECT_EQ(timing.device_bytes, expected);
  }
}

// Embedding rows of every type equal the reference dequantization (CUDA: Q8_0, Q4_K and Q6_K
// read in place, the other types from F16 storage: 1e-3).
TEST_P(DeviceConformance, EmbedEveryType) {
  const int64_t rows = 10, cols = 256;
  for (DType type : kAllTypes) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    const std::vector<float> wf = random_vec(rows * cols, 4);
    std::vector<uint8_t> wq(row_bytes(type, cols) * rows);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(type, wf.data() + r * cols, wq.data() + r * row_bytes(type, cols), cols);
    auto w = dev_->load_weight(wq.data(), type, rows, cols, nullptr);
    ASSERT_TRUE(w.ok());
    const std::vector<int32_t> ids = {7, 0, 9, 7};
    Buffer dids = put(ids), dy = zeros(4 * cols);
    dev_->embed(*w, dids.as<int32_t>(), 4, dy.as<float>());
    const std::vector<float> y = get(dy, 4 * cols);
    std::vector<float> ref(cols);
    for (int i = 0; i < 4; ++i) {
      dequantize_row(type, wq.data() + ids[i] * row_bytes(type, cols), ref.data(), cols);
      for (int64_t k = 0; k < cols; ++k) {
        ASSERT_NEAR(y[i * cols + k], ref[k], (cuda_ ? 1e-3 : 1e-6) * (std::fabs(ref[k]) + 1e-3));
      }
    }
  }
}

// F16, BF16 and F32 tables in whole blocks of 16 rows (held interleaved by the AVX-512 CPU
// device): every row embeds to exactly its values (CUDA, which holds BF16 as F16: BF16 within
// F16's rounding). 300 columns: not whole 16-position steps of the interleaving.
TEST_P(DeviceConformance, EmbedInterleavedTypesInWholeSixteenRowBlocks) {
  const int64_t rows = 48, cols = 300;
  for (const DType type : {DType::kF16, DType::kBF16, DType::kF32}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    const std::vector<float> wf = random_vec(rows * cols, 6);
    const int64_t rb = row_bytes(type, cols);
    std::vector<uint8_t> wq(rb * rows);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(type, wf.data() + r * cols, wq.data() + r * rb, cols);
    auto w = dev_->load_weight(wq.data(), type, rows, cols, nullptr);
    ASSERT_TRUE(w.ok());
    std::vector<int32_t> ids(rows);
    for (int32_t i = 0; i < rows; ++i) ids[i] = (i * 7 + 3) % rows;
    Buffer dids = put(ids), dy = zeros(rows * cols);
    dev_->embed(*w, dids.as<int32_t>(), rows, dy.as<float>());
    const std::vector<float> y = get(dy, rows * cols);
    std::vector<float> ref(cols);
    for (int64_t i = 0; i < rows; ++i) {
      dequantize_row(type, wq.data() + ids[i] * rb, ref.data(), cols);
      for (int64_t k = 0; k < cols; ++k) {
        if (cuda_ && type == DType::kBF16) {
          ASSERT_NEAR(y[i * cols + k], ref[k], 1e-3 * (std::fabs(ref[k]) + 1e-3)) << i << " " << k;
        } else {
          ASSERT_EQ(y[i * cols + k], ref[k]) << i << " " << k;
        }
      }
    }
  }
}

// RMSNorm, SwiGLU, add, add_bias, softmax, gather: relative 1e-5 (CPU), 1e-4 (CUDA fast math).
TEST_P(DeviceConformance, ElementwiseAndRowOps) {
  const int64_t rows = 3, dim = 200;
  const double tol = cuda_ ? 1e-4 : 1e-5;
  const std::vector<float> x = random_vec(rows * dim, 5, 3.0f), w = random_vec(dim, 6),
                           u = random_vec(rows * dim, 7);
  Buffer dx = put(x), dw = put(w), du = put(u), dy = zeros(rows * dim);
  dev_->rms_norm(dx.as<float>(), dw.as<float>(), rows, dim, 1e-5f, dy.as<float>());
  std::vector<float> y = get(dy, rows * dim);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
    const double scale = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int64_t i = 0; i < dim; ++i) {
      const double ref = x[r * dim + i] * scale * w[i];
      ASSERT_NEAR(y[r * dim + i], ref, tol * (std::fabs(ref) + 1e-3));
    }
  }
  dev_->swiglu(dx.as<float>(), du.as<float>(), rows * dim, dy.as<float>());
  y = get(dy, rows * dim);
  for (int64_t i = 0; i < rows * dim; ++i) {
    const double ref = x[i] / (1.0 + std::exp(-double(x[i]))) * u[i];
    ASSERT_NEAR(y[i], ref, tol * (std::fabs(ref) + 1e-3));
  }
  dev_->add(dx.as<float>(), du.as<float>(), rows * dim, dy.as<float>());
  y = get(dy, rows * dim);
  for (int64_t i = 0; i < rows * dim; ++i) ASSERT_EQ(y[i], x[i] + u[i]);
  dev_->add_bias(dy.as<float>(), dw.as<float>(), rows, dim);
  y = get(dy, rows * dim);
  for (int64_t i = 0; i < rows * dim; ++i) ASSERT_EQ(y[i], (x[i] + u[i]) + w[i % dim]);
  dev_->upload(dy.data(), x.data(), rows * dim * 4);
  dev_->softmax(dy.as<float>(), rows, dim);
  y = get(dy, rows * dim);
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -1e30, sum = 0;
    for (int64_t i = 0; i < dim; ++i) mx = std::max(mx, double(x[r * dim + i]));
    for (int64_t i = 0; i < dim; ++i) sum += std::exp(x[r * dim + i] - mx);
    for (int64_t i = 0; i < dim; ++i) {
      const double ref = std::exp(x[r * dim + i] - mx) / sum;
      ASSERT_NEAR(y[r * dim + i], ref, tol * ref + 1e-9);
    }
  }
  const std::vector<int32_t> pick = {2, 0};
  Buffer dpick = put(pick);
  dev_->gather_rows(dx.as<float>(), dpick.as<int32_t>(), 2, dim, dy.as<float>());
  y = get(dy, 2 * dim);
  for (int64_t i = 0; i < dim; ++i) {
    ASSERT_EQ(y[i], x[2 * dim + i]);
    ASSERT_EQ(y[dim + i], x[i]);
  }
}

// RoPE in both orderings, with linear scaling and frequency factors, vs double-precision loops.
// Tolerance 2e-5 absolute on unit-scale inputs (CUDA: 2e-4, float angles).
TEST_P(DeviceConformance, RopeBothOrderings) {
  const int32_t heads = 3, head_dim = 16, rows = 4;
  const std::vector<int32_t> pos = {0, 1, 17, 300};
  const std::vector<float> factors = {1, 1, 2, 2, 4, 4, 8, 8};
  Buffer dpos = put(pos), dfac = put(factors);
  for (bool neox : {false, true}) {
    for (bool with_factors : {false, true}) {
      const std::vector<float> x = random_vec(rows * heads * head_dim, 8);
      Buffer dx = put(x);
      RopeParams p{.freq_base = 10000.0f,
                   .freq_scale = 0.5f,
                   .n_rot = head_dim,
                   .neox = neox,
                   .freq_factors = with_factors ? dfac.as<float>() : nullptr};
      dev_->rope(dx.as<float>(), dpos.as<int32_t>(), rows, heads, head_dim, p);
      const std::vector<float> y = get(dx, rows * heads * head_dim);
      for (int32_t r = 0; r < rows; ++r) {
        for (int32_t h = 0; h < heads; ++h) {
          const float* v = x.data() + (r * heads + h) * head_dim;
          for (int32_t i = 0; i < head_dim / 2; ++i) {
            double theta = pos[r] * 0.5 * std::pow(10000.0, -2.0 * i / head_dim);
            if (with_factors) theta /= factors[i];
            const int a = neox ? i : 2 * i, b = neox ? i + head_dim / 2 : 2 * i + 1;
            const double ra = v[a] * std::cos(theta) - v[b] * std::sin(theta);
            const double rb = v[a] * std::sin(theta) + v[b] * std::cos(theta);
            const float* out = y.data() + (r * heads + h) * head_dim;
            ASSERT_NEAR(out[a], ra, cuda_ ? 2e-4 : 2e-5)
                << "neox " << neox << " r " << r << " i " << i;
            ASSERT_NEAR(out[b], rb, cuda_ ? 2e-4 : 2e-5);
          }
        }
      }
    }
  }
}

// Paged attention setup: two sequences in scattered blocks, GQA 4 query heads per 2 KV heads.
struct AttentionCase {
  int32_t n_heads = 4, n_kv_heads = 2, head_dim = 32, block_size = 4, n_blocks = 12;
  std::vector<int32_t> tables = {7, 2, 9, 0, /*seq 1:*/ 5, 11, 3};
  std::vector<int32_t> table_begin = {0, 4};
  std::vector<int32_t> lens = {13, 10};  // positions cached per sequence
  std::vector<float> k_cache, v_cache;
  int64_t kv_dim() const { return int64_t{n_kv_heads} * head_dim; }
  int64_t slot(int s, int32_t p) const {
    return int64_t{tables[table_begin[s] + p / block_size]} * block_size + p % block_size;
  }
};

// Reference attention of one query (head h) of sequence s at position pos, in double.
std::vector<double> ref_attention(const AttentionCase& c, const float* q, int s, int32_t pos,
                                  int h) {
  const int group = c.n_heads / c.n_kv_heads;
  std::vector<double> scores(pos + 1), out(c.head_dim, 0.0);
  double mx = -1e300, sum = 0;
  for (int32_t j = 0; j <= pos; ++j) {
    const float* k = c.k_cache.data() + c.slot(s, j) * c.kv_dim() + (h / group) * c.head_dim;
    double d = 0;
    for (int i = 0; i < c.head_dim; ++i) d += double(q[i]) * k[i];
    scores[j] = d / std::sqrt(double(c.head_dim));
    mx = std::max(mx, scores[j]);
  }
  for (double& sc : scores) sum += (sc = std::exp(sc - mx));
  for (int32_t j = 0; j <= pos; ++j) {
    const float* v = c.v_cache.data() + c.slot(s, j) * c.kv_dim() + (h / group) * c.head_dim;
    for (int i = 0; i < c.head_dim; ++i) out[i] += scores[j] / sum * v[i];
  }
  return out;
}

// kv_write through slots, then prefill (all positions of both sequences as queries, causal) and
// decode (the last position only) vs the reference. Tolerance 1e-5 (CPU) / 1e-4 (CUDA).
// Run with 2 query heads per KV head and with 6 (more than one pass of the CPU's 4-head groups).
TEST_P(DeviceConformance, PagedAttentionPrefillAndDecode) {
  for (int32_t n_heads : {4, 12}) {
    SCOPED_TRACE("heads " + std::to_string(n_heads));
    AttentionCase c;
    c.n_heads = n_heads;
    const int64_t cache_rows = int64_t{c.n_blocks} * c.block_size;
    c.k_cache.assign(cache_rows * c.kv_dim(), 0.0f);
    c.v_cache.assign(cache_rows * c.kv_dim(), 0.0f);
    // Write every sequence's K/V through kv_write.
    std::vector<int32_t> slots;
    std::vector<AttentionToken> toks;
    for (int s = 0; s < 2; ++s) {
      for (int32_t p = 0; p < c.lens[s]; ++p) {
        slots.push_back(static_cast<int32_t>(c.slot(s, p)));
        toks.push_back({p, c.table_begin[s]});
      }
    }
    const int64_t n = static_cast<int64_t>(slots.size());
    const std::vector<float> k = random_vec(n * c.kv_dim(), 9), v = random_vec(n * c.kv_dim(), 10);
    const std::vector<float> q = random_vec(n * c.n_heads * c.head_dim, 11, 2.0f);
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(c.k_cache.data() + slots[i] * c.kv_dim(), k.data() + i * c.kv_dim(),
                  c.kv_dim() * 4);
      std::memcpy(c.v_cache.data() + slots[i] * c.kv_dim(), v.data() + i * c.kv_dim(),
                  c.kv_dim() * 4);
    }
    Buffer dkc = zeros(cache_rows * c.kv_dim()), dvc = zeros(cache_rows * c.kv_dim());
    Buffer dk = put(k), dv = put(v), dslots = put(slots), dq = put(q), dtables = put(c.tables);
    dev_->kv_write(dkc.as<float>(), dvc.as<float>(), dk.as<float>(), dv.as<float>(),
                   dslots.as<int32_t>(), n, c.kv_dim());
    ASSERT_EQ(get(dkc, cache_rows * c.kv_dim()), c.k_cache);
    ASSERT_EQ(get(dvc, cache_rows * c.kv_dim()), c.v_cache);

    const int64_t q_dim = int64_t{c.n_heads} * c.head_dim;
    for (bool decode : {false, true}) {
      std::vector<AttentionToken> run_toks;
      std::vector<float> run_q;
      std::vector<int> seq_of;
      for (int64_t i = 0; i < n; ++i) {
        const int s = i < c.lens[0] ? 0 : 1;
        if (decode && toks[i].pos != c.lens[s] - 1) continue;
        run_toks.push_back(toks[i]);
        run_q.insert(run_q.end(), q.begin() + i * q_dim, q.begin() + (i + 1) * q_dim);
        seq_of.push_back(s);
      }
      const int32_t m = static_cast<int32_t>(run_toks.size());
      Buffer dtok = put(run_toks), drq = put(run_q), dout = zeros(m * q_dim);
      AttentionArgs a{.q = drq.as<float>(),
                      .out = dout.as<float>(),
                      .k_cache = dkc.as<float>(),
                      .v_cache = dvc.as<float>(),
                      .block_tables = dtables.as<int32_t>(),
                      .tokens = dtok.as<AttentionToken>(),
                      .n_tokens = m,
                      .n_heads = c.n_heads,
                      .n_kv_heads = c.n_kv_heads,
                      .head_dim = c.head_dim,
                      .block_size = c.block_size,
                      .max_pos = 12,
                      .scale = 1.0f / std::sqrt(float(c.head_dim))};
      dev_->paged_attention(a);
      const std::vector<float> out = get(dout, m * q_dim);
      for (int32_t t = 0; t < m; ++t) {
        for (int h = 0; h < c.n_heads; ++h) {
          const auto ref = ref_attention(c, run_q.data() + t * q_dim + h * c.head_dim, seq_of[t],
                                         run_toks[t].pos, h);
          for (int i = 0; i < c.head_dim; ++i) {
            ASSERT_NEAR(out[t * q_dim + h * c.head_dim + i], ref[i], cuda_ ? 1e-4 : 1e-5)
                << "decode " << decode << " token " << t << " head " << h;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDevices, DeviceConformance, testing::ValuesIn(configs()), config_name);
// Batch invariance of attention: a decode query alone gives the same bits as inside a call with
// the other sequence's whole prefill.
TEST(CpuBatchInvariance, AttentionTokenAloneEqualsTokenInBatch) {
  AttentionCase c;
  const int64_t cache_rows = int64_t{c.n_blocks} * c.block_size;
  const std::vector<float> kc = random_vec(cache_rows * c.kv_dim(), 14),
                           vc = random_vec(cache_rows * c.kv_dim(), 15);
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim;
  std::vector<AttentionToken> toks;
  for (int32_t p = 0; p < c.lens[1]; ++p) toks.push_back({p, 4});
  toks.push_back({12, 0});
  const int32_t m = static_cast<int32_t>(toks.size());
  const std::vector<float> q = random_vec(m * q_dim, 16);
  auto dev = make_device({.kind = DeviceKind::kCpu, .cpu_threads = 3, .cpu_isa = ""});
  ASSERT_TRUE(dev.ok());
  std::vector<float> out(m * q_dim), alone(q_dim);
  AttentionArgs a{.q = q.data(),
                  .out = out.data(),
                  .k_cache = kc.data(),
                  .v_cache = vc.data(),
                  .block_tables = c.tables.data(),
                  .tokens = toks.data(),
                  .n_tokens = m,
                  .n_heads = c.n_heads,
                  .n_kv_heads = c.n_kv_heads,
                  .head_dim = c.head_dim,
                  .block_size = c.block_size,
                  .max_pos = 12,
                  .scale = 0.2f};
  (*dev)->paged_attention(a);
  a.q = q.data() + (m - 1) * q_dim;
  a.out = alone.data();
  a.tokens = toks.data() + m - 1;
  a.n_tokens = 1;
  (*dev)->paged_attention(a);
  EXPECT_EQ(0, std::memcmp(alone.data(), out.data() + (m - 1) * q_dim, q_dim * 4));
}

// The CPU device's SwiGLU gives the same bits with every instruction set this CPU has (one exp
// for all of them, as the attention softmax), 16 at a time and in the padded tail, and stays
// finite where exp(-gate) overflows or underflows: gate * up for a large gate, about 0 for a
// very negative one.
TEST(CpuSwiglu, SameBitsOnEveryInstructionSetAndFiniteAtTheExtremes) {
  std::vector<float> gate = random_vec(37, 21, 4.0f), up = random_vec(37, 22);
  for (const float g : {-1000.0f, -100.0f, -88.0f, -0.0f, 0.0f, 20.0f, 88.0f, 100.0f, 1000.0f}) {
    gate.push_back(g);
    up.push_back(0.75f);
  }
  const int64_t n = static_cast<int64_t>(gate.size());
  std::vector<float> scalar;
  for (const char* isa : {"scalar", "avx2", "avx512"}) {
    auto dev = make_device({.kind = DeviceKind::kCpu, .cpu_threads = 1, .cpu_isa = isa});
    ASSERT_TRUE(dev.ok());
    if ((*dev)->description().find(isa) == std::string::npos) continue;  // not on this CPU
    std::vector<float> y(n);
    (*dev)->swiglu(gate.data(), up.data(), n, y.data());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << isa << " gate " << gate[i];
      const double ref = gate[i] / (1.0 + std::exp(-double(gate[i]))) * up[i];
      ASSERT_NEAR(y[i], ref, 1e-5 * (std::fabs(ref) + 1e-3)) << isa << " gate " << gate[i];
    }
    if (scalar.empty()) {
      scalar = y;
    } else {
      EXPECT_EQ(0, std::memcmp(scalar.data(), y.data(), n * sizeof(float))) << isa;
    }
  }
}

TEST(MakeDevice, CudaUnavailableIsAnErrorAndAutoFallsBackToCpu) {
  auto cuda = make_device({.kind = DeviceKind::kCuda, .cpu_threads = 0, .cpu_isa = ""});
  auto any = make_device({.kind = DeviceKind::kAuto, .cpu_threads = 0, .cpu_isa = ""});
  ASSERT_TRUE(any.ok());
  if (!cuda.ok()) {
    EXPECT_FALSE(cuda.error().message.empty());
    EXPECT_EQ((*any)->kind(), DeviceKind::kCpu);
  } else {
    EXPECT_EQ((*any)->kind(), DeviceKind::kCuda);
  }
}

}  // namespace
}  // namespace cutline::device
