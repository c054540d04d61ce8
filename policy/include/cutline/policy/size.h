#pragma once
// Sizes in bytes, written the way the policy and every command line writes them: a number and an
// optional binary unit ("256MiB", "2GiB", "1.5G", "64KiB", "4096"). K, M, G and T, with or without
// "iB" or "B", all mean powers of 1024; a bare number is bytes. Public beside duration.h so that
// the policy loader and the CLI flags (--kv-memory, --weights-memory) read sizes the same way.

#include <cstdint>
#include <optional>
#include <string_view>

namespace cutline::policy {

// Bytes, or nullopt when `text` is not a size. Negative values, an unknown unit and values that
// do not fit in int64 are refused; a fraction is rounded down to whole bytes.
std::optional<int64_t> parse_size_bytes(std::string_view text);

}  // namespace cutline::policy
