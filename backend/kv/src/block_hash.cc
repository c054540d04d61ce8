#include "cutline/kv/block_hash.h"

namespace cutline::kv {
namespace {

constexpr uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

BlockHash model_salt(std::string_view model_identity) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a, then mixed
  for (unsigned char c : model_identity) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return mix(h);
}

BlockHash chain_block_hash(BlockHash parent, std::span<const int32_t> block_tokens) {
  uint64_t h = mix(parent ^ 0x5851F42D4C957F2Dull);
  for (int32_t t : block_tokens) h = mix(h ^ static_cast<uint32_t>(t));
  return mix(h ^ block_tokens.size());
}

}  // namespace cutline::kv
