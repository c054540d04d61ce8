// decode_bench: CPU decode throughput against the memory-bandwidth roofline. For each
// weight type it writes a Llama GGUF of ~1.2 GiB (F16 size) with random weights, loads it on the
// CPU device, and measures side by side with a STREAM-style bandwidth run:
//   - batch-1 decode tokens/s and % of roofline = weight bytes per token x tokens/s / read
//   bandwidth; with --repeats N the two alternate N times and each figure is the median
//   - batch-8 decode throughput and its ratio to batch 1
//   - prefill tokens/s for a 512-token prompt (the mean of two runs after a warm-up)
//   - the seconds LlamaRunner::load took (a layout the device copies the weights into costs here)
// With --device cuda (tests/gpu/run.sh) the same figures come from the CUDA device, the roofline
// against the GPU's bandwidth given by --bandwidth-gbs (tests/gpu/device_bandwidth.cu measures it).
// With --model FILE (repeatable) it measures existing GGUFs instead, each row labeled with the
// file's name (tests/bench/run_llama_cpp_compare.sh passes the files llama.cpp's llama-quantize
// wrote, so both engines read the same bytes).
// Run by tests/bench/run_decode_bench.sh, tests/bench/run_llama_cpp_compare.sh and
// tests/gpu/run.sh, not by ctest.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include <sys/resource.h>
#include <vector>

#include "bench_stats.h"
#include "cutline/device/device.h"
#include "cutline/device/quant.h"
#include "cutline/model/gguf_writer.h"
#include "cutline/model/llama_runner.h"

namespace {

using namespace cutline;
using Clock = std::chrono::steady_clock;
double secs(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
// CPU seconds this process has used (user + system): on a shared machine, throughput per CPU
// second shows the kernels' efficiency apart from the share of the cores the run got.
double cpu_secs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The 1/5/15-minute load averages, to print beside figures measured on a shared machine.
std::string load_average() {
  char buf[128] = {};
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fgets(buf, sizeof buf, f) == nullptr) buf[0] = 0;
    std::fclose(f);
  }
  std::string s(buf);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

struct Spec {
  int layers = 10, dim = 2048, heads = 16, kv_heads = 4, ffn = 5632, vocab = 32000, ctx = 2048;
  device::DType type = device::DType::kF16;
};

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Status write_model(const Spec& s, const std::string& path) {
  model::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "decode-bench");
  w.set_u32("llama.block_count", s.layers);
  w.set_u32("llama.embedding_length", s.dim);
  w.set_u32("llama.feed_forward_length", s.ffn);
  w.set_u32("llama.attention.head_count", s.heads);
  w.set_u32("llama.attention.head_count_kv", s.kv_heads);
  w.set_u32("llama.context_length", s.ctx);
  // Written out (1e-5 is also the default) because llama.cpp refuses a llama file without it,
  // and the bench files are for running side by side with it.
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  struct T {
    std::string name;
    bool norm;
    int64_t cols, rows;
  };
  const int64_t kv = int64_t{s.kv_heads} * (s.dim / s.heads);
  std::vector<T> ts = {{"token_embd.weight", false, s.dim, s.vocab},
                       {"output_norm.weight", true, s.dim, 1},
                       {"output.weight", false, s.dim, s.vocab}};
  for (int i = 0; i < s.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    for (T t : {T{"attn_norm.weight", true, s.dim, 1}, T{"ffn_norm.weight", true, s.dim, 1},
                T{"attn_q.weight", false, s.dim, s.dim}, T{"attn_k.weight", false, s.dim, kv},
                T{"attn_v.weight", false, s.dim, kv}, T{"attn_output.weight", false, s.dim, s.dim},
                T{"ffn_gate.weight", false, s.dim, s.ffn}, T{"ffn_up.weight", false, s.dim, s.ffn},
                T{"ffn_down.weight", false, s.ffn, s.dim}}) {
      t.name = p + t.name;
      ts.push_back(t);
    }
  }
  for (const T& t : ts) {
    const auto type = t.norm ? model::TensorType::kF32 : static_cast<model::TensorType>(s.type);
    Status st = t.norm ? w.add_tensor(t.name, type, {t.cols})
                       : w.add_tensor(t.name, type, {t.cols, t.rows});
    if (!st.ok()) return st;
  }
  if (Status st = w.begin_file(path); !st.ok()) return st;
  uint64_t seed = 7;
  std::vector<float> rows;
  std::vector<uint8_t> bytes;
  for (const T& t : ts) {
    const device::DType type = t.norm ? device::DType::kF32 : s.type;
    const int64_t chunk = 256;
    for (int64_t r0 = 0; r0 < t.rows; r0 += chunk) {
      const int64_t nr = std::min(chunk, t.rows - r0);
      rows.resize(nr * t.cols);
      const float scale = t.norm ? 0.0f : 1.0f / std::sqrt(float(t.cols));
      for (float& x : rows)
        x = (t.norm ? 1.0f : 0.0f) + scale * (float(splitmix(seed) >> 40) / float(1 << 24) * 2 - 1);
      const int64_t rb = device::row_bytes(type, t.cols);
      bytes.resize(nr * rb);
      for (int64_t r = 0; r < nr; ++r)
        device::quantize_row(type, rows.data() + r * t.cols, bytes.data() + r * rb, t.cols);
      if (Status st = w.write_data(bytes); !st.ok()) return st;
    }
  }
  return w.finish();
}

// STREAM-style bandwidth with `threads` threads over 1 GiB: read (sum of 64-bit words, the best
// of a plain and two prefetching loops) and copy (memcpy; bytes read + written). GB/s = 1e9
// bytes/s.
struct Bandwidth {
  double read_gbs = 0, copy_gbs = 0;
};

// The read side's loop, compiled for the widest vectors the CPU has (the loader picks the
// clone): in baseline x86-64 code the additions, not the memory, bound it, and the roofline
// came out below what decode itself draws.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define WIDEST_VECTORS \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), optimize("O3")))
#else
#define WIDEST_VECTORS
#endif
WIDEST_VECTORS uint64_t sum_words(const uint64_t* a, size_t n) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; ++i) s += a[i];
  return s;
}
// The same sum with software prefetches 4 KiB ahead, into all cache levels or (nta) as
// non-temporal, as the decode kernels prefetch the rows they read next: on a 2-vCPU AMD EPYC VM
// these read 5-25 % faster than the plain loop, so the roofline takes the best of the three
// (the decode of F16 and Q8_0 files outran the plain loop).
WIDEST_VECTORS uint64_t sum_words_prefetched(const uint64_t* a, size_t n, bool nta) {
  constexpr size_t kAhead = 512, kLine = 8;  // in words: 4 KiB ahead, one 64-byte line per step
  uint64_t s = 0;
  size_t i = 0;
  for (; i + 4 * kLine <= n; i += 4 * kLine) {
    for (size_t l = 0; l < 4; ++l) {
      if (nta) {
        __builtin_prefetch(a + i + kAhead + l * kLine, 0, 0);
      } else {
        __builtin_prefetch(a + i + kAhead + l * kLine, 0, 3);
      }
    }
    for (size_t j = 0; j < 4 * kLine; ++j) s += a[i + j];
  }
  for (; i < n; ++i) s += a[i];
  return s;
}

class BandwidthProbe {
 public:
  explicit BandwidthProbe(int threads)
      : threads_(threads), a_(kWords, 1), b_(kWords, 2), sums_(threads) {}

  // Best of `reps` reads of each kind (plain, prefetched, prefetched non-temporal) and, with
  // `copy`, copies.
  Bandwidth measure(int reps, bool copy) {
    Bandwidth best;
    for (int rep = 0; rep < reps; ++rep) {
      for (int kind = 0; kind < 3; ++kind) {
        const auto t0 = Clock::now();
        parallel([&](size_t lo, size_t hi, int t) {
          sums_[t] = kind == 0 ? sum_words(a_.data() + lo, hi - lo)
                               : sum_words_prefetched(a_.data() + lo, hi - lo, kind == 2);
        });
        best.read_gbs = std::max(best.read_gbs, kWords * 8.0 / secs(t0) / 1e9);
      }
      if (!copy) continue;
      const auto t0 = Clock::now();
      parallel([&](size_t lo, size_t hi, int) {
        std::memcpy(b_.data() + lo, a_.data() + lo, (hi - lo) * 8);
      });
      best.copy_gbs = std::max(best.copy_gbs, 2.0 * kWords * 8.0 / secs(t0) / 1e9);
    }
    if (sums_[0] == 42) std::printf(" ");  // keep the sums alive
    return best;
  }

 private:
  static constexpr size_t kWords = (size_t{1} << 30) / 8;

  template <typename Fn>
  void parallel(Fn&& fn) {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads_; ++t) {
      ts.emplace_back([&, t] { fn(kWords * t / threads_, kWords * (t + 1) / threads_, t); });
    }
    for (auto& t : ts) t.join();
  }

  const int threads_;
  std::vector<uint64_t> a_, b_;
  std::vector<uint64_t> sums_;
};

using cutline::bench::median;

struct Figures {
  double decode_tps = 0, prefill_tps = 0;
  double decode_cpu_s_per_token = 0;  // CPU seconds per decoded token
  double prefill_tokens_per_cpu_s = 0;
};

// Prefill `prompt` tokens for `batch` sequences, then `steps` decode steps.
Figures run(model::LlamaRunner& r, int batch, int prompt, int steps, bool time_prefill) {
  const int block = 16;
  const int blocks_per_seq = (prompt + steps + block - 1) / block;
  if (!r.allocate_kv(batch * blocks_per_seq, block).ok()) std::abort();
  std::vector<std::vector<int32_t>> tables(batch), toks(batch);
  for (int b = 0; b < batch; ++b) {
    for (int i = 0; i < blocks_per_seq; ++i) tables[b].push_back(b * blocks_per_seq + i);
    for (int i = 0; i < prompt; ++i) toks[b].push_back((b * 131 + i * 17) % 32000);
  }
  std::vector<float> logits;
  Figures f;
  auto t0 = Clock::now();
  const double pc0 = cpu_secs();
  for (int b = 0; b < batch; ++b) {
    model::ForwardBatch fb;
    fb.steps.push_back({.seq_id = b,
                        .tokens = toks[b],
                        .start_pos = 0,
                        .block_table = tables[b],
                        .want_logits = true});
    if (!r.forward(fb, logits).ok()) std::abort();
  }
  if (time_prefill) {
    f.prefill_tps = batch * prompt / secs(t0);
    f.prefill_tokens_per_cpu_s = batch * prompt / (cpu_secs() - pc0);
  }
  std::vector<int32_t> next(batch, 5);
  t0 = Clock::now();
  const double c0 = cpu_secs();
  for (int s = 0; s < steps; ++s) {
    model::ForwardBatch fb;
    for (int b = 0; b < batch; ++b) {
      fb.steps.push_back({.seq_id = b,
                          .tokens = std::span<const int32_t>(&next[b], 1),
                          .start_pos = prompt + s,
                          .block_table = tables[b],
                          .want_logits = true});
    }
    if (!r.forward(fb, logits).ok()) std::abort();
  }
  const double tps = batch * steps / secs(t0);
  f.decode_cpu_s_per_token = (cpu_secs() - c0) / (batch * steps);
  f.decode_tps = tps;
  return f;
}

}  // namespace

// "1,8,32" -> {1, 8, 32}; nothing for an empty or malformed list.
std::vector<int> parse_batches(const std::string& list) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < list.size()) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    const int b = std::atoi(list.substr(pos, comma - pos).c_str());
    if (b <= 0) return {};
    out.push_back(b);
    pos = comma + 1;
  }
  return out;
}

int main(int argc, char** argv) {
  std::string dir = "/tmp", types = "f16,q8_0,q4_k", device_name = "cpu", batches_list;
  std::vector<std::string> models;
  Spec spec;
  bool keep = false;
  int threads = 0, steps = 16, repeats = 1;
  double given_gbs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc)
      dir = argv[++i];
    else if (a == "--types" && i + 1 < argc)
      types = argv[++i];
    else if (a == "--layers" && i + 1 < argc)
      spec.layers = std::atoi(argv[++i]);
    else if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--steps" && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (a == "--device" && i + 1 < argc)
      device_name = argv[++i];
    else if (a == "--bandwidth-gbs" && i + 1 < argc)
      given_gbs = std::atof(argv[++i]);
    else if (a == "--batches" && i + 1 < argc)
      batches_list = argv[++i];
    else if (a == "--repeats" && i + 1 < argc)
      repeats = std::atoi(argv[++i]);
    else if (a == "--model" && i + 1 < argc)
      models.push_back(argv[++i]);
    else if (a == "--keep")
      keep = true;
    else {
      std::fprintf(stderr,
                   "usage: decode_bench --dir DIR [--types f16,q8_0,q4_k] [--layers N] [--threads "
                   "N] [--steps N] [--repeats N] [--keep]\n"
                   "       decode_bench --model FILE [--model FILE ...] [--threads N] [--steps N]\n"
                   "                    [--device cpu|cuda] [--bandwidth-gbs GB/s] [--batches "
                   "1,8,32,64] [--repeats N]\n"
                   "  --bandwidth-gbs: the device's measured read bandwidth for the roofline "
                   "(default: a host STREAM run, which only fits the CPU device)\n"
                   "  --batches: also report aggregate decode tokens/s at these batch sizes\n"
                   "  --repeats: alternate batch-1 decode and the bandwidth run N times and "
                   "report their medians (default 1)\n"
                   "  --model: measure this GGUF (kept) instead of writing one per type\n");
      return 2;
    }
  }
  const std::vector<int> batches = parse_batches(batches_list);
  if (!batches_list.empty() && batches.empty()) {
    std::fprintf(stderr, "decode_bench: --batches expects positive integers, e.g. 1,8,32,64\n");
    return 2;
  }
  if (repeats < 1) {
    std::fprintf(stderr, "decode_bench: --repeats expects a positive integer\n");
    return 2;
  }
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  device::DeviceKind kind = device::DeviceKind::kCpu;
  if (device_name == "cuda") {
    kind = device::DeviceKind::kCuda;
  } else if (device_name != "cpu") {
    std::fprintf(stderr, "decode_bench: --device expects cpu or cuda, got '%s'\n",
                 device_name.c_str());
    return 2;
  }
  auto dev_r = device::make_device({.kind = kind, .cpu_threads = threads, .cpu_isa = ""});
  if (!dev_r.ok()) {
    std::fprintf(stderr, "decode_bench: no %s device: %s\n", device_name.c_str(),
                 dev_r.error().message.c_str());
    return 1;
  }
  std::shared_ptr<device::Device> dev(std::move(dev_r).value());
  if (models.empty()) {
    std::printf("device: %s; model: llama %d layers, dim %d, ffn %d, heads %d/%d, vocab %d\n",
                dev->description().c_str(), spec.layers, spec.dim, spec.ffn, spec.heads,
                spec.kv_heads, spec.vocab);
  } else {
    std::printf("device: %s; models as given\n", dev->description().c_str());
  }
  std::printf("load average at start: %s (%u CPUs)\n", load_average().c_str(),
              std::thread::hardware_concurrency());
  std::printf("%-6s %9s %10s %9s %9s %10s %9s %9s %8s %11s %10s %10s %10s %11s %7s\n", "type",
              "file_GiB", "B/token_GB", "read_GB/s", "copy_GB/s", "dec1_tok/s", "roofline",
              "dec8_tok/s", "b8/b1", "prefill512", "cpu_ms/t1", "cpu_ms/t8", "cpu_b8/b1",
              "pre512/cpus", "load_s");
  // (row label, file, whether this run wrote it)
  struct Job {
    std::string name, path;
    bool written = false;
  };
  std::vector<Job> jobs;
  for (const std::string& m : models) {
    std::string base = m.substr(m.find_last_of('/') + 1);
    if (base.size() > 5 && base.ends_with(".gguf")) base.resize(base.size() - 5);
    jobs.push_back({.name = base, .path = m});
  }
  size_t pos = 0;
  while (models.empty() && pos <= types.size()) {
    const size_t comma = std::min(types.find(',', pos), types.size());
    const std::string name = types.substr(pos, comma - pos);
    pos = comma + 1;
    // Any type by its dtype_name ("f16", "q8_0", "q5_k", "iq4_xs", ...).
    if (!device::parse_dtype(name)) continue;
    jobs.push_back(
        {.name = name,
         .path = dir + "/decode-bench-" + name + "-" + std::to_string(spec.layers) + ".gguf",
         .written = true});
  }
  for (const Job& job : jobs) {
    const std::string& name = job.name;
    const std::string& path = job.path;
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      std::fclose(f);
    } else if (!job.written) {
      std::fprintf(stderr, "decode_bench: cannot read %s\n", path.c_str());
      return 1;
    } else {
      spec.type = *device::parse_dtype(name);
      if (Status st = write_model(spec, path); !st.ok()) {
        std::fprintf(stderr, "writing %s: %s\n", path.c_str(), st.error().message.c_str());
        return 1;
      }
    }
    auto file = model::GgufFile::open(path);
    if (!file.ok()) {
      std::fprintf(stderr, "%s\n", file.error().message.c_str());
      return 1;
    }
    std::shared_ptr<const model::GgufFile> shared(std::move(file).value());
    int64_t per_token = 0;
    for (const auto& t : shared->tensors()) {
      if (t.name != "token_embd.weight") per_token += t.n_bytes;
    }
    const auto load0 = Clock::now();
    auto runner = model::LlamaRunner::load(shared, dev);
    const double load_s = secs(load0);
    if (!runner.ok()) {
      std::fprintf(stderr, "%s\n", runner.error().message.c_str());
      return 1;
    }
    // Batch-1 decode and the read bandwidth alternate `repeats` times: the figures are the
    // medians, the roofline the median of each pair's ratio, so that a busy moment on a shared
    // machine moves one pair rather than the figure.
    std::optional<BandwidthProbe> probe;
    if (given_gbs <= 0) probe.emplace(threads);
    Bandwidth bw = probe ? probe->measure(3, true) : Bandwidth{.read_gbs = given_gbs};
    std::vector<double> reads, dec1, cpu1, roofline;
    for (int i = 0; i < repeats; ++i) {
      const double read = i == 0 || !probe ? bw.read_gbs : probe->measure(3, false).read_gbs;
      const Figures f = run(**runner, 1, 16, steps, false);
      reads.push_back(read);
      dec1.push_back(f.decode_tps);
      cpu1.push_back(f.decode_cpu_s_per_token);
      roofline.push_back(100.0 * per_token * f.decode_tps / 1e9 / read);
    }
    probe.reset();
    bw.read_gbs = median(reads);
    Figures one;
    one.decode_tps = median(dec1);
    one.decode_cpu_s_per_token = median(cpu1);
    const Figures eight = run(**runner, 8, 16, steps, false);
    run(**runner, 1, 512, 1, true);  // warm-up: first-touch page faults of the 512-row buffers
    // The mean of two timed prefills, as llama-bench -r 2 reports its pp512.
    Figures pre = run(**runner, 1, 512, 1, true);
    const Figures pre2 = run(**runner, 1, 512, 1, true);
    pre.prefill_tps = (pre.prefill_tps + pre2.prefill_tps) / 2;
    pre.prefill_tokens_per_cpu_s =
        (pre.prefill_tokens_per_cpu_s + pre2.prefill_tokens_per_cpu_s) / 2;
    std::printf(
        "%-6s %9.3f %10.3f %9.1f %9.1f %10.2f %8.1f%% %9.2f %8.2f %11.1f %10.1f %10.1f %10.2f "
        "%11.1f %7.2f\n",
        name.c_str(), shared->file_bytes() / double(1 << 30), per_token / 1e9, bw.read_gbs,
        bw.copy_gbs, one.decode_tps, median(roofline), eight.decode_tps,
        eight.decode_tps / one.decode_tps, pre.prefill_tps, 1e3 * one.decode_cpu_s_per_token,
        1e3 * eight.decode_cpu_s_per_token,
        one.decode_cpu_s_per_token / eight.decode_cpu_s_per_token, pre.prefill_tokens_per_cpu_s,
        load_s);
    for (int b : batches) {
      const Figures agg = run(**runner, b, 16, steps, false);
      std::printf("%-6s aggregate decode, batch %3d: %10.1f tok/s (%.2fx batch 1)\n", name.c_str(),
                  b, agg.decode_tps, agg.decode_tps / one.decode_tps);
    }
    std::fflush(stdout);
    if (job.written && !keep) std::remove(path.c_str());
  }
  std::printf("load average at end: %s\n", load_average().c_str());
  return 0;
}
