#include "cutline/kv/block_pool.h"

#include <algorithm>
#include <cassert>

namespace cutline::kv {

int32_t blocks_for_budget(int64_t kv_bytes, int64_t kv_bytes_per_token, int32_t block_size) {
  if (kv_bytes <= 0 || kv_bytes_per_token <= 0 || block_size <= 0) return 0;
  int64_t n = kv_bytes / (kv_bytes_per_token * block_size);
  return static_cast<int32_t>(std::min<int64_t>(n, INT32_MAX));
}

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size), blocks_(std::max(num_blocks, 0)) {
  for (BlockId id = 0; id < this->num_blocks(); ++id) push_free_tail(id);
}

int32_t BlockPool::num_cached_free() const {
  int32_t n = 0;
  for (BlockId id = free_head_; id != -1; id = blocks_[id].next)
    if (blocks_[id].cached) ++n;
  return n;
}

void BlockPool::push_free_tail(BlockId id) {
  Block& b = blocks_[id];
  b.prev = free_tail_;
  b.next = -1;
  if (free_tail_ != -1)
    blocks_[free_tail_].next = id;
  else
    free_head_ = id;
  free_tail_ = id;
  ++num_free_;
}

void BlockPool::remove_free(BlockId id) {
  Block& b = blocks_[id];
  if (b.prev != -1)
    blocks_[b.prev].next = b.next;
  else
    free_head_ = b.next;
  if (b.next != -1)
    blocks_[b.next].prev = b.prev;
  else
    free_tail_ = b.prev;
  b.prev = b.next = -1;
  --num_free_;
}

void BlockPool::evict(BlockId id) {
  Block& b = blocks_[id];
  if (!b.cached) return;
  auto it = index_.find(b.hash);
  if (it != index_.end() && it->second == id) index_.erase(it);
  b.cached = false;
  b.tokens.clear();
  ++evictions_;
}

std::optional<BlockId> BlockPool::allocate() {
  if (free_head_ == -1) return std::nullopt;
  BlockId id = free_head_;
  remove_free(id);
  evict(id);
  blocks_[id].ref_count = 1;
  return id;
}

std::optional<std::vector<BlockId>> BlockPool::allocate(int32_t n) {
  if (n < 0 || n > num_free_) return std::nullopt;
  std::vector<BlockId> out;
  out.reserve(n);
  for (int32_t i = 0; i < n; ++i) out.push_back(*allocate());
  return out;
}

void BlockPool::ref(BlockId id) {
  Block& b = blocks_[id];
  if (b.ref_count == 0) remove_free(id);
  ++b.ref_count;
}

void BlockPool::unref(BlockId id) {
  Block& b = blocks_[id];
  assert(b.ref_count > 0);
  if (--b.ref_count == 0) push_free_tail(id);
}

std::optional<BlockId> BlockPool::find_cached(BlockHash hash, BlockHash parent,
                                              std::span<const int32_t> tokens) const {
  auto it = index_.find(hash);
  if (it == index_.end()) return std::nullopt;
  const Block& b = blocks_[it->second];
  if (!b.cached || b.parent != parent ||
      !std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end()))
    return std::nullopt;
  return it->second;
}

void BlockPool::set_cached(BlockId id, BlockHash hash, BlockHash parent,
                           std::span<const int32_t> tokens) {
  Block& b = blocks_[id];
  assert(b.ref_count > 0);
  if (b.cached || index_.count(hash) != 0) return;
  b.cached = true;
  b.hash = hash;
  b.parent = parent;
  b.tokens.assign(tokens.begin(), tokens.end());
  index_.emplace(hash, id);
}

}  // namespace cutline::kv
