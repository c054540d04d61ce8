#pragma once
// BlockPool: the fixed set of physical KV blocks (block_size tokens each) that a ModelRunner has
// allocated storage for. Owns reference counts, the free list and the prefix-cache index.
//
// A block is either in use (ref_count > 0) or free. Free blocks sit in one queue in LRU order;
// a free block may still hold a cached full block of some sequence's tokens (it carries a content
// hash, see block_hash.h), and then it can be revived by a prefix-cache hit. Allocation takes the
// least recently freed block, which evicts its cached contents (LRU eviction of the prefix cache
// "when free blocks run out"). Nothing here throws; running out is std::nullopt.
//
// Not thread-safe: owned by the engine thread (through KVCacheManager).

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "cutline/kv/block_hash.h"

namespace cutline::kv {

using BlockId = int32_t;

// How many blocks a memory budget buys: floor(kv_bytes / (kv_bytes_per_token * block_size)).
int32_t blocks_for_budget(int64_t kv_bytes, int64_t kv_bytes_per_token, int32_t block_size);

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  // Blocks that can be allocated now (free, cached or not).
  int32_t num_free() const { return num_free_; }
  int32_t num_used() const { return num_blocks() - num_free_; }
  // Free blocks that still hold a cached full block (evictable).
  int32_t num_cached_free() const;
  // Blocks with a content hash, free or in use.
  int32_t num_cached() const { return static_cast<int32_t>(index_.size()); }
  int64_t evictions() const { return evictions_; }

  // Takes a free block with ref_count 1; evicts its cached contents if it had any.
  std::optional<BlockId> allocate();
  // Takes `n` blocks, all or none.
  std::optional<std::vector<BlockId>> allocate(int32_t n);
  // Adds a reference to a block in use or revives a free cached block.
  void ref(BlockId id);
  // Drops a reference; at zero the block joins the tail of the free queue (most recently freed)
  // keeping its cached contents.
  void unref(BlockId id);
  int32_t ref_count(BlockId id) const { return blocks_[id].ref_count; }

  // Prefix cache: finds the block holding `tokens` after the block whose hash is `parent`.
  // The tokens are compared, not only the hash. Does not change reference counts.
  std::optional<BlockId> find_cached(BlockHash hash, BlockHash parent,
                                     std::span<const int32_t> tokens) const;
  // Records that block `id` (in use, full) holds `tokens` with chain hash `hash`. When another
  // block already holds the same hash, nothing changes (the first one stays the cached copy).
  void set_cached(BlockId id, BlockHash hash, BlockHash parent, std::span<const int32_t> tokens);
  bool is_cached(BlockId id) const { return blocks_[id].cached; }

 private:
  struct Block {
    int32_t ref_count = 0;
    // Free-queue links (-1 = none); meaningful only while ref_count == 0.
    BlockId prev = -1;
    BlockId next = -1;
    bool cached = false;
    BlockHash hash = 0;
    BlockHash parent = 0;
    std::vector<int32_t> tokens;  // the cached tokens (block_size of them) when cached
  };

  void push_free_tail(BlockId id);
  void remove_free(BlockId id);
  void evict(BlockId id);

  int32_t block_size_;
  std::vector<Block> blocks_;
  BlockId free_head_ = -1;  // least recently freed
  BlockId free_tail_ = -1;  // most recently freed
  int32_t num_free_ = 0;
  int64_t evictions_ = 0;
  std::unordered_map<BlockHash, BlockId> index_;
};

}  // namespace cutline::kv
