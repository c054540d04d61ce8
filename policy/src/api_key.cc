// SHA-256 digests of API keys and constant-time authentication (api_key.h).
#include "cutline/policy/api_key.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "cutline/policy/policy.h"

namespace cutline::policy {

KeyDigest sha256_digest(std::string_view key) {
  KeyDigest out{};
  unsigned int len = 0;
  // EVP_Digest with SHA-256 cannot fail for in-memory input short of allocation failure.
  EVP_Digest(key.data(), key.size(), out.data(), &len, EVP_sha256(), nullptr);
  return out;
}

bool digest_equal(const KeyDigest& a, const KeyDigest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string digest_hex(const KeyDigest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(digest.size() * 2);
  for (uint8_t b : digest) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

const Tenant* authenticate(const Policy& policy, std::string_view bearer_token) {
  const KeyDigest presented = sha256_digest(bearer_token);
  const Tenant* found = nullptr;
  // No early exit: the time taken does not depend on which key (if any) matched.
  for (const auto& tenant : policy.tenants) {
    for (const auto& key : tenant.api_keys) {
      const bool eq = digest_equal(presented, key.digest);
      if (eq && found == nullptr) found = &tenant;
    }
  }
  return found;
}

}  // namespace cutline::policy
