#pragma once
// API keys. The policy never holds a plain key: `sha256:<hex>` entries are stored as the digest,
// `env:VARNAME` entries are read at load, hashed at once, and the plain text is dropped. The
// gateway authenticates a bearer token by hashing it and comparing the digest against every
// configured digest in constant time (OpenSSL CRYPTO_memcmp, and no early exit across keys), so
// that neither the key nor which tenant matched leaks through timing.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace cutline::policy {

struct Policy;
struct Tenant;

using KeyDigest = std::array<uint8_t, 32>;  // SHA-256

KeyDigest sha256_digest(std::string_view key);

// Constant-time equality (CRYPTO_memcmp).
bool digest_equal(const KeyDigest& a, const KeyDigest& b);

// Lower-case hex of a digest (64 characters).
std::string digest_hex(const KeyDigest& digest);

// The tenant owning `bearer_token` (the text after "Bearer "), or nullptr. Hashes the token once
// and compares it with every key of every tenant without stopping at a match.
// Thread-safe (reads the immutable Policy only).
const Tenant* authenticate(const Policy& policy, std::string_view bearer_token);

}  // namespace cutline::policy
