#include "cutline/gateway/request_id.h"

#include <sys/random.h>

#include <cstdint>
#include <random>

namespace cutline::gateway {
namespace {

// splitmix64-seeded xoshiro256** per thread: 128 bits per id without a system call per request.
struct IdGenerator {
  uint64_t s[4];
  IdGenerator() {
    uint64_t seed[4] = {};
    if (getrandom(seed, sizeof seed, 0) != static_cast<ssize_t>(sizeof seed)) {
      std::random_device rd;  // getrandom is missing or interrupted: the same OS source
      for (auto& x : seed) x = (uint64_t{rd()} << 32) ^ rd();
    }
    for (int i = 0; i < 4; ++i) s[i] = seed[i] | (i == 0 ? 1 : 0);
  }
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t next() {
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }
};

}  // namespace

std::string new_request_id() {
  thread_local IdGenerator gen;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "cl-";
  id.resize(3 + 32);
  for (int half = 0; half < 2; ++half) {
    uint64_t v = gen.next();
    for (int i = 0; i < 16; ++i) {
      id[3 + half * 16 + i] = kHex[v & 0xf];
      v >>= 4;
    }
  }
  return id;
}

bool valid_request_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxRequestIdBytes) return false;
  for (char c : id) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x21 || u > 0x7e || c == '"' || c == '\\' || c == ',' || c == ';') return false;
  }
  return true;
}

std::string request_id_for(const proto::HttpHeaders& headers) {
  if (auto h = headers.get("X-Request-Id"); h && valid_request_id(*h)) return std::string(*h);
  return new_request_id();
}

}  // namespace cutline::gateway
