#pragma once
// The CPU device's inner kernels, one table per instruction set, chosen at run time
// (__builtin_cpu_supports) — the build's baseline stays SSE4.2; the AVX2 and AVX-512 variants are
// compiled with per-function target attributes.
//
// Batch invariance lives here: dot_rows computes each row's dot product with the same fixed
// sequence of operations whatever `nr` is, so one activation row gives the same bits alone or in
// a tile with others.

#include <cstdint>
#include <string_view>

#include "cutline/device/quant.h"

namespace cutline::device::cpu {

enum class Isa { kScalar, kAvx2, kAvx512 };

struct Kernels {
  Isa isa = Isa::kScalar;
  int dot_tile = 1;  // the most rows one dot_rows call takes
  // out[r] = sum_i w[i] * xs[r][i] for r < nr <= dot_tile.
  void (*dot_rows)(const float* w, const float* const* xs, int nr, int64_t k, float* out) = nullptr;
  // Dequantizes n elements (a multiple of block_elems(type)) of one row to F32.
  void (*dequant)(DType type, const void* src, float* dst, int64_t n) = nullptr;
  // Optional: dot_rows reading the weight row's blocks directly, bitwise equal to dequant +
  // dot_rows; returns false when it has no kernel for this type or k (the caller falls back).
  // With nr == 0 it only answers whether it has one.
  bool (*dot_rows_typed)(DType type, const void* w, const float* const* xs, int nr, int64_t k,
                         float* out) = nullptr;
};

// The best ISA this CPU supports, capped by the environment variable CUTLINE_CPU_ISA
// (scalar|avx2|avx512) when set.
Isa detect_isa();
std::string_view isa_name(Isa isa);
// Kernels for `isa`; isa must be supported by this CPU.
const Kernels& kernels_for(Isa isa);

const Kernels& scalar_kernels();
const Kernels& avx2_kernels();
const Kernels& avx512_kernels();

}  // namespace cutline::device::cpu
