// Quantized-weight kernels (see cuda_quant.h). Each thread dequantizes chunks of 8 consecutive
// elements of a row (qblock::kChunk: never crossing a block or scale group) with byte loads, so
// the 34-byte Q8_0 and 210-byte Q6_K blocks, which are only 2-byte aligned, are read safely.
//
// Matvec: a thread block of kWarps warps, one weight row per warp. In each step the warp's 32
// lanes take 32 consecutive chunks = 256 elements (one Q4_K or Q6_K block, eight Q8_0 blocks),
// so a warp reads a contiguous span of the row, dots it with every activation row (at most
// kMatvecMaxRows, kept in registers), and ends with a butterfly shuffle reduction.
#include "cuda_quant.h"
#include "cutline/device/quant_blocks.h"

namespace cutline::device::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 256;
constexpr int kChunk = qblock::kChunk;

struct Q8_0 {
  __device__ static void chunk(const uint8_t* row, int64_t k0, float* w) {
    qblock::q8_0_chunk(row, k0, w);
  }
};
struct Q4_K {
  __device__ static void chunk(const uint8_t* row, int64_t k0, float* w) {
    qblock::q4_k_chunk(row, k0, w);
  }
};
struct Q6_K {
  __device__ static void chunk(const uint8_t* row, int64_t k0, float* w) {
    qblock::q6_k_chunk(row, k0, w);
  }
};

template <typename Q, int NR>
__global__ void matvec_kernel(const uint8_t* w, int64_t rows, int64_t cols, int64_t row_bytes,
                              const float* x, float* y) {
  const int lane = threadIdx.x % 32;
  const int64_t r = int64_t{blockIdx.x} * kWarps + threadIdx.x / 32;
  if (r >= rows) return;  // r is the same for the whole warp: the shuffles below stay full
  const uint8_t* wr = w + r * row_bytes;
  float acc[NR];
#pragma unroll
  for (int b = 0; b < NR; ++b) acc[b] = 0.0f;
  for (int64_t k0 = int64_t{lane} * kChunk; k0 < cols; k0 += 32 * kChunk) {
    float wv[kChunk];
    Q::chunk(wr, k0, wv);
#pragma unroll
    for (int b = 0; b < NR; ++b) {
      // Two 16-byte loads (quant_matvec checks the alignment) instead of eight 4-byte ones.
      const float4* xb = reinterpret_cast<const float4*>(x + b * cols + k0);
      const float4 lo = __ldg(xb), hi = __ldg(xb + 1);
      const float xv[kChunk] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < kChunk; ++i) s += wv[i] * xv[i];
      acc[b] += s;
    }
  }
#pragma unroll
  for (int b = 0; b < NR; ++b) {
    float v = acc[b];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) y[b * rows + r] = v;
  }
}

// Chunk c of rows [r0, ...): row r0 + c / (cols / 8), elements from 8 * (c % (cols / 8)).
template <typename Q>
__global__ void dequant_f16_kernel(const uint8_t* w, int64_t cols, int64_t row_bytes, int64_t r0,
                                   int64_t n_chunks, __half* out) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c >= n_chunks) return;
  const int64_t per_row = cols / kChunk;
  const int64_t r = c / per_row, k0 = c % per_row * kChunk;
  float wv[kChunk];
  Q::chunk(w + (r0 + r) * row_bytes, k0, wv);
  // out + r * cols + k0 is 16-byte aligned: cols and k0 are multiples of 8 halves.
  __half2* o = reinterpret_cast<__half2*>(out + r * cols + k0);
#pragma unroll
  for (int i = 0; i < kChunk / 2; ++i) o[i] = __floats2half2_rn(wv[2 * i], wv[2 * i + 1]);
}

template <typename Q>
__global__ void embed_kernel(const uint8_t* table, int64_t cols, int64_t row_bytes,
                             const int32_t* ids, int64_t n_chunks, float* y) {
  const int64_t c = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c >= n_chunks) return;
  const int64_t per_row = cols / kChunk;
  const int64_t i = c / per_row, k0 = c % per_row * kChunk;
  float wv[kChunk];
  Q::chunk(table + int64_t{ids[i]} * row_bytes, k0, wv);
#pragma unroll
  for (int j = 0; j < kChunk; ++j) y[i * cols + k0 + j] = wv[j];
}

unsigned grid_for(int64_t n, int64_t per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

// Calls fn(Q{}) with the block type of `type` (one of stays_quantized's).
template <typename Fn>
void dispatch(DType type, Fn&& fn) {
  switch (type) {
    case DType::kQ8_0:
      return fn(Q8_0{});
    case DType::kQ4_K:
      return fn(Q4_K{});
    case DType::kQ6_K:
      return fn(Q6_K{});
    default:
      return;
  }
}

}  // namespace

bool stays_quantized(DType type) {
  return type == DType::kQ8_0 || type == DType::kQ4_K || type == DType::kQ6_K;
}

bool quant_matvec(DType type, const void* w, int64_t rows, int64_t cols, const float* x,
                  int64_t n_rows, float* y, cudaStream_t stream) {
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || cols % kChunk != 0) return false;
  if (rows == 0 || n_rows == 0) return true;
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t rb = row_bytes(type, cols);
  const unsigned grid = grid_for(rows, kWarps);
  dispatch(type, [&](auto q) {
    using Q = decltype(q);
    switch (n_rows) {
      case 1:
        return matvec_kernel<Q, 1><<<grid, 32 * kWarps, 0, stream>>>(wb, rows, cols, rb, x, y);
      case 2:
        return matvec_kernel<Q, 2><<<grid, 32 * kWarps, 0, stream>>>(wb, rows, cols, rb, x, y);
      case 3:
        return matvec_kernel<Q, 3><<<grid, 32 * kWarps, 0, stream>>>(wb, rows, cols, rb, x, y);
      case 4:
        return matvec_kernel<Q, 4><<<grid, 32 * kWarps, 0, stream>>>(wb, rows, cols, rb, x, y);
      case 5:
        return matvec_kernel<Q, 5><<<grid, 32 * kWarps, 0, stream>>>(wb, rows, cols, rb, x, y);
      case 6:
        return matvec_kernel<Q, 6><<<grid, 32 * kWarps, 0, stream>>>(wb, rows, cols, rb, x, y);
      case 7:
        return matvec_kernel<Q, 7><<<grid, 32 * kWarps, 0, stream>>>(wb, rows, cols, rb, x, y);
      default:
        return matvec_kernel<Q, 8><<<grid, 32 * kWarps, 0, stream>>>(wb, rows, cols, rb, x, y);
    }
  });
  return true;
}

void dequant_rows_f16(DType type, const void* w, int64_t cols, int64_t r0, int64_t r1, __half* out,
                      cudaStream_t stream) {
  const int64_t n_chunks = (r1 - r0) * (cols / kChunk);
  if (n_chunks <= 0) return;
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t rb = row_bytes(type, cols);
  dispatch(type, [&](auto q) {
    dequant_f16_kernel<decltype(q)>
        <<<grid_for(n_chunks, kThreads), kThreads, 0, stream>>>(wb, cols, rb, r0, n_chunks, out);
  });
}

void quant_embed(DType type, const void* table, int64_t cols, const int32_t* ids, int64_t n,
                 float* y, cudaStream_t stream) {
  const int64_t n_chunks = n * (cols / kChunk);
  if (n_chunks <= 0) return;
  const auto* tb = static_cast<const uint8_t*>(table);
  const int64_t rb = row_bytes(type, cols);
  dispatch(type, [&](auto q) {
    embed_kernel<decltype(q)>
        <<<grid_for(n_chunks, kThreads), kThreads, 0, stream>>>(tb, cols, rb, ids, n_chunks, y);
  });
}

}  // namespace cutline::device::cuda
