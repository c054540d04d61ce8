#pragma once
// BackendOptions: the cutline-backend command line (CLI11, through cutline/cli), parsed and
// validated into one struct before anything starts. backend/main.cc calls
// parse_backend_options(); a parse error is printed as one line and the process exits 2.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/base/result.h"

namespace cutline::server {

enum class DeviceChoice { kAuto, kCpu, kCuda };
std::string_view to_string(DeviceChoice device);

// One --model NAME=PATH. PATH "builtin" means the synthesized tiny model.
struct ModelArg {
  std::string name;
  std::string path;
  bool builtin() const { return path == "builtin"; }
};

struct BackendOptions {
  std::string host = "127.0.0.1";
  int port = 8000;               // 0 = any free port (printed on start-up)
  std::vector<ModelArg> models;  // in command-line order; the first is the default model
  DeviceChoice device = DeviceChoice::kAuto;
  int64_t kv_memory_bytes = 256ll << 20;        // --kv-memory, per resident model
  std::optional<int64_t> weights_memory_bytes;  // --weights-memory; default: device - KV
  std::vector<std::string> keep_resident;       // --keep-resident NAME (repeatable)
  int32_t max_step_tokens = 512;                // --max-step-tokens
  int32_t attention_positions_per_token = 0;    // --prefill-attention (0: off)
  int32_t block_size = 16;                      // --block-size (tokens per KV block)
  std::string chat_template;                    // --chat-template NAME (empty = detect)
  std::string cache_dir;                        // --cache-dir; default $CUTLINE_CACHE_DIR
                                                // or ~/.cache/cutline
  int threads = 0;                              // --threads: HTTP worker loops (0 = auto)
  int64_t drain_timeout_ms = 10000;             // --drain-timeout on SIGTERM/SIGINT
  bool help = false;                            // --help: print backend_usage() and exit 0
  bool version = false;                         // --version: print cli::version_line() and exit 0
  // --no-parse-special: special-token text in a completions or /tokenize prompt stays text.
  bool parse_special = true;
};

// argv[0] is skipped. Both "--opt value" and "--opt=value" are accepted; sizes and durations use
// the policy's grammar (cutline/policy/size.h, duration.h; --drain-timeout also takes bare
// seconds). --help / --version set `help` / `version` and nothing else is checked. Without
// --model the default is tiny=builtin. `env_cache_dir` and `home` stand in for $CUTLINE_CACHE_DIR
// and $HOME.
Result<BackendOptions> parse_backend_options(int argc, const char* const* argv,
                                             std::string_view env_cache_dir, std::string_view home);

std::string backend_usage();

}  // namespace cutline::server
