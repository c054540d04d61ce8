#pragma once
// The AVX2 int8 kernels (cpu_kernels_avx2_lowbit.cc) that avx2_kernels() puts in its table for
// Q4_1, Q5_0, Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS; each does what the Kernels member of the same
// name describes (cpu_kernels.h).
#if defined(__x86_64__)
#include <cstdint>

#include "cpu_kernels.h"

namespace cutline::device::cpu::avx2 {

__attribute__((target("avx2,fma,f16c"))) void quantize_row_x8(const float* x, int64_t k, int8_t* q8,
                                                              float* d8, float* sums8);
bool reads_x8(DType type);
__attribute__((target("avx2,fma,f16c"))) bool dot_block_q_lowbit(DType type, const void* w,
                                                                 int64_t w_stride, int nw,
                                                                 const QuantRow* xs, int nr,
                                                                 int64_t k, float* out,
                                                                 int64_t ldo);

}  // namespace cutline::device::cpu::avx2
#endif
