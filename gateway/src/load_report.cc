// Load reports from Cutline backends and vLLM endpoints (load_report.h).
#include "cutline/gateway/load_report.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>

#include "cutline/gateway/prometheus_text.h"

namespace cutline::gateway {

bool LoadSnapshot::resident(std::string_view model) const {
  return std::find(resident_models.begin(), resident_models.end(), model) != resident_models.end();
}

double LoadSnapshot::score() const {
  double s = 2.0 * static_cast<double>(waiting) + static_cast<double>(running);
  if (kv_usage > 0.9) s += 40.0 * (kv_usage - 0.9);  // up to 4 when the cache is full
  if (draining) s += 1e6;
  return s;
}

namespace {

Error bad(std::string why) {
  return make_error(ErrorKind::kBadRequest, "/v1/cutline/state: " + std::move(why));
}

}  // namespace

Result<LoadSnapshot> parse_cutline_state(std::string_view json) {
  simdjson::padded_string padded(json);
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) return bad("not JSON");
  simdjson::ondemand::object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS) return bad("not a JSON object");
  LoadSnapshot s;
  bool have_queue = false;
  bool have_running = false;
  int64_t kv_used = -1;
  for (auto field : root) {
    std::string_view key;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS) return bad("malformed key");
    auto value = field.value();
    if (key == "queue_depth") {
      if (value.get_int64().get(s.waiting) != simdjson::SUCCESS) return bad("queue_depth");
      have_queue = true;
    } else if (key == "running") {
      if (value.get_int64().get(s.running) != simdjson::SUCCESS) return bad("running");
      have_running = true;
    } else if (key == "draining") {
      if (value.get_bool().get(s.draining) != simdjson::SUCCESS) return bad("draining");
    } else if (key == "kv_blocks") {
      simdjson::ondemand::object kv;
      if (value.get_object().get(kv) != simdjson::SUCCESS) return bad("kv_blocks");
      for (auto f : kv) {
        std::string_view k;
        if (f.unescaped_key().get(k) != simdjson::SUCCESS) return bad("kv_blocks");
        if (k == "used") {
          if (f.value().get_int64().get(kv_used) != simdjson::SUCCESS) return bad("kv_blocks.used");
        } else if (k == "free") {
          if (f.value().get_int64().get(s.kv_blocks_free) != simdjson::SUCCESS) {
            return bad("kv_blocks.free");
          }
        }
      }
    } else if (key == "models") {
      simdjson::ondemand::array models;
      if (value.get_array().get(models) != simdjson::SUCCESS) return bad("models");
      s.reports_models = true;
      for (auto m : models) {
        simdjson::ondemand::object mo;
        if (m.get_object().get(mo) != simdjson::SUCCESS) return bad("models[]");
        std::string_view name;
        bool resident = false;
        for (auto f : mo) {
          std::string_view k;
          if (f.unescaped_key().get(k) != simdjson::SUCCESS) return bad("models[]");
          if (k == "name") {
            if (f.value().get_string().get(name) != simdjson::SUCCESS) return bad("models[].name");
          } else if (k == "resident") {
            if (f.value().get_bool().get(resident) != simdjson::SUCCESS) {
              return bad("models[].resident");
            }
          }
        }
        if (resident && !name.empty()) s.resident_models.emplace_back(name);
      }
    }
  }
  if (!have_queue) return bad("queue_depth is missing");
  if (!have_running) return bad("running is missing");
  if (kv_used >= 0 && s.kv_blocks_free >= 0 && kv_used + s.kv_blocks_free > 0) {
    s.kv_usage = static_cast<double>(kv_used) / static_cast<double>(kv_used + s.kv_blocks_free);
  }
  return s;
}

Result<LoadSnapshot> parse_vllm_metrics(std::string_view text) {
  LoadSnapshot s;
  bool waiting = false, running = false, kv = false;
  double kv_sum = 0;
  int kv_n = 0;
  Status st = for_each_prom_sample(text, [&](const PromSample& p) {
    if (!std::isfinite(p.value) || p.value < 0) return;
    if (p.name == "vllm:num_requests_waiting") {
      s.waiting += static_cast<int64_t>(p.value);
      waiting = true;
    } else if (p.name == "vllm:num_requests_running") {
      s.running += static_cast<int64_t>(p.value);
      running = true;
    } else if (p.name == "vllm:kv_cache_usage_perc" || p.name == "vllm:gpu_cache_usage_perc") {
      kv_sum += p.value;
      ++kv_n;
      kv = true;
    }
  });
  if (!st.ok()) return make_error(ErrorKind::kBadRequest, "/metrics: " + st.error().message);
  if (!waiting && !running && !kv) {
    return make_error(ErrorKind::kBadRequest,
                      "/metrics: no vllm:num_requests_waiting, vllm:num_requests_running or "
                      "vllm:kv_cache_usage_perc sample");
  }
  // vLLM reports the fraction (0..1) despite the name; a value above 1 is read as percent.
  if (kv_n > 0) {
    double v = kv_sum / kv_n;
    s.kv_usage = v > 1.0 ? std::min(v / 100.0, 1.0) : v;
  }
  return s;
}

}  // namespace cutline::gateway
