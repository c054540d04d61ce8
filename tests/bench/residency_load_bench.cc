// residency_load_bench: model load throughput against the file-read bandwidth of the same file,
// measured in the same run (target >= 80%).
//
//   residency_load_bench [--model PATH | --layers N --dim D] [--reps R] [--dir DIR]
//
// Each repetition evicts the file from the page cache (posix_fadvise DONTNEED; mincore reports
// how much stayed resident) and then measures, in turn:
//   read      plain sequential reads of the whole file (8 MiB preads): the bandwidth baseline
//   load      the backend's loader (load_served_model, what a cold --model request runs): bytes of
//             the file / (read + convert + upload phases), and / everything up to the engine
//   mmap      a cold mmap touched one byte per page (the path without the prefetch)
// and prints the medians and the ratio load / read.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_stats.h"
#include "cutline/base/clock.h"
#include "cutline/device/device.h"
#include "cutline/model/synth.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/residency/load_report.h"
#include "cutline/server/file_prefetch.h"
#include "cutline/server/served_model.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Drops the file's clean pages from the page cache; returns the fraction still resident.
double evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return 1.0;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  struct stat st {};
  ::fstat(fd, &st);
  double resident = 0;
  void* map = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  if (map != MAP_FAILED) {
    const long page = ::sysconf(_SC_PAGESIZE);
    const size_t pages = (static_cast<size_t>(st.st_size) + page - 1) / page;
    std::vector<unsigned char> vec(pages);
    size_t in = 0;
    if (::mincore(map, static_cast<size_t>(st.st_size), vec.data()) == 0)
      for (unsigned char v : vec) in += v & 1;
    resident = pages ? static_cast<double>(in) / static_cast<double>(pages) : 0;
    ::munmap(map, static_cast<size_t>(st.st_size));
  }
  ::close(fd);
  return resident;
}

double mmap_touch_ms(const std::string& path, int64_t& bytes) {
  const auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  struct stat st {};
  ::fstat(fd, &st);
  bytes = st.st_size;
  auto* map = static_cast<const volatile unsigned char*>(
      ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0));
  uint64_t sum = 0;
  for (int64_t i = 0; i < st.st_size; i += 4096) sum += map[i];
  ::munmap(const_cast<unsigned char*>(map), static_cast<size_t>(st.st_size));
  ::close(fd);
  const double ms = ms_since(t0);
  if (sum == 1) std::fprintf(stderr, " ");  // keeps the loop
  return ms;
}

using cutline::bench::median;

}  // namespace

int main(int argc, char** argv) {
  using namespace cutline;
  std::string path;
  std::string dir = "/tmp";
  int reps = 3;
  model::SynthOptions synth;
  synth.layers = 12;
  synth.dim = 1024;
  synth.heads = 16;
  synth.kv_heads = 8;
  synth.name = "cutline-load-bench";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--model")
      path = argv[i + 1];
    else if (a == "--layers")
      synth.layers = std::atoi(argv[i + 1]);
    else if (a == "--dim")
      synth.dim = std::atoi(argv[i + 1]);
    else if (a == "--reps")
      reps = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--dir")
      dir = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  bool synthesized = false;
  if (path.empty()) {
    path = dir + "/cutline-load-bench-" + std::to_string(::getpid()) + ".gguf";
    const auto t0 = Clock::now();
    if (auto st = model::synthesize_tiny_model(synth, path); !st.ok()) {
      std::fprintf(stderr, "synth: %s\n", st.error().message.c_str());
      return 1;
    }
    synthesized = true;
    std::fprintf(stderr, "synthesized %s in %.0f ms\n", path.c_str(), ms_since(t0));
  }

  device::DeviceOptions dev_options;
  dev_options.kind = device::DeviceKind::kCpu;
  auto dev = device::make_device(dev_options);
  if (!dev.ok()) {
    std::fprintf(stderr, "device: %s\n", dev.error().message.c_str());
    return 1;
  }
  std::shared_ptr<device::Device> device(std::move(dev).value());
  proto::EventLoop dispatch;  // not run: the bench sends no requests
  server::ServedModelOptions options;
  options.kv_memory_bytes = 16ll << 20;

  std::vector<double> read_mbps, load_mbps, load_all_mbps, read_phase_mbps, mmap_mbps;
  std::vector<double> resident_fractions;
  int64_t file_bytes = 0;
  for (int rep = 0; rep < reps; ++rep) {
    resident_fractions.push_back(evict(path));
    auto t0 = Clock::now();
    auto bytes = server::prefetch_file(path);
    const double read_ms = ms_since(t0);
    if (!bytes.ok()) {
      std::fprintf(stderr, "%s\n", bytes.error().message.c_str());
      return 1;
    }
    file_bytes = *bytes;
    read_mbps.push_back(static_cast<double>(file_bytes) / 1e3 / read_ms);

    resident_fractions.push_back(evict(path));
    const base::MonotonicClock clock;
    residency::PhaseRecorder recorder(clock);
    residency::ModelSpec spec{"bench", path, false, file_bytes};
    t0 = Clock::now();
    auto loaded = server::load_served_model(spec, options, device, dispatch, recorder);
    const double total_ms = ms_since(t0);
    if (!loaded.ok()) {
      std::fprintf(stderr, "load: %s\n", loaded.error().message.c_str());
      return 1;
    }
    const residency::LoadReport report = recorder.take();
    // Load proper: everything but warm-up and KV allocation (not I/O).
    const double load_ms = total_ms - report.warmup_ms();
    double pipeline_ms = 0;  // read + convert + upload phases only
    for (const auto& p : report.phases)
      if (!residency::is_warmup_phase(p.phase)) pipeline_ms += p.ms;
    load_mbps.push_back(static_cast<double>(file_bytes) / 1e3 / pipeline_ms);
    load_all_mbps.push_back(static_cast<double>(file_bytes) / 1e3 / load_ms);
    read_phase_mbps.push_back(report.read_bytes_per_s() / 1e6);
    std::fprintf(stderr, "rep %d: read %.0f MB/s; load phases:", rep, read_mbps.back());
    for (const auto& p : report.phases)
      std::fprintf(stderr, " %s=%.1fms", residency::to_string(p.phase).data(), p.ms);
    std::fprintf(stderr, " (total %.1f ms)\n", total_ms);
    loaded.value().reset();

    resident_fractions.push_back(evict(path));
    int64_t mapped = 0;
    const double mmap_ms = mmap_touch_ms(path, mapped);
    mmap_mbps.push_back(static_cast<double>(mapped) / 1e3 / mmap_ms);
  }
  if (synthesized) ::unlink(path.c_str());

  const double read = median(read_mbps);
  const double load = median(load_mbps);
  const double load_all = median(load_all_mbps);
  std::printf("file: %.1f MiB, %d reps, page cache after eviction: max %.1f%% resident\n",
              static_cast<double>(file_bytes) / (1 << 20), reps,
              100.0 * *std::max_element(resident_fractions.begin(), resident_fractions.end()));
  std::printf("%-44s %10.0f MB/s\n", "file read (8 MiB sequential preads)", read);
  std::printf("%-44s %10.0f MB/s  (%.0f%% of file read)\n", "load, read+convert+upload phases",
              load, 100.0 * load / read);
  std::printf("%-44s %10.0f MB/s  (%.0f%% of file read)\n", "load, open to engine (no warm-up)",
              load_all, 100.0 * load_all / read);
  std::printf("%-44s %10.0f MB/s\n", "read phase alone", median(read_phase_mbps));
  std::printf("%-44s %10.0f MB/s  (%.0f%% of file read)\n", "cold mmap, one byte per page",
              median(mmap_mbps), 100.0 * median(mmap_mbps) / read);
  std::printf(
      "{\"bench\":\"residency_load\",\"file_bytes\":%lld,\"read_mb_per_s\":%.1f,"
      "\"load_mb_per_s\":%.1f,\"load_open_to_engine_mb_per_s\":%.1f,\"ratio\":%.3f,"
      "\"ratio_open_to_engine\":%.3f,\"mmap_touch_mb_per_s\":%.1f}\n",
      static_cast<long long>(file_bytes), read, load, load_all, load / read, load_all / read,
      median(mmap_mbps));
  return 0;
}
