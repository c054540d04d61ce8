// Portable CPU kernels (the build's baseline ISA): the fallback when AVX2 is absent.
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "cpu_kernels.h"

namespace cutline::device::cpu {
namespace {

// 4 scalar accumulators, element i goes to accumulator i % 4; same order for every row.
void dot_rows(const float* w, const float* const* xs, int nr, int64_t k, float* out) {
  for (int r = 0; r < nr; ++r) {
    float acc[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= k; i += 4)
      for (int j = 0; j < 4; ++j) acc[j] += w[i + j] * xs[r][i + j];
    float tail = 0;
    for (; i < k; ++i) tail += w[i] * xs[r][i];
    out[r] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + tail;
  }
}

void dequant(DType type, const void* src, float* dst, int64_t n) {
  dequantize_row(type, src, dst, n);
}

}  // namespace

const Kernels& scalar_kernels() {
  static const Kernels k{Isa::kScalar, 1, &dot_rows, &dequant};
  return k;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "scalar";
}

Isa detect_isa() {
  Isa best = Isa::kScalar;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = Isa::kAvx2;
  if (best == Isa::kAvx2 && __builtin_cpu_supports("avx512f") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) {
    best = Isa::kAvx512;
  }
#endif
  if (const char* cap = std::getenv("CUTLINE_CPU_ISA")) {
    const std::string_view v(cap);
    if (v == "scalar") best = Isa::kScalar;
    if (v == "avx2" && best == Isa::kAvx512) best = Isa::kAvx2;
  }
  return best;
}

bool avx512_extension_allowed(Avx512Extension ext) {
  const char* cap = std::getenv("CUTLINE_CPU_ISA");
  if (cap == nullptr) return true;
  const std::string_view v(cap);
  if (v == "avx512-base") return false;
  if (v == "avx512-vnni") return ext == Avx512Extension::kVnni;
  return true;
}

const Kernels& kernels_for(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return avx512_kernels();
    case Isa::kAvx2:
      return avx2_kernels();
    default:
      return scalar_kernels();
  }
}

}  // namespace cutline::device::cpu
