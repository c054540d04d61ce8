#pragma once
// Device: the one interface every compute device implements (STYLE.md "One device interface, many
// devices"). The Llama forward pass (backend/model) calls only this interface; the CPU device is
// always built, the CUDA device when nvcc exists (make_device picks one at run time).
//
// Memory: every pointer an op takes is device memory from alloc() (host memory for the CPU
// device), including the small int arrays (token ids, positions, KV slots, block tables).
// Ops are enqueued in order and may run asynchronously; sync() waits for them and returns the
// first error any of them hit (a CUDA launch or cuBLAS failure). Ops never throw; their argument
// contracts (shapes, ranges) are checked by the caller and asserted here.
//
// Batch invariance: on the CPU device every output row of every op is reduced in a fixed order
// that depends only on that row (not on the batch size, the other rows or the thread count), so
// a sequence's logits are bitwise identical alone or in a batch. caps().batch_invariant says
// whether a device guarantees this.

#include <cstdint>
#include <memory>
#include <string>

#include "cutline/base/result.h"
#include "cutline/device/quant.h"

namespace cutline::device {

enum class DeviceKind { kAuto, kCpu, kCuda };

class Device;

// An owned block of device memory, freed when destroyed.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device* device, void* data, int64_t bytes) : device_(device), data_(data), bytes_(bytes) {}
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  void reset();
  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  Device* device_ = nullptr;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

// A weight matrix of `rows` output features by `cols` inputs (GGUF ne1 x ne0), row-major, each
// row `row_bytes(type, cols)` bytes of blocks. `data` is device memory; on the CPU it may point
// straight into the model file's mmap (then `storage` is empty).
//
// A device may hold a weight in a layout of its own (`layout`); only that device's ops read it.
enum class WeightLayout {
  kRows,           // as above
  kInterleaved16,  // CPU: blocks of 16 rows, k-major (element i of the 16 rows side by side)
};
struct Weight {
  const void* data = nullptr;
  DType type = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  WeightLayout layout = WeightLayout::kRows;
  Buffer storage;
};

// What load_weight spent, by phase (the residency manager reports these).
struct WeightLoadTiming {
  double convert_ms = 0;     // dequantize / re-layout on the host
  double upload_ms = 0;      // host -> device copies
  int64_t device_bytes = 0;  // bytes the device holds for weights (0 when zero-copy)
};

struct DeviceCaps {
  bool zero_copy_host_weights = false;  // weights can stay in host (mmap) memory
  bool native_quant_matmul = false;     // matmul reads quantized blocks directly
  bool batch_invariant = false;         // see the header comment
};

struct RopeParams {
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // 1 / linear scaling factor
  int32_t n_rot = 0;        // rotated dims per head (head_dim when 0)
  // false: "normal" ordering, adjacent pairs (x[2i], x[2i+1]) as llama.cpp uses for llama;
  // true: "neox" ordering, halves (x[i], x[i + n_rot/2]) as llama.cpp uses for qwen2.
  bool neox = false;
  // Optional per-pair frequency divisors ([n_rot / 2] floats, device memory; Llama 3.1's
  // rope_freqs.weight): the angle of pair i is divided by freq_factors[i].
  const float* freq_factors = nullptr;
};

// One query token of a paged attention call: it sits at absolute position `pos` and attends to
// positions [0, pos] of its sequence, whose physical blocks are block_tables[table_begin ...].
struct AttentionToken {
  int32_t pos = 0;
  int32_t table_begin = 0;
};

struct AttentionArgs {
  const float* q = nullptr;        // [n_tokens][n_heads * head_dim]
  float* out = nullptr;            // [n_tokens][n_heads * head_dim]
  const float* k_cache = nullptr;  // one layer: [n_blocks * block_size][n_kv_heads * head_dim]
  const float* v_cache = nullptr;
  const int32_t* block_tables = nullptr;   // concatenated per-sequence tables
  const AttentionToken* tokens = nullptr;  // [n_tokens]
  int32_t n_tokens = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;  // n_heads % n_kv_heads == 0 (GQA)
  int32_t head_dim = 0;
  int32_t block_size = 0;
  int32_t max_pos = 0;  // max over tokens of pos (sizes scratch)
  float scale = 1.0f;   // usually 1/sqrt(head_dim)
};

class Device {
 public:
  virtual ~Device() = default;

  virtual DeviceKind kind() const = 0;
  virtual std::string description() const = 0;  // e.g. "cpu: 2 threads, avx512"
  virtual DeviceCaps caps() const = 0;

  // Memory.
  virtual Result<Buffer> alloc(int64_t bytes) = 0;  // kExhausted when it does not fit
  virtual void free(void* data) = 0;                // called by Buffer
  virtual void upload(void* dst, const void* host_src, int64_t bytes) = 0;
  virtual void download(void* host_dst, const void* src, int64_t bytes) = 0;
  virtual void fill_zero(void* dst, int64_t bytes) = 0;
  virtual int64_t free_bytes() const = 0;
  // Makes a host weight (e.g. in a mmap that outlives the Weight) usable by matmul and embed.
  virtual Result<Weight> load_weight(const void* host, DType type, int64_t rows, int64_t cols,
                                     WeightLoadTiming* timing) = 0;
  virtual Status sync() = 0;

  // y[b][n] = sum_k x[b][k] * w[n][k] for b < n_rows (x: [n_rows][w.cols], y: [n_rows][w.rows]).
  virtual void matmul(const float* x, int64_t n_rows, const Weight& w, float* y) = 0;
  // matmul of the same x by each target's weight into its y (the weights' cols equal). The
  // results are those of the separate calls; a device may run them as one step (the CPU device
  // prepares x once and spreads every weight's work over its threads at once).
  struct MatmulTarget {
    const Weight* w = nullptr;
    float* y = nullptr;
  };
  virtual void matmuls(const float* x, int64_t n_rows, const MatmulTarget* targets, int n) {
    for (int i = 0; i < n; ++i) matmul(x, n_rows, *targets[i].w, targets[i].y);
  }
  // y[i] = table[ids[i]] as F32 (y: [n][table.cols]).
  virtual void embed(const Weight& table, const int32_t* ids, int64_t n, float* y) = 0;
  // y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight.
  virtual void rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                        float* y) = 0;
  // Rotates x ([rows][n_heads * head_dim]) in place; row r is at positions[r].
  virtual void rope(float* x, const int32_t* positions, int64_t rows, int32_t n_heads,
                    int32_t head_dim, const RopeParams& params) = 0;
  // y = silu(gate) * up, elementwise over n.
  virtual void swiglu(const float* gate, const float* up, int64_t n, float* y) = 0;
  // y = a + b, elementwise over n (y may alias a or b).
  virtual void add(const float* a, const float* b, int64_t n, float* y) = 0;
  // x[r][c] += bias[c].
  virtual void add_bias(float* x, const float* bias, int64_t rows, int64_t cols) = 0;
  // y[i] = x[rows[i]] for i < n (x, y: rows of `cols` floats).
  virtual void gather_rows(const float* x, const int32_t* rows, int64_t n, int64_t cols,
                           float* y) = 0;
  // Softmax of each row of x ([rows][cols]) in place.
  virtual void softmax(float* x, int64_t rows, int64_t cols) = 0;
  // Writes token i's K and V ([n][kv_dim]) into cache row slots[i] (block * block_size + offset).
  virtual void kv_write(float* k_cache, float* v_cache, const float* k, const float* v,
                        const int32_t* slots, int64_t n, int64_t kv_dim) = 0;
  // Causal paged attention for prefill chunks and decode tokens alike (see AttentionToken).
  virtual void paged_attention(const AttentionArgs& args) = 0;
};

struct DeviceOptions {
  DeviceKind kind = DeviceKind::kAuto;
  int32_t cpu_threads = 0;  // 0: one per core
  // CPU instruction set: "" for the best this CPU has, or "scalar" | "avx2" | "avx512" (capped
  // to what the CPU supports; the environment variable CUTLINE_CPU_ISA caps it too).
  std::string cpu_isa;
};

// kCpu: the CPU device. kCuda: the CUDA device, or an error when none is usable (not built, no
// driver, no GPU). kAuto: CUDA when usable, else CPU with a logged reason.
Result<std::unique_ptr<Device>> make_device(const DeviceOptions& options);
std::string_view to_string(DeviceKind kind);

}  // namespace cutline::device
