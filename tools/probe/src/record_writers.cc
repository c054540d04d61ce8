#include "cutline/tools/probe/record_writers.h"

#include <cstdio>

#include "cutline/base/json_writer.h"

namespace cutline::tools::probe {

namespace {

using base::JsonWriter;

void write_record(JsonWriter& w, const RequestRecord& r) {
  w.begin_object();
  w.field("run", r.run).field("concurrency", r.concurrency).field("sequence", r.sequence);
  w.field("prompt", r.prompt_name).field("prompt_index", r.prompt_index);
  w.field("repeat", r.repeat).optional_field("seed", r.seed).field("model", r.model);
  w.optional_field("max_tokens_requested", r.max_tokens_requested);
  w.field("http_status", r.http_status);
  if (r.finish_reason.empty()) {
    w.key("finish_reason").null();
  } else {
    w.field("finish_reason", r.finish_reason);
  }
  w.field("output_tokens", r.output_tokens).field("count_method", r.count_method);
  w.field("cause", r.cause).field("cause_source", to_string(r.cause_source));
  w.field("truncated", r.truncated).field("model_stop", r.model_stop);
  if (!r.policy.empty()) w.field("policy", r.policy);
  if (!r.rule.empty()) w.field("rule", r.rule);
  w.optional_field("limit", r.limit).optional_field("observed", r.observed);
  if (!r.unit.empty()) w.field("unit", r.unit);
  if (!r.transport_error.empty()) w.field("transport_error", r.transport_error);
  w.field("client_timeout", r.client_timeout);
  if (!r.error.empty()) w.field("error", r.error);
  w.field("start_ms", r.start_ms).field("end_ms", r.end_ms).field("duration_ms", r.duration_ms());
  w.optional_field("ttft_ms", r.ttft_ms);
  w.key("itl_ms").begin_array();
  for (double g : r.itl_ms) w.value(g);
  w.end_array();
  w.optional_field("itl_mean_ms", r.itl_mean_ms()).optional_field("itl_max_ms", r.itl_max_ms());
  w.optional_field("queue_ms", r.queue_ms).optional_field("server_ttft_ms", r.server_ttft_ms);
  w.optional_field("preemptions", r.preemptions).optional_field("kv_bytes_peak", r.kv_bytes_peak);
  w.optional_field("device_free_bytes", r.device_free_bytes);
  if (r.phases) {
    w.key("phases").begin_object();
    w.field("queue", r.phases->queue_ms).field("load", r.phases->load_ms);
    w.field("warmup", r.phases->warmup_ms).field("prefill", r.phases->prefill_ms);
    w.field("first_decode", r.phases->first_decode_ms).end_object();
  }
  if (!r.model_state.empty()) w.field("model_state", r.model_state);
  if (!r.reporter.empty()) w.field("reporter", r.reporter);
  w.field("content_hash", r.content_hash);
  w.end_object();
}

void write_level(JsonWriter& w, const LevelSummary& s) {
  w.begin_object().field("concurrency", s.concurrency).field("answers", s.answers);
  w.field("mean_output_tokens", s.mean_output_tokens);
  w.field("min_output_tokens", s.min_output_tokens);
  w.field("median_output_tokens", s.median_output_tokens);
  w.field("max_output_tokens", s.max_output_tokens);
  w.field("model_stops", s.model_stops).field("completion_rate", s.completion_rate);
  w.field("shorter", s.shorter).field("compared", s.compared).field("differing", s.differing);
  w.key("causes").begin_object();
  for (const auto& [c, n] : s.causes) w.field(c, n);
  w.end_object();
  w.key("shorter_causes").begin_object();
  for (const auto& [c, n] : s.shorter_causes) w.field(c, n);
  w.end_object();
  w.optional_field("ttft_p50_ms", s.ttft_p50_ms).optional_field("ttft_p90_ms", s.ttft_p90_ms);
  w.optional_field("ttft_p99_ms", s.ttft_p99_ms).optional_field("itl_p50_ms", s.itl_p50_ms);
  w.optional_field("itl_p90_ms", s.itl_p90_ms).optional_field("itl_p99_ms", s.itl_p99_ms);
  w.end_object();
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

template <typename T>
std::string opt(const std::optional<T>& v) {
  if (!v) return "";
  if constexpr (std::is_floating_point_v<T>) {
    return num(*v);
  } else {
    return std::to_string(*v);
  }
}

}  // namespace

std::string report_json(const ProbeReport& report) {
  std::string out;
  JsonWriter w(out);
  w.begin_object().key("probe").begin_object();
  w.field("mode", report.mode == ProbeMode::kLoad ? "load" : "switch");
  w.field("url", report.url).field("label", report.label).field("model", report.model);
  w.field("max_tokens", report.max_tokens).field("temperature", report.temperature);
  w.field("seed", report.seed).field("started_utc", report.started_utc);
  w.field("batch_invariant_claimed", report.load.batch_invariant_claimed);
  w.field("serving_defect", report.load.serving_defect);
  w.key("policy");
  if (report.policy_json.empty()) {
    w.null();
  } else {
    w.raw(report.policy_json);
  }
  if (!report.policy_error.empty()) w.field("policy_error", report.policy_error);
  w.end_object();
  w.key("verdict").begin_array();
  for (const auto& l : report.verdict_lines()) w.value(l);
  w.end_array();
  w.key("levels").begin_array();
  for (const auto& s : report.load.levels) write_level(w, s);
  w.end_array();
  w.key("requests").begin_array();
  for (const auto& r : report.records) write_record(w, r);
  w.end_array();
  w.end_object();
  out += '\n';
  return out;
}

const std::vector<std::string>& csv_columns() {
  static const std::vector<std::string> kColumns = {"run",
                                                    "concurrency",
                                                    "sequence",
                                                    "prompt",
                                                    "repeat",
                                                    "seed",
                                                    "model",
                                                    "max_tokens_requested",
                                                    "http_status",
                                                    "finish_reason",
                                                    "output_tokens",
                                                    "count_method",
                                                    "cause",
                                                    "cause_source",
                                                    "truncated",
                                                    "policy",
                                                    "rule",
                                                    "limit",
                                                    "observed",
                                                    "unit",
                                                    "transport_error",
                                                    "client_timeout",
                                                    "error",
                                                    "start_ms",
                                                    "end_ms",
                                                    "ttft_ms",
                                                    "itl_mean_ms",
                                                    "itl_max_ms",
                                                    "itl_count",
                                                    "queue_ms",
                                                    "server_ttft_ms",
                                                    "preemptions",
                                                    "kv_bytes_peak",
                                                    "device_free_bytes",
                                                    "phase_queue_ms",
                                                    "phase_load_ms",
                                                    "phase_warmup_ms",
                                                    "phase_prefill_ms",
                                                    "phase_first_decode_ms",
                                                    "model_state",
                                                    "content_hash"};
  return kColumns;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string records_csv(const std::vector<RequestRecord>& records) {
  std::string out;
  const auto& cols = csv_columns();
  for (size_t i = 0; i < cols.size(); ++i) out += (i ? "," : "") + cols[i];
  out += '\n';
  for (const auto& r : records) {
    std::optional<double> pq, pl, pw, pp, pf;
    if (r.phases) {
      pq = r.phases->queue_ms;
      pl = r.phases->load_ms;
      pw = r.phases->warmup_ms;
      pp = r.phases->prefill_ms;
      pf = r.phases->first_decode_ms;
    }
    const std::vector<std::string> row = {r.run,
                                          std::to_string(r.concurrency),
                                          std::to_string(r.sequence),
                                          r.prompt_name,
                                          std::to_string(r.repeat),
                                          opt(r.seed),
                                          r.model,
                                          opt(r.max_tokens_requested),
                                          std::to_string(r.http_status),
                                          r.finish_reason,
                                          std::to_string(r.output_tokens),
                                          r.count_method,
                                          r.cause,
                                          std::string(to_string(r.cause_source)),
                                          r.truncated ? "true" : "false",
                                          r.policy,
                                          r.rule,
                                          opt(r.limit),
                                          opt(r.observed),
                                          r.unit,
                                          r.transport_error,
                                          r.client_timeout ? "true" : "false",
                                          r.error,
                                          num(r.start_ms),
                                          num(r.end_ms),
                                          opt(r.ttft_ms),
                                          opt(r.itl_mean_ms()),
                                          opt(r.itl_max_ms()),
                                          std::to_string(r.itl_ms.size()),
                                          opt(r.queue_ms),
                                          opt(r.server_ttft_ms),
                                          opt(r.preemptions),
                                          opt(r.kv_bytes_peak),
                                          opt(r.device_free_bytes),
                                          opt(pq),
                                          opt(pl),
                                          opt(pw),
                                          opt(pp),
                                          opt(pf),
                                          r.model_state,
                                          r.content_hash};
    for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + csv_field(row[i]);
    out += '\n';
  }
  return out;
}

}  // namespace cutline::tools::probe
