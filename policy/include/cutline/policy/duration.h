#pragma once
// Durations in the policy file: a number followed by a unit, "ms", "s" or "m" ("250ms", "10s",
// "1.5s", "2m"). A bare number is refused (the unit must be explicit). Used by the loader; public
// so that other front ends (CLI flags) read durations the same way.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cutline::policy {

// Milliseconds, or nullopt when `text` is not a duration. Fractions below 1 ms are rounded up
// ("0.1ms" -> 1). Negative values and values over ~24 days (INT32_MAX ms) are refused.
std::optional<int64_t> parse_duration_ms(std::string_view text);

// The positive durations parse_duration_ms accepts, as an ECMA-262 pattern (the policy's JSON
// Schema, json_schema.h). It does not bound the magnitude: past INT32_MAX ms the loader refuses
// what the pattern lets through.
inline constexpr std::string_view kDurationPattern = "^(?=[0-9.]*[1-9])[0-9]+(\\.[0-9]+)?(ms|s|m)$";

// The shortest exact spelling: 60000 -> "1m", 1500 -> "1500ms", 10000 -> "10s".
std::string format_duration_ms(int64_t ms);

}  // namespace cutline::policy
