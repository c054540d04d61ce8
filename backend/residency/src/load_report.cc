#include "cutline/residency/load_report.h"

#include <cassert>

namespace cutline::residency {

std::string_view to_string(LoadPhase phase) {
  switch (phase) {
    case LoadPhase::kRead:
      return "read";
    case LoadPhase::kConvert:
      return "convert";
    case LoadPhase::kUpload:
      return "upload";
    case LoadPhase::kWarmup:
      return "warmup";
    case LoadPhase::kKvAlloc:
      return "kv_alloc";
  }
  return "read";
}

bool is_warmup_phase(LoadPhase phase) {
  return phase == LoadPhase::kWarmup || phase == LoadPhase::kKvAlloc;
}

double LoadReport::load_ms() const {
  double ms = 0;
  for (const auto& p : phases)
    if (!is_warmup_phase(p.phase)) ms += p.ms;
  return ms;
}

double LoadReport::warmup_ms() const {
  double ms = 0;
  for (const auto& p : phases)
    if (is_warmup_phase(p.phase)) ms += p.ms;
  return ms;
}

int64_t LoadReport::bytes_read() const {
  int64_t bytes = 0;
  for (const auto& p : phases)
    if (p.phase == LoadPhase::kRead) bytes += p.bytes;
  return bytes;
}

double LoadReport::read_bytes_per_s() const {
  double ms = 0;
  int64_t bytes = 0;
  for (const auto& p : phases) {
    if (p.phase != LoadPhase::kRead) continue;
    ms += p.ms;
    bytes += p.bytes;
  }
  return ms > 0 ? static_cast<double>(bytes) / (ms / 1000.0) : 0.0;
}

void PhaseRecorder::begin(LoadPhase phase) {
  assert(open_since_us_ < 0 && "PhaseRecorder::begin while a phase is open");
  open_phase_ = phase;
  open_since_us_ = clock_.now_us();
}

void PhaseRecorder::end(int64_t bytes) {
  assert(open_since_us_ >= 0 && "PhaseRecorder::end without begin");
  const int64_t elapsed_us = clock_.now_us() - open_since_us_;
  open_since_us_ = -1;
  add(open_phase_, static_cast<double>(elapsed_us) / 1000.0, bytes);
}

void PhaseRecorder::add(LoadPhase phase, double ms, int64_t bytes) {
  report_.phases.push_back(PhaseTiming{phase, ms, bytes});
}

}  // namespace cutline::residency
