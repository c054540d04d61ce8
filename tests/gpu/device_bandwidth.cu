// device_bandwidth: the GPU's measured memory bandwidth, the denominator of the decode roofline in
// tests/gpu/run.sh (bytes per token / this = the fastest a batch-1 decode can go). Two kernels
// over buffers far larger than any cache, best of 5 runs each:
//   read: every thread sums 16-byte words (the way a decode streams weights)
//   copy: every 16-byte word read once and written once (bytes moved = 2 x buffer)
// Prints one line "read_gbs=R copy_gbs=C device=NAME" (GB/s = 1e9 bytes/s); exit 1 without a GPU.
#include <cuda_runtime.h>

#include <cstdio>

namespace {

__global__ void read_kernel(const uint4* __restrict__ src, size_t n, unsigned* __restrict__ sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint4 v = src[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;  // keeps the loads alive; practically never true
}

__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    dst[i] = src[i];
}

bool check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "device_bandwidth: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "device_bandwidth: no usable CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  if (!check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties")) return 1;
  const size_t bytes = size_t{2} << 30;  // 2 GiB per buffer: far beyond L2 on any GPU
  const size_t n = bytes / sizeof(uint4);
  uint4 *a = nullptr, *b = nullptr;
  unsigned* sink = nullptr;
  if (!check(cudaMalloc(&a, bytes), "cudaMalloc") || !check(cudaMalloc(&b, bytes), "cudaMalloc") ||
      !check(cudaMalloc(&sink, sizeof(unsigned)), "cudaMalloc") ||
      !check(cudaMemset(a, 1, bytes), "cudaMemset"))
    return 1;
  const int threads = 256, blocks = prop.multiProcessorCount * 8;
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  float best_read_ms = 1e30f, best_copy_ms = 1e30f;
  for (int rep = 0; rep < 6; ++rep) {  // the first of each is a warm-up
    float ms = 0;
    cudaEventRecord(t0);
    read_kernel<<<blocks, threads>>>(a, n, sink);
    cudaEventRecord(t1);
    if (!check(cudaEventSynchronize(t1), "read kernel")) return 1;
    cudaEventElapsedTime(&ms, t0, t1);
    if (rep > 0 && ms < best_read_ms) best_read_ms = ms;
    cudaEventRecord(t0);
    copy_kernel<<<blocks, threads>>>(a, b, n);
    cudaEventRecord(t1);
    if (!check(cudaEventSynchronize(t1), "copy kernel")) return 1;
    cudaEventElapsedTime(&ms, t0, t1);
    if (rep > 0 && ms < best_copy_ms) best_copy_ms = ms;
  }
  std::printf("read_gbs=%.1f copy_gbs=%.1f device=%s\n", bytes / (best_read_ms * 1e6),
              2.0 * bytes / (best_copy_ms * 1e6), prop.name);
  cudaFree(a);
  cudaFree(b);
  cudaFree(sink);
  return 0;
}
