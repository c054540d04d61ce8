#include "cutline/engine/sequence_record.h"

namespace cutline::engine {

void fill_stop_record(const SequenceRecord& rec, proto::StopRecord& out) {
  out.cause = rec.cause;
  out.reporter = "backend";
  out.message = rec.message;
  if (out.request_id.empty()) out.request_id = rec.request_id;
  out.input_tokens = rec.input_tokens;
  out.output_tokens = rec.output_tokens;
  out.count_method = proto::CountMethod::kEngine;
  out.queue_ms = rec.queue_ms;
  if (rec.output_tokens > 0) {
    out.ttft_ms = rec.ttft_ms;
    proto::TtftPhases phases = out.phases.value_or(proto::TtftPhases{});
    phases.queue_ms = rec.queue_ms;
    phases.prefill_ms = rec.prefill_ms;
    phases.first_decode_ms = rec.first_decode_ms;
    out.phases = phases;
  }
  if (rec.output_tokens > 1) {
    out.itl_mean_ms = rec.itl_mean_ms;
    out.itl_max_ms = rec.itl_max_ms;
  }
  out.duration_ms = rec.duration_ms;
  out.preemptions = rec.preemptions;
  out.kv_bytes_peak = rec.kv_bytes_peak;
  out.device_free_bytes = rec.device_free_bytes;
}

}  // namespace cutline::engine
