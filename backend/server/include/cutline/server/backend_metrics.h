#pragma once
// BackendMetrics: the cutline_backend_* Prometheus set and cutline_build_info, on prometheus-cpp
// core, rendered by our own /metrics handler with prometheus::TextSerializer (no civetweb exposer).
//
// Counters and histograms are updated where things happen (request finish, engine step, model
// load); gauges are set from a snapshot just before each scrape. Thread-safe.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "cutline/proto/wire/stop_record.h"
#include "cutline/residency/load_report.h"

namespace prometheus {
class Registry;
template <typename T>
class Family;
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace cutline::server {

// Gauge values at scrape time.
struct GaugeSnapshot {
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_free = 0;
  int64_t kv_bytes = 0;  // bytes of KV in use
  int64_t device_free_bytes = 0;
  int64_t queue_depth = 0;
  int64_t running = 0;
  // Cumulative, summed over the resident models' engines: prefix-cache lookups (one per
  // admitted prompt) and those that reused at least one KV block.
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
};

// One model's series on the per-token path, looked up once per request (a label lookup per
// token would take the family's lock and hash the label every time).
struct ModelSeries {
  prometheus::Histogram* inter_token = nullptr;
};

class BackendMetrics {
 public:
  BackendMetrics();
  ~BackendMetrics();
  BackendMetrics(const BackendMetrics&) = delete;
  BackendMetrics& operator=(const BackendMetrics&) = delete;

  // One finished request: requests_total{model,cause}, preemptions_total{model},
  // ttft_seconds{model} and phase_seconds{model,phase} (when the record has phases).
  void on_request_finished(std::string_view model, const proto::StopRecord& rec);
  // A request refused before it reached the engine (4xx/5xx): counted with cause="error".
  void on_request_rejected(std::string_view model);
  ModelSeries series_for(std::string_view model);
  // inter_token_seconds{model}.
  void observe_inter_token_seconds(const ModelSeries& series, double seconds);
  void observe_step_tokens(int64_t tokens);
  // model_load_seconds{model,phase}, one observation per phase and one with phase="total".
  void on_model_load(std::string_view model, const residency::LoadReport& report);
  // model_evictions_total{model}.
  void on_model_evicted(std::string_view model);

  // Sets the gauges and renders the Prometheus text exposition format.
  std::string render(const GaugeSnapshot& gauges);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_ = nullptr;
  prometheus::Family<prometheus::Counter>* preemptions_ = nullptr;
  prometheus::Family<prometheus::Gauge>* kv_blocks_ = nullptr;
  prometheus::Gauge* kv_blocks_used_ = nullptr;
  prometheus::Gauge* kv_blocks_free_ = nullptr;
  prometheus::Gauge* kv_bytes_ = nullptr;
  prometheus::Gauge* device_free_bytes_ = nullptr;
  prometheus::Gauge* queue_depth_ = nullptr;
  prometheus::Gauge* running_ = nullptr;
  prometheus::Family<prometheus::Histogram>* ttft_ = nullptr;
  prometheus::Family<prometheus::Histogram>* phase_ = nullptr;
  prometheus::Histogram* step_tokens_ = nullptr;
  prometheus::Family<prometheus::Histogram>* inter_token_ = nullptr;
  prometheus::Family<prometheus::Histogram>* model_load_ = nullptr;
  prometheus::Family<prometheus::Counter>* evictions_ = nullptr;
  prometheus::Counter* prefix_queries_ = nullptr;
  prometheus::Counter* prefix_hits_ = nullptr;
  std::mutex render_mu_;  // gauges are set and read as one snapshot
  double prefix_queries_reported_ = 0;
  double prefix_hits_reported_ = 0;
};

}  // namespace cutline::server
