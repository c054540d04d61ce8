#include "cutline/kv/block_pool.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace cutline::kv {
namespace {

TEST(BlockPool, BlocksForBudgetRoundsDown) {
  EXPECT_EQ(blocks_for_budget(1 << 20, 1024, 16), 64);
  EXPECT_EQ(blocks_for_budget(1024 * 16 - 1, 1024, 16), 0);
  EXPECT_EQ(blocks_for_budget(0, 1024, 16), 0);
  EXPECT_EQ(blocks_for_budget(1 << 20, 0, 16), 0);
}

TEST(BlockPool, AllocatesEveryBlockOnceThenRunsOutWithoutThrowing) {
  BlockPool pool(8, 16);
  std::set<BlockId> ids;
  for (int i = 0; i < 8; ++i) {
    auto id = pool.allocate();
    ASSERT_TRUE(id);
    EXPECT_TRUE(ids.insert(*id).second);
    EXPECT_EQ(pool.ref_count(*id), 1);
  }
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_FALSE(pool.allocate());
  EXPECT_FALSE(pool.allocate(1));
  for (BlockId id : ids) pool.unref(id);
  EXPECT_EQ(pool.num_free(), 8);
}

TEST(BlockPool, AllocateManyIsAllOrNothing) {
  BlockPool pool(5, 16);
  auto three = pool.allocate(3);
  ASSERT_TRUE(three);
  EXPECT_FALSE(pool.allocate(3));
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_TRUE(pool.allocate(2));
  EXPECT_EQ(pool.num_free(), 0);
}

TEST(BlockPool, RefCountKeepsSharedBlockUntilLastUnref) {
  BlockPool pool(2, 16);
  BlockId id = *pool.allocate();
  pool.ref(id);
  EXPECT_EQ(pool.ref_count(id), 2);
  pool.unref(id);
  EXPECT_EQ(pool.num_free(), 1);
  pool.unref(id);
  EXPECT_EQ(pool.num_free(), 2);
}

TEST(BlockPool, CachedBlockSurvivesFreeAndIsRevivedUntilEvicted) {
  BlockPool pool(2, 4);
  std::vector<int32_t> tokens{1, 2, 3, 4};
  BlockId a = *pool.allocate();
  pool.set_cached(a, 77, 5, tokens);
  pool.unref(a);
  EXPECT_EQ(pool.num_cached_free(), 1);
  auto hit = pool.find_cached(77, 5, tokens);
  ASSERT_TRUE(hit);
  EXPECT_EQ(*hit, a);
  EXPECT_FALSE(pool.find_cached(77, 6, tokens));  // other parent: not the same prefix
  std::vector<int32_t> other{1, 2, 3, 5};
  EXPECT_FALSE(pool.find_cached(77, 5, other));  // same hash, other tokens: not a hit
  pool.ref(a);                                   // revive
  EXPECT_EQ(pool.num_free(), 1);
  pool.unref(a);
  // Allocating both blocks evicts the cached one (LRU: a was freed after the untouched block,
  // so the untouched block goes first, then a).
  BlockId first = *pool.allocate();
  EXPECT_NE(first, a);
  EXPECT_TRUE(pool.find_cached(77, 5, tokens));
  BlockId second = *pool.allocate();
  EXPECT_EQ(second, a);
  EXPECT_FALSE(pool.find_cached(77, 5, tokens));
  EXPECT_EQ(pool.evictions(), 1);
}

TEST(BlockPool, FreeQueueIsLeastRecentlyFreedFirst) {
  BlockPool pool(3, 4);
  BlockId a = *pool.allocate(), b = *pool.allocate(), c = *pool.allocate();
  pool.unref(b);
  pool.unref(c);
  pool.unref(a);
  EXPECT_EQ(*pool.allocate(), b);
  EXPECT_EQ(*pool.allocate(), c);
  EXPECT_EQ(*pool.allocate(), a);
}

TEST(BlockPool, DuplicateHashKeepsFirstCachedCopy) {
  BlockPool pool(2, 2);
  std::vector<int32_t> t{9, 9};
  BlockId a = *pool.allocate(), b = *pool.allocate();
  pool.set_cached(a, 1, 0, t);
  pool.set_cached(b, 1, 0, t);
  EXPECT_EQ(*pool.find_cached(1, 0, t), a);
  EXPECT_FALSE(pool.is_cached(b));
  EXPECT_EQ(pool.num_cached(), 1);
}

}  // namespace
}  // namespace cutline::kv
