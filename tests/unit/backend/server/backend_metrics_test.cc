#include "cutline/server/backend_metrics.h"

#include <gtest/gtest.h>

#include "cutline/cli/version.h"

namespace cutline::server {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(BackendMetrics, FinishedRequestCountsCauseAndPhases) {
  BackendMetrics m;
  proto::StopRecord rec;
  rec.cause = proto::Cause::kClientMaxTokens;
  rec.preemptions = 2;
  rec.ttft_ms = 120;
  rec.phases = proto::TtftPhases{10, 50, 20, 30, 10};
  m.on_request_finished("tiny", rec);
  m.on_request_finished("tiny", rec);
  const std::string text = m.render(GaugeSnapshot{});
  EXPECT_TRUE(has_line(
      text, "cutline_backend_requests_total{cause=\"client_max_tokens\",model=\"tiny\"} 2"))
      << text;
  EXPECT_TRUE(has_line(text, "cutline_backend_preemptions_total{model=\"tiny\"} 4")) << text;
  EXPECT_TRUE(has_line(text, "cutline_backend_ttft_seconds_count{model=\"tiny\"} 2")) << text;
  EXPECT_TRUE(
      has_line(text, "cutline_backend_phase_seconds_sum{model=\"tiny\",phase=\"load\"} 0.1"))
      << text;
}

TEST(BackendMetrics, GaugesComeFromTheSnapshot) {
  BackendMetrics m;
  GaugeSnapshot g;
  g.kv_blocks_used = 7;
  g.kv_blocks_free = 9;
  g.kv_bytes = 4096;
  g.device_free_bytes = 1 << 20;
  g.queue_depth = 3;
  g.running = 2;
  g.prefix_cache_hits = 5;
  std::string text = m.render(g);
  EXPECT_TRUE(has_line(text, "cutline_backend_kv_blocks{state=\"used\"} 7")) << text;
  EXPECT_TRUE(has_line(text, "cutline_backend_kv_blocks{state=\"free\"} 9")) << text;
  EXPECT_TRUE(has_line(text, "cutline_backend_kv_bytes 4096")) << text;
  EXPECT_TRUE(has_line(text, "cutline_backend_device_free_bytes 1048576")) << text;
  EXPECT_TRUE(has_line(text, "cutline_backend_queue_depth 3")) << text;
  EXPECT_TRUE(has_line(text, "cutline_backend_running 2")) << text;
  EXPECT_TRUE(has_line(text, "cutline_backend_prefix_cache_hits_total 5")) << text;
  g.prefix_cache_hits = 8;
  text = m.render(g);
  EXPECT_TRUE(has_line(text, "cutline_backend_prefix_cache_hits_total 8")) << text;
}

TEST(BackendMetrics, PrefixQueriesBesideHitsAndAfterAnEviction) {
  BackendMetrics m;
  GaugeSnapshot g;
  g.prefix_cache_queries = 10;
  g.prefix_cache_hits = 4;
  std::string text = m.render(g);
  EXPECT_TRUE(has_line(text, "cutline_backend_prefix_cache_queries_total 10")) << text;
  EXPECT_TRUE(has_line(text, "cutline_backend_prefix_cache_hits_total 4")) << text;
  // A model with 6 of the queries and 3 of the hits was evicted: the sums fall to 4 and 1, the
  // counters hold; new lookups on what remains count again at once.
  g.prefix_cache_queries = 4;
  g.prefix_cache_hits = 1;
  text = m.render(g);
  EXPECT_TRUE(has_line(text, "cutline_backend_prefix_cache_queries_total 10")) << text;
  g.prefix_cache_queries = 7;
  g.prefix_cache_hits = 2;
  text = m.render(g);
  EXPECT_TRUE(has_line(text, "cutline_backend_prefix_cache_queries_total 13")) << text;
  EXPECT_TRUE(has_line(text, "cutline_backend_prefix_cache_hits_total 5")) << text;
}

TEST(BackendMetrics, LatencyHistogramsAreLabeledByModel) {
  BackendMetrics m;
  proto::StopRecord rec;
  rec.ttft_ms = 50;
  m.on_request_finished("a", rec);
  m.on_request_finished("b", rec);
  m.on_request_finished("b", rec);
  const ModelSeries a = m.series_for("a");
  for (int i = 0; i < 3; ++i) m.observe_inter_token_seconds(a, 0.01);
  const std::string text = m.render(GaugeSnapshot{});
  EXPECT_TRUE(has_line(text, "cutline_backend_ttft_seconds_count{model=\"a\"} 1")) << text;
  EXPECT_TRUE(has_line(text, "cutline_backend_ttft_seconds_count{model=\"b\"} 2")) << text;
  EXPECT_TRUE(has_line(text, "cutline_backend_inter_token_seconds_count{model=\"a\"} 3")) << text;
  EXPECT_TRUE(
      has_line(text, "cutline_backend_inter_token_seconds_bucket{model=\"a\",le=\"0.01\"} 3"))
      << text;
}

TEST(BackendMetrics, ModelLoadPhasesAndTotal) {
  BackendMetrics m;
  residency::LoadReport r;
  r.phases = {{residency::LoadPhase::kRead, 400, 100},
              {residency::LoadPhase::kRead, 100, 0},
              {residency::LoadPhase::kWarmup, 250, 0}};
  r.total_ms = 800;
  m.on_model_load("big", r);
  m.observe_step_tokens(17);
  m.observe_inter_token_seconds(m.series_for("big"), 0.02);
  const std::string text = m.render(GaugeSnapshot{});
  EXPECT_TRUE(
      has_line(text, "cutline_backend_model_load_seconds_sum{model=\"big\",phase=\"read\"} 0.5"))
      << text;
  EXPECT_TRUE(
      has_line(text, "cutline_backend_model_load_seconds_sum{model=\"big\",phase=\"total\"} 0.8"))
      << text;
  // A phase run in two parts is one observation of their sum.
  EXPECT_TRUE(
      has_line(text, "cutline_backend_model_load_seconds_count{model=\"big\",phase=\"read\"} 1"))
      << text;
  EXPECT_TRUE(has_line(text, "cutline_backend_step_tokens_count 1")) << text;
  EXPECT_TRUE(has_line(text, "cutline_backend_inter_token_seconds_count{model=\"big\"} 1")) << text;
}

// A loaded model shows its TTFT phases and evictions at 0 before its first request or eviction;
// an eviction counts against the evicted model.
TEST(BackendMetrics, LoadedModelShowsPhasesAndEvictionsFromZero) {
  BackendMetrics m;
  residency::LoadReport r;
  r.total_ms = 5;
  m.on_model_load("a", r);
  m.on_model_load("b", r);
  m.on_model_evicted("a");
  const std::string text = m.render(GaugeSnapshot{});
  EXPECT_TRUE(has_line(text, "cutline_backend_model_evictions_total{model=\"a\"} 1")) << text;
  EXPECT_TRUE(has_line(text, "cutline_backend_model_evictions_total{model=\"b\"} 0")) << text;
  EXPECT_TRUE(
      has_line(text, "cutline_backend_phase_seconds_count{model=\"b\",phase=\"first_decode\"} 0"))
      << text;
}

TEST(BackendMetrics, BuildInfoNamesVersionAndCommit) {
  BackendMetrics m;
  const std::string text = m.render(GaugeSnapshot{});
  EXPECT_NE(text.find("cutline_build_info{commit=\""), std::string::npos) << text;
  EXPECT_NE(text.find("version=\"" CUTLINE_VERSION "\"} 1"), std::string::npos) << text;
}

}  // namespace
}  // namespace cutline::server
