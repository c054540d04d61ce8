#pragma once
// What a command line parsed into, without CLI11: the exit codes every binary shares, the version
// line and Parsed. Headers that only carry a parse result include this one; cli.h (which pulls in
// the whole of CLI11, ~8 s of compile time per file) is for the files that declare options.

#include <string>
#include <string_view>

namespace cutline::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitDefect = 3;

// "cutline-gateway 0.1.0 (git 321c07f0a1b2)".
std::string version_line(std::string_view program);

// The result of parsing without printing: what a caller (or a test) does next.
struct Parsed {
  enum class Kind { kRun, kHelp, kVersion, kError };
  Kind kind = Kind::kRun;
  std::string text;  // kHelp: the help text; kVersion: the version line; kError: the message
};

}  // namespace cutline::cli
