#pragma once
// Loading a policy file: YAML text -> validated, immutable Policy, or the list of every error
// found. Nothing throws out of here (yaml-cpp's exceptions are caught at this boundary and turned
// into Diagnostics). The only I/O is reading the file (and, through LoadOptions::env, the
// environment variables named by `env:` API keys).
//
// Each error reads `FILE:LINE:COLUMN: KEY.PATH: message`, e.g.
//   cutline.yaml:14:9: policies[2].budget.adaptive[0].when: unknown key "queue_deph_gt"
// with 1-based positions from yaml-cpp's Node::Mark().

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/policy/policy.h"

namespace cutline::policy {

struct Diagnostic {
  std::string file;
  int line = 0;      // 1-based; 0 when the error has no position (unreadable file)
  int column = 0;    // 1-based
  std::string path;  // key path, "" for syntax errors
  std::string message;
  // A warning: the file loads and the gateway uses it, but part of it can never apply (a route
  // no request path can equal, a rule earlier rules shadow) or is open to others (an admin
  // listener off loopback without a token). See LoadResult::warnings.
  bool warning = false;

  // "FILE:LINE:COLUMN: PATH: message", or "FILE:LINE:COLUMN: warning: PATH: message" (parts
  // without a value are left out).
  std::string to_string() const;
};

struct LoadOptions {
  // Reads an environment variable for `env:VARNAME` keys; nullopt = not set. Empty function =
  // ::getenv. Tests inject a map.
  std::function<std::optional<std::string>(const std::string& name)> env;
};

struct LoadResult {
  std::shared_ptr<const Policy> policy;  // set iff errors is empty
  std::vector<Diagnostic> errors;        // every error, in file order
  // Every warning, in file order; only when the file loaded (errors is empty), since a broken
  // match reads as "*" and would make the checks behind them report noise.
  std::vector<Diagnostic> warnings;

  bool ok() const { return policy != nullptr; }
  // All errors, one per line.
  std::string error_text() const;
  // All warnings, one per line ("FILE:LINE:COLUMN: warning: PATH: message").
  std::string warning_text() const;
};

// Reads and validates `path`. The file name in diagnostics is `path` as given.
LoadResult load_policy_file(const std::string& path, const LoadOptions& options = {});

// Validates YAML text; `file_name` is used in diagnostics and Policy::source_file.
LoadResult load_policy_text(std::string_view yaml, const std::string& file_name,
                            const LoadOptions& options = {});

}  // namespace cutline::policy
