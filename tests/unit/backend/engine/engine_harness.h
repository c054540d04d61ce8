#pragma once
// Test helpers: drive an Engine with step() and collect each sequence's outcome.

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cutline/engine/engine.h"
#include "fake_model.h"

namespace cutline::engine::testing {

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  std::optional<SequenceRecord> record;
  int events = 0;
};

// Steps until the engine is idle (or max_steps), returning every sequence's outcome.
inline std::map<SeqId, Outcome> run_until_idle(Engine& engine, int max_steps = 100000) {
  std::map<SeqId, Outcome> out;
  std::vector<EngineEvent> events;
  for (int i = 0; i < max_steps && !engine.idle(); ++i) {
    engine.step();
    events.clear();
    engine.drain_events(events);
    for (auto& e : events) {
      Outcome& o = out[e.seq_id];
      EXPECT_FALSE(o.record.has_value()) << "event after the finished event";
      o.tokens.insert(o.tokens.end(), e.tokens.begin(), e.tokens.end());
      o.text += e.text;
      ++o.events;
      EXPECT_EQ(e.finished, e.record.has_value());
      if (e.record) o.record = *e.record;
    }
  }
  EXPECT_TRUE(engine.idle()) << "engine did not finish within " << max_steps << " steps";
  return out;
}

inline std::vector<int32_t> make_prompt(uint64_t seed, int32_t len, int32_t vocab = 64) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < len; ++i)
    p.push_back(2 + static_cast<int32_t>(counter_bits(seed, i) % (vocab - 2)));
  return p;
}

inline std::unique_ptr<Engine> make_engine(FakeRunner& runner, FakeTokenizer& tok,
                                           EngineConfig config) {
  auto e = Engine::create(runner, tok, std::move(config));
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return std::move(e).value();
}

}  // namespace cutline::engine::testing
