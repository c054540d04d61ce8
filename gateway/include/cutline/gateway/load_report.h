#pragma once
// What an endpoint says about its own load, parsed from the two formats the upstream pool polls
// (EndpointProber): a Cutline backend's `GET /v1/cutline/state` JSON and a vLLM server's
// `GET /metrics` Prometheus text. The pool turns a LoadSnapshot into a load score (load_aware
// balancing) and a residency answer (is the requested model loaded there?).
//
// Parsing is strict about types and lenient about extra fields: an answer that is not the
// expected shape is an error value (the prober keeps no report for that endpoint, so a garbage
// answer is never mistaken for an idle endpoint).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/base/result.h"

namespace cutline::gateway {

struct LoadSnapshot {
  int64_t waiting = 0;                       // requests queued, not yet running
  int64_t running = 0;                       // sequences being decoded
  double kv_usage = -1;                      // fraction of KV cache in use, 0..1; -1 = not reported
  int64_t kv_blocks_free = -1;               // -1 = not reported
  bool draining = false;                     // the endpoint is shutting down: pick it last
  bool reports_models = false;               // `resident_models` is meaningful (Cutline backends)
  std::vector<std::string> resident_models;  // loaded and ready now
  int64_t at_ns = 0;                         // when the prober received it (the pool's clock)

  bool resident(std::string_view model) const;
  // The number load_aware balancing compares (lower is better): queued requests weigh twice
  // a running one, and a nearly full KV cache (which means preemptions) adds up to 4.
  double score() const;
};

// {"queue_depth":N,"running":N,"draining":b,"kv_blocks":{"used":N,"free":N},
//  "models":[{"name":"m","resident":true,"loading":false},...],...}
// Errors (kBadRequest) name the field: "/v1/cutline/state: queue_depth is missing".
Result<LoadSnapshot> parse_cutline_state(std::string_view json);

// vllm:num_requests_waiting, vllm:num_requests_running and vllm:kv_cache_usage_perc (also the
// older vllm:gpu_cache_usage_perc), summed over label sets (one per model_name). Errors when
// the text does not parse or none of the three families is present.
Result<LoadSnapshot> parse_vllm_metrics(std::string_view text);

}  // namespace cutline::gateway
