#include "cutline/residency/residency.h"

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace cutline::residency {
namespace {

class FakeModel : public ResidentModel {
 public:
  FakeModel(int64_t bytes, std::atomic<int>* alive) : bytes_(bytes), alive_(alive) { ++*alive_; }
  ~FakeModel() override { --*alive_; }
  int64_t weight_bytes() const override { return bytes_; }

 private:
  int64_t bytes_;
  std::atomic<int>* alive_;
};

// A fake clock and a fake loader: each load advances the clock by fixed phase durations.
struct Fixture {
  base::ManualClock clock{1'000'000'000};  // 1 s
  std::atomic<int> alive{0};
  std::vector<std::string> loads;  // names in load order
  std::mutex loads_mu;
  bool fail_next = false;

  Loader loader() {
    return [this](const ModelSpec& spec,
                  PhaseRecorder& rec) -> Result<std::unique_ptr<ResidentModel>> {
      {
        std::lock_guard<std::mutex> lock(loads_mu);
        loads.push_back(spec.name);
      }
      if (fail_next) {
        fail_next = false;
        return make_error(ErrorKind::kIo, "cannot read " + spec.path);
      }
      rec.begin(LoadPhase::kRead);
      clock.advance_us(40'000);  // 40 ms
      rec.end(spec.weight_bytes_estimate);
      rec.begin(LoadPhase::kConvert);
      clock.advance_us(10'000);  // 10 ms
      rec.end();
      clock.advance_us(1'000);  // 1 ms gap between phases counts as load
      rec.begin(LoadPhase::kWarmup);
      clock.advance_us(5'000);  // 5 ms
      rec.end();
      rec.add(LoadPhase::kKvAlloc, 2.0);
      clock.advance_us(2'000);
      return std::unique_ptr<ResidentModel>(
          std::make_unique<FakeModel>(spec.weight_bytes_estimate, &alive));
    };
  }
  std::unique_ptr<Residency> make(int64_t budget) {
    return std::make_unique<Residency>(ResidencyOptions{budget}, clock, loader());
  }
};

ModelSpec spec(std::string name, int64_t bytes, bool pinned = false) {
  return ModelSpec{name, "/models/" + name + ".gguf", pinned, bytes};
}

const ModelStatus& status_of(const std::vector<ModelStatus>& all, const std::string& name) {
  for (const auto& s : all)
    if (s.name == name) return s;
  ADD_FAILURE() << "no status for " << name;
  return all.front();
}

TEST(Residency, FirstAcquireLoadsColdWithTimedPhasesThenResident) {
  Fixture f;
  auto r = f.make(0);
  ASSERT_TRUE(r->add_model(spec("tiny", 1000)).ok());
  {
    auto lease = r->acquire("tiny");
    ASSERT_TRUE(lease.ok());
    EXPECT_EQ(lease->found, ModelState::kCold);
    EXPECT_DOUBLE_EQ(lease->load_ms, 51.0);   // 40 read + 10 convert + 1 gap
    EXPECT_DOUBLE_EQ(lease->warmup_ms, 7.0);  // 5 warm-up + 2 KV allocation
    EXPECT_DOUBLE_EQ(lease->wait_ms, 0.0);
    EXPECT_EQ(lease->model().weight_bytes(), 1000);
  }
  auto again = r->acquire("tiny");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->found, ModelState::kResident);
  EXPECT_DOUBLE_EQ(again->load_ms, 0.0);
  EXPECT_DOUBLE_EQ(again->warmup_ms, 0.0);
  EXPECT_EQ(f.loads.size(), 1u);

  const auto all = r->snapshot();
  const auto& s = status_of(all, "tiny");
  EXPECT_TRUE(s.resident);
  EXPECT_EQ(s.busy, 1);
  EXPECT_EQ(s.loads, 1);
  ASSERT_TRUE(s.last_load.has_value());
  ASSERT_EQ(s.last_load->phases.size(), 4u);
  EXPECT_EQ(s.last_load->phases[0].phase, LoadPhase::kRead);
  EXPECT_EQ(s.last_load->phases[0].bytes, 1000);
  EXPECT_DOUBLE_EQ(s.last_load->total_ms, 58.0);
  EXPECT_DOUBLE_EQ(s.last_load->read_bytes_per_s(), 1000 / 0.040);
}

TEST(Residency, TryAcquireNeverLoads) {
  Fixture f;
  auto r = f.make(0);
  ASSERT_TRUE(r->add_model(spec("a", 10)).ok());
  auto miss = r->try_acquire("a");
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
  EXPECT_TRUE(f.loads.empty());
  ASSERT_TRUE(r->acquire("a").ok());
  auto hit = r->try_acquire("a");
  ASSERT_TRUE(hit.ok());
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ((*hit)->found, ModelState::kResident);
  EXPECT_EQ(status_of(r->snapshot(), "a").busy, 1);
  EXPECT_FALSE(r->try_acquire("zzz").ok());
}

TEST(Residency, UnknownModelIsNotFound) {
  Fixture f;
  auto r = f.make(0);
  auto lease = r->acquire("nope");
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.error().kind, ErrorKind::kNotFound);
  EXPECT_NE(lease.error().message.find("nope"), std::string::npos);
}

TEST(Residency, DuplicateNameRefused) {
  Fixture f;
  auto r = f.make(0);
  ASSERT_TRUE(r->add_model(spec("a", 1)).ok());
  EXPECT_FALSE(r->add_model(spec("a", 1)).ok());
}

TEST(Residency, EvictsLeastRecentlyUsedIdleModel) {
  Fixture f;
  auto r = f.make(250);
  for (const char* n : {"a", "b", "c"}) ASSERT_TRUE(r->add_model(spec(n, 100)).ok());
  ASSERT_TRUE(r->acquire("a").ok());
  f.clock.advance_us(1000);
  ASSERT_TRUE(r->acquire("b").ok());
  f.clock.advance_us(1000);
  ASSERT_TRUE(r->acquire("a").ok());  // a is now more recent than b
  f.clock.advance_us(1000);
  auto c = r->acquire("c");  // needs 100 more: b (LRU) goes
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->found, ModelState::kCold);
  auto all = r->snapshot();
  EXPECT_TRUE(status_of(all, "a").resident);
  EXPECT_FALSE(status_of(all, "b").resident);
  EXPECT_EQ(status_of(all, "b").evictions, 1);
  EXPECT_TRUE(status_of(all, "c").resident);
  EXPECT_EQ(r->resident_bytes(), 200);
  EXPECT_EQ(f.alive.load(), 2);  // b's memory was freed
  c->release();

  auto b = r->acquire("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->found, ModelState::kEvictedThenLoaded);
  EXPECT_GT(b->load_ms, 0.0);
}

TEST(Residency, PinnedModelIsNeverEvicted) {
  Fixture f;
  auto r = f.make(200);
  ASSERT_TRUE(r->add_model(spec("pinned", 100, true)).ok());
  ASSERT_TRUE(r->add_model(spec("b", 100)).ok());
  ASSERT_TRUE(r->add_model(spec("c", 100)).ok());
  ASSERT_TRUE(r->acquire("pinned").ok());
  f.clock.advance_us(1000);
  ASSERT_TRUE(r->acquire("b").ok());
  f.clock.advance_us(1000);
  ASSERT_TRUE(r->acquire("c").ok());  // pinned is LRU but b is the one to go
  auto all = r->snapshot();
  EXPECT_TRUE(status_of(all, "pinned").resident);
  EXPECT_FALSE(status_of(all, "b").resident);
  EXPECT_TRUE(status_of(all, "c").resident);
}

TEST(Residency, ModelThatCanNeverFitIsAnErrorNotAWait) {
  Fixture f;
  auto r = f.make(150);
  ASSERT_TRUE(r->add_model(spec("pinned", 100, true)).ok());
  ASSERT_TRUE(r->add_model(spec("big", 200)).ok());
  ASSERT_TRUE(r->add_model(spec("mid", 100)).ok());
  auto big = r->acquire("big");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().kind, ErrorKind::kExhausted);
  EXPECT_NE(big.error().message.find("--weights-memory"), std::string::npos);
  ASSERT_TRUE(r->acquire("pinned").ok());
  auto mid = r->acquire("mid");  // pinned holds 100 of 150
  ASSERT_FALSE(mid.ok());
  EXPECT_NE(mid.error().message.find("pinned"), std::string::npos);
}

TEST(Residency, PinnedModelsOverBudgetRefusedAtRegistration) {
  Fixture f;
  auto r = f.make(150);
  ASSERT_TRUE(r->add_model(spec("a", 100, true)).ok());
  EXPECT_FALSE(r->add_model(spec("b", 100, true)).ok());
}

TEST(Residency, BusyModelIsNeverEvictedRequestWaitsAndReportsQueueTime) {
  Fixture f;
  auto r = f.make(100);
  ASSERT_TRUE(r->add_model(spec("a", 100)).ok());
  ASSERT_TRUE(r->add_model(spec("b", 100)).ok());
  auto a = r->acquire("a");
  ASSERT_TRUE(a.ok());

  auto pending = std::async(std::launch::async, [&] { return r->acquire("b"); });
  // b cannot load while a runs: it must still be waiting.
  EXPECT_EQ(pending.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  auto all = r->snapshot();
  EXPECT_TRUE(status_of(all, "a").resident);
  EXPECT_FALSE(status_of(all, "b").resident);

  f.clock.advance_us(30'000);  // a runs for 30 ms more
  a->release();
  ASSERT_EQ(pending.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  auto b = pending.get();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->found, ModelState::kCold);
  EXPECT_DOUBLE_EQ(b->wait_ms, 30.0);
  all = r->snapshot();
  EXPECT_FALSE(status_of(all, "a").resident);
  EXPECT_TRUE(status_of(all, "b").resident);
}

TEST(Residency, LoaderErrorLeavesModelUnloadedAndRetryable) {
  Fixture f;
  auto r = f.make(0);
  ASSERT_TRUE(r->add_model(spec("a", 10)).ok());
  f.fail_next = true;
  auto first = r->acquire("a");
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.error().kind, ErrorKind::kIo);
  EXPECT_FALSE(status_of(r->snapshot(), "a").resident);
  auto second = r->acquire("a");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->found, ModelState::kCold);
}

TEST(Residency, OnLoadAndOnEvictCallbacksFire) {
  Fixture f;
  auto r = f.make(100);
  std::vector<std::string> events;
  r->set_on_load([&](const std::string& n, const LoadReport& rep) {
    events.push_back("load:" + n + ":" + std::to_string(static_cast<int>(rep.total_ms)));
  });
  r->set_on_evict([&](const std::string& n) { events.push_back("evict:" + n); });
  ASSERT_TRUE(r->add_model(spec("a", 100)).ok());
  ASSERT_TRUE(r->add_model(spec("b", 100)).ok());
  ASSERT_TRUE(r->acquire("a").ok());
  ASSERT_TRUE(r->acquire("b").ok());
  EXPECT_EQ(events, (std::vector<std::string>{"load:a:58", "evict:a", "load:b:58"}));
}

TEST(Residency, ShutdownWakesWaiters) {
  Fixture f;
  auto r = f.make(100);
  ASSERT_TRUE(r->add_model(spec("a", 100)).ok());
  ASSERT_TRUE(r->add_model(spec("b", 100)).ok());
  auto a = r->acquire("a");
  ASSERT_TRUE(a.ok());
  auto pending = std::async(std::launch::async, [&] { return r->acquire("b"); });
  EXPECT_EQ(pending.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  r->shutdown();
  ASSERT_EQ(pending.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  auto b = pending.get();
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().kind, ErrorKind::kExhausted);
}

TEST(LoadReport, PhaseNamesAndSplit) {
  EXPECT_EQ(to_string(LoadPhase::kKvAlloc), "kv_alloc");
  EXPECT_EQ(to_string(ModelState::kEvictedThenLoaded), "evicted_then_loaded");
  LoadReport r;
  r.phases = {
      {LoadPhase::kRead, 10, 100}, {LoadPhase::kUpload, 5, 100}, {LoadPhase::kWarmup, 3, 0}};
  EXPECT_DOUBLE_EQ(r.load_ms(), 15);
  EXPECT_DOUBLE_EQ(r.warmup_ms(), 3);
  EXPECT_EQ(r.bytes_read(), 100);
}

}  // namespace
}  // namespace cutline::residency
