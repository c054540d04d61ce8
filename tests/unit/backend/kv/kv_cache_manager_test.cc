#include "cutline/kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace cutline::kv {
namespace {

std::vector<int32_t> iota_tokens(int n, int start = 100) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

TEST(KVCacheManager, AllocatesOnlyWhatTheTokensNeed) {
  KVCacheManager kv(10, 16, model_salt("m"));
  auto t = kv.allocate(1, 17);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->size(), 2u);  // waste <= one partial block
  EXPECT_EQ(kv.allocate(1, 32)->size(), 2u);
  EXPECT_EQ(kv.allocate(1, 33)->size(), 3u);
  EXPECT_EQ(kv.num_free_blocks(), 7);
  EXPECT_EQ(kv.blocks_for_tokens(0), 0);
  EXPECT_EQ(kv.blocks_for_tokens(16), 1);
}

TEST(KVCacheManager, ReturnsNulloptAndChangesNothingWhenFull) {
  KVCacheManager kv(4, 16, model_salt("m"));
  ASSERT_TRUE(kv.allocate(1, 48));
  EXPECT_FALSE(kv.allocate(2, 33));  // needs 3, 1 free
  EXPECT_EQ(kv.num_free_blocks(), 1);
  EXPECT_EQ(kv.num_blocks_of(2), 0);
  EXPECT_FALSE(kv.allocate(1, 81));
  EXPECT_EQ(kv.num_blocks_of(1), 3);
  kv.free(1);
  kv.free(2);
  kv.free(99);  // unknown: ignored
  EXPECT_EQ(kv.num_free_blocks(), 4);
  EXPECT_EQ(kv.stats().sequences, 0);
}

TEST(KVCacheManager, SharesCommittedFullBlocksOfTheSamePrefix) {
  KVCacheManager kv(16, 4, model_salt("m"));
  auto prompt = iota_tokens(10);  // 2 full blocks + 2 tokens
  ASSERT_EQ(kv.match_prefix(1, prompt), 0);
  ASSERT_TRUE(kv.allocate(1, 10));
  kv.commit(1, prompt, 10);
  auto t1 = std::vector<BlockId>(kv.block_table(1).begin(), kv.block_table(1).end());

  auto other = prompt;
  other[9] = 7;  // differs only in the partial block
  EXPECT_EQ(kv.match_prefix(2, other), 8);
  auto t2 = kv.block_table(2);
  ASSERT_EQ(t2.size(), 2u);
  EXPECT_EQ(t2[0], t1[0]);
  EXPECT_EQ(t2[1], t1[1]);
  EXPECT_EQ(kv.pool().ref_count(t1[0]), 2);
  ASSERT_TRUE(kv.allocate(2, 10));
  EXPECT_NE(kv.block_table(2)[2], t1[2]);

  auto diverged = prompt;
  diverged[5] = 1;  // differs in block 1: only block 0 is shared
  EXPECT_EQ(kv.match_prefix(3, diverged), 4);
  KVStats s = kv.stats();
  EXPECT_EQ(s.prefix_queries, 3);
  EXPECT_EQ(s.prefix_hits, 2);
  EXPECT_EQ(s.prefix_hit_tokens, 12);
}

TEST(KVCacheManager, NeverMatchesTheWholePromptSoTheLastTokenIsComputed) {
  KVCacheManager kv(16, 4, model_salt("m"));
  auto prompt = iota_tokens(8);
  kv.match_prefix(1, prompt);
  ASSERT_TRUE(kv.allocate(1, 8));
  kv.commit(1, prompt, 8);
  EXPECT_EQ(kv.match_prefix(2, prompt), 4);
}

TEST(KVCacheManager, OtherModelDoesNotShare) {
  KVCacheManager a(16, 4, model_salt("a"));
  KVCacheManager b(16, 4, model_salt("b"));
  EXPECT_NE(model_salt("a"), model_salt("b"));
  auto prompt = iota_tokens(9);
  EXPECT_NE(chain_block_hash(model_salt("a"), std::span(prompt).first(4)),
            chain_block_hash(model_salt("b"), std::span(prompt).first(4)));
}

TEST(KVCacheManager, FreedPrefixIsRevivedUntilAllocationEvictsIt) {
  KVCacheManager kv(4, 4, model_salt("m"));
  auto prompt = iota_tokens(9);
  kv.match_prefix(1, prompt);
  ASSERT_TRUE(kv.allocate(1, 9));
  kv.commit(1, prompt, 9);
  kv.free(1);
  EXPECT_EQ(kv.num_free_blocks(), 4);
  EXPECT_EQ(kv.stats().blocks_cached, 2);
  EXPECT_EQ(kv.match_prefix(2, prompt), 8);
  kv.free(2);
  // Another sequence takes every block: the cached ones are evicted.
  ASSERT_TRUE(kv.allocate(3, 16));
  EXPECT_EQ(kv.stats().blocks_cached, 0);
  kv.free(3);
  EXPECT_EQ(kv.match_prefix(4, prompt), 0);
  EXPECT_GE(kv.stats().evictions, 2);
}

TEST(KVCacheManager, CancelMatchUndoesTheHit) {
  KVCacheManager kv(8, 4, model_salt("m"));
  auto prompt = iota_tokens(9);
  kv.match_prefix(1, prompt);
  ASSERT_TRUE(kv.allocate(1, 9));
  kv.commit(1, prompt, 9);
  kv.free(1);
  ASSERT_EQ(kv.match_prefix(2, prompt), 8);
  kv.cancel_match(2);
  KVStats s = kv.stats();
  EXPECT_EQ(s.prefix_hits, 0);
  EXPECT_EQ(s.prefix_queries, 1);
  EXPECT_EQ(kv.num_free_blocks(), 8);
}

TEST(KVCacheManager, DisabledPrefixCachingNeverShares) {
  KVCacheManager kv(8, 4, model_salt("m"), /*prefix_caching=*/false);
  auto prompt = iota_tokens(9);
  kv.match_prefix(1, prompt);
  ASSERT_TRUE(kv.allocate(1, 9));
  kv.commit(1, prompt, 9);
  EXPECT_EQ(kv.match_prefix(2, prompt), 0);
  EXPECT_EQ(kv.stats().blocks_cached, 0);
}

}  // namespace
}  // namespace cutline::kv
