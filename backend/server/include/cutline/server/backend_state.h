#pragma once
// BackendState: the snapshot behind GET /v1/cutline/state — resident models with their bytes,
// last use and last load (phase by phase), KV blocks used/free, queue depth and running
// sequences — and its JSON form. Also what the gauges of /metrics are set from. Pure: the server
// gathers the snapshot, these functions only shape it.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cutline/engine/engine_stats.h"
#include "cutline/residency/residency.h"
#include "cutline/server/backend_metrics.h"

namespace cutline::server {

struct ModelStateView {
  residency::ModelStatus status;
  std::optional<engine::EngineStats> engine;  // present while resident
};

struct BackendState {
  std::vector<ModelStateView> models;
  int64_t now_us = 0;                // residency clock, to turn last_used_us into an age
  int64_t weights_budget_bytes = 0;  // 0 = unlimited
  int64_t kv_memory_bytes = 0;       // per resident model (--kv-memory)
  std::string device;                // e.g. "cpu: 2 threads, avx2"
  int64_t device_free_bytes = 0;
  bool draining = false;  // shutting down: new requests are refused
  int64_t active_requests = 0;
  // Requests waiting for their model to load (or for room to load it): part of the queue.
  int64_t waiting_for_model = 0;
};

// Sums over resident models.
struct BackendTotals {
  int64_t weights_resident_bytes = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_free = 0;
  int64_t kv_bytes_used = 0;
  int64_t queue_depth = 0;  // engine queues + requests waiting for their model
  int64_t running = 0;
  int64_t prefix_queries = 0;
  int64_t prefix_hits = 0;
};
BackendTotals totals_of(const BackendState& state);

GaugeSnapshot gauges_of(const BackendState& state);

std::string backend_state_json(const BackendState& state);

}  // namespace cutline::server
