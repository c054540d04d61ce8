#include "cutline/server/backend_metrics.h"

#include <iterator>
#include <mutex>
#include <sstream>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "cutline/cli/version.h"

namespace cutline::server {

namespace {

// Seconds buckets from 1 ms to 2 min: TTFT and load times span a cold multi-GB load down to a
// warm decode step.
const prometheus::Histogram::BucketBoundaries& seconds_buckets() {
  static const prometheus::Histogram::BucketBoundaries b = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
  return b;
}

const prometheus::Histogram::BucketBoundaries& token_buckets() {
  static const prometheus::Histogram::BucketBoundaries b = {1,   2,   4,   8,    16,   32,  64,
                                                            128, 256, 512, 1024, 2048, 4096};
  return b;
}

constexpr const char* kTtftPhases[] = {"queue", "load", "warmup", "prefill", "first_decode"};

// The engines count cumulatively; a counter advances by the difference. The sum falls when a
// model is evicted (its engine's counts go with it): the baseline follows it down, so that the
// counter resumes with the next lookups instead of waiting to climb back past the old sum.
void advance(prometheus::Counter& counter, double& reported, int64_t engines_total) {
  const auto now = static_cast<double>(engines_total);
  if (now > reported) counter.Increment(now - reported);
  reported = now;
}

}  // namespace

BackendMetrics::BackendMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  using prometheus::BuildCounter;
  using prometheus::BuildGauge;
  using prometheus::BuildHistogram;
  auto& r = *registry_;
  requests_ = &BuildCounter()
                   .Name("cutline_backend_requests_total")
                   .Help("Requests finished by the backend, by model and stop cause")
                   .Register(r);
  preemptions_ = &BuildCounter()
                      .Name("cutline_backend_preemptions_total")
                      .Help("Sequence preemptions (KV blocks ran out), by model")
                      .Register(r);
  kv_blocks_ = &BuildGauge()
                    .Name("cutline_backend_kv_blocks")
                    .Help("KV cache blocks by state, summed over resident models")
                    .Register(r);
  kv_blocks_used_ = &kv_blocks_->Add({{"state", "used"}});
  kv_blocks_free_ = &kv_blocks_->Add({{"state", "free"}});
  kv_bytes_ = &BuildGauge()
                   .Name("cutline_backend_kv_bytes")
                   .Help("Bytes of KV cache in use")
                   .Register(r)
                   .Add({});
  device_free_bytes_ = &BuildGauge()
                            .Name("cutline_backend_device_free_bytes")
                            .Help("Free memory on the compute device")
                            .Register(r)
                            .Add({});
  queue_depth_ = &BuildGauge()
                      .Name("cutline_backend_queue_depth")
                      .Help("Sequences waiting for admission into the running batch")
                      .Register(r)
                      .Add({});
  running_ = &BuildGauge()
                  .Name("cutline_backend_running")
                  .Help("Sequences in the running batch")
                  .Register(r)
                  .Add({});
  ttft_ = &BuildHistogram()
               .Name("cutline_backend_ttft_seconds")
               .Help("Backend time to first token, by model")
               .Register(r);
  phase_ = &BuildHistogram()
                .Name("cutline_backend_phase_seconds")
                .Help("TTFT phases by model: queue, load, warmup, prefill, first_decode")
                .Register(r);
  step_tokens_ = &BuildHistogram()
                      .Name("cutline_backend_step_tokens")
                      .Help("Tokens processed per engine step (decode + prefill chunks)")
                      .Register(r)
                      .Add({}, token_buckets());
  inter_token_ = &BuildHistogram()
                      .Name("cutline_backend_inter_token_seconds")
                      .Help("Gap between consecutive output tokens of a sequence, by model")
                      .Register(r);
  model_load_ = &BuildHistogram()
                     .Name("cutline_backend_model_load_seconds")
                     .Help("Model load pipeline time by model and phase")
                     .Register(r);
  prefix_queries_ = &BuildCounter()
                         .Name("cutline_backend_prefix_cache_queries_total")
                         .Help("Prefix-cache lookups (one per admitted prompt)")
                         .Register(r)
                         .Add({});
  prefix_hits_ = &BuildCounter()
                      .Name("cutline_backend_prefix_cache_hits_total")
                      .Help("Prefix-cache lookups that reused at least one KV block")
                      .Register(r)
                      .Add({});
  evictions_ = &BuildCounter()
                    .Name("cutline_backend_model_evictions_total")
                    .Help("Models evicted to make room for another, by model")
                    .Register(r);
  BuildGauge()
      .Name("cutline_build_info")
      .Help("Always 1; the labels say which version and git commit this process was built from")
      .Register(r)
      .Add({{"version", CUTLINE_VERSION}, {"commit", CUTLINE_GIT_COMMIT}})
      .Set(1);
}

BackendMetrics::~BackendMetrics() = default;

void BackendMetrics::on_request_finished(std::string_view model, const proto::StopRecord& rec) {
  const std::string m(model);
  requests_->Add({{"model", m}, {"cause", std::string(proto::to_string(rec.cause))}}).Increment();
  auto& pre = preemptions_->Add({{"model", m}});
  if (rec.preemptions && *rec.preemptions > 0) pre.Increment(static_cast<double>(*rec.preemptions));
  if (rec.ttft_ms) ttft_->Add({{"model", m}}, seconds_buckets()).Observe(*rec.ttft_ms / 1000.0);
  if (rec.phases) {
    const auto& p = *rec.phases;
    const double ms[] = {p.queue_ms, p.load_ms, p.warmup_ms, p.prefill_ms, p.first_decode_ms};
    for (size_t i = 0; i < std::size(kTtftPhases); ++i)
      phase_->Add({{"model", m}, {"phase", kTtftPhases[i]}}, seconds_buckets())
          .Observe(ms[i] / 1000.0);
  }
}

void BackendMetrics::on_request_rejected(std::string_view model) {
  requests_->Add({{"model", std::string(model)}, {"cause", "error"}}).Increment();
}

ModelSeries BackendMetrics::series_for(std::string_view model) {
  ModelSeries s;
  s.inter_token = &inter_token_->Add({{"model", std::string(model)}}, seconds_buckets());
  return s;
}

void BackendMetrics::observe_inter_token_seconds(const ModelSeries& series, double seconds) {
  if (series.inter_token) series.inter_token->Observe(seconds);
}

void BackendMetrics::on_model_evicted(std::string_view model) {
  evictions_->Add({{"model", std::string(model)}}).Increment();
}

void BackendMetrics::observe_step_tokens(int64_t tokens) {
  step_tokens_->Observe(static_cast<double>(tokens));
}

void BackendMetrics::on_model_load(std::string_view model, const residency::LoadReport& report) {
  const std::string m(model);
  // A loaded model's TTFT phases and evictions show (at 0) before its first request or eviction.
  for (const char* p : kTtftPhases) phase_->Add({{"model", m}, {"phase", p}}, seconds_buckets());
  evictions_->Add({{"model", m}});
  // One observation per phase per load, even when a phase ran in several parts.
  double ms[residency::kLoadPhaseCount] = {};
  bool seen[residency::kLoadPhaseCount] = {};
  for (const auto& p : report.phases) {
    ms[static_cast<int>(p.phase)] += p.ms;
    seen[static_cast<int>(p.phase)] = true;
  }
  for (int i = 0; i < residency::kLoadPhaseCount; ++i) {
    if (!seen[i]) continue;
    const auto phase = static_cast<residency::LoadPhase>(i);
    model_load_
        ->Add({{"model", m}, {"phase", std::string(residency::to_string(phase))}},
              seconds_buckets())
        .Observe(ms[i] / 1000.0);
  }
  model_load_->Add({{"model", m}, {"phase", "total"}}, seconds_buckets())
      .Observe(report.total_ms / 1000.0);
}

std::string BackendMetrics::render(const GaugeSnapshot& g) {
  std::lock_guard<std::mutex> lock(render_mu_);
  kv_blocks_used_->Set(static_cast<double>(g.kv_blocks_used));
  kv_blocks_free_->Set(static_cast<double>(g.kv_blocks_free));
  kv_bytes_->Set(static_cast<double>(g.kv_bytes));
  device_free_bytes_->Set(static_cast<double>(g.device_free_bytes));
  queue_depth_->Set(static_cast<double>(g.queue_depth));
  running_->Set(static_cast<double>(g.running));
  advance(*prefix_queries_, prefix_queries_reported_, g.prefix_cache_queries);
  advance(*prefix_hits_, prefix_hits_reported_, g.prefix_cache_hits);
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace cutline::server
