#pragma once
// BackendOptions: the cutline-backend command line, parsed and validated into one struct before
// anything starts. backend/main.cc calls parse_backend_options(); a parse error is printed with
// the usage text and the process exits 2.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/proto/result.h"

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
  bool help = false;
  // --no-parse-special: special-token text in a completions or /tokenize prompt stays text.
  bool parse_special = true;
};

// Parses sizes like "256MiB", "2GiB", "1.5G", "4096" (bytes). Binary units K/M/G/T with or
// without "iB"/"B" all mean powers of 1024. kBadRequest names the text on error.
Result<int64_t> parse_size(std::string_view text);
// Parses durations like "10s", "500ms", "2m" into ms.
Result<int64_t> parse_duration_ms(std::string_view text);

// argv[0] is skipped. Both "--opt value" and "--opt=value" are accepted. Without --model the
// default is tiny=builtin. `env_cache_dir` and `home` stand in for $CUTLINE_CACHE_DIR and $HOME.
Result<BackendOptions> parse_backend_options(int argc, const char* const* argv,
                                             std::string_view env_cache_dir, std::string_view home);

std::string backend_usage();

}  // namespace cutline::server
