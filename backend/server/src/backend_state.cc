#include "cutline/server/backend_state.h"

#include "cutline/base/json_writer.h"

namespace cutline::server {

BackendTotals totals_of(const BackendState& state) {
  BackendTotals t;
  t.queue_depth = state.waiting_for_model;
  for (const auto& m : state.models) {
    if (m.status.resident) t.weights_resident_bytes += m.status.weight_bytes;
    if (!m.engine) continue;
    const auto& e = *m.engine;
    t.kv_blocks_used += e.kv_blocks_used;
    t.kv_blocks_free += e.kv_blocks_free;
    t.kv_bytes_used += static_cast<int64_t>(e.kv_blocks_used) * e.kv_bytes_per_block;
    t.queue_depth += e.queue_depth;
    t.running += e.running;
    t.prefix_queries += e.prefix_queries;
    t.prefix_hits += e.prefix_hits;
  }
  return t;
}

GaugeSnapshot gauges_of(const BackendState& state) {
  const BackendTotals t = totals_of(state);
  GaugeSnapshot g;
  g.kv_blocks_used = t.kv_blocks_used;
  g.kv_blocks_free = t.kv_blocks_free;
  g.kv_bytes = t.kv_bytes_used;
  g.device_free_bytes = state.device_free_bytes;
  g.queue_depth = t.queue_depth;
  g.running = t.running;
  g.prefix_cache_queries = t.prefix_queries;
  g.prefix_cache_hits = t.prefix_hits;
  return g;
}

namespace {

void write_load(base::JsonWriter& w, const residency::LoadReport& r) {
  w.begin_object();
  w.field("total_ms", r.total_ms);
  w.field("load_ms", r.load_ms());
  w.field("warmup_ms", r.warmup_ms());
  w.field("bytes_read", r.bytes_read());
  w.field("read_mb_per_s", r.read_bytes_per_s() / 1e6);
  w.key("phases").begin_array();
  for (const auto& p : r.phases) {
    w.begin_object();
    w.field("phase", residency::to_string(p.phase));
    w.field("ms", p.ms);
    w.field("bytes", p.bytes);
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

}  // namespace

std::string backend_state_json(const BackendState& state) {
  const BackendTotals t = totals_of(state);
  std::string out;
  base::JsonWriter w(out);
  w.begin_object();
  w.field("draining", state.draining);
  w.field("active_requests", state.active_requests);
  w.field("waiting_for_model", state.waiting_for_model);
  w.field("queue_depth", t.queue_depth);
  w.field("running", t.running);
  w.key("kv_blocks").begin_object();
  w.field("used", t.kv_blocks_used);
  w.field("free", t.kv_blocks_free);
  w.field("used_bytes", t.kv_bytes_used);
  w.end_object();
  w.key("weights").begin_object();
  w.field("budget_bytes", state.weights_budget_bytes);
  w.field("resident_bytes", t.weights_resident_bytes);
  w.end_object();
  w.field("kv_memory_bytes_per_model", state.kv_memory_bytes);
  w.key("device").begin_object();
  w.field("description", state.device);
  w.field("free_bytes", state.device_free_bytes);
  w.end_object();
  w.key("models").begin_array();
  for (const auto& m : state.models) {
    const auto& s = m.status;
    w.begin_object();
    w.field("name", s.name);
    w.field("path", s.path);
    w.field("resident", s.resident);
    w.field("loading", s.loading);
    w.field("pinned", s.pinned);
    w.field("weight_bytes", s.weight_bytes);
    w.field("busy", static_cast<int64_t>(s.busy));
    w.field("loads", s.loads);
    w.field("evictions", s.evictions);
    if (s.last_used_us >= 0) {
      w.field("last_used_ms_ago", static_cast<double>(state.now_us - s.last_used_us) / 1000.0);
    } else {
      w.key("last_used_ms_ago").null();
    }
    if (s.last_load) {
      w.key("last_load");
      write_load(w, *s.last_load);
    }
    if (m.engine) {
      const auto& e = *m.engine;
      w.key("engine").begin_object();
      w.field("queue_depth", static_cast<int64_t>(e.queue_depth));
      w.field("running", static_cast<int64_t>(e.running));
      w.field("kv_blocks_total", static_cast<int64_t>(e.kv_blocks_total));
      w.field("kv_blocks_used", static_cast<int64_t>(e.kv_blocks_used));
      w.field("kv_blocks_free", static_cast<int64_t>(e.kv_blocks_free));
      w.field("kv_blocks_cached", static_cast<int64_t>(e.kv_blocks_cached));
      w.field("block_size", static_cast<int64_t>(e.block_size));
      w.field("kv_bytes_per_block", e.kv_bytes_per_block);
      w.field("preemptions_total", e.preemptions_total);
      w.field("prefix_queries", e.prefix_queries);
      w.field("prefix_hits", e.prefix_hits);
      w.field("steps", e.steps);
      w.field("sequences_finished", e.sequences_finished);
      w.end_object();
    }
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return out;
}

}  // namespace cutline::server
