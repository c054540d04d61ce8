#pragma once
// ProbeOptions: the command line of `cutline probe load` and `cutline probe switch`, parsed into
// one value (errors are values naming the option).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cutline/proto/result.h"

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

// Parses argv after `probe` (argv[0] = "load" | "switch").
Result<ProbeOptions> parse_probe_options(int argc, char** argv);

extern const char* const kProbeUsage;

}  // namespace cutline::tools::probe
