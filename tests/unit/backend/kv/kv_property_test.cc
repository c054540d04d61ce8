// Property test: 10,000 random add / grow / abort / finish / preempt operations on the KV cache
// manager with prefix sharing never leak a block, never double-use one, and always leave the
// pool whole once every sequence is gone.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "cutline/kv/kv_cache_manager.h"

namespace cutline::kv {
namespace {

TEST(KVProperty, TenThousandRandomOperationsLeakNoBlock) {
  constexpr int32_t kBlocks = 64;
  constexpr int32_t kBlockSize = 4;
  KVCacheManager kv(kBlocks, kBlockSize, model_salt("prop"));
  std::mt19937_64 rng(12345);
  struct Seq {
    std::vector<int32_t> tokens;
    int64_t computed = 0;
  };
  std::map<SeqId, Seq> live;
  SeqId next = 1;
  // A few shared prefixes so that sharing and eviction actually happen.
  std::vector<std::vector<int32_t>> prefixes;
  for (int p = 0; p < 4; ++p) {
    std::vector<int32_t> t;
    for (int i = 0; i < 12; ++i) t.push_back(static_cast<int32_t>(rng() % 50));
    prefixes.push_back(t);
  }
  int64_t failures = 0;
  for (int op = 0; op < 10000; ++op) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 3 || live.empty()) {  // add
      Seq s;
      s.tokens = prefixes[rng() % prefixes.size()];
      const int extra = 1 + static_cast<int>(rng() % 20);
      for (int i = 0; i < extra; ++i) s.tokens.push_back(static_cast<int32_t>(rng() % 50));
      const SeqId id = next++;
      s.computed = kv.match_prefix(id, s.tokens);
      ASSERT_EQ(s.computed % kBlockSize, 0);
      ASSERT_LT(s.computed, static_cast<int64_t>(s.tokens.size()));
      if (!kv.allocate(id, static_cast<int64_t>(s.tokens.size()))) {
        kv.cancel_match(id);
        ++failures;
        continue;
      }
      s.computed = static_cast<int64_t>(s.tokens.size());
      kv.commit(id, s.tokens, s.computed);
      live.emplace(id, std::move(s));
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      if (kind < 7) {  // grow by one decoded token
        Seq& s = it->second;
        s.tokens.push_back(static_cast<int32_t>(rng() % 50));
        if (!kv.allocate(it->first, static_cast<int64_t>(s.tokens.size()))) {
          ++failures;
          kv.free(it->first);  // preempted / out of memory
          live.erase(it);
          continue;
        }
        s.computed = static_cast<int64_t>(s.tokens.size());
        kv.commit(it->first, s.tokens, s.computed);
      } else {  // abort or finish
        kv.free(it->first);
        live.erase(it);
      }
    }
    // Invariants: every referenced block's ref count equals the number of tables holding it;
    // used + free == total.
    std::map<BlockId, int> refs;
    for (const auto& [id, s] : live) {
      auto table = kv.block_table(id);
      ASSERT_EQ(static_cast<int64_t>(table.size()), kv.blocks_for_tokens(s.tokens.size()));
      for (BlockId b : table) ++refs[b];
    }
    for (const auto& [b, n] : refs) ASSERT_EQ(kv.pool().ref_count(b), n) << "block " << b;
    ASSERT_EQ(static_cast<int32_t>(refs.size()) + kv.num_free_blocks(), kBlocks);
  }
  for (const auto& [id, s] : live) kv.free(id);
  EXPECT_EQ(kv.num_free_blocks(), kBlocks);
  EXPECT_EQ(kv.stats().sequences, 0);
  EXPECT_GT(kv.stats().prefix_hits, 0);
  EXPECT_GT(failures, 0);  // the pool did run out, so the out-of-blocks paths were exercised
}

}  // namespace
}  // namespace cutline::kv
