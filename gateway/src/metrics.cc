#include "cutline/gateway/metrics.h"

#include <algorithm>
#include <sstream>

#include <prometheus/text_serializer.h>

#include "cutline/cli/version.h"

namespace cutline::gateway {
namespace {

using prometheus::Histogram;

const Histogram::BucketBoundaries kLatencyBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                    0.5,   1,    2.5,   5,    10,  30};
const Histogram::BucketBoundaries kDurationBounds = {0.01, 0.05, 0.1, 0.25, 0.5, 1,
                                                     2.5,  5,    10,  30,   60,  300};
const Histogram::BucketBoundaries kTokenBounds = {1,   4,    16,   64,   128,  256,
                                                  512, 1024, 2048, 4096, 8192, 16384};

Histogram::BucketBoundaries itl_bounds() {
  return Histogram::BucketBoundaries(ItlBuckets::kBoundsSeconds.begin(),
                                     ItlBuckets::kBoundsSeconds.end());
}

}  // namespace

void ItlBuckets::add(double seconds) {
  size_t i = 0;
  while (i < kBoundsSeconds.size() && seconds > kBoundsSeconds[i]) ++i;
  counts_[i] += 1;
  sum_ += seconds;
  ++count_;
}

GatewayMetrics::GatewayMetrics(LabelBounds bounds)
    : registry_(std::make_shared<prometheus::Registry>()), bounds_(std::move(bounds)) {
  auto& r = *registry_;
  requests_ = &prometheus::BuildCounter()
                   .Name("cutline_requests_total")
                   .Help("Requests by route, model, tenant, policy and HTTP status code")
                   .Register(r);
  stops_ = &prometheus::BuildCounter()
                .Name("cutline_stops_total")
                .Help("Responses ended, by stop cause and origin")
                .Register(r);
  truncations_ =
      &prometheus::BuildCounter()
           .Name("cutline_truncations_total")
           .Help("Responses cut by serving (not by the model or the client's max_tokens)")
           .Register(r);
  would_cut_ = &prometheus::BuildCounter()
                    .Name("cutline_would_cut_total")
                    .Help(
                        "Cuts a policy rule in observe mode would have made, by cause (nothing "
                        "was cut)")
                    .Register(r);
  ttft_ = &prometheus::BuildHistogram()
               .Name("cutline_ttft_seconds")
               .Help("Time from request arrival to the first content token")
               .Register(r);
  itl_ = &prometheus::BuildHistogram()
              .Name("cutline_inter_token_seconds")
              .Help("Gaps between consecutive content tokens")
              .Register(r);
  queue_wait_ = &prometheus::BuildHistogram()
                     .Name("cutline_queue_wait_seconds")
                     .Help("Time spent in the admission queue")
                     .Register(r);
  duration_ = &prometheus::BuildHistogram()
                   .Name("cutline_request_duration_seconds")
                   .Help("Time from request arrival to the last byte")
                   .Register(r);
  output_tokens_ = &prometheus::BuildHistogram()
                        .Name("cutline_output_tokens")
                        .Help("Output tokens per response")
                        .Register(r);
  budget_clamped_ = &prometheus::BuildCounter()
                         .Name("cutline_budget_clamped_total")
                         .Help("Requests whose max_tokens a policy rule lowered, by rule")
                         .Register(r);
  queue_depth_ = &prometheus::BuildGauge()
                      .Name("cutline_queue_depth")
                      .Help("Requests waiting for admission, by policy")
                      .Register(r);
  upstream_errors_ = &prometheus::BuildCounter()
                          .Name("cutline_upstream_errors_total")
                          .Help("Upstream failures by upstream and kind")
                          .Register(r);
  reloads_ = &prometheus::BuildCounter()
                  .Name("cutline_policy_reload_total")
                  .Help("Policy reloads by result (ok, error)")
                  .Register(r);
  // Both results from 0, so that the first failed reload is an increase an alert can see
  // (CutlinePolicyReloadFailed) and not a series that appears at 1.
  reloads_->Add({{"result", "ok"}});
  reloads_->Add({{"result", "error"}});
  bad_requests_ = &prometheus::BuildCounter()
                       .Name("cutline_bad_requests_total")
                       .Help("Requests rejected as bad input, by error kind")
                       .Register(r);
  process_restarts_ = &prometheus::BuildCounter()
                           .Name("cutline_upstream_process_restarts_total")
                           .Help("Restarts of a supervised (spawned) upstream process")
                           .Register(r);
  budget_store_errors_ =
      &prometheus::BuildCounter()
           .Name("cutline_budget_store_errors_total")
           .Help(
               "Token-pool calls served by this process's own pools because the shared "
               "budget_store (Redis) failed or was marked down")
           .Register(r)
           .Add({});
  refused_ = &prometheus::BuildCounter()
                  .Name("cutline_refused_total")
                  .Help(
                      "Connections or HTTP/2 streams the server refused before any policy: "
                      "connection cap, rapid reset, accept back-off for lack of descriptors")
                  .Register(r);
  access_log_dropped_ = &prometheus::BuildCounter()
                             .Name("cutline_access_log_dropped_total")
                             .Help(
                                 "Access-log lines dropped because the writer's queue was full "
                                 "(the log's disk or pipe stalled)")
                             .Register(r)
                             .Add({});
  upstream_ready_ = &prometheus::BuildGauge()
                         .Name("cutline_upstream_ready")
                         .Help("1 when a supervised upstream process answers /healthz, else 0")
                         .Register(r);
  active_streams_ = &prometheus::BuildGauge()
                         .Name("cutline_active_streams")
                         .Help("Streams being relayed now")
                         .Register(r)
                         .Add({});
  tokens_ = &prometheus::BuildCounter()
                 .Name("cutline_tokens_total")
                 .Help(
                     "Tokens by tenant and model, for chargeback. type=input: prompt tokens from "
                     "the upstream's usage (not counted when the upstream reports none); "
                     "type=output: from the upstream's usage when present, else the gateway's "
                     "own count of content chunks")
                 .Register(r);
  prometheus::BuildGauge()
      .Name("cutline_build_info")
      .Help("Always 1; the labels say which version and git commit this process was built from")
      .Register(r)
      .Add({{"version", CUTLINE_VERSION}, {"commit", CUTLINE_GIT_COMMIT}})
      .Set(1);
}

void GatewayMetrics::set_bounds(LabelBounds bounds) {
  std::lock_guard lock(bounds_mu_);
  bounds_ = std::move(bounds);
}

std::string GatewayMetrics::bounded(const std::vector<std::string>& allowed, std::string_view value,
                                    std::string_view fallback) const {
  std::lock_guard lock(bounds_mu_);
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return std::string(value);
  return std::string(fallback);
}

std::string GatewayMetrics::model_label(std::string_view model) const {
  return bounded(bounds_.models, model, "other");
}
std::string GatewayMetrics::tenant_label(std::string_view tenant) const {
  if (tenant.empty()) return "anonymous";
  return bounded(bounds_.tenants, tenant, "other");
}
std::string GatewayMetrics::policy_label(std::string_view policy) const {
  if (policy.empty()) return "none";
  return bounded(bounds_.policies, policy, "other");
}

// The series of one label combination, added on first use (callers hold series_mu_). `key` is
// the cache key on entry to request_series_locked(); the others build theirs in it.
prometheus::Counter* GatewayMetrics::request_series_locked(
    const std::string& key, std::string_view route, const std::string& model,
    const std::string& tenant, const std::string& policy, const std::string& code) {
  auto r = request_series_.find(key);
  if (r == request_series_.end()) {
    r = request_series_
            .emplace(key, &requests_->Add({{"route", std::string(route)},
                                           {"model", model},
                                           {"tenant", tenant},
                                           {"policy", policy},
                                           {"code", code}}))
            .first;
  }
  return r->second;
}

GatewayMetrics::StopSeries GatewayMetrics::stop_series_locked(std::string& key,
                                                              const proto::StopRecord& s,
                                                              const std::string& model,
                                                              const std::string& policy) {
  const std::string cause(proto::to_string(s.cause));
  const std::string origin(proto::to_string(s.origin()));
  key.assign(cause).append(1, '\x1f').append(origin).append(1, '\x1f').append(policy);
  key.append(1, '\x1f').append(model);
  auto st = stop_series_.find(key);
  if (st == stop_series_.end()) {
    StopSeries fresh{
        &stops_->Add({{"cause", cause}, {"origin", origin}, {"policy", policy}, {"model", model}}),
        nullptr};
    if (proto::is_serving_cut(s.cause)) {
      fresh.truncations =
          &truncations_->Add({{"cause", cause}, {"policy", policy}, {"model", model}});
    }
    st = stop_series_.emplace(key, fresh).first;
  }
  return st->second;
}

GatewayMetrics::ModelPolicySeries GatewayMetrics::model_policy_series_locked(
    std::string& key, const std::string& model, const std::string& policy) {
  key.assign(model).append(1, '\x1f').append(policy);
  auto m = model_policy_series_.find(key);
  if (m == model_policy_series_.end()) {
    const prometheus::Labels labels = {{"model", model}, {"policy", policy}};
    m = model_policy_series_
            .emplace(key, ModelPolicySeries{&ttft_->Add(labels, kLatencyBounds),
                                            &queue_wait_->Add(labels, kLatencyBounds),
                                            &duration_->Add(labels, kDurationBounds),
                                            &output_tokens_->Add(labels, kTokenBounds),
                                            &itl_->Add(labels, itl_bounds())})
            .first;
  }
  return m->second;
}

GatewayMetrics::TokenSeries GatewayMetrics::token_series_locked(std::string& key,
                                                                const std::string& model,
                                                                const std::string& tenant) {
  key.assign(model).append(1, '\x1f').append(tenant);
  auto t = token_series_.find(key);
  if (t == token_series_.end()) {
    auto add = [&](const char* type) {
      return &tokens_->Add({{"tenant", tenant}, {"model", model}, {"type", type}});
    };
    t = token_series_.emplace(key, TokenSeries{add("input"), add("output")}).first;
  }
  return t->second;
}

void GatewayMetrics::record(const RequestOutcome& o) {
  const std::string model = model_label(o.model);
  const std::string policy = policy_label(o.policy);
  const std::string tenant = tenant_label(o.tenant);
  const std::string code = std::to_string(o.code);
  // Label values never hold '\x1f' (routes, codes and causes are ours; tenants, models and
  // policies come bounded from the config), so it separates the parts of a cache key.
  thread_local std::string key;
  prometheus::Counter* request = nullptr;
  StopSeries stop{nullptr, nullptr};
  ModelPolicySeries mp{};
  TokenSeries tokens{};
  {
    std::lock_guard lock(series_mu_);
    key.assign(o.route).append(1, '\x1f').append(model).append(1, '\x1f').append(tenant);
    key.append(1, '\x1f').append(policy).append(1, '\x1f').append(code);
    request = request_series_locked(key, o.route, model, tenant, policy, code);
    if (o.stop) {
      stop = stop_series_locked(key, *o.stop, model, policy);
      mp = model_policy_series_locked(key, model, policy);
      tokens = token_series_locked(key, model, tenant);
    }
  }
  request->Increment();
  if (!o.clamp_rule.empty()) {
    prometheus::Counter* clamped = nullptr;
    {
      std::lock_guard lock(series_mu_);
      key.assign(o.clamp_rule);
      auto it = clamped_series_.find(key);
      if (it == clamped_series_.end()) {
        it = clamped_series_.emplace(key, &budget_clamped_->Add({{"rule", key}})).first;
      }
      clamped = it->second;
    }
    clamped->Increment();
  }
  if (!o.stop) return;
  const proto::StopRecord& s = *o.stop;
  stop.stops->Increment();
  if (stop.truncations != nullptr) stop.truncations->Increment();
  for (const proto::WouldCut& c : s.would_cut) {
    would_cut_->Add({{"cause", std::string(proto::to_string(c.cause))}, {"policy", policy}})
        .Increment();
  }
  if (s.ttft_ms) mp.ttft->Observe(*s.ttft_ms / 1000.0);
  if (s.queue_ms) mp.queue_wait->Observe(*s.queue_ms / 1000.0);
  if (s.duration_ms) mp.duration->Observe(*s.duration_ms / 1000.0);
  if (s.cause != proto::Cause::kAdmissionRejected && s.cause != proto::Cause::kInvalidRequest &&
      s.cause != proto::Cause::kPolicyDenied) {
    mp.output_tokens->Observe(static_cast<double>(s.output_tokens));
  }
  if (s.input_tokens && *s.input_tokens > 0)
    tokens.input->Increment(static_cast<double>(*s.input_tokens));
  if (s.output_tokens > 0) tokens.output->Increment(static_cast<double>(s.output_tokens));
  if (o.itl && o.itl->count() > 0) {
    const auto& c = o.itl->counts();
    // One increment per bucket, +Inf included (prometheus-cpp's ObserveMultiple contract).
    thread_local std::vector<double> increments;
    increments.assign(c.begin(), c.end());
    mp.itl->ObserveMultiple(increments, o.itl->sum_seconds());
  }
}

void GatewayMetrics::set_queue_depth(std::string_view policy, double depth) {
  const std::string label = policy_label(policy);
  prometheus::Gauge* gauge = nullptr;
  {
    std::lock_guard lock(series_mu_);
    auto it = queue_depth_series_.find(label);
    if (it == queue_depth_series_.end()) {
      it = queue_depth_series_.emplace(label, &queue_depth_->Add({{"policy", label}})).first;
    }
    gauge = it->second;
  }
  gauge->Set(depth);
}

void GatewayMetrics::upstream_error(std::string_view upstream, std::string_view kind) {
  upstream_errors_->Add({{"upstream", std::string(upstream)}, {"kind", std::string(kind)}})
      .Increment();
}

void GatewayMetrics::set_budget_store_errors(uint64_t total) {
  const double delta = static_cast<double>(total) - budget_store_errors_->Value();
  if (delta > 0) budget_store_errors_->Increment(delta);
}

void GatewayMetrics::refused(std::string_view reason) {
  const bool known =
      reason == "connections" || reason == "http2_resets" || reason == "accept_backoff";
  refused_->Add({{"reason", known ? std::string(reason) : std::string("other")}}).Increment();
}

void GatewayMetrics::set_access_log_dropped(uint64_t total) {
  const double delta = static_cast<double>(total) - access_log_dropped_->Value();
  if (delta > 0) access_log_dropped_->Increment(delta);
}

void GatewayMetrics::policy_reload(bool ok) {
  reloads_->Add({{"result", ok ? "ok" : "error"}}).Increment();
}

void GatewayMetrics::bad_request(std::string_view kind) {
  bad_requests_->Add({{"kind", std::string(kind)}}).Increment();
}

void GatewayMetrics::upstream_process_restarted(std::string_view upstream) {
  process_restarts_->Add({{"upstream", std::string(upstream)}}).Increment();
}

void GatewayMetrics::set_upstream_ready(std::string_view upstream, bool ready) {
  upstream_ready_->Add({{"upstream", std::string(upstream)}}).Set(ready ? 1 : 0);
  process_restarts_->Add({{"upstream", std::string(upstream)}});  // the series exists from 0
}

std::string GatewayMetrics::serialize() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace cutline::gateway
