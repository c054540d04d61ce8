#pragma once
// GatewayMetrics: every Prometheus series the gateway exports, on a
// prometheus-cpp core Registry, serialized in text format by the admin listener (not civetweb).
//
// Label values come from a bounded set: tenants, models and policies named in the config, plus
// "other" for unknown models, "anonymous" for requests without a tenant and "none" for requests
// no policy matched. LabelBounds are replaced on reload (set_bounds); series already created stay.
//
// Thread-safe: called from every worker. Per-token work never touches this class: a stream
// accumulates its inter-token gaps in an ItlBuckets and hands them over once, at finish.

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "cutline/proto/wire/stop_record.h"

namespace cutline::gateway {

struct LabelBounds {
  std::vector<std::string> models;    // exact model names from the config (globs excluded)
  std::vector<std::string> tenants;   // tenant names
  std::vector<std::string> policies;  // policy names
};

// Inter-token gaps of one stream, bucketed with the same boundaries as
// cutline_inter_token_seconds, so that recording a gap is an array increment (no lock, no
// allocation) and the histogram is updated once per stream.
class ItlBuckets {
 public:
  static constexpr std::array<double, 12> kBoundsSeconds = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.05,
                                                            0.1,   0.25,   0.5,   1,    2.5,  5};
  void add(double seconds);
  const std::array<double, kBoundsSeconds.size() + 1>& counts() const { return counts_; }
  double sum_seconds() const { return sum_; }
  int64_t count() const { return count_; }

 private:
  std::array<double, kBoundsSeconds.size() + 1> counts_{};
  double sum_ = 0;
  int64_t count_ = 0;
};

// Everything the metrics need about one finished request.
struct RequestOutcome {
  std::string_view route;   // "/v1/chat/completions", "/v1/completions", "/v1/models", "other"
  std::string_view model;   // as requested (bounded here)
  std::string_view tenant;  // "" = anonymous
  std::string_view policy;  // "" = none
  int code = 200;
  const proto::StopRecord* stop = nullptr;  // null for passthrough and admin-free paths
  const ItlBuckets* itl = nullptr;
  std::string_view clamp_rule;  // YAML path of the rule that clamped max_tokens; "" = none
};

class GatewayMetrics {
 public:
  explicit GatewayMetrics(LabelBounds bounds = {});

  void set_bounds(LabelBounds bounds);
  std::string model_label(std::string_view model) const;
  std::string tenant_label(std::string_view tenant) const;
  std::string policy_label(std::string_view policy) const;

  void record(const RequestOutcome& outcome);
  void stream_opened() { active_streams_->Increment(); }
  void stream_closed() { active_streams_->Decrement(); }
  void set_queue_depth(std::string_view policy, double depth);
  void upstream_error(std::string_view upstream, std::string_view kind);
  void policy_reload(bool ok);
  // Bad input rejected before any policy applies (the kind is an ErrorKind label).
  void bad_request(std::string_view kind);

  // Supervised upstream processes (supervisor.h): a restart after the process died, and whether
  // it answers /healthz now. Upstream names come from the config (bounded).
  void upstream_process_restarted(std::string_view upstream);
  void set_upstream_ready(std::string_view upstream, bool ready);

  // budget_store: redis (async_redis_pool_store.h): the stores' running count of failed calls
  // (served from the local fallback, or refused under on_error: closed); the counter
  // cutline_budget_store_errors_total follows it (call before a scrape).
  void set_budget_store_errors(uint64_t total);

  // Work the HTTP servers refused on their own, before any request reached a policy:
  // "connections" (connection cap: 503 and close), "http2_resets" (rapid reset: GOAWAY),
  // "accept_backoff" (out of descriptors: accepting paused). Other reasons count as "other".
  void refused(std::string_view reason);
  // The access log's running count of lines dropped because its queue was full
  // (cutline_access_log_dropped_total follows it; call before a scrape).
  void set_access_log_dropped(uint64_t total);

  // Prometheus text exposition format of every series.
  std::string serialize() const;

 private:
  std::string bounded(const std::vector<std::string>& allowed, std::string_view value,
                      std::string_view fallback) const;

  // The series record() touches, found once per label combination: prometheus-cpp's Family::Add
  // builds and hashes a label map under the family's lock on every call. Series are never
  // removed, so the pointers stay valid for the registry's life.
  struct ModelPolicySeries {
    prometheus::Histogram* ttft;
    prometheus::Histogram* queue_wait;
    prometheus::Histogram* duration;
    prometheus::Histogram* output_tokens;
    prometheus::Histogram* itl;
  };
  struct StopSeries {
    prometheus::Counter* stops;
    prometheus::Counter* truncations;  // null for a cause that is not a serving cut
  };
  std::mutex series_mu_;
  std::unordered_map<std::string, prometheus::Counter*> request_series_;
  std::unordered_map<std::string, StopSeries> stop_series_;
  std::unordered_map<std::string, ModelPolicySeries> model_policy_series_;
  struct TokenSeries {
    prometheus::Counter* input;
    prometheus::Counter* output;
  };
  std::unordered_map<std::string, TokenSeries> token_series_;  // by model and tenant
  // Per request too: by policy label, and by the clamping rule's path.
  std::unordered_map<std::string, prometheus::Gauge*> queue_depth_series_;
  std::unordered_map<std::string, prometheus::Counter*> clamped_series_;
  prometheus::Counter* request_series_locked(const std::string& key, std::string_view route,
                                             const std::string& model, const std::string& tenant,
                                             const std::string& policy, const std::string& code);
  StopSeries stop_series_locked(std::string& key, const proto::StopRecord& stop,
                                const std::string& model, const std::string& policy);
  ModelPolicySeries model_policy_series_locked(std::string& key, const std::string& model,
                                               const std::string& policy);
  TokenSeries token_series_locked(std::string& key, const std::string& model,
                                  const std::string& tenant);

  std::shared_ptr<prometheus::Registry> registry_;
  mutable std::mutex bounds_mu_;
  LabelBounds bounds_;

  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Counter>* stops_;
  prometheus::Family<prometheus::Counter>* truncations_;
  prometheus::Family<prometheus::Histogram>* ttft_;
  prometheus::Family<prometheus::Histogram>* itl_;
  prometheus::Family<prometheus::Histogram>* queue_wait_;
  prometheus::Family<prometheus::Histogram>* duration_;
  prometheus::Family<prometheus::Histogram>* output_tokens_;
  prometheus::Family<prometheus::Counter>* budget_clamped_;
  // Observe mode: cuts a rule would have made ({cause, policy}), one per StopRecord::would_cut.
  prometheus::Family<prometheus::Counter>* would_cut_;
  prometheus::Family<prometheus::Gauge>* queue_depth_;
  prometheus::Family<prometheus::Counter>* upstream_errors_;
  prometheus::Family<prometheus::Counter>* reloads_;
  prometheus::Family<prometheus::Counter>* bad_requests_;
  prometheus::Family<prometheus::Counter>* process_restarts_;
  prometheus::Family<prometheus::Gauge>* upstream_ready_;
  prometheus::Counter* budget_store_errors_;
  prometheus::Family<prometheus::Counter>* refused_;
  prometheus::Counter* access_log_dropped_;
  prometheus::Gauge* active_streams_;
  prometheus::Family<prometheus::Counter>* tokens_;
};

}  // namespace cutline::gateway
