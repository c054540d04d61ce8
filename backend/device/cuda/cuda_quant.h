#pragma once
// Kernels over weights that stay quantized in GPU memory (Q8_0, Q4_K, Q6_K: raw GGUF blocks, as
// uploaded), dequantized with quant_blocks.h. Used by cuda_device.cu; launches go on `stream` and
// report nothing themselves (the caller checks cudaGetLastError). C++17 (nvcc).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cutline/device/quant.h"

namespace cutline::device::cuda {

// Whether weights of `type` stay quantized on the GPU (the other types are converted to F16 at
// load).
bool stays_quantized(DType type);

// The most activation rows quant_matvec takes: decode steps and small batches.
constexpr int64_t kMatvecMaxRows = 8;

// y[b][r] = sum_k x[b][k] * w[r][k] for b < n_rows <= kMatvecMaxRows (x: [n_rows][cols] F32,
// y: [n_rows][rows]). One warp per weight row, F32 accumulation, fixed reduction order. False
// (nothing launched) when x is not 16-byte aligned: the caller takes the F16 path instead.
bool quant_matvec(DType type, const void* w, int64_t rows, int64_t cols, const float* x,
                  int64_t n_rows, float* y, cudaStream_t stream);

// out[(r - r0) * cols + k] = w[r][k] as F16 (round to nearest even) for r in [r0, r1).
void dequant_rows_f16(DType type, const void* w, int64_t cols, int64_t r0, int64_t r1, __half* out,
                      cudaStream_t stream);

// y[i][k] = table[ids[i]][k] as F32, exactly as dequantize_row gives it (y: [n][cols]).
void quant_embed(DType type, const void* table, int64_t cols, const int32_t* ids, int64_t n,
                 float* y, cudaStream_t stream);

}  // namespace cutline::device::cuda
