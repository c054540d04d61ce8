// The engine driving the real LlamaRunner on the synthesized tiny model (CPU device): the same
// prompt, parameters and seed give bitwise identical tokens alone or among 1, 3 or 7 others,
// with chunked or one-step prefill, and after preemptions; and the stop causes hold with the
// real byte-level BPE tokenizer.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/device/device.h"
#include "cutline/engine/engine.h"
#include "cutline/model/gguf_file.h"
#include "cutline/model/llama_runner.h"
#include "cutline/model/synth.h"
#include "cutline/model/tokenizer_loader.h"

namespace cutline::engine {
namespace {

class TinyModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One file per process: ctest runs each test in its own process, in parallel, and
    // rewriting a file another process has mapped would crash it (SIGBUS).
    path_ = ::testing::TempDir() + "/engine_tiny_model_" + std::to_string(::getpid()) + ".gguf";
    const std::string& path = path_;
    model::SynthOptions o;
    o.context = 512;
    ASSERT_TRUE(model::synthesize_tiny_model(o, path).ok());
    auto file = model::GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.error().message;
    file_ = std::shared_ptr<const model::GgufFile>(std::move(file).value());
    auto tok = model::load_tokenizer(*file_);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    tokenizer_ = std::move(tok).value().release();
    // CUTLINE_TEST_DEVICE=cuda runs the suite on the CUDA device (tests/gpu/run.sh); a missing
    // device then fails the suite rather than falling back.
    const char* env = std::getenv("CUTLINE_TEST_DEVICE");
    const bool cuda = env != nullptr && std::string_view(env) == "cuda";
    auto dev =
        device::make_device({.kind = cuda ? device::DeviceKind::kCuda : device::DeviceKind::kCpu,
                             .cpu_threads = 2,
                             .cpu_isa = {}});
    ASSERT_TRUE(dev.ok()) << dev.error().message;
    auto runner =
        model::LlamaRunner::load(file_, std::shared_ptr<device::Device>(std::move(dev).value()),
                                 {.name = {}, .warmup = false});
    ASSERT_TRUE(runner.ok()) << runner.error().message;
    runner_ = std::move(runner).value().release();
  }
  static void TearDownTestSuite() {
    delete runner_;
    delete tokenizer_;
    file_.reset();
    std::remove(path_.c_str());
  }

  struct Outcome {
    std::vector<int32_t> tokens;
    std::string text;
    std::optional<SequenceRecord> record;
  };

  static std::map<SeqId, Outcome> run(Engine& engine) {
    std::map<SeqId, Outcome> out;
    std::vector<EngineEvent> events;
    for (int i = 0; i < 20000 && !engine.idle(); ++i) {
      engine.step();
      events.clear();
      engine.drain_events(events);
      for (auto& e : events) {
        Outcome& o = out[e.seq_id];
        o.tokens.insert(o.tokens.end(), e.tokens.begin(), e.tokens.end());
        o.text += e.text;
        if (e.record) o.record = *e.record;
      }
    }
    EXPECT_TRUE(engine.idle());
    return out;
  }

  static AddRequest target() {
    AddRequest r;
    r.prompt = tokenizer_->encode("The quick brown fox jumps over the lazy dog because", true);
    r.sampling.temperature = 0.8f;
    r.sampling.top_p = 0.95f;
    r.sampling.top_k = 50;
    r.sampling.seed = 1234;
    r.stop.max_tokens = 24;
    r.stop.ignore_eos = true;
    return r;
  }
  static AddRequest other(int i) {
    static const char* kTexts[] = {"Once upon a time",
                                   "In the beginning there was",
                                   "A list of numbers: 1, 2, 3,",
                                   "Hello",
                                   "The weather today is",
                                   "Why is the sky blue? Because",
                                   "Paged attention keeps keys and values in blocks"};
    AddRequest r;
    r.prompt = tokenizer_->encode(kTexts[i % 7], true);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 77 + i;
    r.stop.max_tokens = 8 + 5 * i;
    r.stop.ignore_eos = true;
    return r;
  }

  // Runs the target among concurrency-1 others and returns its tokens.
  static std::vector<int32_t> target_tokens(int concurrency, EngineConfig cfg,
                                            int64_t* preemptions = nullptr) {
    auto engine = Engine::create(*runner_, *tokenizer_, cfg);
    EXPECT_TRUE(engine.ok());
    if (!engine.ok()) return {};
    SeqId id = 0;
    for (int i = 0; i < concurrency - 1; ++i) {
      if (i == concurrency / 2) id = *(*engine)->add(target());
      EXPECT_TRUE((*engine)->add(other(i)).ok());
    }
    if (id == 0) id = *(*engine)->add(target());
    auto out = run(**engine);
    const Outcome& o = out[id];
    EXPECT_TRUE(o.record.has_value());
    if (o.record) {
      EXPECT_FALSE(o.record->runner_error) << o.record->message;
      EXPECT_EQ(o.record->cause, proto::Cause::kClientMaxTokens) << o.record->message;
    }
    EXPECT_EQ((*engine)->stats().kv_blocks_used, 0);
    if (preemptions) *preemptions = (*engine)->stats().preemptions_total;
    return o.tokens;
  }

  static EngineConfig config() {
    EngineConfig cfg;
    cfg.num_blocks = 128;
    cfg.block_size = 16;
    return cfg;
  }

  static inline std::string path_;
  static inline std::shared_ptr<const model::GgufFile> file_;
  static inline model::Tokenizer* tokenizer_ = nullptr;
  static inline model::LlamaRunner* runner_ = nullptr;
};

TEST_F(TinyModel, BatchInvariantAtConcurrency1248) {
  const auto alone = target_tokens(1, config());
  ASSERT_EQ(alone.size(), 24u);
  // Not a degenerate stream (which would make the comparison meaningless).
  EXPECT_GT(std::set<int32_t>(alone.begin(), alone.end()).size(), 8u);
  for (int c : {2, 4, 8}) EXPECT_EQ(target_tokens(c, config()), alone) << "concurrency " << c;
}

TEST_F(TinyModel, ChunkedPrefillGivesIdenticalTokens) {
  const auto whole = target_tokens(4, config());
  EngineConfig chunked = config();
  chunked.max_step_tokens = 5;
  EXPECT_EQ(target_tokens(4, chunked), whole);
}

TEST_F(TinyModel, IdenticalTokensAfterPreemptions) {
  const auto alone = target_tokens(1, config());
  EngineConfig tight = config();
  tight.num_blocks = 6;  // 96 slots for 8 sequences of 20-60 tokens
  tight.max_preemptions = 1000;
  int64_t preemptions = 0;
  EXPECT_EQ(target_tokens(8, tight, &preemptions), alone);
  EXPECT_GT(preemptions, 0);
}

TEST_F(TinyModel, StopStringOnRealTokenizerIsCutAndTextMatchesTokens) {
  auto engine = Engine::create(*runner_, *tokenizer_, config());
  ASSERT_TRUE(engine.ok());
  AddRequest r = target();
  r.stop.max_tokens = 40;
  SeqId free_id = *(*engine)->add(r);
  auto free_run = run(**engine);
  const std::string full = free_run[free_id].text;
  EXPECT_EQ(full, tokenizer_->decode(free_run[free_id].tokens));
  ASSERT_GE(full.size(), 12u);
  const std::string stop = full.substr(full.size() / 2, 3);
  const size_t at = full.find(stop);
  r.stop.stop_strings = {stop};
  SeqId id = *(*engine)->add(r);
  auto cut = run(**engine);
  ASSERT_TRUE(cut[id].record);
  EXPECT_EQ(cut[id].record->cause, proto::Cause::kStopSequence);
  EXPECT_EQ(cut[id].text, full.substr(0, at));
}

}  // namespace
}  // namespace cutline::engine
