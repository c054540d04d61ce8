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
#include "cpu_device_impl.h"
#include "cpu_kernels.h"
#include "cutline/device/thread_pool.h"

namespace cutline::device {
namespace {

// Tells the kernel that a weight's source pages (the model file's mapping, once copied into a
// device layout) will not be read again, so that they are reclaimed before anything else instead
// of counting twice. Only a hint: the bytes stay valid and readable.
void release_pages(const void* p, int64_t bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes)) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_COLD);
}

}  // namespace

Result<Buffer> CpuDevice::alloc_weight(int64_t bytes) {
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

Result<Weight> CpuDevice::load_weight(const void* host, DType type, int64_t rows, int64_t cols,
                                      WeightLoadTiming* timing) {
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
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  return w;
}

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

void CpuDevice::embed(const Weight& table, const int32_t* ids, int64_t n, float* y) {
  const int64_t k = table.cols;
  const int64_t rb = row_bytes(table.type, k);
  const auto* base = static_cast<const uint8_t*>(table.data);
  if (table.layout == WeightLayout::kInterleaved16) {  // cpu_kernels.h interleave
    const auto* h = static_cast<const uint16_t*>(table.data);
    const auto* f = static_cast<const float*>(table.data);
    for (int64_t i = 0; i < n; ++i) {
      assert(ids[i] >= 0 && ids[i] < table.rows);
      for (int64_t c = 0; c < k; ++c) {
        const int64_t at = cpu::interleaved_index(table.type, k, ids[i], c);
        y[i * k + c] = table.type == DType::kF32    ? f[at]
                       : table.type == DType::kBF16 ? bf16_to_f32(h[at])
                                                    : f16_to_f32(h[at]);
      }
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

std::unique_ptr<Device> make_cpu_device(int32_t n_threads, std::string_view isa) {
  if (n_threads <= 0)
    n_threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  cpu::Isa chosen = cpu::detect_isa();
  if (isa == "scalar") chosen = cpu::Isa::kScalar;
  if (isa == "avx2" && chosen == cpu::Isa::kAvx512) chosen = cpu::Isa::kAvx2;
  return std::make_unique<CpuDevice>(n_threads, chosen);
}

}  // namespace cutline::device
