// cutline-backend end to end: the real binary with --model tiny=builtin, spoken to over loopback
// like any OpenAI client would.

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "backend_harness.h"

namespace cutline::test {
namespace {

const char* kChatStream =
    R"({"model":"tiny","messages":[{"role":"user","content":"Hello there"}],"max_tokens":12,)"
    R"("seed":7,"stream":true,"stream_options":{"include_usage":true}})";

class BackendServing : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    backend_ = new Backend();
    ASSERT_TRUE(backend_->start({"--model", "tiny=builtin"})) << backend_->stderr_text();
  }
  static void TearDownTestSuite() {
    delete backend_;
    backend_ = nullptr;
  }
  static Backend* backend_;
};
Backend* BackendServing::backend_ = nullptr;

TEST_F(BackendServing, StreamedChatEndsWithCutlineRecordAndPhases) {
  auto r = backend_->post("/v1/chat/completions", kChatStream);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers.get("Content-Type").value_or(""), "text/event-stream");
  bool done = false;
  auto chunks = sse_payloads(r->body, &done);
  EXPECT_TRUE(done) << r->body;
  ASSERT_GE(chunks.size(), 3u) << r->body;
  EXPECT_NE(chunks.front().find("\"role\":\"assistant\""), std::string::npos);
  // The chunk before the usage chunk carries finish_reason and the stop record.
  const std::string& last = chunks[chunks.size() - 2];
  EXPECT_NE(last.find("\"finish_reason\":\"length\""), std::string::npos) << last;
  auto rec = cutline_of(last);
  ASSERT_TRUE(rec.has_value()) << last;
  EXPECT_EQ(rec->cause, proto::Cause::kClientMaxTokens);
  EXPECT_EQ(rec->reporter, "backend");
  EXPECT_EQ(rec->output_tokens, 12);
  EXPECT_EQ(rec->requested_max_tokens, 12);
  EXPECT_EQ(rec->model_state, "resident");  // the default model loads at start-up
  ASSERT_TRUE(rec->phases.has_value());
  EXPECT_EQ(rec->phases->load_ms, 0);
  EXPECT_EQ(rec->phases->warmup_ms, 0);
  // The prompt's forward step is prefill; first_decode is sampling the first token (can be 0 ms).
  EXPECT_GT(rec->phases->prefill_ms, 0);
  EXPECT_GE(rec->phases->first_decode_ms, 0);
  ASSERT_TRUE(rec->ttft_ms.has_value());
  const auto& p = *rec->phases;
  EXPECT_NEAR(*rec->ttft_ms,
              p.queue_ms + p.load_ms + p.warmup_ms + p.prefill_ms + p.first_decode_ms, 0.01);
  EXPECT_GT(rec->kv_bytes_peak.value_or(0), 0);
  EXPECT_GT(rec->device_free_bytes.value_or(0), 0);
  EXPECT_EQ(rec->preemptions.value_or(-1), 0);
  // include_usage: a last chunk with no choices and the usage.
  EXPECT_NE(chunks.back().find("\"choices\":[]"), std::string::npos) << chunks.back();
  EXPECT_NE(chunks.back().find("\"completion_tokens\":12"), std::string::npos) << chunks.back();
  // The trailer repeats the cause.
  EXPECT_NE(std::string(r->trailers.get("cutline-stop").value_or("")).find("client_max_tokens"),
            std::string::npos);
}

TEST_F(BackendServing, SameSeedSameText) {
  auto a = backend_->post("/v1/chat/completions", kChatStream);
  auto b = backend_->post("/v1/chat/completions", kChatStream);
  ASSERT_TRUE(a.ok() && b.ok());
  // Content deltas concatenated (ids and timestamps differ).
  auto text = [](const std::string& body) {
    std::string all;
    for (const auto& c : sse_payloads(body)) {
      const auto at = c.find("\"content\":\"");
      if (at != std::string::npos) all += c.substr(at, c.find('}', at) - at);
    }
    return all;
  };
  EXPECT_EQ(text(a->body), text(b->body));
}

TEST_F(BackendServing, NonStreamingCompletionHasBodyRecordAndHeader) {
  auto r = backend_->post(
      "/v1/completions", R"({"model":"tiny","prompt":"Once upon a time","max_tokens":6,"seed":7})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->body.find("\"object\":\"text_completion\""), std::string::npos);
  EXPECT_NE(r->body.find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_NE(r->body.find("\"completion_tokens\":6"), std::string::npos) << r->body;
  auto rec = cutline_of(r->body);
  ASSERT_TRUE(rec.has_value()) << r->body;
  EXPECT_EQ(rec->cause, proto::Cause::kClientMaxTokens);
  ASSERT_TRUE(rec->phases.has_value());
  EXPECT_EQ(rec->model_state, "resident");
  auto header = r->headers.get("Cutline-Stop");
  ASSERT_TRUE(header.has_value());
  EXPECT_NE(header->find("cause=client_max_tokens"), std::string::npos);
}

TEST_F(BackendServing, NonStreamingChat) {
  auto r = backend_->post(
      "/v1/chat/completions",
      R"({"model":"tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":4})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->body.find("\"object\":\"chat.completion\""), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("\"role\":\"assistant\""), std::string::npos);
  EXPECT_TRUE(cutline_of(r->body).has_value());
}

TEST_F(BackendServing, ClientErrorsAreOpenAiStyle) {
  auto unknown = backend_->post("/v1/chat/completions",
                                R"({"model":"nope","messages":[{"role":"user","content":"x"}]})");
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->status, 404);
  EXPECT_NE(unknown->body.find("model_not_found"), std::string::npos) << unknown->body;
  EXPECT_NE(unknown->body.find("nope"), std::string::npos);

  const std::string long_prompt(20000, 'a');
  auto too_long =
      backend_->post("/v1/completions", R"({"model":"tiny","prompt":")" + long_prompt + "\"}");
  ASSERT_TRUE(too_long.ok());
  EXPECT_EQ(too_long->status, 400);
  EXPECT_NE(too_long->body.find("context_length"), std::string::npos) << too_long->body;

  auto bad_json = backend_->post("/v1/completions", R"({"model":"tiny","prompt":)");
  ASSERT_TRUE(bad_json.ok());
  EXPECT_EQ(bad_json->status, 400);
  EXPECT_NE(bad_json->body.find("\"error\""), std::string::npos);

  auto bad_max =
      backend_->post("/v1/completions", R"({"model":"tiny","prompt":"x","max_tokens":-3})");
  ASSERT_TRUE(bad_max.ok());
  EXPECT_EQ(bad_max->status, 400);
}

TEST_F(BackendServing, ModelsHealthStateAndMetrics) {
  auto models = backend_->get("/v1/models");
  ASSERT_TRUE(models.ok());
  EXPECT_EQ(models->status, 200);
  EXPECT_NE(models->body.find("\"id\":\"tiny\""), std::string::npos);

  auto health = backend_->get("/healthz");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
  // /health too, the path vLLM, SGLang and TGI answer and a gateway checks by default.
  auto vllm_style = backend_->get("/health");
  ASSERT_TRUE(vllm_style.ok());
  EXPECT_EQ(vllm_style->status, 200);
  EXPECT_NE(vllm_style->body.find("\"ok\""), std::string::npos) << vllm_style->body;

  auto state = backend_->get("/v1/cutline/state");
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->status, 200);
  EXPECT_EQ(json_number(state->body, "/running"), 0);
  EXPECT_GT(json_number(state->body, "/kv_blocks/free"), 0);
  EXPECT_EQ(json_number(state->body, "/models/0/resident"), 1);
  EXPECT_GT(json_number(state->body, "/models/0/weight_bytes"), 0);
  EXPECT_GE(json_number(state->body, "/models/0/last_used_ms_ago"), 0);
  EXPECT_GT(json_number(state->body, "/models/0/last_load/total_ms"), 0);

  ASSERT_TRUE(backend_
                  ->post("/v1/completions",
                         R"({"model":"tiny","prompt":"metrics","max_tokens":3,"ignore_eos":true})")
                  .ok());
  // The request is counted when its sequence's record is handled, which may be just after the
  // client has the response: poll.
  std::string m;
  EXPECT_TRUE(wait_for([&] {
    auto metrics = backend_->get("/metrics");
    if (!metrics.ok() || metrics->status != 200) return false;
    m = metrics->body;
    return metric_value(
               m, R"(cutline_backend_requests_total{cause="client_max_tokens",model="tiny"})") >= 1;
  })) << m;
  for (const char* name :
       {"cutline_backend_preemptions_total", "cutline_backend_kv_blocks{state=\"used\"}",
        "cutline_backend_kv_blocks{state=\"free\"}", "cutline_backend_kv_bytes",
        "cutline_backend_device_free_bytes", "cutline_backend_queue_depth",
        "cutline_backend_running", "cutline_backend_ttft_seconds_count",
        "cutline_backend_phase_seconds_count{model=\"tiny\",phase=\"prefill\"}",
        "cutline_backend_step_tokens_count", "cutline_backend_inter_token_seconds_count",
        "cutline_backend_model_load_seconds_count{model=\"tiny\",phase=\"read\"}",
        "cutline_backend_prefix_cache_hits_total", "cutline_backend_prefix_cache_queries_total",
        "cutline_backend_ttft_seconds_count{model=\"tiny\"}",
        "cutline_backend_inter_token_seconds_count{model=\"tiny\"}"})
    EXPECT_NE(m.find(name), std::string::npos) << name;
}

// A model slow enough that a long answer is still running when the client leaves.
class BackendSlowModel : public ::testing::Test {
 protected:
  void SetUp() override {
    model::SynthOptions o;
    o.layers = 8;
    o.dim = 512;
    o.heads = 8;
    o.kv_heads = 4;
    o.context = 8192;
    o.seed = 3;
    slow_path_ = synth_model(backend_.dir(), "slow", o);
    ASSERT_FALSE(slow_path_.empty());
  }
  Backend backend_;
  std::string slow_path_;
};

const char* kLongStream =
    R"({"model":"slow","prompt":"Tell me a long story","max_tokens":8000,"ignore_eos":true,"stream":true})";

TEST_F(BackendSlowModel, ClientDisconnectAbortsTheSequence) {
  ASSERT_TRUE(backend_.start({"--model", "slow=" + slow_path_})) << backend_.stderr_text();
  {
    RawClient client(backend_.port());
    ASSERT_TRUE(client.connected());
    client.post("/v1/completions", kLongStream);
    const std::string got = client.read_until("\"text\":", 20000);
    ASSERT_NE(got.find("\"text\":"), std::string::npos) << got;
    auto state = backend_.get("/v1/cutline/state");
    ASSERT_TRUE(state.ok());
    EXPECT_EQ(json_number(state->body, "/running"), 1) << state->body;
  }  // the client goes away mid-stream
  EXPECT_TRUE(wait_for(
      [&] {
        auto state = backend_.get("/v1/cutline/state");
        return state.ok() && json_number(state->body, "/running") == 0 &&
               json_number(state->body, "/active_requests") == 0;
      },
      10000))
      << backend_.get("/v1/cutline/state")->body;
  auto metrics = backend_.get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metric_value(metrics->body,
                         R"(cutline_backend_requests_total{cause="client_cancel",model="slow"})"),
            1)
      << metrics->body;
}

TEST_F(BackendSlowModel, ShutdownDrainsThenEndsStreamsWithALabeledStop) {
  ASSERT_TRUE(backend_.start({"--model", "slow=" + slow_path_, "--drain-timeout", "300ms"}))
      << backend_.stderr_text();
  RawClient client(backend_.port());
  ASSERT_TRUE(client.connected());
  client.post("/v1/completions", kLongStream);
  ASSERT_NE(client.read_until("\"text\":", 20000).find("\"text\":"), std::string::npos);
  backend_.signal(SIGTERM);
  // Draining stops accepting: a new connection is refused while the open stream still runs.
  EXPECT_TRUE(wait_for([&] { return !RawClient(backend_.port()).connected(); }, 200, 2))
      << "the backend still accepted connections while draining";
  const std::string got = client.read_until("[DONE]", 20000);
  EXPECT_NE(got.find("\"cause\":\"backend_preempted\""), std::string::npos) << got;
  EXPECT_NE(got.find("shutdown"), std::string::npos);
  EXPECT_NE(got.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(backend_.stop(), 0);
}

}  // namespace
}  // namespace cutline::test
