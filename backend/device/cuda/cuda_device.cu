// CudaDevice: Device on the first CUDA GPU.
//
// Weights: Q8_0, Q4_K and Q6_K stay quantized in GPU memory (the GGUF blocks uploaded as they
// are, so a Q4_K_M model takes its file size, not F16 size); F32 stays F32; every other type is
// dequantized to F16 on the host at load. Matmul by a quantized weight: up to kMatvecMaxRows
// activation rows (decode), cuda_quant.cu's kernel dequantizes the blocks in registers and dots
// them with the F32 activations, one warp per output row; more rows (prefill), the weight is
// dequantized to F16 into a scratch buffer on the device (at most kScratchElems elements, reused,
// the weight taken in slices of rows when larger) and cuBLAS runs the F16 GEMM as for F16
// weights. Own kernels run RMSNorm, RoPE, SwiGLU, embedding (quantized tables read in place),
// softmax, the KV write and paged attention (prefill and decode alike, one thread block per
// query token and head, online softmax across 4 warps in a fixed order).
//
// CI and development machines have no GPU: these kernels (and cuda_quant.cu's) are compiled there
// (sm_90), not run. They run only where a GPU exists, through tests/gpu/run.sh, whose conformance
// step is tests/unit/backend/device's cuda cases against the CPU reference.
//
// Errors: a failed launch or cuBLAS call is remembered and returned by the next sync(); nothing
// throws. Batch invariance: every kernel here reduces a row in a fixed order, but cuBLAS may pick
// a different algorithm for a different batch size, so caps().batch_invariant is false.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "cuda_device.h"
#include "cuda_quant.h"

namespace cutline::device {
namespace {

constexpr int kThreads = 256;
constexpr int kAttnWarps = 4;
constexpr int kMaxHeadDim = 256;
// The F16 scratch a quantized weight is dequantized into for a prefill GEMM: 64 Mi elements
// (128 MiB) at most, less when the largest quantized weight loaded is smaller.
constexpr int64_t kScratchElems = int64_t{64} << 20;

int blocks_for(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

__global__ void f32_to_f16_kernel(const float* x, __half* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = __float2half(x[i]);
}

template <typename T>
__device__ float load_f(const T* p, int64_t i);
template <>
__device__ float load_f<float>(const float* p, int64_t i) {
  return p[i];
}
template <>
__device__ float load_f<__half>(const __half* p, int64_t i) {
  return __half2float(p[i]);
}

template <typename T>
__global__ void embed_kernel(const T* table, const int32_t* ids, int64_t n, int64_t cols,
                             float* y) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n * cols) y[i] = load_f(table, int64_t{ids[i / cols]} * cols + i % cols);
}

// Block-wide sum in a fixed tree order (deterministic).
__device__ float block_sum(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += shared[w];
  return total;
}

__device__ float block_max(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) m = fmaxf(m, shared[w]);
  return m;
}

__global__ void rms_norm_kernel(const float* x, const float* w, int64_t dim, float eps, float* y) {
  __shared__ float shared[32];
  const float* xr = x + blockIdx.x * dim;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
  ss = block_sum(ss, shared);
  const float scale = rsqrtf(ss / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    y[blockIdx.x * dim + i] = xr[i] * scale * w[i];
}

__global__ void softmax_kernel(float* x, int64_t cols) {
  __shared__ float shared[32];
  float* v = x + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, v[i]);
  m = block_max(m, shared);
  float s = 0;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) s += expf(v[i] - m);
  s = block_sum(s, shared);
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) v[i] = expf(v[i] - m) / s;
}

__global__ void rope_kernel(float* x, const int32_t* pos, int64_t rows, int32_t n_heads,
                            int32_t head_dim, int32_t n_rot, float freq_base, float freq_scale,
                            bool neox, const float* factors) {
  const int32_t half = n_rot / 2;
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= rows * n_heads * half) return;
  const int32_t pair = static_cast<int32_t>(i % half);
  const int64_t rh = i / half;
  float* v = x + rh * head_dim;
  float theta = pos[rh / n_heads] * freq_scale * powf(freq_base, -2.0f * pair / n_rot);
  if (factors != nullptr) theta /= factors[pair];
  float s, c;
  sincosf(theta, &s, &c);
  const int32_t a = neox ? pair : 2 * pair, b = neox ? pair + half : 2 * pair + 1;
  const float x0 = v[a], x1 = v[b];
  v[a] = x0 * c - x1 * s;
  v[b] = x0 * s + x1 * c;
}

__global__ void swiglu_kernel(const float* g, const float* u, int64_t n, float* y) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

__global__ void add_kernel(const float* a, const float* b, int64_t n, float* y) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

__global__ void add_bias_kernel(float* x, const float* bias, int64_t n, int64_t cols) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) x[i] += bias[i % cols];
}

__global__ void gather_kernel(const float* x, const int32_t* rows, int64_t n, int64_t cols,
                              float* y) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n * cols) y[i] = x[int64_t{rows[i / cols]} * cols + i % cols];
}

__global__ void kv_write_kernel(float* kc, float* vc, const float* k, const float* v,
                                const int32_t* slots, int64_t n, int64_t kv_dim) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n * kv_dim) return;
  const int64_t dst = int64_t{slots[i / kv_dim]} * kv_dim + i % kv_dim;
  kc[dst] = k[i];
  vc[dst] = v[i];
}

// One block per (query token, head); warp w handles positions w, w + 4, ...; each lane holds
// head_dim / 32 dims of q and of the running output.
__global__ void paged_attention_kernel(AttentionArgs a) {
  constexpr int kPerLane = kMaxHeadDim / 32;
  __shared__ float s_m[kAttnWarps], s_l[kAttnWarps];
  __shared__ float s_acc[kAttnWarps][kMaxHeadDim];
  const int64_t t = blockIdx.x;
  const int32_t h = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const AttentionToken tok = a.tokens[t];
  const int64_t q_dim = int64_t{a.n_heads} * a.head_dim,
                kv_dim = int64_t{a.n_kv_heads} * a.head_dim;
  const int64_t head_off = int64_t{h / (a.n_heads / a.n_kv_heads)} * a.head_dim;
  const float* q = a.q + t * q_dim + int64_t{h} * a.head_dim;
  const int32_t* table = a.block_tables + tok.table_begin;
  float qr[kPerLane], acc[kPerLane];
  for (int i = 0; i < kPerLane; ++i) {
    const int d = lane + 32 * i;
    qr[i] = d < a.head_dim ? q[d] : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int32_t j = warp; j <= tok.pos; j += kAttnWarps) {
    const int64_t row = int64_t{table[j / a.block_size]} * a.block_size + j % a.block_size;
    const float* k = a.k_cache + row * kv_dim + head_off;
    const float* v = a.v_cache + row * kv_dim + head_off;
    float s = 0.0f;
    for (int i = 0; i < kPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < a.head_dim) s += qr[i] * k[d];
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    s *= a.scale;
    const float m_new = fmaxf(m, s);
    const float corr = expf(m - m_new), p = expf(s - m_new);
    l = l * corr + p;
    for (int i = 0; i < kPerLane; ++i) {
      const int d = lane + 32 * i;
      acc[i] = acc[i] * corr + (d < a.head_dim ? p * v[d] : 0.0f);
    }
    m = m_new;
  }
  if (lane == 0) {
    s_m[warp] = m;
    s_l[warp] = l;
  }
  for (int i = 0; i < kPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < a.head_dim) s_acc[warp][d] = acc[i];
  }
  __syncthreads();
  float big = -INFINITY;
  for (int w = 0; w < kAttnWarps; ++w) big = fmaxf(big, s_m[w]);
  float total = 0.0f;
  for (int w = 0; w < kAttnWarps; ++w) total += s_l[w] > 0 ? s_l[w] * expf(s_m[w] - big) : 0.0f;
  float* out = a.out + t * q_dim + int64_t{h} * a.head_dim;
  for (int d = threadIdx.x; d < a.head_dim; d += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kAttnWarps; ++w) o += s_l[w] > 0 ? s_acc[w][d] * expf(s_m[w] - big) : 0.0f;
    out[d] = o / total;
  }
}

class CudaDevice final : public Device {
 public:
  CudaDevice(int ordinal, cudaStream_t stream, cublasHandle_t blas, std::string name)
      : ordinal_(ordinal), stream_(stream), blas_(blas), name_(std::move(name)) {}
  ~CudaDevice() override {
    if (half_x_ != nullptr) cudaFree(half_x_);
    if (scratch_ != nullptr) cudaFree(scratch_);
    cublasDestroy(blas_);
    cudaStreamDestroy(stream_);
  }

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string description() const override {
    return "cuda:" + std::to_string(ordinal_) + " " + name_;
  }
  DeviceCaps caps() const override {
    // Q8_0, Q4_K and Q6_K matmuls read the blocks (decode) or dequantize them on the device
    // (prefill); cuBLAS is not batch-invariant.
    DeviceCaps caps;
    caps.native_quant_matmul = true;
    return caps;
  }

  Result<Buffer> alloc(int64_t bytes) override {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, static_cast<size_t>(bytes > 0 ? bytes : 1));
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear the allocation error, it is reported here
      return make_error(ErrorKind::kExhausted, "cuda: cannot allocate " + std::to_string(bytes) +
                                                   " bytes: " + cudaGetErrorString(err));
    }
    return Buffer(this, p, bytes);
  }
  void free(void* data) override { cudaFree(data); }
  void upload(void* dst, const void* src, int64_t bytes) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    check(cudaStreamSynchronize(stream_));  // the host buffer may go away after return
  }
  void download(void* dst, const void* src, int64_t bytes) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    check(cudaStreamSynchronize(stream_));
  }
  void fill_zero(void* dst, int64_t bytes) override {
    check(cudaMemsetAsync(dst, 0, bytes, stream_));
  }
  int64_t free_bytes() const override {
    size_t free_b = 0, total = 0;
    return cudaMemGetInfo(&free_b, &total) == cudaSuccess ? static_cast<int64_t>(free_b) : 0;
  }
  Result<Weight> load_weight(const void* host, DType type, int64_t rows, int64_t cols,
                             WeightLoadTiming* timing) override;
  Status sync() override {
    check(cudaStreamSynchronize(stream_));
    if (error_.empty()) return {};
    Error e = make_error(ErrorKind::kInternal, error_);
    error_.clear();
    return e;
  }

  void matmul(const float* x, int64_t n_rows, const Weight& w, float* y) override;
  void embed(const Weight& t, const int32_t* ids, int64_t n, float* y) override {
    if (cuda::stays_quantized(t.type)) {
      cuda::quant_embed(t.type, t.data, t.cols, ids, n, y, stream_);
    } else if (t.type == DType::kF32) {
      embed_kernel<<<blocks_for(n * t.cols), kThreads, 0, stream_>>>(
          static_cast<const float*>(t.data), ids, n, t.cols, y);
    } else {
      embed_kernel<<<blocks_for(n * t.cols), kThreads, 0, stream_>>>(
          static_cast<const __half*>(t.data), ids, n, t.cols, y);
    }
    launched();
  }
  void rms_norm(const float* x, const float* w, int64_t rows, int64_t dim, float eps,
                float* y) override {
    if (rows == 0) return;
    rms_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream_>>>(x, w, dim, eps, y);
    launched();
  }
  void rope(float* x, const int32_t* pos, int64_t rows, int32_t n_heads, int32_t head_dim,
            const RopeParams& p) override {
    const int32_t n_rot = p.n_rot > 0 ? p.n_rot : head_dim;
    rope_kernel<<<blocks_for(rows * n_heads * (n_rot / 2)), kThreads, 0, stream_>>>(
        x, pos, rows, n_heads, head_dim, n_rot, p.freq_base, p.freq_scale, p.neox, p.freq_factors);
    launched();
  }
  void swiglu(const float* g, const float* u, int64_t n, float* y) override {
    swiglu_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(g, u, n, y);
    launched();
  }
  void add(const float* a, const float* b, int64_t n, float* y) override {
    add_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(a, b, n, y);
    launched();
  }
  void add_bias(float* x, const float* bias, int64_t rows, int64_t cols) override {
    add_bias_kernel<<<blocks_for(rows * cols), kThreads, 0, stream_>>>(x, bias, rows * cols, cols);
    launched();
  }
  void gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t cols,
                   float* y) override {
    gather_kernel<<<blocks_for(n * cols), kThreads, 0, stream_>>>(x, rows, n, cols, y);
    launched();
  }
  void softmax(float* x, int64_t rows, int64_t cols) override {
    if (rows == 0) return;
    softmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream_>>>(x, cols);
    launched();
  }
  void kv_write(float* kc, float* vc, const float* k, const float* v, const int32_t* slots,
                int64_t n, int64_t kv_dim) override {
    kv_write_kernel<<<blocks_for(n * kv_dim), kThreads, 0, stream_>>>(kc, vc, k, v, slots, n,
                                                                      kv_dim);
    launched();
  }
  void paged_attention(const AttentionArgs& a) override {
    if (a.head_dim > kMaxHeadDim) {
      remember("cuda: head_dim " + std::to_string(a.head_dim) + " > " +
               std::to_string(kMaxHeadDim));
      return;
    }
    if (a.n_tokens == 0) return;
    const dim3 grid(static_cast<unsigned>(a.n_tokens), static_cast<unsigned>(a.n_heads));
    paged_attention_kernel<<<grid, 32 * kAttnWarps, 0, stream_>>>(a);
    launched();
  }

 private:
  void remember(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }
  void check(cudaError_t err) {
    if (err != cudaSuccess) remember(std::string("cuda: ") + cudaGetErrorString(err));
  }
  void launched() { check(cudaGetLastError()); }
  // x ([n][cols] F32) as F16 in half_x_, or nullptr (remembered) when it cannot be allocated.
  const __half* half_activations(const float* x, int64_t n);
  // y ([n_rows][ldy], columns [0, m)) = x * a^T, a: [m][k] of a_type, x: [n_rows][k] of a_type.
  void gemm(const void* a, cudaDataType_t a_type, int64_t m, int64_t k, const void* x,
            int64_t n_rows, float* y, int64_t ldy);
  void quant_matmul(const float* x, int64_t n_rows, const Weight& w, float* y);

  int ordinal_;
  cudaStream_t stream_;
  cublasHandle_t blas_;
  std::string name_;
  std::string error_;         // first error since the last sync()
  __half* half_x_ = nullptr;  // activations converted for F16 GEMMs
  int64_t half_x_elems_ = 0;
  __half* scratch_ = nullptr;  // a quantized weight dequantized for a prefill GEMM
  int64_t scratch_elems_ = 0;
  int64_t max_quant_elems_ = 0;  // the largest quantized weight loaded
};

Result<Weight> CudaDevice::load_weight(const void* host, DType type, int64_t rows, int64_t cols,
                                       WeightLoadTiming* timing) {
  using Clock = std::chrono::steady_clock;
  if (cols % block_elems(type) != 0) {
    return make_error(ErrorKind::kBadRequest,
                      "cuda: row of " + std::to_string(cols) + " elements is not whole blocks");
  }
  const auto t0 = Clock::now();
  // Q8_0, Q4_K, Q6_K: the blocks as they are; F32 as it is; the rest F16, converted here.
  DType stored = type;
  std::vector<uint16_t> half;
  if (!cuda::stays_quantized(type) && type != DType::kF32) {
    stored = DType::kF16;
    half.resize(static_cast<size_t>(rows * cols));
    std::vector<float> row(cols);
    const int64_t rb = row_bytes(type, cols);
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(type, static_cast<const uint8_t*>(host) + r * rb, row.data(), cols);
      for (int64_t c = 0; c < cols; ++c) half[r * cols + c] = f32_to_f16(row[c]);
    }
  }
  const auto t1 = Clock::now();
  const int64_t bytes = rows * row_bytes(stored, cols);
  auto buf = alloc(bytes);
  if (!buf.ok()) return std::move(buf).error();
  upload(buf->data(), half.empty() ? host : static_cast<const void*>(half.data()), bytes);
  if (Status s = sync(); !s.ok()) return std::move(s).error();
  const auto t2 = Clock::now();
  if (timing != nullptr) {
    timing->convert_ms += std::chrono::duration<double, std::milli>(t1 - t0).count();
    timing->upload_ms += std::chrono::duration<double, std::milli>(t2 - t1).count();
    timing->device_bytes += bytes;
  }
  if (cuda::stays_quantized(stored)) max_quant_elems_ = std::max(max_quant_elems_, rows * cols);
  Weight w;
  w.data = buf->data();
  w.type = stored;
  w.rows = rows;
  w.cols = cols;
  w.storage = std::move(buf).value();
  return Result<Weight>(std::move(w));
}

const __half* CudaDevice::half_activations(const float* x, int64_t n) {
  if (half_x_elems_ < n) {
    if (half_x_ != nullptr) cudaFree(half_x_);
    half_x_ = nullptr;
    half_x_elems_ = 0;
    if (cudaMalloc(&half_x_, n * sizeof(__half)) != cudaSuccess) {
      cudaGetLastError();
      remember("cuda: cannot allocate the F16 activation buffer");
      return nullptr;
    }
    half_x_elems_ = n;
  }
  f32_to_f16_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(x, half_x_, n);
  launched();
  return half_x_;
}

void CudaDevice::gemm(const void* a, cudaDataType_t a_type, int64_t m, int64_t k, const void* x,
                      int64_t n_rows, float* y, int64_t ldy) {
  const float alpha = 1.0f, beta = 0.0f;
  // Row-major y[B][N] = x[B][K] * a[N][K]^T is column-major y^T = a^T(op T) * x^T.
  const cublasStatus_t st = cublasGemmEx(
      blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n_rows),
      static_cast<int>(k), &alpha, a, a_type, static_cast<int>(k), x, a_type, static_cast<int>(k),
      &beta, y, CUDA_R_32F, static_cast<int>(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS)
    remember("cublas: gemm failed with status " + std::to_string(static_cast<int>(st)));
}

void CudaDevice::matmul(const float* x, int64_t n_rows, const Weight& w, float* y) {
  if (n_rows == 0) return;
  if (cuda::stays_quantized(w.type)) return quant_matmul(x, n_rows, w, y);
  if (w.type == DType::kF32) return gemm(w.data, CUDA_R_32F, w.rows, w.cols, x, n_rows, y, w.rows);
  const __half* hx = half_activations(x, n_rows * w.cols);
  if (hx != nullptr) gemm(w.data, CUDA_R_16F, w.rows, w.cols, hx, n_rows, y, w.rows);
}

// Decode: the blocks read in place. Prefill: slices of rows dequantized into scratch_ (sized once
// to the largest quantized weight, at most kScratchElems), each followed by its F16 GEMM into
// columns [r0, r1) of y; the stream orders a slice's GEMM before the next slice overwrites it.
void CudaDevice::quant_matmul(const float* x, int64_t n_rows, const Weight& w, float* y) {
  if (n_rows <= cuda::kMatvecMaxRows &&
      cuda::quant_matvec(w.type, w.data, w.rows, w.cols, x, n_rows, y, stream_)) {
    launched();
    return;
  }
  const int64_t need = std::min(w.rows * w.cols, std::max(kScratchElems, w.cols));
  if (scratch_elems_ < need) {
    if (scratch_ != nullptr) cudaFree(scratch_);
    scratch_ = nullptr;
    scratch_elems_ = 0;
    const int64_t elems = std::max(need, std::min(max_quant_elems_, kScratchElems));
    if (cudaMalloc(&scratch_, elems * sizeof(__half)) != cudaSuccess) {
      cudaGetLastError();
      remember("cuda: cannot allocate the F16 dequantization buffer");
      return;
    }
    scratch_elems_ = elems;
  }
  const __half* hx = half_activations(x, n_rows * w.cols);
  if (hx == nullptr) return;
  const int64_t slice = scratch_elems_ / w.cols;
  for (int64_t r0 = 0; r0 < w.rows; r0 += slice) {
    const int64_t r1 = std::min(w.rows, r0 + slice);
    cuda::dequant_rows_f16(w.type, w.data, w.cols, r0, r1, scratch_, stream_);
    launched();
    gemm(scratch_, CUDA_R_16F, r1 - r0, w.cols, hx, n_rows, y + r0, w.rows);
  }
}

}  // namespace

Result<std::unique_ptr<Device>> make_cuda_device() {
  int count = 0;
  // Without a driver (libcuda.so.1 absent) cudart returns an error here instead of crashing.
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return make_error(ErrorKind::kUnsupported,
                      std::string("cuda: cudaGetDeviceCount failed: ") + cudaGetErrorString(err));
  }
  if (count == 0) return make_error(ErrorKind::kUnsupported, "cuda: no CUDA device found");
  if (cudaSetDevice(0) != cudaSuccess)
    return make_error(ErrorKind::kUnsupported, "cuda: cudaSetDevice(0) failed");
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  cudaStream_t stream = nullptr;
  if (cudaStreamCreate(&stream) != cudaSuccess)
    return make_error(ErrorKind::kUnsupported, "cuda: cannot create a stream");
  cublasHandle_t blas = nullptr;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
    cudaStreamDestroy(stream);
    return make_error(ErrorKind::kUnsupported, "cuda: cublasCreate failed");
  }
  cublasSetStream(blas, stream);
  return std::unique_ptr<Device>(new CudaDevice(0, stream, blas, prop.name));
}

}  // namespace cutline::device

// libcutline_cuda.so's entry points (cuda_device.h); every other symbol of the plugin is hidden.
extern "C" __attribute__((visibility("default"))) int cutline_cuda_plugin_abi() {
  return cutline::device::kCudaPluginAbi;
}

extern "C" __attribute__((visibility("default"))) cutline::device::Device* cutline_cuda_make_device(
    std::string* error) {
  auto made = cutline::device::make_cuda_device();
  if (!made.ok()) {
    *error = made.error().message;
    return nullptr;
  }
  return std::move(made).value().release();
}
