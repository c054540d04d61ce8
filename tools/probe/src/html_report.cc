#include "cutline/tools/probe/html_report.h"

#include <cstdio>
#include <set>

#include "svg_chart.h"

namespace cutline::tools::probe {

namespace {

std::string num(double v, const char* f = "%.1f") {
  char buf[32];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string opt(const std::optional<double>& v) { return v ? num(*v) : "&ndash;"; }

std::string load_charts(const ProbeReport& r) {
  std::vector<std::string> cats;
  ChartSeries mean{"mean", {}}, min{"min", {}}, max{"max", {}};
  ChartSeries t50{"p50", {}}, t90{"p90", {}}, t99{"p99", {}};
  ChartSeries i50{"p50", {}}, i90{"p90", {}}, i99{"p99", {}};
  std::set<std::string> cause_names;
  for (const auto& s : r.load.levels) {
    for (const auto& [c, k] : s.causes) cause_names.insert(c);
  }
  std::vector<ChartSeries> causes;
  for (const auto& c : cause_names) causes.push_back({c, {}});
  for (const auto& s : r.load.levels) {
    cats.push_back("c=" + std::to_string(s.concurrency));
    mean.values.push_back(s.mean_output_tokens);
    min.values.push_back(static_cast<double>(s.min_output_tokens));
    max.values.push_back(static_cast<double>(s.max_output_tokens));
    t50.values.push_back(s.ttft_p50_ms.value_or(0));
    t90.values.push_back(s.ttft_p90_ms.value_or(0));
    t99.values.push_back(s.ttft_p99_ms.value_or(0));
    i50.values.push_back(s.itl_p50_ms.value_or(0));
    i90.values.push_back(s.itl_p90_ms.value_or(0));
    i99.values.push_back(s.itl_p99_ms.value_or(0));
    for (auto& c : causes) {
      auto it = s.causes.find(c.name);
      c.values.push_back(it == s.causes.end() ? 0 : it->second);
    }
  }
  std::string out = "<section class=\"charts\">";
  out += svg_bar_chart("chart-output-tokens", "Output tokens by concurrency", cats,
                       {min, mean, max}, "output tokens", false);
  out += svg_bar_chart("chart-stop-causes", "Stop causes by concurrency", cats, causes, "answers",
                       true);
  out += svg_bar_chart("chart-ttft", "Time to first token (client) percentiles", cats,
                       {t50, t90, t99}, "ms", false);
  out += svg_bar_chart("chart-itl", "Inter-token latency (client) percentiles", cats,
                       {i50, i90, i99}, "ms", false);
  out += "</section>";
  out +=
      "<h2>Per concurrency level</h2><table><tr><th>concurrency</th><th>answers</th>"
      "<th>mean tokens</th><th>min</th><th>median</th><th>max</th><th>completion rate</th>"
      "<th>shorter than baseline</th><th>stop causes</th><th>TTFT p50/p90/p99 ms</th>"
      "<th>ITL p50/p90/p99 ms</th></tr>";
  for (const auto& s : r.load.levels) {
    std::string cs;
    for (const auto& [c, k] : s.causes)
      cs += (cs.empty() ? "" : ", ") + c + " " + std::to_string(k);
    out += "<tr><td>" + std::to_string(s.concurrency) + "</td><td>" + std::to_string(s.answers) +
           "</td><td>" + num(s.mean_output_tokens) + "</td><td>" +
           std::to_string(s.min_output_tokens) + "</td><td>" +
           std::to_string(s.median_output_tokens) + "</td><td>" +
           std::to_string(s.max_output_tokens) + "</td><td>" +
           num(100 * s.completion_rate, "%.0f%%") + "</td><td>" + std::to_string(s.shorter) +
           "</td><td>" + html_escape(cs) + "</td><td>" + opt(s.ttft_p50_ms) + " / " +
           opt(s.ttft_p90_ms) + " / " + opt(s.ttft_p99_ms) + "</td><td>" + opt(s.itl_p50_ms) +
           " / " + opt(s.itl_p90_ms) + " / " + opt(s.itl_p99_ms) + "</td></tr>";
  }
  out += "</table>";
  return out;
}

std::string switch_charts(const ProbeReport& r) {
  std::vector<std::string> rows;
  ChartSeries q{"queue", {}}, l{"load", {}}, w{"warmup", {}}, p{"prefill", {}},
      f{"first_decode", {}}, total{"TTFT (client, no phases reported)", {}};
  ChartSeries client{"TTFT client", {}}, server{"TTFT endpoint", {}};
  for (const auto& rec : r.records) {
    rows.push_back(rec.run + " · " + rec.model + " · " + rec.prompt_name);
    const proto::TtftPhases ph = rec.phases.value_or(proto::TtftPhases{});
    q.values.push_back(ph.queue_ms);
    l.values.push_back(ph.load_ms);
    w.values.push_back(ph.warmup_ms);
    p.values.push_back(ph.prefill_ms);
    f.values.push_back(ph.first_decode_ms);
    total.values.push_back(rec.phases ? 0 : rec.ttft_ms.value_or(0));
    client.values.push_back(rec.ttft_ms.value_or(0));
    server.values.push_back(rec.server_ttft_ms.value_or(0));
  }
  std::vector<ChartSeries> segments = {q, l, w, p, f};
  if (!r.switch_verdict.phases_available) segments.push_back(total);
  std::string out = "<section class=\"charts\">";
  out += svg_waterfall("chart-phases", "TTFT phase waterfall per switch scenario", rows, segments,
                       "ms from arrival");
  std::vector<std::string> short_rows;
  for (size_t i = 0; i < rows.size(); ++i) short_rows.push_back(std::to_string(i + 1));
  out += svg_bar_chart("chart-switch-ttft", "TTFT per step (numbered as in the table)", short_rows,
                       {client, server}, "ms", false);
  out += "</section>";
  return out;
}

std::string requests_table(const ProbeReport& r) {
  std::string out =
      "<h2>Every request</h2><table class=\"requests\"><tr><th>#</th><th>run</th><th>c</th>"
      "<th>prompt</th><th>seed</th><th>model</th><th>max_tokens</th><th>status</th>"
      "<th>finish_reason</th><th>output tokens</th><th>cause</th><th>rule</th>"
      "<th>TTFT ms</th><th>ITL mean ms</th><th>queue ms</th><th>preempt.</th><th>KV bytes</th>"
      "<th>device free</th><th>model_state</th><th>hash</th><th>error</th></tr>";
  int i = 0;
  for (const auto& rec : r.records) {
    auto o64 = [](const std::optional<int64_t>& v) {
      return v ? std::to_string(*v) : std::string("&ndash;");
    };
    out += "<tr><td>" + std::to_string(++i) + "</td><td>" + html_escape(rec.run) + "</td><td>" +
           std::to_string(rec.concurrency) + "</td><td>" + html_escape(rec.prompt_name) +
           "</td><td>" + o64(rec.seed) + "</td><td>" + html_escape(rec.model) + "</td><td>" +
           o64(rec.max_tokens_requested) + "</td><td>" + std::to_string(rec.http_status) +
           "</td><td>" + html_escape(rec.finish_reason) + "</td><td>" +
           std::to_string(rec.output_tokens) + "</td><td>" + html_escape(rec.cause) +
           (rec.cause_source == CauseSource::kDerived ? " (derived)" : "") + "</td><td>" +
           html_escape(rec.rule) + "</td><td>" + opt(rec.ttft_ms) + "</td><td>" +
           opt(rec.itl_mean_ms()) + "</td><td>" + opt(rec.queue_ms) + "</td><td>" +
           o64(rec.preemptions) + "</td><td>" + o64(rec.kv_bytes_peak) + "</td><td>" +
           o64(rec.device_free_bytes) + "</td><td>" + html_escape(rec.model_state) +
           "</td><td><code>" + rec.content_hash.substr(0, 8) + "</code></td><td>" +
           html_escape(rec.error) + "</td></tr>";
  }
  return out + "</table>";
}

}  // namespace

std::string render_html_report(const ProbeReport& r) {
  const bool load = r.mode == ProbeMode::kLoad;
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>cutline probe " +
      std::string(load ? "load" : "switch") +
      " report</title><style>"
      "body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;"
      "font-size:12px;margin:8px 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
      ".verdict li{margin:4px 0}.defect{color:#b00;font-weight:bold}svg.chart{margin:8px;"
      "border:1px solid #eee}pre{background:#f6f6f6;padding:8px;overflow:auto;font-size:11px}"
      "</style></head><body>\n";
  out += "<h1>cutline probe " + std::string(load ? "load" : "switch") + "</h1>";
  out += "<table class=\"facts\"><tr><th>endpoint</th><td>" + html_escape(r.url) +
         "</td></tr><tr><th>label</th><td>" + html_escape(r.label) +
         "</td></tr><tr><th>model</th><td>" + html_escape(r.model) +
         "</td></tr><tr><th>sampling</th><td>max_tokens " + std::to_string(r.max_tokens) +
         ", temperature " + num(r.temperature, "%g") + ", seed " + std::to_string(r.seed) +
         "</td></tr><tr><th>started</th><td>" + html_escape(r.started_utc) + "</td></tr>";
  if (load) {
    out += "<tr><th>batch-invariant sampling claimed</th><td>" +
           std::string(r.load.batch_invariant_claimed ? "yes" : "no") + "</td></tr>";
  }
  out += "</table>";
  out += "<h2>Verdict</h2><ul class=\"verdict\">";
  for (const auto& l : r.verdict_lines()) {
    const bool defect = l.rfind("SERVING DEFECT", 0) == 0;
    out +=
        std::string("<li") + (defect ? " class=\"defect\"" : "") + ">" + html_escape(l) + "</li>";
  }
  out += "</ul>";
  out += load ? load_charts(r) : switch_charts(r);
  out += requests_table(r);
  out += "<h2>Endpoint policy</h2>";
  if (!r.policy_json.empty()) {
    out += "<pre class=\"policy\">" + html_escape(r.policy_json) + "</pre>";
  } else {
    out += "<p>" +
           html_escape(r.policy_error.empty() ? std::string("not recorded (no --admin-url given)")
                                              : r.policy_error) +
           "</p>";
  }
  out += "</body></html>\n";
  return out;
}

}  // namespace cutline::tools::probe
