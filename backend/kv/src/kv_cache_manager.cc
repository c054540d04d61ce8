#include "cutline/kv/kv_cache_manager.h"

#include <algorithm>
#include <cassert>

namespace cutline::kv {

KVCacheManager::KVCacheManager(int32_t num_blocks, int32_t block_size, BlockHash salt,
                               bool prefix_caching)
    : pool_(num_blocks, block_size), salt_(salt), prefix_caching_(prefix_caching) {}

int32_t KVCacheManager::blocks_for_tokens(int64_t n_tokens) const {
  const int64_t bs = pool_.block_size();
  return static_cast<int32_t>((std::max<int64_t>(n_tokens, 0) + bs - 1) / bs);
}

int32_t KVCacheManager::match_prefix(SeqId seq, std::span<const int32_t> tokens) {
  Table& table = tables_[seq];
  assert(table.blocks.empty());
  table.last_hash = salt_;
  if (!prefix_caching_) return 0;
  ++prefix_queries_;
  const int32_t bs = pool_.block_size();
  // Leave at least the last token to compute: its logits are needed.
  const int64_t max_blocks = tokens.empty() ? 0 : (static_cast<int64_t>(tokens.size()) - 1) / bs;
  BlockHash parent = salt_;
  for (int64_t i = 0; i < max_blocks; ++i) {
    auto block_tokens = tokens.subspan(i * bs, bs);
    BlockHash h = chain_block_hash(parent, block_tokens);
    auto hit = pool_.find_cached(h, parent, block_tokens);
    if (!hit) break;
    pool_.ref(*hit);
    table.blocks.push_back(*hit);
    parent = h;
  }
  table.n_committed = static_cast<int32_t>(table.blocks.size());
  table.last_hash = parent;
  const int32_t hit_tokens = table.n_committed * bs;
  last_match_tokens_ = hit_tokens;
  if (hit_tokens > 0) {
    ++prefix_hits_;
    prefix_hit_tokens_ += hit_tokens;
  }
  return hit_tokens;
}

void KVCacheManager::cancel_match(SeqId seq) {
  if (prefix_caching_ && tables_.count(seq) != 0) {
    --prefix_queries_;
    if (last_match_tokens_ > 0) {
      --prefix_hits_;
      prefix_hit_tokens_ -= last_match_tokens_;
    }
  }
  last_match_tokens_ = 0;
  free(seq);
}

std::optional<std::span<const BlockId>> KVCacheManager::allocate(SeqId seq, int64_t n_tokens) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) {
    it = tables_.emplace(seq, Table{}).first;
    it->second.last_hash = salt_;
  }
  Table& table = it->second;
  const int32_t need = blocks_for_tokens(n_tokens) - static_cast<int32_t>(table.blocks.size());
  if (need > 0) {
    auto fresh = pool_.allocate(need);
    if (!fresh) return std::nullopt;
    table.blocks.insert(table.blocks.end(), fresh->begin(), fresh->end());
  }
  return std::span<const BlockId>(table.blocks);
}

void KVCacheManager::commit(SeqId seq, std::span<const int32_t> tokens, int64_t n_computed) {
  if (!prefix_caching_) return;
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  Table& table = it->second;
  const int32_t bs = pool_.block_size();
  const int64_t full = std::min<int64_t>(n_computed, static_cast<int64_t>(tokens.size())) / bs;
  const int64_t limit = std::min<int64_t>(full, static_cast<int64_t>(table.blocks.size()));
  for (int64_t i = table.n_committed; i < limit; ++i) {
    auto block_tokens = tokens.subspan(i * bs, bs);
    BlockHash h = chain_block_hash(table.last_hash, block_tokens);
    pool_.set_cached(table.blocks[i], h, table.last_hash, block_tokens);
    table.last_hash = h;
    table.n_committed = static_cast<int32_t>(i + 1);
  }
}

void KVCacheManager::free(SeqId seq) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  // Release tail blocks first so that, among this sequence's blocks, the ones deepest in the
  // prefix chain are evicted first and the shared heads survive longest.
  auto& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) pool_.unref(*b);
  tables_.erase(it);
}

std::span<const BlockId> KVCacheManager::block_table(SeqId seq) const {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return {};
  return it->second.blocks;
}

int32_t KVCacheManager::num_blocks_of(SeqId seq) const {
  auto it = tables_.find(seq);
  return it == tables_.end() ? 0 : static_cast<int32_t>(it->second.blocks.size());
}

KVStats KVCacheManager::stats() const {
  KVStats s;
  s.blocks_total = pool_.num_blocks();
  s.blocks_free = pool_.num_free();
  s.blocks_used = pool_.num_used();
  s.blocks_cached = pool_.num_cached();
  s.prefix_queries = prefix_queries_;
  s.prefix_hits = prefix_hits_;
  s.prefix_hit_tokens = prefix_hit_tokens_;
  s.evictions = pool_.evictions();
  s.sequences = static_cast<int32_t>(tables_.size());
  return s;
}

}  // namespace cutline::kv
