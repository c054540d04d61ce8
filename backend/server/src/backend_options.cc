#include "cutline/server/backend_options.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

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

// Splits "123.5GiB" into the number and the unit suffix; false when no number leads.
bool split_number(std::string_view text, double& number, std::string& unit) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return false;
  const std::string num(text.substr(0, i));
  char* end = nullptr;
  number = std::strtod(num.c_str(), &end);
  if (end == nullptr || *end != '\0' || !std::isfinite(number)) return false;
  unit.clear();
  for (char c : text.substr(i)) unit.push_back(static_cast<char>(std::tolower(c)));
  return true;
}

Result<int> parse_int(std::string_view opt, std::string_view text, int min, int max) {
  int v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < min || v > max)
    return bad(std::string(opt) + " expects an integer in [" + std::to_string(min) + ", " +
               std::to_string(max) + "], got '" + std::string(text) + "'");
  return v;
}

}  // namespace

Result<int64_t> parse_size(std::string_view text) {
  double number = 0;
  std::string unit;
  if (!split_number(text, number, unit))
    return bad("invalid size '" + std::string(text) + "' (expected e.g. 256MiB, 2GiB, 4096)");
  double scale = 0;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib")
    scale = 1024.0;
  else if (unit == "m" || unit == "mb" || unit == "mib")
    scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gb" || unit == "gib")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tb" || unit == "tib")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    return bad("invalid size unit in '" + std::string(text) + "' (use B, KiB, MiB, GiB, TiB)");
  const double bytes = number * scale;
  if (bytes > 9.0e18) return bad("size '" + std::string(text) + "' is too large");
  return static_cast<int64_t>(bytes);
}

Result<int64_t> parse_duration_ms(std::string_view text) {
  double number = 0;
  std::string unit;
  if (!split_number(text, number, unit))
    return bad("invalid duration '" + std::string(text) + "' (expected e.g. 10s, 500ms)");
  double scale = 0;
  if (unit == "ms")
    scale = 1;
  else if (unit == "s" || unit.empty())
    scale = 1000;
  else if (unit == "m")
    scale = 60000;
  else
    return bad("invalid duration unit in '" + std::string(text) + "' (use ms, s, m)");
  return static_cast<int64_t>(number * scale);
}

std::string backend_usage() {
  return R"(usage: cutline-backend [options]
  --host H                 listen address (default 127.0.0.1)
  --port P                 listen port (default 8000; 0 = any free port)
  --model NAME=PATH        serve the GGUF at PATH as NAME (repeatable; the first is the default).
                           PATH "builtin" synthesizes the tiny model into the cache directory.
                           Without --model: tiny=builtin.
  --device cpu|cuda|auto   compute device (default auto: CUDA when a GPU is usable, else CPU)
  --kv-memory SIZE         KV cache pool per resident model (default 256MiB), e.g. 64MiB, 2GiB
  --weights-memory SIZE    weights budget shared by resident models (default: device memory
                           minus the KV pools); least-recently-used idle models are evicted
  --keep-resident NAME     pin a model: loaded at start-up and never evicted (repeatable)
  --max-step-tokens N      tokens per engine step (prefill chunk budget, default 512)
  --prefill-attention N    charge a prefill token at position p 1 + p/N budget tokens, so late
                           chunks of a long prompt are smaller (default 0: off)
  --block-size N           tokens per KV block (default 16)
  --chat-template NAME     override the chat template (llama3, chatml, mistral, gemma, phi3,
                           phi4, phi4-mini, qwen3, qwen3-no-think)
  --no-parse-special       keep special-token text ("<|im_start|>", "<s>") in a completions or
                           /tokenize prompt as plain text (default: parsed as the token; a
                           request may say "parse_special": true or false)
  --cache-dir DIR          where builtin models are synthesized
                           (default $CUTLINE_CACHE_DIR or ~/.cache/cutline)
  --threads N              HTTP worker threads (default 2)
  --drain-timeout DUR      on SIGTERM/SIGINT, let streams finish this long (default 10s)
  -h, --help               this text
)";
}

Result<BackendOptions> parse_backend_options(int argc, const char* const* argv,
                                             std::string_view env_cache_dir,
                                             std::string_view home) {
  BackendOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      continue;
    }
    if (arg == "--no-parse-special") {
      o.parse_special = false;
      continue;
    }
    if (arg.substr(0, 2) != "--") return bad("unexpected argument '" + std::string(arg) + "'");
    std::string_view opt = arg;
    std::string_view val;
    bool have_val = false;
    if (auto eq = arg.find('='); eq != std::string_view::npos) {
      opt = arg.substr(0, eq);
      val = arg.substr(eq + 1);
      have_val = true;
    }
    static constexpr std::string_view kKnown[] = {"--host",          "--port",
                                                  "--model",         "--device",
                                                  "--kv-memory",     "--weights-memory",
                                                  "--keep-resident", "--max-step-tokens",
                                                  "--block-size",    "--chat-template",
                                                  "--cache-dir",     "--threads",
                                                  "--drain-timeout", "--prefill-attention"};
    bool known = false;
    for (std::string_view k : kKnown) known = known || k == opt;
    if (!known) return bad("unknown option '" + std::string(opt) + "'");
    auto need_value = [&]() -> Status {
      if (have_val) return {};
      if (i + 1 >= argc) return bad(std::string(opt) + " needs a value");
      val = argv[++i];
      return {};
    };
    if (auto st = need_value(); !st.ok()) return std::move(st).error();

    if (opt == "--host") {
      if (val.empty()) return bad("--host needs a value");
      o.host = std::string(val);
    } else if (opt == "--port") {
      auto v = parse_int(opt, val, 0, 65535);
      if (!v.ok()) return std::move(v).error();
      o.port = *v;
    } else if (opt == "--model") {
      const auto eq = val.find('=');
      if (eq == std::string_view::npos || eq == 0 || eq + 1 == val.size())
        return bad("--model expects NAME=PATH (e.g. tiny=builtin), got '" + std::string(val) + "'");
      ModelArg m{std::string(val.substr(0, eq)), std::string(val.substr(eq + 1))};
      for (const auto& prev : o.models)
        if (prev.name == m.name) return bad("--model name '" + m.name + "' is given twice");
      o.models.push_back(std::move(m));
    } else if (opt == "--device") {
      if (val == "cpu")
        o.device = DeviceChoice::kCpu;
      else if (val == "cuda")
        o.device = DeviceChoice::kCuda;
      else if (val == "auto")
        o.device = DeviceChoice::kAuto;
      else
        return bad("--device expects cpu, cuda or auto, got '" + std::string(val) + "'");
    } else if (opt == "--kv-memory") {
      auto v = parse_size(val);
      if (!v.ok()) return std::move(v).error();
      if (*v <= 0) return bad("--kv-memory must be positive");
      o.kv_memory_bytes = *v;
    } else if (opt == "--weights-memory") {
      auto v = parse_size(val);
      if (!v.ok()) return std::move(v).error();
      if (*v <= 0) return bad("--weights-memory must be positive");
      o.weights_memory_bytes = *v;
    } else if (opt == "--keep-resident") {
      o.keep_resident.emplace_back(val);
    } else if (opt == "--max-step-tokens") {
      auto v = parse_int(opt, val, 1, 1 << 20);
      if (!v.ok()) return std::move(v).error();
      o.max_step_tokens = *v;
    } else if (opt == "--prefill-attention") {
      auto v = parse_int(opt, val, 0, 1 << 24);
      if (!v.ok()) return std::move(v).error();
      o.attention_positions_per_token = *v;
    } else if (opt == "--block-size") {
      auto v = parse_int(opt, val, 1, 4096);
      if (!v.ok()) return std::move(v).error();
      o.block_size = *v;
    } else if (opt == "--chat-template") {
      o.chat_template = std::string(val);
    } else if (opt == "--cache-dir") {
      o.cache_dir = std::string(val);
    } else if (opt == "--threads") {
      auto v = parse_int(opt, val, 1, 256);
      if (!v.ok()) return std::move(v).error();
      o.threads = *v;
    } else if (opt == "--drain-timeout") {
      auto v = parse_duration_ms(val);
      if (!v.ok()) return std::move(v).error();
      o.drain_timeout_ms = *v;
    } else {
      return bad("unknown option '" + std::string(opt) + "'");
    }
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
