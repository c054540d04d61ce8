// Consistent-hash ring for prefix affinity (prefix_ring.h).
#include "cutline/gateway/prefix_ring.h"

#include <algorithm>
#include <string>

namespace cutline::gateway {

namespace {

bool word_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}
bool space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

std::string_view affinity_prefix(std::string_view prompt, policy::AffinityUnit unit,
                                 int64_t length) {
  if (length <= 0) return {};
  if (unit == policy::AffinityUnit::kBytes) {
    return prompt.substr(0, static_cast<size_t>(std::min<int64_t>(length, prompt.size())));
  }
  size_t i = 0;
  int64_t words = 0;
  while (i < prompt.size() && words < length) {
    while (i < prompt.size() && space(static_cast<unsigned char>(prompt[i]))) ++i;
    if (i == prompt.size()) break;
    if (word_char(static_cast<unsigned char>(prompt[i]))) {
      while (i < prompt.size() && word_char(static_cast<unsigned char>(prompt[i]))) ++i;
    } else {
      ++i;
    }
    ++words;
  }
  return prompt.substr(0, i);
}

uint64_t affinity_hash(std::string_view key) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : key) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return mix(h);
}

PrefixRing::PrefixRing(const std::vector<std::string_view>& endpoint_names)
    : endpoint_count_(endpoint_names.size()) {
  points_.reserve(endpoint_names.size() * kPointsPerEndpoint);
  std::string key;
  for (size_t e = 0; e < endpoint_names.size(); ++e) {
    for (int v = 0; v < kPointsPerEndpoint; ++v) {
      key.assign(endpoint_names[e]);
      key += '#';
      key += std::to_string(v);
      points_.push_back({affinity_hash(key), static_cast<uint32_t>(e)});
    }
  }
  std::sort(points_.begin(), points_.end(),
            [](const Point& a, const Point& b) { return a.hash < b.hash; });
}

size_t PrefixRing::first_at_or_after(uint64_t hash) const {
  auto it = std::lower_bound(points_.begin(), points_.end(), hash,
                             [](const Point& p, uint64_t h) { return p.hash < h; });
  return it == points_.end() ? 0 : static_cast<size_t>(it - points_.begin());
}

}  // namespace cutline::gateway
