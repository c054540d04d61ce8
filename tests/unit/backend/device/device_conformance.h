#pragma once
// The device conformance fixture, shared by device_conformance_test.cc (every op) and
// device_matmul_conformance_test.cc (matmul): one parameter per device configuration present (the
// CPU device with each instruction set this CPU has, at 1 and 3 threads; the CUDA device when a
// GPU exists at run time), skipped when that configuration is absent.
#include <gtest/gtest.h>

#include <cstdlib>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "cutline/device/device.h"

namespace cutline::device {

struct Config {
  DeviceKind kind;
  int32_t threads;
  std::string isa;
};

inline void PrintTo(const Config& c, std::ostream* os) {
  *os << (c.kind == DeviceKind::kCuda ? std::string("cuda")
                                      : "cpu " + c.isa + " x" + std::to_string(c.threads));
}

inline std::vector<Config> configs() {
  std::vector<Config> out;
  for (const char* isa : {"scalar", "avx2", "avx512"}) {
    for (int32_t threads : {1, 3}) out.push_back({DeviceKind::kCpu, threads, isa});
  }
  out.push_back({DeviceKind::kCuda, 0, ""});
  return out;
}

inline std::string config_name(const testing::TestParamInfo<Config>& info) {
  if (info.param.kind == DeviceKind::kCuda) return "cuda";
  return "cpu_" + info.param.isa + "_t" + std::to_string(info.param.threads);
}

inline constexpr DType kAllTypes[] = {DType::kF32,    DType::kF16,   DType::kBF16, DType::kQ8_0,
                                      DType::kQ4_0,   DType::kQ4_1,  DType::kQ5_0, DType::kQ2_K,
                                      DType::kQ3_K,   DType::kQ4_K,  DType::kQ5_K, DType::kQ6_K,
                                      DType::kIQ4_NL, DType::kIQ4_XS};

// Whether the kernels of `isa` read int8 activations for type t (cpu_kernels.h QuantRow q8 or
// qg): Q4_K and Q6_K on AVX-512; Q8_0 on AVX-512 with VNNI; Q4_0, Q4_1, Q5_0, Q2_K, Q3_K, Q5_K,
// IQ4_NL and IQ4_XS on AVX-512 and AVX2.
inline bool reads_int8(const std::string& isa, DType t) {
  if (isa != "avx512" && isa != "avx2") return false;
  if (t == DType::kQ4_K || t == DType::kQ6_K) return isa == "avx512";
  if (t == DType::kQ8_0) {
#if defined(__x86_64__)
    // CUTLINE_CPU_ISA=avx512-base turns VNNI off (cpu_kernels.h avx512_extension_allowed).
    const char* cap = std::getenv("CUTLINE_CPU_ISA");
    return isa == "avx512" && __builtin_cpu_supports("avx512vnni") &&
           (cap == nullptr || std::string(cap) != "avx512-base");
#else
    return false;
#endif
  }
  return t == DType::kQ4_0 || t == DType::kQ4_1 || t == DType::kQ5_0 || t == DType::kQ2_K ||
         t == DType::kQ3_K || t == DType::kQ5_K || t == DType::kIQ4_NL || t == DType::kIQ4_XS;
}

inline std::vector<float> random_vec(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

class DeviceConformance : public testing::TestWithParam<Config> {
 protected:
  void SetUp() override {
    DeviceOptions opts{
        .kind = GetParam().kind, .cpu_threads = GetParam().threads, .cpu_isa = GetParam().isa};
    auto dev = make_device(opts);
    if (!dev.ok()) GTEST_SKIP() << "device not present: " << dev.error().message;
    dev_ = std::move(dev).value();
    if (dev_->kind() == DeviceKind::kCpu &&
        dev_->description().find(GetParam().isa) == std::string::npos) {
      GTEST_SKIP() << "this CPU lacks " << GetParam().isa << " (" << dev_->description() << ")";
    }
    cuda_ = dev_->kind() == DeviceKind::kCuda;
  }

  template <typename T>
  Buffer put(const std::vector<T>& host) {
    auto b = dev_->alloc(static_cast<int64_t>(host.size() * sizeof(T)) + 4);
    EXPECT_TRUE(b.ok());
    dev_->upload(b->data(), host.data(), static_cast<int64_t>(host.size() * sizeof(T)));
    return std::move(b).value();
  }
  Buffer zeros(int64_t floats) {
    auto b = dev_->alloc(floats * 4 + 4);
    EXPECT_TRUE(b.ok());
    dev_->fill_zero(b->data(), floats * 4);
    return std::move(b).value();
  }
  std::vector<float> get(const Buffer& b, int64_t floats) {
    std::vector<float> out(floats);
    dev_->download(out.data(), b.data(), floats * 4);
    EXPECT_TRUE(dev_->sync().ok());
    return out;
  }

  std::unique_ptr<Device> dev_;
  bool cuda_ = false;
};

}  // namespace cutline::device
