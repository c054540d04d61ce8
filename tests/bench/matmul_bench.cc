// matmul_bench: the CPU device's matmul alone, per weight type and batch size, in CPU time of
// the calling thread (a 1-thread device runs every task on the caller), so that kernels can be
// compared on a machine shared with other work. Weights (several copies, ~192 MiB, beyond the
// caches; COPIES=1 in the environment keeps one copy in cache) are streamed from memory as in
// decode. Prints CPU us per call, weight GB/s and GFLOP/s per batch size, and the batch-8 over
// batch-1 ratio of rows served per CPU second. With --threads N (N > 1) it also prints the wall
// time per call, to weigh the thread pool's wake-up against small matmuls.
//   matmul_bench [--types f16,q8_0,q4_k] [--rows 5632] [--cols 2048] [--reps 20] [--isa avx512]
//                [--threads 1] [--batches 1,2,4,8]
// --batches takes any list of batch sizes (64 or 512: the prefill kernel alone); the b8/b1 line
// is printed when both 1 and 8 are in it.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cutline/device/device.h"
#include "cutline/device/quant.h"

namespace {

using namespace cutline;

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::string types = "f16,q8_0,q4_k", isa;
  int64_t rows = 5632, cols = 2048;
  int reps = 20, threads = 1;
  std::vector<int> batches = {1, 2, 4, 8};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--types")
      types = argv[i + 1];
    else if (a == "--rows")
      rows = std::atoll(argv[i + 1]);
    else if (a == "--cols")
      cols = std::atoll(argv[i + 1]);
    else if (a == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (a == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (a == "--isa")
      isa = argv[i + 1];
    else if (a == "--batches") {
      batches.clear();
      std::istringstream list(argv[i + 1]);
      for (std::string b; std::getline(list, b, ',');) batches.push_back(std::atoi(b.c_str()));
    }
  }
  auto dev = device::make_device(
      {.kind = device::DeviceKind::kCpu, .cpu_threads = threads, .cpu_isa = isa});
  if (!dev.ok()) return 1;
  std::printf("%s; weight %lld x %lld\n", (*dev)->description().c_str(), (long long)rows,
              (long long)cols);
  std::printf("%-6s %6s %12s %10s %10s %12s\n", "type", "batch", "cpu_us/call", "w_GB/s", "GFLOP/s",
              "wall_us/call");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  std::vector<float> wf(cols), y(max_batch * rows);
  // The activations in a device buffer, 64-byte aligned as the model's are.
  auto xbuf = (*dev)->alloc(static_cast<int64_t>(max_batch * cols * sizeof(float)));
  if (!xbuf.ok()) return 1;
  float* x = static_cast<float*>(xbuf->data());
  for (int64_t i = 0; i < max_batch * cols; ++i) x[i] = dist(rng);
  size_t pos = 0;
  while (pos <= types.size()) {
    const size_t comma = std::min(types.find(',', pos), types.size());
    const std::string name = types.substr(pos, comma - pos);
    pos = comma + 1;
    // Any type by its dtype_name ("f16", "q8_0", "q5_k", "iq4_xs", ...).
    auto parsed = device::parse_dtype(name);
    if (!parsed) continue;
    const device::DType type = *parsed;
    const int64_t rb = device::row_bytes(type, cols);
    // Several copies so that a call streams from memory, not from the 32 MiB L3.
    const int copies = std::getenv("COPIES")
                           ? std::atoi(std::getenv("COPIES"))
                           : std::max<int64_t>(1, (int64_t{192} << 20) / (rb * rows));
    // One copy quantized (seconds for the IQ4 types), the others its bytes.
    std::vector<uint8_t> wq(rb * rows * copies);
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : wf) v = dist(rng) * 0.05f;
      device::quantize_row(type, wf.data(), wq.data() + r * rb, cols);
    }
    for (int c = 1; c < copies; ++c) std::memcpy(wq.data() + c * rb * rows, wq.data(), rb * rows);
    std::vector<device::Weight> ws;
    for (int c = 0; c < copies; ++c)
      ws.push_back(std::move(
          (*dev)->load_weight(wq.data() + c * rb * rows, type, rows, cols, nullptr).value()));
    std::map<int, double> us;
    for (int batch : batches) {
      // Warm-up, every copy at least once and 0.2 s in all: without it, a short timed run right
      // after the single-threaded setup above read some types up to 40 % low with two threads
      // (IQ4_NL and IQ4_XS on a 2-core VM, at 15 calls against 200).
      const auto warm = std::chrono::steady_clock::now();
      for (int r = 0;
           r < copies || std::chrono::steady_clock::now() - warm < std::chrono::milliseconds(200);
           ++r)
        (*dev)->matmul(x, batch, ws[r % copies], y.data());
      const double t0 = thread_cpu_s();
      const auto w0 = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r) (*dev)->matmul(x, batch, ws[r % copies], y.data());
      const double wall_us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - w0).count() /
          reps;
      us[batch] = (thread_cpu_s() - t0) / reps * 1e6;
      if (threads > 1) us[batch] = wall_us;  // the caller's CPU time misses the workers'
      std::printf("%-6s %6d %12.1f %10.2f %10.2f %12.2f\n", name.c_str(), batch, us[batch],
                  rb * rows / us[batch] / 1e3, 2.0 * rows * cols * batch / us[batch] / 1e3,
                  wall_us);
    }
    if (us.count(1) && us.count(8))
      std::printf("%-6s b8/b1 rows per cpu-s: %.2fx\n", name.c_str(), 8 * us[1] / us[8]);
    std::fflush(stdout);
  }
  return 0;
}
