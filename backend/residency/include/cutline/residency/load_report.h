#pragma once
// LoadReport: how long loading one model took, phase by phase, on one monotonic clock, with the
// bytes each phase moved. Filled by the loader through a PhaseRecorder while Residency times the
// whole load; shown in /v1/cutline/state, in cutline_backend_model_load_seconds{model,phase} and in
// the TTFT phases (load, warmup) of the request that waited for it.

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "cutline/base/clock.h"

namespace cutline::residency {

// The load pipeline, in order. kRead..kUpload make up a request's `load` TTFT phase; kWarmup and
// kKvAlloc its `warmup` phase.
enum class LoadPhase : uint8_t {
  kRead,     // checkpoint bytes read from disk (mmap touch or sequential reads)
  kConvert,  // dequantize / convert tensor types
  kUpload,   // host-to-device copy
  kWarmup,   // device context, kernels, first dummy step
  kKvAlloc,  // KV block pool allocation on the device
};
inline constexpr int kLoadPhaseCount = 5;

std::string_view to_string(LoadPhase phase);
// True for the phases that count as the request's `warmup` TTFT phase (else `load`).
bool is_warmup_phase(LoadPhase phase);

struct PhaseTiming {
  LoadPhase phase = LoadPhase::kRead;
  double ms = 0;
  int64_t bytes = 0;  // bytes moved in this phase (0 when not meaningful)
};

struct LoadReport {
  std::vector<PhaseTiming> phases;  // in the order they ran; a phase may be absent
  double total_ms = 0;              // wall time of the whole load (>= sum of phases)

  double load_ms() const;    // sum of read/convert/upload
  double warmup_ms() const;  // sum of warmup/kv_alloc
  int64_t bytes_read() const;
  // Bytes read per second of the read phase (0 when no read was timed).
  double read_bytes_per_s() const;
};

// Handed to a loader: it brackets each phase with begin/end (or adds one it timed itself), all on
// the residency's clock so that phases and the total share one time base.
class PhaseRecorder {
 public:
  // `clock` is not owned and must outlive the recorder.
  explicit PhaseRecorder(const base::Clock& clock) : clock_(clock) {}

  void begin(LoadPhase phase);
  // Ends the phase begun last, recording `bytes`.
  void end(int64_t bytes = 0);
  // A phase timed elsewhere (e.g. a runner's own report); appended as is.
  void add(LoadPhase phase, double ms, int64_t bytes = 0);

  const LoadReport& report() const { return report_; }
  LoadReport take() { return std::move(report_); }

 private:
  const base::Clock& clock_;
  LoadReport report_;
  LoadPhase open_phase_ = LoadPhase::kRead;
  int64_t open_since_us_ = -1;
};

}  // namespace cutline::residency
