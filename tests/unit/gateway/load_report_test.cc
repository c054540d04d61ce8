// Load reports: a Cutline backend's /v1/cutline/state and a vLLM /metrics page, and the
// Prometheus text reader under the latter. Garbage is an error, never an idle endpoint.
#include "cutline/gateway/load_report.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cutline/gateway/prometheus_text.h"

namespace cutline::gateway {
namespace {

TEST(LoadReport, CutlineStateGivesQueueRunningKvAndResidentModels) {
  auto s = parse_cutline_state(
      R"({"draining":false,"active_requests":3,"waiting_for_model":0,"queue_depth":2,)"
      R"("running":1,"kv_blocks":{"used":30,"free":70,"used_bytes":1},"weights":{},)"
      R"("models":[{"name":"tiny-a","resident":true,"loading":false,"engine":{"queue_depth":2}},)"
      R"({"name":"tiny-b","resident":false,"loading":true}]})");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->waiting, 2);
  EXPECT_EQ(s->running, 1);
  EXPECT_DOUBLE_EQ(s->kv_usage, 0.3);
  EXPECT_EQ(s->kv_blocks_free, 70);
  EXPECT_TRUE(s->reports_models);
  EXPECT_TRUE(s->resident("tiny-a"));
  EXPECT_FALSE(s->resident("tiny-b"));
  EXPECT_DOUBLE_EQ(s->score(), 5.0);
}

TEST(LoadReport, CutlineStateErrorsNameTheField) {
  auto html = parse_cutline_state("<html>");
  ASSERT_FALSE(html.ok());
  EXPECT_EQ(html.error().message.rfind("/v1/cutline/state: not ", 0), 0u) << html.error().message;
  EXPECT_EQ(parse_cutline_state("[1]").error().message, "/v1/cutline/state: not a JSON object");
  EXPECT_EQ(parse_cutline_state(R"({"running":1})").error().message,
            "/v1/cutline/state: queue_depth is missing");
  EXPECT_FALSE(parse_cutline_state(R"({"queue_depth":"2","running":1})").ok());
  EXPECT_FALSE(parse_cutline_state(R"({"queue_depth":2,"running":1,"models":7})").ok());
}

TEST(LoadReport, VllmMetricsAreSummedOverModels) {
  auto s = parse_vllm_metrics(
      "# HELP vllm:num_requests_waiting Number of requests waiting.\n"
      "# TYPE vllm:num_requests_waiting gauge\n"
      "vllm:num_requests_waiting{model_name=\"a\"} 3.0\n"
      "vllm:num_requests_waiting{model_name=\"b\",engine=\"0\"} 1\n"
      "vllm:num_requests_running{model_name=\"a\"} 5 1700000000000\n"
      "vllm:kv_cache_usage_perc{model_name=\"a\"} 0.95\n"
      "process_cpu_seconds_total 12.5\n");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->waiting, 4);
  EXPECT_EQ(s->running, 5);
  EXPECT_DOUBLE_EQ(s->kv_usage, 0.95);
  EXPECT_FALSE(s->reports_models);
  EXPECT_DOUBLE_EQ(s->score(), 2 * 4 + 5 + 2.0);
}

TEST(LoadReport, VllmGarbageIsAnErrorNamingTheLine) {
  auto bad = parse_vllm_metrics("vllm:num_requests_waiting 1\nvllm:num_requests_running{x=\"1\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "/metrics: line 2: unterminated label value");
  EXPECT_EQ(parse_vllm_metrics("up 1\n").error().message,
            "/metrics: no vllm:num_requests_waiting, vllm:num_requests_running or "
            "vllm:kv_cache_usage_perc sample");
  EXPECT_FALSE(parse_vllm_metrics("vllm:num_requests_waiting lots\n").ok());
  EXPECT_FALSE(parse_vllm_metrics("{}\n").ok());
}

TEST(PrometheusText, LabelsAreUnescapedAndSpecialValuesRead) {
  PromSample s;
  auto r = parse_prom_line(R"(m{a="x\"y",b="line\nbreak"} +Inf)", s);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(*r);
  EXPECT_EQ(s.name, "m");
  ASSERT_EQ(s.labels.size(), 2u);
  EXPECT_EQ(s.labels[0].second, "x\"y");
  EXPECT_EQ(s.labels[1].second, "line\nbreak");
  EXPECT_TRUE(std::isinf(s.value));
  EXPECT_FALSE(*parse_prom_line("   # comment", s));
  EXPECT_FALSE(*parse_prom_line("", s));
  EXPECT_FALSE(parse_prom_line("m{a=\"x\"}", s).ok());
}

}  // namespace
}  // namespace cutline::gateway
