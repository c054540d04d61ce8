#include "cutline/server/backend_state.h"

#include <gtest/gtest.h>

namespace cutline::server {
namespace {

BackendState two_models() {
  BackendState s;
  s.now_us = 10'000'000;
  s.weights_budget_bytes = 1000;
  s.device = "cpu: test";
  s.device_free_bytes = 5000;
  s.waiting_for_model = 1;
  ModelStateView a;
  a.status.name = "a";
  a.status.resident = true;
  a.status.weight_bytes = 300;
  a.status.last_used_us = 9'000'000;
  residency::LoadReport r;
  r.phases = {{residency::LoadPhase::kRead, 20, 300}, {residency::LoadPhase::kKvAlloc, 5, 64}};
  r.total_ms = 26;
  a.status.last_load = r;
  engine::EngineStats e;
  e.kv_blocks_used = 3;
  e.kv_blocks_free = 5;
  e.kv_bytes_per_block = 100;
  e.queue_depth = 2;
  e.running = 1;
  e.prefix_hits = 4;
  a.engine = e;
  ModelStateView b;
  b.status.name = "b";
  b.status.weight_bytes = 400;
  s.models = {a, b};
  return s;
}

TEST(BackendState, TotalsSumResidentModels) {
  const BackendTotals t = totals_of(two_models());
  EXPECT_EQ(t.weights_resident_bytes, 300);
  EXPECT_EQ(t.kv_blocks_used, 3);
  EXPECT_EQ(t.kv_blocks_free, 5);
  EXPECT_EQ(t.kv_bytes_used, 300);
  EXPECT_EQ(t.queue_depth, 3);  // 2 in the engine + 1 waiting for its model
  EXPECT_EQ(t.running, 1);
  const GaugeSnapshot g = gauges_of(two_models());
  EXPECT_EQ(g.device_free_bytes, 5000);
  EXPECT_EQ(g.prefix_cache_hits, 4);
}

TEST(BackendState, JsonShowsModelsLastUseAndLoadPhases) {
  const std::string json = backend_state_json(two_models());
  for (const char* part : {R"("queue_depth":3)", R"("waiting_for_model":1)", R"("running":1)",
                           R"("kv_blocks":{"used":3,"free":5,"used_bytes":300})",
                           R"("budget_bytes":1000)", R"("resident_bytes":300)", R"("name":"a")",
                           R"("last_used_ms_ago":1000)", R"("phase":"kv_alloc")",
                           R"("bytes_read":300)", R"("name":"b")", R"("last_used_ms_ago":null)"})
    EXPECT_NE(json.find(part), std::string::npos) << part << " in " << json;
}

}  // namespace
}  // namespace cutline::server
