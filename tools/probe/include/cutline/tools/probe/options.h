#pragma once
// ProbeOptions: the command line of `cutline probe load` and `cutline probe switch` (CLI11,
// through cutline/cli), parsed into one value.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/cli/parsed.h"

namespace cutline::tools::probe {

enum class ProbeMode { kLoad, kSwitch };

struct ProbeOptions {
  ProbeMode mode = ProbeMode::kLoad;
  std::string url;  // base URL, e.g. http://127.0.0.1:8080 (the route is appended)
  std::string route = "/v1/chat/completions";
  std::string api_key;
  std::string model = "tiny";
  std::vector<std::string> models;  // switch: A,B
  std::string prompts_file;         // empty = the built-in short/medium/long set
  std::vector<int> concurrency = {1, 2, 4, 8};
  int repeat = 0;  // 0 = enough repetitions that the top level is really reached
  int64_t max_tokens = 64;
  double temperature = 0.0;
  int64_t seed = 1234;
  std::optional<double> top_p;
  std::vector<std::pair<std::string, std::string>> headers;  // --header NAME:VALUE
  int64_t timeout_ms = 60000;                                // per request, then disconnect
  std::string label;
  std::string admin_url;
  std::string out_dir;                  // empty = no files
  std::optional<bool> batch_invariant;  // --batch-invariant yes|no; unset = from the endpoint
  bool progress = true;                 // only shown on a TTY anyway
};

// The command line of `cutline probe`: the options when `parsed.kind` is kRun; otherwise what
// to print (help, version or the error, whose "see --help" names `help_command`).
struct ProbeCommandLine {
  cli::Parsed parsed;
  ProbeOptions options;
  std::string help_command = "cutline probe";
};

// Parses argv starting at `probe` (argv[0] = "probe", argv[1] = "load" | "switch"). --url and
// --api-key default to $OPENAI_BASE_URL and $OPENAI_API_KEY.
ProbeCommandLine parse_probe_command_line(int argc, const char* const* argv);

// The exit codes `cutline probe --help` documents.
extern const char* const kProbeExitCodes;

}  // namespace cutline::tools::probe
