#pragma once
// The AVX-512 integer kernels (cpu_kernels_avx512_quant.cc) that avx512_kernels() puts in its
// table; each does what the Kernels member of the same name describes (cpu_kernels.h).
#if defined(__x86_64__)
#include <cstdint>

#include "cpu_kernels.h"

#define CUTLINE_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
// Kernel templates with a kVnni parameter are compiled with VNNI enabled for both variants; the
// kVnni = false ones, run on AVX-512 CPUs without VNNI, use vpmaddwd + vpaddd intrinsics only,
// which GCC does not fuse into vpdpwssd (checked in the object code: no vpdpw* in them).
#define CUTLINE_AVX512_VNNI_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512vnni")))
// Kernels that also permute bytes across a whole register (vpermb): only called where the CPU has
// AVX-512 VBMI as well as VNNI.
#define CUTLINE_AVX512_VBMI_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512vnni,avx512vbmi")))
// Kernels that also move bits within bytes (gf2p8affineqb): only called where the CPU has GFNI as
// well as VNNI.
#define CUTLINE_AVX512_GFNI_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512vnni,gfni")))

namespace cutline::device::cpu::avx512 {

CUTLINE_AVX512_TARGET void quantize_row_x(const float* x, int64_t k, int16_t* q, float* d,
                                          float* sums);
CUTLINE_AVX512_TARGET void quantize_row_x8(const float* x, int64_t k, int8_t* q8, float* d8,
                                           float* sums8);
// Whether this CPU has the AVX-512 extension (and CUTLINE_CPU_ISA allows it); checked once.
bool has_extension(Avx512Extension ext);
// has_extension(kVnni): vpdpwssd, vpdpbusd.
bool has_vnni();
bool reads_x8(DType type);
// Q8_0 on CPUs with AVX-512 VNNI.
bool reads_xg(DType type);
CUTLINE_AVX512_TARGET void quantize_row_xg(const float* x, int64_t k, uint8_t* qg, float* dg);
// Q8_0 on CPUs with AVX-512 VNNI.
int64_t packed_q_bytes(DType type, int64_t k);
CUTLINE_AVX512_TARGET void pack_wq(DType type, const void* w, int64_t w_stride, int nw, int64_t k,
                                   void* dst);
CUTLINE_AVX512_TARGET void dot_packed_q(DType type, const void* wp, int nw, const QuantRow* xs,
                                        int nr, int64_t k, float* out, int64_t ldo);
// Q4_1, Q5_0, Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS (cpu_kernels_avx512_lowbit.cc): all read the
// int8 activations; dot_block_q hands these types to dot_block_q_lowbit.
bool reads_x8_lowbit(DType type);
CUTLINE_AVX512_TARGET bool dot_block_q_lowbit(DType type, const void* w, int64_t w_stride, int nw,
                                              const QuantRow* xs, int nr, int64_t k, float* out,
                                              int64_t ldo);
CUTLINE_AVX512_TARGET bool dot_block_q(DType type, const void* w, int64_t w_stride, int nw,
                                       const QuantRow* xs, int nr, int64_t k, float* out,
                                       int64_t ldo);

}  // namespace cutline::device::cpu::avx512
#endif
