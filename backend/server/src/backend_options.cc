#include "cutline/server/backend_options.h"

#include <string>
#include <vector>

#include "cutline/cli/cli.h"

namespace cutline::server {

std::string_view to_string(DeviceChoice device) {
  switch (device) {
    case DeviceChoice::kAuto:
      return "auto";
    case DeviceChoice::kCpu:
      return "cpu";
    case DeviceChoice::kCuda:
      return "cuda";
  }
  return "auto";
}

namespace {

Error bad(std::string message) { return make_error(ErrorKind::kBadRequest, std::move(message)); }

// The command line as CLI11 declarations bound to `o`; --model values are collected raw and
// checked by parse_backend_options() (NAME=PATH, names unique).
std::unique_ptr<CLI::App> make_backend_app(BackendOptions& o, std::vector<std::string>& models) {
  auto app = cli::make_app(
      "cutline-backend",
      "The co-located inference backend: an OpenAI API with stop causes and TTFT phases, serving "
      "Llama-family GGUF models with memory-aware residency.");
  app->add_option("--host", o.host, "Listen address (default 127.0.0.1)")
      ->check([](const std::string& h) { return h.empty() ? std::string("empty address") : ""; });
  app->add_option("--port", o.port, "Listen port (default 8000; 0 = any free port)")
      ->check(CLI::Range(0, 65535));
  app->add_option("--model", models,
                  "Serve the GGUF at PATH as NAME (repeatable; the first is the default). PATH "
                  "\"builtin\" synthesizes the tiny model into the cache directory. Without "
                  "--model: tiny=builtin.")
      ->type_name("NAME=PATH")
      ->allow_extra_args(false);
  app->add_option_function<std::string>(
         "--device",
         [&o](const std::string& v) {
           if (v == "cpu") {
             o.device = DeviceChoice::kCpu;
           } else if (v == "cuda") {
             o.device = DeviceChoice::kCuda;
           } else if (v == "auto") {
             o.device = DeviceChoice::kAuto;
           } else {
             throw CLI::ValidationError("--device", "expects cpu, cuda or auto, got '" + v + "'");
           }
         },
         "Compute device: cpu, cuda or auto (default: CUDA when a GPU is usable)")
      ->type_name("cpu|cuda|auto");
  cli::add_size(*app, "--kv-memory", o.kv_memory_bytes,
                "KV cache pool per resident model (default 256MiB), e.g. 64MiB, 2GiB", 1);
  cli::add_size(*app, "--weights-memory", o.weights_memory_bytes,
                "Weights budget shared by resident models (default: device memory minus the KV "
                "pools); least-recently-used idle models are evicted",
                1);
  app->add_option("--keep-resident", o.keep_resident,
                  "Pin a model: loaded at start-up and never evicted (repeatable)")
      ->type_name("NAME")
      ->allow_extra_args(false);
  app->add_option("--max-step-tokens", o.max_step_tokens,
                  "Tokens per engine step (prefill chunk budget, default 512)")
      ->check(CLI::Range(1, 1 << 20));
  app->add_option("--prefill-attention", o.attention_positions_per_token,
                  "Charge a prefill token at position p 1 + p/N budget tokens, so late chunks of a "
                  "long prompt are smaller (default 0: off)")
      ->check(CLI::Range(0, 1 << 24));
  app->add_option("--block-size", o.block_size, "Tokens per KV block (default 16)")
      ->check(CLI::Range(1, 4096));
  app->add_option("--chat-template", o.chat_template,
                  "Override the chat template (llama3, chatml, mistral, gemma, phi3, phi4, "
                  "phi4-mini, qwen3, qwen3-no-think, qwen2.5, hermes)");
  app->add_flag_function(
      "--no-parse-special", [&o](int64_t) { o.parse_special = false; },
      "Keep special-token text (\"<|im_start|>\", \"<s>\") in a completions or /tokenize prompt "
      "as plain text (default: parsed as the token; a request may say \"parse_special\")");
  app->add_option("--cache-dir", o.cache_dir,
                  "Where builtin models are synthesized (default $CUTLINE_CACHE_DIR or "
                  "~/.cache/cutline)");
  app->add_option("--threads", o.threads, "HTTP worker threads (default 2)")
      ->check(CLI::Range(1, 256));
  cli::add_duration(*app, "--drain-timeout", o.drain_timeout_ms,
                    "On SIGTERM/SIGINT, let streams finish this long (default 10s)", 1000);
  return app;
}

}  // namespace

std::string backend_usage() {
  BackendOptions o;
  std::vector<std::string> models;
  return make_backend_app(o, models)->help();
}

Result<BackendOptions> parse_backend_options(int argc, const char* const* argv,
                                             std::string_view env_cache_dir,
                                             std::string_view home) {
  BackendOptions o;
  std::vector<std::string> models;
  auto app = make_backend_app(o, models);
  const cli::Parsed parsed = cli::try_parse(*app, argc, argv);
  switch (parsed.kind) {
    case cli::Parsed::Kind::kRun:
      break;
    case cli::Parsed::Kind::kHelp:
      o.help = true;
      return o;
    case cli::Parsed::Kind::kVersion:
      o.version = true;
      return o;
    case cli::Parsed::Kind::kError:
      return bad(parsed.text);
  }
  for (std::string_view val : models) {
    const auto eq = val.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == val.size())
      return bad("--model expects NAME=PATH (e.g. tiny=builtin), got '" + std::string(val) + "'");
    ModelArg m{std::string(val.substr(0, eq)), std::string(val.substr(eq + 1))};
    for (const auto& prev : o.models)
      if (prev.name == m.name) return bad("--model name '" + m.name + "' is given twice");
    o.models.push_back(std::move(m));
  }
  if (o.models.empty()) o.models.push_back(ModelArg{"tiny", "builtin"});
  for (const auto& name : o.keep_resident) {
    bool known = false;
    for (const auto& m : o.models) known = known || m.name == name;
    if (!known) return bad("--keep-resident names unknown model '" + name + "'");
  }
  if (o.cache_dir.empty()) {
    if (!env_cache_dir.empty())
      o.cache_dir = std::string(env_cache_dir);
    else if (!home.empty())
      o.cache_dir = std::string(home) + "/.cache/cutline";
    else
      o.cache_dir = ".cache/cutline";
  }
  if (o.threads == 0) o.threads = 2;
  return o;
}

}  // namespace cutline::server
