// CpuDevice: Device on host memory with a reused thread pool and run-time ISA kernels
// (cpu_kernels.h). Every op splits work across output rows/columns only, never across a
// reduction, so results do not depend on the thread count or the batch (batch invariance).
#include "cpu_device.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "cpu_attention.h"
#include "cpu_kernels.h"
#include "cutline/device/thread_pool.h"

namespace cutline::device {
namespace {

// Activation rows per pass over a weight slice: the slice's dequantized rows are reused for this
// many rows while they sit in cache (prefill); decode batches fit in one pass.
constexpr int64_t kBatchBlock = 64;
// Below this many multiply-adds a matmul runs on the calling thread: waking a worker took
// ~5 us (matmul_bench --threads 2: 320x64 F16 at batch 1 took 7 us on 2 threads), while 2^18
// multiply-adds take ~10-20 us on one.
constexpr int64_t kParallelMacs = int64_t{1} << 18;
// Tells the kernel that a weight's source pages (the model file's mapping, once copied into a
// device layout) will not be read again, so that they are reclaimed before anything else instead
// of counting twice. Only a hint: the bytes stay valid and readable.
void release_pages(const void* p, int64_t bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes)) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_COLD);
}

// First output column of matmul task `task` of n_tasks: slices start on 16-column (64-byte)
// boundaries so that two tasks never write the same cache line of an output row.
int64_t task_begin(int64_t n_out, int64_t task, int64_t n_tasks) {
  if (task >= n_tasks) return n_out;
  return n_out * task / n_tasks / 16 * 16;
}
// Below this many elements an elementwise op runs on the calling thread.
constexpr int64_t kParallelElems = 1 << 16;

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
  Result<Buffer> alloc_weight(int64_t bytes) {
    constexpr int64_t kHuge = int64_t{2} << 20;
    if (bytes < kHuge) return alloc(bytes);
    const int64_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, static_cast<size_t>(rounded));
    if (p == nullptr) {
      return make_error(ErrorKind::kExhausted,
                        "cpu: cannot allocate " + std::to_string(bytes) + " bytes");
    }
    madvise(p, static_cast<size_t>(rounded), MADV_HUGEPAGE);
    return Buffer(this, p, bytes);
  }
  void upload(void* dst, const void* src, int64_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, int64_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void fill_zero(void* dst, int64_t bytes) override { std::memset(dst, 0, bytes); }
  int64_t free_bytes() const override;
  Result<Weight> load_weight(const void* host, DType type, int64_t rows, int64_t cols,
                             WeightLoadTiming* timing) override {
    if (cols % block_elems(type) != 0) {
      return make_error(ErrorKind::kBadRequest, "cpu: row of " + std::to_string(cols) +
                                                    " elements is not whole " +
                                                    std::string(dtype_name(type)) + " blocks");
    }
    Weight w;
    w.data = host;  // zero-copy: read in place, unless the kernels have a layout for the type
    w.type = type;
    w.rows = rows;
    w.cols = cols;
    const int64_t bytes =
        kernels_.interleaved_bytes != nullptr ? kernels_.interleaved_bytes(type, rows, cols) : 0;
    if (bytes > 0) {
      const auto t0 = std::chrono::steady_clock::now();
      auto buf = alloc_weight(bytes);
      if (!buf.ok()) return buf.error();
      w.storage = std::move(buf).value();
      const int64_t blocks = rows / cpu::kInterleaveRows;
      parallel_range(blocks, 16, [&](int64_t b0, int64_t b1, int32_t) {
        kernels_.interleave(type, host, cols, b0, b1, w.storage.data());
      });
      w.data = w.storage.data();
      w.layout = WeightLayout::kInterleaved16;
      release_pages(host, row_bytes(type, cols) * rows);
      if (timing != nullptr) {
        timing->convert_ms +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
      }
    }
    return w;
  }
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

int64_t CpuDevice::free_bytes() const {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

// Tasks own slices of output columns (weight rows); finer than the thread count so that a
// preempted core does not hold the step back, but at least kTileW rows each. A small matmul runs
// on the calling thread alone: waking a worker costs more than it (see kParallelMacs).
int64_t CpuDevice::matmul_tasks(const Weight& w, int64_t n_rows) const {
  if (w.rows * w.cols * n_rows < kParallelMacs) return 1;
  return std::clamp<int64_t>(w.rows / (4 * cpu::kTileW), 1,
                             pool_.size() == 1 ? 1 : pool_.size() * 8);
}

void CpuDevice::matmul(const float* x, int64_t n_rows, const Weight& w, float* y) {
  if (w.layout == WeightLayout::kInterleaved16) {
    const MatmulTarget target{&w, y};
    matmuls(x, n_rows, &target, 1);
    return;
  }
  const int64_t n_out = w.rows, k = w.cols;
  const int64_t rb = row_bytes(w.type, k);
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int64_t n_tasks = matmul_tasks(w, n_rows);
  // Integer path: the activations are quantized once per call (cpu_kernels.h QuantRow), then
  // each weight block is decoded once for up to kTileRows activation rows. Chosen by weight type
  // only, never by n_rows (batch invariance).
  if (kernels_.dot_block_q != nullptr &&
      kernels_.dot_block_q(w.type, nullptr, 0, 0, nullptr, 0, k, nullptr, 0)) {
    matmul_quantized(x, n_rows, w, y, n_tasks);
    return;
  }
  if (n_rows > cpu::kTileRows && kernels_.packed_bytes != nullptr &&
      kernels_.packed_bytes(w.type, k) > 0) {
    matmul_packed(x, n_rows, w, y, n_tasks);
    return;
  }
  const float* xs[cpu::kTileRows];
  // The register-blocked tile reads weight blocks in place (F32/F16/BF16/Q8_0/Q4_0) or, for the
  // other types, the F32 rows dequantized once per batch block. The path depends on the weight
  // type and k only, never on n_rows: every (row, column) gets the same bits (cpu_kernels.h).
  if (kernels_.dot_block != nullptr &&
      kernels_.dot_block(DType::kF32, nullptr, 0, 0, xs, 0, k, nullptr, 0, {})) {
    const bool in_place = kernels_.dot_block(w.type, nullptr, 0, 0, xs, 0, k, nullptr, 0, {});
    pool_.run(n_tasks, [&](int64_t task, int32_t thread) {
      const int64_t n_begin = task_begin(n_out, task, n_tasks),
                    n_end = task_begin(n_out, task + 1, n_tasks);
      float* wbuf = in_place ? nullptr : scratch(thread, cpu::kTileW * k);
      // Decode dequantizes one row at a time (it stays in L1); the bits do not depend on this.
      // Batches of 3 and more read in place take panels of kPanelW rows, prefill batches of
      // kPrefillPanelW (cpu_kernels.h).
      const int64_t group = in_place && n_rows > cpu::kTileRows ? cpu::kPrefillPanelW
                            : in_place && n_rows > 2            ? cpu::kPanelW
                            : in_place || n_rows > 2            ? cpu::kTileW
                                                                : 1;
      const float* tile_xs[cpu::kTileRows];
      for (int64_t b0 = 0; b0 < n_rows; b0 += kBatchBlock) {
        const int64_t b1 = std::min(n_rows, b0 + kBatchBlock);
        for (int64_t n = n_begin; n < n_end; n += group) {
          const int nw = static_cast<int>(std::min<int64_t>(group, n_end - n));
          const void* wt = base + n * rb;
          int64_t stride = rb;
          DType type = w.type;
          if (!in_place) {
            for (int a = 0; a < nw; ++a)
              kernels_.dequant(w.type, base + (n + a) * rb, wbuf + a * k, k);
            wt = wbuf;
            stride = k * 4;
            type = DType::kF32;
          }
          // The rows after these, for the last tile to prefetch while it runs (in place only).
          const cpu::PrefetchRows next{
              .w = base + (n + nw) * rb,
              .stride = rb,
              .rows = in_place ? static_cast<int>(std::min<int64_t>(group, n_end - n - nw)) : 0,
              .bytes = rb};
          for (int64_t b = b0; b < b1; b += cpu::kTileRows) {
            const int nr = static_cast<int>(std::min<int64_t>(cpu::kTileRows, b1 - b));
            for (int r = 0; r < nr; ++r) tile_xs[r] = x + (b + r) * k;
            kernels_.dot_block(type, wt, stride, nw, tile_xs, nr, k, y + b * n_out + n, n_out,
                               b + nr < b1 ? cpu::PrefetchRows{} : next);
          }
        }
      }
    });
    return;
  }
  const int tile = kernels_.dot_tile;
  // Small batches read the blocks in the dot product itself (no scratch round trip); large ones
  // dequantize a row once and reuse it. Both give the same bits (cpu_kernels.h), so the choice
  // by batch size keeps batch invariance.
  const bool fused = n_rows <= 2 * tile && kernels_.dot_rows_typed != nullptr &&
                     kernels_.dot_rows_typed(w.type, nullptr, nullptr, 0, k, nullptr);
  pool_.run(n_tasks, [&](int64_t task, int32_t thread) {
    const int64_t n_begin = task_begin(n_out, task, n_tasks),
                  n_end = task_begin(n_out, task + 1, n_tasks);
    float* wbuf = scratch(thread, k);
    const float* xs[4];
    float out[4];
    for (int64_t b0 = 0; b0 < n_rows; b0 += kBatchBlock) {
      const int64_t b1 = std::min(n_rows, b0 + kBatchBlock);
      for (int64_t n = n_begin; n < n_end; ++n) {
        const uint8_t* row = base + n * rb;
        const float* wrow = reinterpret_cast<const float*>(row);
        if (w.type != DType::kF32 && !fused) {
          kernels_.dequant(w.type, row, wbuf, k);
          wrow = wbuf;
        }
        for (int64_t b = b0; b < b1; b += tile) {
          const int nr = static_cast<int>(std::min<int64_t>(tile, b1 - b));
          for (int r = 0; r < nr; ++r) xs[r] = x + (b + r) * k;
          if (fused) {
            kernels_.dot_rows_typed(w.type, row, xs, nr, k, out);
          } else {
            kernels_.dot_rows(wrow, xs, nr, k, out);
          }
          for (int r = 0; r < nr; ++r) y[(b + r) * n_out + n] = out[r];
        }
      }
    }
  });
}

// Prefill batches (cpu_kernels.h dot_packed): the activations are packed once, by all threads;
// then each task packs its weight rows one panel at a time and runs every activation row
// against it, while the kernel prefetches the task's next panel. Each pair gets the bits of
// dot_rows, as on the other paths. Decode batches (up to kTileRows rows) read the weights in
// place: packing them measured 16-19 % faster on one thread at 5-8 rows, but 4 % slower in
// decode_bench on two threads, which share the memory bandwidth.
void CpuDevice::matmul_packed(const float* x, int64_t n_rows, const Weight& w, float* y,
                              int64_t n_tasks) {
  const int64_t n_out = w.rows, k = w.cols;
  const int64_t rb = row_bytes(w.type, k), pb = kernels_.packed_bytes(w.type, k);
  const auto* base = static_cast<const uint8_t*>(w.data);
  // 64-byte aligned, as the packed weights: the kernel reads both in 64-byte vectors.
  float* xp = aligned64(xp_, n_rows * k);
  xps_.resize(n_rows);
  for (int64_t r = 0; r < n_rows; ++r) xps_[r] = xp + r * k;
  parallel_range(n_rows, 8, [&](int64_t begin, int64_t end, int32_t) {
    for (int64_t r = begin; r < end; ++r) kernels_.pack_x(x + r * k, k, xp + r * k);
  });
  // A panel of about 512 KiB stays in L2 while every activation row passes over it.
  const int64_t panel = std::clamp<int64_t>((int64_t{512} << 10) / pb / 4 * 4, 4, cpu::kPackPanelW);
  for_each_panel(n_out, n_tasks, panel, pb, [&](void* wp, int64_t n, int nw, int64_t n_end) {
    kernels_.pack_w(w.type, base + n * rb, rb, nw, k, wp);
    const cpu::PrefetchRows next{.w = base + (n + nw) * rb,
                                 .stride = rb,
                                 .rows = static_cast<int>(std::min(panel, n_end - n - nw)),
                                 .bytes = rb};
    kernels_.dot_packed(w.type, wp, nw, xps_.data(), static_cast<int>(n_rows), k, y + n, n_out,
                        next);
  });
}

// Weights held interleaved (cpu_kernels.h dot_interleaved), every batch size: the activations
// are packed in tiles of kInterleaveTileRows rows, by all threads, then each task takes its slice
// of the row blocks. Decode batches pass the whole slice in one call (one tile of activation rows
// streams the blocks from memory); prefill batches pass panels of at most about 512 KiB, which
// stay in L2 while every tile of activation rows passes over them. Prefill slices and panels
// are whole multiples of the kInterleaveTileBlocks blocks a full tile takes where the weight has
// them, so that narrower tiles run only on a weight's last blocks.
const float* CpuDevice::pack_interleaved(const float* x, int64_t n_rows, int64_t k) {
  if (n_rows == 1) return x;  // one row is its own packed tile
  constexpr int64_t kTile = cpu::kInterleaveTileRows;
  float* packed = aligned64(xp_, n_rows * k);
  parallel_range((n_rows + kTile - 1) / kTile, std::max<int64_t>(1, kParallelElems / (kTile * k)),
                 [&](int64_t begin, int64_t end, int32_t) {
                   for (int64_t t = begin; t < end; ++t) {
                     const int64_t r = t * kTile;
                     kernels_.pack_interleaved_x(x + r * k,
                                                 static_cast<int>(std::min(kTile, n_rows - r)), k,
                                                 packed + r * k);
                   }
                 });
  return packed;
}

CpuDevice::InterleavedJob CpuDevice::interleaved_job(const Weight& w, float* y, int64_t n_rows,
                                                     int64_t n_tasks) const {
  InterleavedJob j{.w = &w, .y = y};
  j.blocks = w.rows / cpu::kInterleaveRows;
  j.block_bytes = kernels_.interleaved_bytes(w.type, cpu::kInterleaveRows, w.cols);
  const bool prefill = n_rows > cpu::kTileRows;
  // Tasks split at any block (a block's 16 outputs of a row are one 64-byte line), prefill
  // tasks at whole units of a full tile's blocks.
  j.unit = prefill ? cpu::kInterleaveTileBlocks : 1;
  j.units = (j.blocks + j.unit - 1) / j.unit;
  j.panel = prefill ? std::max<int64_t>(1, (int64_t{512} << 10) / j.block_bytes / j.unit) * j.unit
                    : j.blocks;
  j.tasks = std::clamp<int64_t>(n_tasks, 1, j.units);
  return j;
}

void CpuDevice::run_interleaved(const InterleavedJob& j, const float* xp, int64_t n_rows,
                                int64_t task) {
  const auto* base = static_cast<const uint8_t*>(j.w->data);
  const int64_t b_end = std::min(j.blocks, j.units * (task + 1) / j.tasks * j.unit);
  for (int64_t b = std::min(j.blocks, j.units * task / j.tasks * j.unit); b < b_end; b += j.panel) {
    kernels_.dot_interleaved(j.w->type, base + b * j.block_bytes, j.w->cols,
                             static_cast<int>(std::min(j.panel, b_end - b)), xp,
                             static_cast<int>(n_rows), j.y + b * cpu::kInterleaveRows, j.w->rows);
  }
}

// Interleaved weights of one input: x is packed once and every weight's tasks run in one pass
// of the pool, so that a small weight's tasks (a K or V projection) fill the threads beside a
// large one's instead of after it. Any other weight: one matmul call each.
void CpuDevice::matmuls(const float* x, int64_t n_rows, const MatmulTarget* targets, int n) {
  const std::span<const MatmulTarget> all(targets, n);
  const bool interleaved =
      n > 0 && std::all_of(all.begin(), all.end(), [&](const MatmulTarget& t) {
        return t.w->layout == WeightLayout::kInterleaved16 && t.w->cols == targets[0].w->cols;
      });
  if (!interleaved) {
    if (matmuls_quantized(x, n_rows, all)) return;
    for (const MatmulTarget& t : all) matmul(x, n_rows, *t.w, t.y);
    return;
  }
  std::vector<InterleavedJob>& jobs = jobs_;
  jobs.clear();
  int64_t total = 0, macs = 0;
  for (const MatmulTarget& t : all) {
    jobs.push_back(interleaved_job(*t.w, t.y, n_rows, matmul_tasks(*t.w, n_rows)));
    total += jobs.back().tasks;
    macs += t.w->rows * t.w->cols * n_rows;
  }
  const float* xp = pack_interleaved(x, n_rows, targets[0].w->cols);
  if (macs < kParallelMacs) {  // all of it on the calling thread, as matmul_tasks would
    for (const InterleavedJob& job : jobs)
      for (int64_t task = 0; task < job.tasks; ++task) run_interleaved(job, xp, n_rows, task);
    return;
  }
  pool_.run(total, [&](int64_t task, int32_t) {
    size_t j = 0;
    for (; task >= jobs[j].tasks; ++j) task -= jobs[j].tasks;
    run_interleaved(jobs[j], xp, n_rows, task);
  });
}

bool CpuDevice::matmuls_quantized(const float* x, int64_t n_rows,
                                  std::span<const MatmulTarget> all) {
  if (all.size() < 2 || n_rows > cpu::kTileRows || kernels_.dot_block_q == nullptr) return false;
  const Weight& w0 = *all[0].w;
  for (const MatmulTarget& t : all) {
    if (t.w->layout != WeightLayout::kRows || t.w->cols != w0.cols ||
        !same_x_layout(t.w->type, w0.type) ||
        !kernels_.dot_block_q(t.w->type, nullptr, 0, 0, nullptr, 0, t.w->cols, nullptr, 0))
      return false;
  }
  quantize_x(x, n_rows, w0.type, w0.cols);
  task_ends_.clear();
  int64_t total = 0;
  for (const MatmulTarget& t : all) task_ends_.push_back(total += matmul_tasks(*t.w, n_rows));
  if (total == static_cast<int64_t>(all.size())) {  // each one small: on the calling thread
    for (const MatmulTarget& t : all) run_quantized(*t.w, t.y, n_rows, 0, 1);
    return true;
  }
  pool_.run(total, [&](int64_t task, int32_t) {
    size_t j = 0;
    while (task >= task_ends_[j]) ++j;
    const int64_t first = j == 0 ? 0 : task_ends_[j - 1];
    run_quantized(*all[j].w, all[j].y, n_rows, task - first, task_ends_[j] - first);
  });
  return true;
}

// QuantRow::q, d and sums of each row, or for types whose kernels read int8 (reads_x8) q8, d8,
// sums8 and sums16 instead.
void CpuDevice::quantize_x_blocks(const float* x, int64_t n_rows, DType type, int64_t k) {
  const int64_t kp = cpu::qrow_padded(k);
  const int64_t scales = kp / cpu::kQBlock + kp / cpu::kQGroup;
  const bool x8 = kernels_.reads_x8 != nullptr && kernels_.reads_x8(type);
  // The kernels read q and q8 in 64-byte vectors.
  int16_t* q0 = x8 ? nullptr : aligned64(xq_, n_rows * kp);
  int8_t* q80 = x8 ? aligned64(xq8_, n_rows * kp) : nullptr;
  // Scales and sums of whichever layout the type's kernels read.
  if (static_cast<int64_t>(xd_.size()) < n_rows * scales) xd_.resize(n_rows * scales);
  if (x8 && static_cast<int64_t>(xs16_.size()) < n_rows * (kp / 16))
    xs16_.resize(n_rows * (kp / 16));
  float* d = xd_.data();
  float* sums = xd_.data() + n_rows * (kp / cpu::kQBlock);
  parallel_range(n_rows, std::max<int64_t>(1, kParallelElems / k),
                 [&](int64_t r0, int64_t r1, int32_t) {
                   for (int64_t r = r0; r < r1; ++r) {
                     float* dr = d + r * (kp / cpu::kQBlock);
                     float* sr = sums + r * (kp / cpu::kQGroup);
                     if (!x8) {
                       int16_t* q = q0 + r * kp;
                       kernels_.quantize_row_x(x + r * k, k, q, dr, sr);
                       qrows_[r] = cpu::QuantRow{.q = q, .d = dr, .sums = sr};
                       continue;
                     }
                     int8_t* q8 = q80 + r * kp;
                     kernels_.quantize_row_x8(x + r * k, k, q8, dr, sr);
                     int16_t* s16 = xs16_.data() + r * (kp / 16);
                     for (int64_t g = 0; g < kp / 16; ++g) {
                       int sum = 0;
                       for (int i = 0; i < 16; ++i) sum += q8[16 * g + i];
                       s16[g] = static_cast<int16_t>(sum);
                     }
                     qrows_[r] = cpu::QuantRow{.q8 = q8, .d8 = dr, .sums8 = sr, .sums16 = s16};
                   }
                 });
}

// QuantRow per row of x in the layout the kernels of `type` read (cpu_kernels.h).
void CpuDevice::quantize_x(const float* x, int64_t n_rows, DType type, int64_t k) {
  const int64_t kp = cpu::qrow_padded(k);
  qrows_.resize(n_rows);
  if (kernels_.reads_xg != nullptr && kernels_.reads_xg(type)) {
    // Int8 per group only (cpu_kernels.h QuantRow::qg), 64-byte aligned: the kernel reads it
    // in 64-byte vectors.
    uint8_t* qg0 = aligned64(xqg_, n_rows * kp);
    float* dg0 = aligned64(xdg_, n_rows * (4 * kp / cpu::kQGroup));
    parallel_range(n_rows, std::max<int64_t>(1, kParallelElems / k),
                   [&](int64_t r0, int64_t r1, int32_t) {
                     for (int64_t r = r0; r < r1; ++r) {
                       uint8_t* qg = qg0 + r * kp;
                       float* dg = dg0 + r * (4 * kp / cpu::kQGroup);
                       kernels_.quantize_row_xg(x + r * k, k, qg, dg);
                       qrows_[r] = cpu::QuantRow{.qg = qg, .dg = dg};
                     }
                   });
  } else {
    quantize_x_blocks(x, n_rows, type, k);
  }
}

// Whether two weight types' kernels read the same QuantRow layout.
bool CpuDevice::same_x_layout(DType a, DType b) const {
  const auto xg = [&](DType t) { return kernels_.reads_xg != nullptr && kernels_.reads_xg(t); };
  const auto x8 = [&](DType t) { return kernels_.reads_x8 != nullptr && kernels_.reads_x8(t); };
  return xg(a) == xg(b) && (xg(a) || x8(a) == x8(b));
}

// Task `task` of n_tasks of a decode-sized matmul on the quantized rows in qrows_.
void CpuDevice::run_quantized(const Weight& w, float* y, int64_t n_rows, int64_t task,
                              int64_t n_tasks) {
  const int64_t n_out = w.rows, k = w.cols, rb = row_bytes(w.type, k);
  const auto* base = static_cast<const uint8_t*>(w.data);
  const int64_t n_begin = task_begin(n_out, task, n_tasks),
                n_end = task_begin(n_out, task + 1, n_tasks);
  for (int64_t b0 = 0; b0 < n_rows; b0 += kBatchBlock) {
    const int64_t b1 = std::min(n_rows, b0 + kBatchBlock);
    for (int64_t n = n_begin; n < n_end; n += cpu::kTileW) {
      const int nw = static_cast<int>(std::min<int64_t>(cpu::kTileW, n_end - n));
      for (int64_t b = b0; b < b1; b += cpu::kTileRows) {
        const int nr = static_cast<int>(std::min<int64_t>(cpu::kTileRows, b1 - b));
        kernels_.dot_block_q(w.type, base + n * rb, rb, nw, qrows_.data() + b, nr, k,
                             y + b * n_out + n, n_out);
      }
    }
  }
}

void CpuDevice::matmul_quantized(const float* x, int64_t n_rows, const Weight& w, float* y,
                                 int64_t n_tasks) {
  const int64_t n_out = w.rows, k = w.cols;
  const int64_t rb = row_bytes(w.type, k);
  const auto* base = static_cast<const uint8_t*>(w.data);
  quantize_x(x, n_rows, w.type, k);
  const int64_t pb = n_rows > cpu::kTileRows && kernels_.packed_q_bytes != nullptr
                         ? kernels_.packed_q_bytes(w.type, k)
                         : 0;
  if (pb > 0) {
    // Prefill: each task prepares a panel of weight rows once (about 256 KiB, in L2), then runs
    // every tile of activation rows over it.
    const int64_t panel = std::clamp<int64_t>((int64_t{256} << 10) / pb / 4 * 4, 4, 64);
    for_each_panel(n_out, n_tasks, panel, pb, [&](void* wp, int64_t n, int nw, int64_t) {
      kernels_.pack_wq(w.type, base + n * rb, rb, nw, k, wp);
      for (int64_t b = 0; b < n_rows; b += cpu::kTileRows) {
        const int nr = static_cast<int>(std::min<int64_t>(cpu::kTileRows, n_rows - b));
        kernels_.dot_packed_q(w.type, wp, nw, qrows_.data() + b, nr, k, y + b * n_out + n, n_out);
      }
    });
    return;
  }
  pool_.run(n_tasks, [&](int64_t task, int32_t) { run_quantized(w, y, n_rows, task, n_tasks); });
}

void CpuDevice::embed(const Weight& table, const int32_t* ids, int64_t n, float* y) {
  const int64_t k = table.cols;
  const int64_t rb = row_bytes(table.type, k);
  const auto* base = static_cast<const uint8_t*>(table.data);
  if (table.layout == WeightLayout::kInterleaved16) {  // F16, cpu_kernels.h interleave
    const auto* h = static_cast<const f16_t*>(table.data);
    constexpr int64_t kRows = cpu::kInterleaveRows;
    for (int64_t i = 0; i < n; ++i) {
      assert(ids[i] >= 0 && ids[i] < table.rows);
      const f16_t* blk = h + ids[i] / kRows * kRows * k + ids[i] % kRows;
      for (int64_t c = 0; c < k; ++c) y[i * k + c] = f16_to_f32(blk[c * kRows]);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    assert(ids[i] >= 0 && ids[i] < table.rows);
    kernels_.dequant(table.type, base + ids[i] * rb, y + i * k, k);
  }
}

void CpuDevice::rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                         float* y) {
  parallel_range(rows, std::max<int64_t>(1, kParallelElems / dim),
                 [&](int64_t r0, int64_t r1, int32_t) {
                   for (int64_t r = r0; r < r1; ++r) {
                     const float* xr = x + r * dim;
                     float ss;
                     kernels_.dot_rows(xr, &xr, 1, dim, &ss);
                     const float scale = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
                     float* yr = y + r * dim;
                     for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * scale * weight[i];
                   }
                 });
}

void CpuDevice::rope(float* x, const int32_t* positions, int64_t rows, int32_t n_heads,
                     int32_t head_dim, const RopeParams& p) {
  const int32_t n_rot = p.n_rot > 0 ? p.n_rot : head_dim;
  const int32_t half = n_rot / 2;
  std::vector<double> inv_freq(half);
  for (int32_t i = 0; i < half; ++i) {
    inv_freq[i] = std::pow(static_cast<double>(p.freq_base), -2.0 * i / n_rot);
    if (p.freq_factors != nullptr) inv_freq[i] /= p.freq_factors[i];
  }
  parallel_range(rows, 8, [&](int64_t r0, int64_t r1, int32_t thread) {
    float* cs = scratch(thread, 2 * half);
    for (int64_t r = r0; r < r1; ++r) {
      for (int32_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(positions[r]) * p.freq_scale * inv_freq[i];
        cs[2 * i] = static_cast<float>(std::cos(angle));
        cs[2 * i + 1] = static_cast<float>(std::sin(angle));
      }
      for (int32_t h = 0; h < n_heads; ++h) {
        float* v = x + (r * n_heads + h) * head_dim;
        for (int32_t i = 0; i < half; ++i) {
          const int32_t a = p.neox ? i : 2 * i, b = p.neox ? i + half : 2 * i + 1;
          const float c = cs[2 * i], s = cs[2 * i + 1];
          const float x0 = v[a], x1 = v[b];
          v[a] = x0 * c - x1 * s;
          v[b] = x0 * s + x1 * c;
        }
      }
    }
  });
}

void CpuDevice::swiglu(const float* gate, const float* up, int64_t n, float* y) {
  parallel_range(n, kParallelElems, [&](int64_t i0, int64_t i1, int32_t) {
    cpu::swiglu(kernels_, gate + i0, up + i0, i1 - i0, y + i0);
  });
}

void CpuDevice::add(const float* a, const float* b, int64_t n, float* y) {
  parallel_range(n, kParallelElems, [&](int64_t i0, int64_t i1, int32_t) {
    for (int64_t i = i0; i < i1; ++i) y[i] = a[i] + b[i];
  });
}

void CpuDevice::add_bias(float* x, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) x[r * cols + c] += bias[c];
}

void CpuDevice::softmax(float* x, int64_t rows, int64_t cols) {
  parallel_range(rows, std::max<int64_t>(1, kParallelElems / cols),
                 [&](int64_t r0, int64_t r1, int32_t) {
                   for (int64_t r = r0; r < r1; ++r) {
                     float* v = x + r * cols;
                     float mx = -INFINITY;
                     for (int64_t i = 0; i < cols; ++i) mx = std::max(mx, v[i]);
                     float sum = 0;
                     for (int64_t i = 0; i < cols; ++i) {
                       v[i] = std::exp(v[i] - mx);
                       sum += v[i];
                     }
                     const float inv = 1.0f / sum;
                     for (int64_t i = 0; i < cols; ++i) v[i] *= inv;
                   }
                 });
}

void CpuDevice::kv_write(float* k_cache, float* v_cache, const float* k, const float* v,
                         const int32_t* slots, int64_t n, int64_t kv_dim) {
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(k_cache + static_cast<int64_t>(slots[i]) * kv_dim, k + i * kv_dim, kv_dim * 4);
    std::memcpy(v_cache + static_cast<int64_t>(slots[i]) * kv_dim, v + i * kv_dim, kv_dim * 4);
  }
}

void CpuDevice::paged_attention(const AttentionArgs& a) {
  cpu::paged_attention(a, pool_, kernels_, scratch_);
}

}  // namespace

std::unique_ptr<Device> make_cpu_device(int32_t n_threads, std::string_view isa) {
  if (n_threads <= 0)
    n_threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  cpu::Isa chosen = cpu::detect_isa();
  if (isa == "scalar") chosen = cpu::Isa::kScalar;
  if (isa == "avx2" && chosen == cpu::Isa::kAvx512) chosen = cpu::Isa::kAvx2;
  return std::make_unique<CpuDevice>(n_threads, chosen);
}

}  // namespace cutline::device
