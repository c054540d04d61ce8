#pragma once
// Glob matching for model names, tenant names, routes and header values in the policy file:
// '*' matches any run of characters (including none), '?' exactly one; everything else is
// literal and case-sensitive. No character classes. Linear in practice (iterative backtracking
// with a single star memory, O(n*m) worst case, no recursion).

#include <string_view>

namespace cutline::policy {

bool glob_match(std::string_view pattern, std::string_view text);

// True when the pattern contains '*' or '?'.
bool is_glob(std::string_view pattern);

}  // namespace cutline::policy
