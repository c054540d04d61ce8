// cutline-backend with several models and small memory budgets: model switching with timed load
// phases, warm return, eviction, and preemptions under a tiny KV pool.

#include <filesystem>
#include <future>
#include <vector>

#include <gtest/gtest.h>

#include "backend_harness.h"

namespace cutline::test {
namespace {

std::string chat(const std::string& model, int max_tokens) {
  return R"({"model":")" + model +
         R"(","messages":[{"role":"user","content":"Hello there"}],"max_tokens":)" +
         std::to_string(max_tokens) + R"(,"ignore_eos":true,"stream":true})";
}

std::optional<proto::StopRecord> stream_record(Backend& b, const std::string& model,
                                               int max_tokens = 4) {
  auto r = b.post("/v1/chat/completions", chat(model, max_tokens));
  if (!r.ok() || r->status != 200) return std::nullopt;
  auto chunks = sse_payloads(r->body);
  if (chunks.empty()) return std::nullopt;
  return cutline_of(chunks.back());
}

std::string other_model(Backend& b) {
  model::SynthOptions o;
  o.seed = 2;
  o.layers = 3;
  return synth_model(b.dir(), "other", o);
}

TEST(BackendResidency, ColdSwitchShowsLoadWarmReturnShowsNone) {
  Backend b;
  const std::string other = other_model(b);
  ASSERT_FALSE(other.empty());
  ASSERT_TRUE(b.start({"--model", "tiny=builtin", "--model", "other=" + other})) << b.stderr_text();

  auto first = stream_record(b, "tiny");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->model_state, "resident");

  auto cold = stream_record(b, "other");
  ASSERT_TRUE(cold.has_value());
  EXPECT_EQ(cold->model_state, "cold");
  ASSERT_TRUE(cold->phases.has_value());
  EXPECT_GT(cold->phases->load_ms, 0);
  EXPECT_GT(cold->phases->warmup_ms, 0);
  // The load is part of the time to first token.
  EXPECT_GE(cold->ttft_ms.value_or(0), cold->phases->load_ms + cold->phases->warmup_ms);

  auto back = stream_record(b, "tiny");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->model_state, "resident");
  ASSERT_TRUE(back->phases.has_value());
  EXPECT_EQ(back->phases->load_ms, 0);
  EXPECT_EQ(back->phases->warmup_ms, 0);

  auto again = stream_record(b, "other");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->model_state, "resident");
  EXPECT_EQ(again->phases->load_ms, 0);

  auto state = b.get("/v1/cutline/state");
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(json_number(state->body, "/models/0/resident"), 1);
  EXPECT_EQ(json_number(state->body, "/models/1/resident"), 1);
  EXPECT_EQ(json_number(state->body, "/models/1/loads"), 1);
  EXPECT_GT(json_number(state->body, "/models/1/last_load/total_ms"), 0);
  EXPECT_GT(json_number(state->body, "/models/1/last_load/bytes_read"), 0);

  auto metrics = b.get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(
      metric_value(metrics->body,
                   R"(cutline_backend_model_load_seconds_count{model="other",phase="total"})"),
      1);
  EXPECT_EQ(metric_value(metrics->body,
                         R"(cutline_backend_model_load_seconds_count{model="other",phase="read"})"),
            1);
}

TEST(BackendResidency, WeightsBudgetEvictsTheIdleModelAndReloadSaysSo) {
  Backend b;
  const std::string other = other_model(b);
  ASSERT_FALSE(other.empty());
  // Room for one of the two small models only.
  ASSERT_TRUE(b.start(
      {"--model", "tiny=builtin", "--model", "other=" + other, "--weights-memory", "600KiB"}))
      << b.stderr_text();
  auto cold = stream_record(b, "other");
  ASSERT_TRUE(cold.has_value());
  EXPECT_EQ(cold->model_state, "cold");
  auto state = b.get("/v1/cutline/state");
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(json_number(state->body, "/models/0/resident"), 0) << state->body;
  EXPECT_EQ(json_number(state->body, "/models/0/evictions"), 1);

  auto back = stream_record(b, "tiny");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->model_state, "evicted_then_loaded");
  EXPECT_GT(back->phases->load_ms, 0);
}

TEST(BackendResidency, KeepResidentPinsAModel) {
  Backend b;
  const std::string other = other_model(b);
  ASSERT_FALSE(other.empty());
  ASSERT_TRUE(b.start({"--model", "tiny=builtin", "--model", "other=" + other, "--weights-memory",
                       "600KiB", "--keep-resident", "tiny"}))
      << b.stderr_text();
  // `other` cannot fit next to the pinned model: a clear 503, and tiny stays.
  auto r = b.post("/v1/chat/completions", chat("other", 2));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_NE(r->body.find("pinned"), std::string::npos) << r->body;
  auto tiny = stream_record(b, "tiny");
  ASSERT_TRUE(tiny.has_value());
  EXPECT_EQ(tiny->model_state, "resident");
}

TEST(BackendResidency, BusyModelIsNotEvictedTheOtherRequestQueues) {
  Backend b;
  model::SynthOptions o;
  o.layers = 8;
  o.dim = 512;
  o.heads = 8;
  o.kv_heads = 4;
  o.seed = 5;
  const std::string slow = synth_model(b.dir(), "slow", o);
  ASSERT_FALSE(slow.empty());
  std::error_code ec;
  // Room for the slow model, not for both.
  const auto budget = std::filesystem::file_size(slow, ec) + 100 * 1024;
  ASSERT_TRUE(b.start({"--model", "tiny=builtin", "--model", "slow=" + slow, "--weights-memory",
                       std::to_string(budget)}))
      << b.stderr_text();
  RawClient client(b.port());
  ASSERT_TRUE(client.connected());
  client.post("/v1/completions",
              R"({"model":"slow","prompt":"go","max_tokens":120,"ignore_eos":true,"stream":true})");
  ASSERT_NE(client.read_until("\"text\":", 20000).find("\"text\":"), std::string::npos);
  // tiny was evicted for slow; it cannot come back while slow is running.
  auto tiny = stream_record(b, "tiny");
  const std::string slow_body = client.read_until("[DONE]", 20000);
  auto slow_rec = cutline_of(slow_body.substr(slow_body.rfind("\"cutline\"") - 1));
  ASSERT_TRUE(slow_rec.has_value()) << slow_body.substr(slow_body.size() - 500);
  EXPECT_EQ(slow_rec->cause, proto::Cause::kClientMaxTokens);  // never evicted under its stream
  EXPECT_EQ(slow_rec->output_tokens, 120);
  ASSERT_TRUE(tiny.has_value());
  EXPECT_EQ(tiny->model_state, "evicted_then_loaded");
  ASSERT_TRUE(tiny->phases.has_value());
  // It waited for slow to finish: queue time, then its own load.
  EXPECT_GT(tiny->phases->queue_ms, 50);
  EXPECT_GT(tiny->phases->load_ms, 0);
  auto state = b.get("/v1/cutline/state");
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(json_number(state->body, "/models/1/resident"), 0) << state->body;
  EXPECT_EQ(json_number(state->body, "/models/1/evictions"), 1);
}

TEST(BackendResidency, TinyKvPoolUnderConcurrencyCountsPreemptions) {
  Backend b;
  // 12 blocks of 16 tokens; each answer needs ~8 blocks, so two running answers do not fit.
  ASSERT_TRUE(b.start({"--model", "tiny=builtin", "--kv-memory", "96KiB"})) << b.stderr_text();
  constexpr int kClients = 8;
  std::vector<std::future<std::optional<proto::StopRecord>>> answers;
  for (int i = 0; i < kClients; ++i)
    answers.push_back(
        std::async(std::launch::async, [&b] { return stream_record(b, "tiny", 100); }));
  int64_t preemptions = 0;
  for (auto& a : answers) {
    auto rec = a.get();
    ASSERT_TRUE(rec.has_value());
    preemptions += rec->preemptions.value_or(0);
    // Every answer is either complete or says why not.
    EXPECT_TRUE(rec->cause == proto::Cause::kClientMaxTokens || rec->cause == proto::Cause::kEos ||
                rec->cause == proto::Cause::kBackendPreempted)
        << proto::to_string(rec->cause);
  }
  EXPECT_GT(preemptions, 0);
  auto metrics = b.get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metric_value(metrics->body, R"(cutline_backend_preemptions_total{model="tiny"})"),
            static_cast<double>(preemptions));
  auto state = b.get("/v1/cutline/state");
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(json_number(state->body, "/models/0/engine/preemptions_total"),
            static_cast<double>(preemptions));
  EXPECT_EQ(json_number(state->body, "/kv_blocks/used"), 0);
}

}  // namespace
}  // namespace cutline::test
