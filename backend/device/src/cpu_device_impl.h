#pragma once
// CpuDevice's declaration, internal to the device module: cpu_device.cc holds memory, loading and
// the elementwise and attention ops, cpu_device_matmul.cc the matmuls (task slicing, activation
// quantization, packed and interleaved paths). Callers use make_device().

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cpu_kernels.h"
#include "cutline/device/device.h"
#include "cutline/device/thread_pool.h"

namespace cutline::device {

// Activation rows per pass over a weight slice: the slice's dequantized rows are reused for this
// many rows while they sit in cache (prefill); decode batches fit in one pass.
inline constexpr int64_t kBatchBlock = 64;
// Below this many multiply-adds a matmul runs on the calling thread: waking a worker took
// ~5 us (matmul_bench --threads 2: 320x64 F16 at batch 1 took 7 us on 2 threads), while 2^18
// multiply-adds take ~10-20 us on one.
inline constexpr int64_t kParallelMacs = int64_t{1} << 18;
// Below this many elements an elementwise op runs on the calling thread.
inline constexpr int64_t kParallelElems = 1 << 16;

// First output column of matmul task `task` of n_tasks: slices start on 16-column (64-byte)
// boundaries so that two tasks never write the same cache line of an output row.
inline int64_t task_begin(int64_t n_out, int64_t task, int64_t n_tasks) {
  if (task >= n_tasks) return n_out;
  return n_out * task / n_tasks / 16 * 16;
}

class CpuDevice final : public Device {
 public:
  CpuDevice(int32_t n_threads, cpu::Isa isa)
      : pool_(n_threads), kernels_(cpu::kernels_for(isa)), scratch_(pool_.size()) {}

  DeviceKind kind() const override { return DeviceKind::kCpu; }
  std::string description() const override {
    return "cpu: " + std::to_string(pool_.size()) + " threads, " +
           std::string(cpu::isa_name(kernels_.isa));
  }
  DeviceCaps caps() const override {
    return DeviceCaps{
        .zero_copy_host_weights = true, .native_quant_matmul = true, .batch_invariant = true};
  }

  Result<Buffer> alloc(int64_t bytes) override {
    const int64_t rounded = std::max<int64_t>(64, (bytes + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, static_cast<size_t>(rounded));
    if (p == nullptr) {
      return make_error(ErrorKind::kExhausted,
                        "cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    }
    return Buffer(this, p, bytes);
  }
  void free(void* data) override { std::free(data); }
  // Memory for a weight the device copies into its own layout: in transparent huge pages where
  // the kernel offers them (2 MiB aligned, MADV_HUGEPAGE), so that writing it at load takes one
  // page fault per 2 MiB instead of per 4 KiB, and streaming it takes fewer TLB misses.
  Result<Buffer> alloc_weight(int64_t bytes);
  void upload(void* dst, const void* src, int64_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, int64_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void fill_zero(void* dst, int64_t bytes) override { std::memset(dst, 0, bytes); }
  int64_t free_bytes() const override;
  Result<Weight> load_weight(const void* host, DType type, int64_t rows, int64_t cols,
                             WeightLoadTiming* timing) override;
  Status sync() override { return {}; }

  void matmul(const float* x, int64_t n_rows, const Weight& w, float* y) override;
  void matmuls(const float* x, int64_t n_rows, const MatmulTarget* targets, int n) override;
  void embed(const Weight& table, const int32_t* ids, int64_t n, float* y) override;
  void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                float* y) override;
  void rope(float* x, const int32_t* positions, int64_t rows, int32_t n_heads, int32_t head_dim,
            const RopeParams& params) override;
  void swiglu(const float* gate, const float* up, int64_t n, float* y) override;
  void add(const float* a, const float* b, int64_t n, float* y) override;
  void add_bias(float* x, const float* bias, int64_t rows, int64_t cols) override;
  void gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t cols,
                   float* y) override {
    for (int64_t i = 0; i < n; ++i) std::memcpy(y + i * cols, x + rows[i] * cols, cols * 4);
  }
  void softmax(float* x, int64_t rows, int64_t cols) override;
  void kv_write(float* k_cache, float* v_cache, const float* k, const float* v,
                const int32_t* slots, int64_t n, int64_t kv_dim) override;
  void paged_attention(const AttentionArgs& args) override;

 private:
  // The first 64-byte aligned address of v, grown to hold n elements from there.
  template <typename T>
  static T* aligned64(std::vector<T>& v, int64_t n) {
    constexpr int64_t kSlack = 64 / sizeof(T);
    if (static_cast<int64_t>(v.size()) < n + kSlack) v.resize(n + kSlack);
    const auto at = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + ((64 - at % 64) % 64) / sizeof(T);
  }
  float* scratch(int32_t thread, int64_t floats) {
    std::vector<float>& s = scratch_[thread];
    if (static_cast<int64_t>(s.size()) < floats) s.resize(floats);
    return s.data();
  }
  // The prefill paths that prepare weights: each of n_tasks tasks takes its slice of the n_out
  // weight rows, panel rows at a time, and calls fn(wp, n, nw, n_end) for rows [n, n + nw) of a
  // slice ending at n_end, wp a 64-byte aligned per-thread buffer of panel * pb bytes.
  template <typename Fn>
  void for_each_panel(int64_t n_out, int64_t n_tasks, int64_t panel, int64_t pb, Fn&& fn) {
    pool_.run(n_tasks, [&](int64_t task, int32_t thread) {
      const int64_t n_begin = task_begin(n_out, task, n_tasks),
                    n_end = task_begin(n_out, task + 1, n_tasks);
      void* wp = aligned64(scratch_[thread], (panel * pb + 3) / 4);
      for (int64_t n = n_begin; n < n_end; n += panel)
        fn(wp, n, static_cast<int>(std::min(panel, n_end - n)), n_end);
    });
  }
  // Runs fn(begin, end) over [0, n) in contiguous chunks; on the caller when n is small.
  template <typename Fn>
  void parallel_range(int64_t n, int64_t min_chunk, Fn&& fn) {
    const int64_t chunks =
        std::clamp<int64_t>(n / std::max<int64_t>(1, min_chunk), 1, pool_.size());
    if (chunks == 1) return fn(int64_t{0}, n, 0);
    pool_.run(chunks,
              [&](int64_t c, int32_t thread) { fn(n * c / chunks, n * (c + 1) / chunks, thread); });
  }

  void matmul_quantized(const float* x, int64_t n_rows, const Weight& w, float* y, int64_t n_tasks);
  void quantize_x(const float* x, int64_t n_rows, DType type, int64_t k);
  bool same_x_layout(DType a, DType b) const;
  void run_quantized(const Weight& w, float* y, int64_t n_rows, int64_t task, int64_t n_tasks);
  // Decode batches of weights that read x through dot_block_q in one layout: x is quantized once
  // and every weight's tasks run in one pass of the pool.
  bool matmuls_quantized(const float* x, int64_t n_rows, std::span<const MatmulTarget> all);
  void quantize_x_blocks(const float* x, int64_t n_rows, DType type, int64_t k);
  void matmul_packed(const float* x, int64_t n_rows, const Weight& w, float* y, int64_t n_tasks);
  // An interleaved weight's share of a matmul: its row blocks, cut into tasks.
  struct InterleavedJob {
    const Weight* w = nullptr;
    float* y = nullptr;
    int64_t blocks = 0, block_bytes = 0, unit = 1, units = 0, panel = 0, tasks = 0;
  };
  int64_t matmul_tasks(const Weight& w, int64_t n_rows) const;
  const float* pack_interleaved(const float* x, int64_t n_rows, int64_t k);
  InterleavedJob interleaved_job(const Weight& w, float* y, int64_t n_rows, int64_t n_tasks) const;
  void run_interleaved(const InterleavedJob& job, const float* xp, int64_t n_rows, int64_t task);

  ThreadPool pool_;
  const cpu::Kernels& kernels_;
  std::vector<std::vector<float>> scratch_;  // per thread
  // matmul_quantized's activations (cpu_kernels.h QuantRow), reused across calls.
  std::vector<int16_t> xq_;
  std::vector<float> xd_;
  std::vector<int8_t> xq8_;
  std::vector<int16_t> xs16_;
  std::vector<uint8_t> xqg_;
  std::vector<float> xdg_;
  std::vector<cpu::QuantRow> qrows_;
  // matmul_packed's activations in stripe order, and a pointer to each row.
  // Also the interleaved path's packed activations (pack_interleaved), and its jobs per call.
  std::vector<float> xp_;
  std::vector<const float*> xps_;
  std::vector<InterleavedJob> jobs_;
  std::vector<int64_t> task_ends_;  // matmuls_quantized: each weight's last task + 1, cumulative
};

}  // namespace cutline::device
