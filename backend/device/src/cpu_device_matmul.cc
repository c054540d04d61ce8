// CpuDevice's matmuls (cpu_device_impl.h): each splits the output columns (weight rows) into
// tasks on the pool, never a reduction, so results do not depend on the thread count or the batch.
#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "cpu_device_impl.h"
#include "cpu_kernels.h"

namespace cutline::device {

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
  // The register-blocked tile reads weight blocks in place (F32/F16/BF16/Q8_0) or, for the
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
  // q8 of every row, then the same in QuantRow::q8p's order, then in q8h's.
  int8_t* q80 = x8 ? aligned64(xq8_, 3 * n_rows * kp) : nullptr;
  // Scales and sums of whichever layout the type's kernels read.
  if (static_cast<int64_t>(xd_.size()) < n_rows * scales) xd_.resize(n_rows * scales);
  if (x8 && static_cast<int64_t>(xs16_.size()) < n_rows * (kp / 16))
    xs16_.resize(n_rows * (kp / 16));
  float* d = xd_.data();
  float* sums = xd_.data() + n_rows * (kp / cpu::kQBlock);
  parallel_range(
      n_rows, std::max<int64_t>(1, kParallelElems / k), [&](int64_t r0, int64_t r1, int32_t) {
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
          int8_t* q8p = q80 + (n_rows + r) * kp;
          for (int64_t c = 0; c < kp; c += 128) {
            for (int m = 0; m < 4; ++m) {
              std::memcpy(q8p + c + 16 * m, q8 + c + 32 * m, 16);
              std::memcpy(q8p + c + 64 + 16 * m, q8 + c + 32 * m + 16, 16);
            }
          }
          int8_t* q8h = q80 + (2 * n_rows + r) * kp;
          for (int64_t c = 0; c < kp; c += 256) {
            for (int j = 0; j < 4; ++j) {
              std::memcpy(q8h + c + 64 * j, q8 + c + 32 * j, 32);
              std::memcpy(q8h + c + 64 * j + 32, q8 + c + 128 + 32 * j, 32);
            }
          }
          qrows_[r] =
              cpu::QuantRow{.q8 = q8, .q8p = q8p, .q8h = q8h, .d8 = dr, .sums8 = sr, .sums16 = s16};
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
    // One tile of activation rows (decode) takes the task's whole slice in one call, so that the
    // dispatch to the type's kernel is paid once per task instead of once per kTileW weight rows
    // (6 % of Q2_K's batch-1 decode). More rows go kTileW weight rows at a time, which stay in L1
    // across the row tiles. Each output's bits do not depend on nw.
    const int64_t tile_w = b1 - b0 <= cpu::kTileRows ? n_end - n_begin : cpu::kTileW;
    for (int64_t n = n_begin; n < n_end; n += tile_w) {
      const int nw = static_cast<int>(std::min<int64_t>(tile_w, n_end - n));
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

}  // namespace cutline::device
