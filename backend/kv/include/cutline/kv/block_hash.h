#pragma once
// Content hashes of full KV blocks, chained so that a block's hash names the whole token prefix
// that ends with it: hash(block i) = H(hash(block i-1), tokens of block i). The chain is seeded
// with a per-model salt so that two models never share blocks. Used by the prefix cache
// (BlockPool's hash index) to find blocks whose K/V can be reused by a new sequence.

#include <cstdint>
#include <span>
#include <string_view>

namespace cutline::kv {

using BlockHash = uint64_t;

// The seed of a model's chain (e.g. from the model name and its file identity).
BlockHash model_salt(std::string_view model_identity);

// Hash of one full block given the hash of the block before it (or the salt for block 0).
BlockHash chain_block_hash(BlockHash parent, std::span<const int32_t> block_tokens);

}  // namespace cutline::kv
