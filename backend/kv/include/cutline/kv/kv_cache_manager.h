#pragma once
// KVCacheManager: per-sequence block tables over a BlockPool. The scheduler asks it for room
// for a sequence's next tokens; it answers with the sequence's block table or std::nullopt
// (never throws, never allocates half). Waste is at most the last partial block per sequence.
//
// Prefix sharing: full blocks of computed tokens are registered in the pool's hash index
// (commit()); a new sequence whose token prefix matches a chain of cached full blocks reuses them
// (match_prefix()), with reference counts, instead of recomputing them. Hits are counted.
//
// Not thread-safe: owned by the engine thread.

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "cutline/kv/block_hash.h"
#include "cutline/kv/block_pool.h"

namespace cutline::kv {

using SeqId = int64_t;

struct KVStats {
  int32_t blocks_total = 0;
  int32_t blocks_used = 0;        // referenced by at least one sequence
  int32_t blocks_free = 0;        // allocatable (includes cached_free)
  int32_t blocks_cached = 0;      // holding a registered full block (used or free)
  int64_t prefix_queries = 0;     // match_prefix calls
  int64_t prefix_hits = 0;        // match_prefix calls that reused at least one block
  int64_t prefix_hit_tokens = 0;  // tokens not recomputed thanks to the cache
  int64_t evictions = 0;          // cached blocks overwritten by allocation
  int32_t sequences = 0;          // sequences with a block table
};

class KVCacheManager {
 public:
  // `salt` separates models (block_hash.h model_salt). `prefix_caching` off: no sharing at all.
  KVCacheManager(int32_t num_blocks, int32_t block_size, BlockHash salt,
                 bool prefix_caching = true);

  int32_t block_size() const { return pool_.block_size(); }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  int32_t num_free_blocks() const { return pool_.num_free(); }
  // Blocks needed to hold `n_tokens` tokens.
  int32_t blocks_for_tokens(int64_t n_tokens) const;

  // For a sequence without blocks: reuses cached full blocks for the longest prefix of `tokens`
  // and returns how many tokens they cover (a multiple of block_size, at most
  // tokens.size() - 1 so that the last token is always computed and yields logits).
  int32_t match_prefix(SeqId seq, std::span<const int32_t> tokens);

  // Undoes a match_prefix whose admission did not happen (frees the blocks, uncounts the hit).
  void cancel_match(SeqId seq);

  // Makes the sequence's table cover `n_tokens` tokens in total (positions [0, n_tokens)).
  // Returns the whole table, or std::nullopt with nothing changed when the pool cannot.
  std::optional<std::span<const BlockId>> allocate(SeqId seq, int64_t n_tokens);

  // Registers the sequence's full blocks among its first `n_computed` tokens (whose K/V are now
  // written) in the prefix cache. `tokens` is the sequence's whole token list.
  void commit(SeqId seq, std::span<const int32_t> tokens, int64_t n_computed);

  // Releases every block of the sequence (finish, abort, preemption). Cached blocks stay
  // revivable until evicted. Unknown sequences are ignored.
  void free(SeqId seq);

  std::span<const BlockId> block_table(SeqId seq) const;
  int32_t num_blocks_of(SeqId seq) const;
  bool has(SeqId seq) const { return tables_.count(seq) != 0; }

  KVStats stats() const;
  const BlockPool& pool() const { return pool_; }

 private:
  struct Table {
    std::vector<BlockId> blocks;
    int32_t n_committed = 0;  // leading blocks already registered in the cache
    BlockHash last_hash = 0;  // chain hash of the last committed block (salt when none)
  };

  BlockPool pool_;
  BlockHash salt_;
  bool prefix_caching_;
  std::unordered_map<SeqId, Table> tables_;
  int64_t prefix_queries_ = 0;
  int64_t prefix_hits_ = 0;
  int64_t prefix_hit_tokens_ = 0;
  int32_t last_match_tokens_ = 0;
};

}  // namespace cutline::kv
