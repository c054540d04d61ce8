// `cutline model`: synth writes the built-in tiny model (or a larger one for benchmarks) as GGUF;
// info prints what the GGUF reader, config and tokenizer loaders make of a file.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "cutline/model/chat_template.h"
#include "cutline/model/gguf_file.h"
#include "cutline/model/model_config.h"
#include "cutline/model/synth.h"
#include "cutline/model/tokenizer_loader.h"

namespace cutline::tools {

namespace {

using model::SynthOptions;

constexpr const char* kUsage =
    "usage: cutline model synth --out FILE [--layers N] [--dim D] [--heads H] [--kv-heads K]\n"
    "                           [--vocab V] [--ffn F] [--context C] [--seed S]\n"
    "                           [--type f16|q8_0|q4_0|q5_K|q4_K|iq4_xs|...] [--tied] [--name "
    "NAME]\n"
    "       cutline model info FILE\n";

bool parse_int(const char* s, int64_t min, int64_t max, int64_t& out) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > max) return false;
  out = v;
  return true;
}

int run_synth(int argc, char** argv) {
  SynthOptions o;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (flag == "--tied") {
      o.tied_output = true;
      continue;
    }
    if (flag == "-h" || flag == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "cutline model synth: %s needs a value\n%s", argv[i], kUsage);
      return 2;
    }
    const char* value = argv[++i];
    int64_t v = 0;
    auto int_flag = [&](int32_t& field, int64_t min) {
      if (!parse_int(value, min, 1 << 30, v)) {
        std::fprintf(stderr, "cutline model synth: %s expects an integer >= %lld, got '%s'\n",
                     argv[i - 1], static_cast<long long>(min), value);
        return false;
      }
      field = static_cast<int32_t>(v);
      return true;
    };
    bool ok = true;
    if (flag == "--out") {
      out = value;
    } else if (flag == "--layers") {
      ok = int_flag(o.layers, 1);
    } else if (flag == "--dim") {
      ok = int_flag(o.dim, 1);
    } else if (flag == "--heads") {
      ok = int_flag(o.heads, 1);
    } else if (flag == "--kv-heads") {
      ok = int_flag(o.kv_heads, 1);
    } else if (flag == "--vocab") {
      ok = int_flag(o.vocab, 1);
    } else if (flag == "--ffn") {
      ok = int_flag(o.ffn, 1);
    } else if (flag == "--context") {
      ok = int_flag(o.context, 1);
    } else if (flag == "--name") {
      o.name = value;
    } else if (flag == "--seed") {
      char* end = nullptr;
      errno = 0;
      unsigned long long seed = std::strtoull(value, &end, 10);
      if (errno != 0 || end == value || *end != '\0') {
        std::fprintf(stderr, "cutline model synth: --seed expects an unsigned integer, got '%s'\n",
                     value);
        return 2;
      }
      o.seed = seed;
    } else if (flag == "--type") {
      auto t = model::parse_tensor_type(value);
      if (!t) {
        std::fprintf(stderr, "cutline model synth: --type must be one of %s, got '%s'\n",
                     model::supported_tensor_types().c_str(), value);
        return 2;
      }
      o.type = *t;
    } else {
      std::fprintf(stderr, "cutline model synth: unknown option '%s'\n%s", argv[i - 1], kUsage);
      return 2;
    }
    if (!ok) return 2;
  }
  if (out.empty()) {
    std::fprintf(stderr, "cutline model synth: --out FILE is required\n%s", kUsage);
    return 2;
  }
  auto start = std::chrono::steady_clock::now();
  Status s = model::synthesize_tiny_model(o, out);
  if (!s) {
    std::fprintf(stderr, "cutline model synth: %s\n", s.error().message.c_str());
    return 1;
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  auto f = model::GgufFile::open(out);
  long long bytes = f ? static_cast<long long>((*f)->file_bytes()) : -1;
  std::printf(
      "wrote %s: %d layers, dim %d, %d heads (%d kv), ffn %d, vocab %d, context %d, %s, "
      "seed %llu, %lld bytes in %.0f ms\n",
      out.c_str(), o.layers, o.dim, o.heads, o.kv_heads, model::synth_ffn_dim(o), o.vocab,
      o.context, model::tensor_type_name(o.type).c_str(), static_cast<unsigned long long>(o.seed),
      bytes, ms);
  return 0;
}

int run_info(int argc, char** argv) {
  if (argc != 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  auto f = model::GgufFile::open(argv[1]);
  if (!f) {
    std::fprintf(stderr, "cutline model info: %s\n", f.error().message.c_str());
    return 1;
  }
  const model::GgufFile& g = **f;
  std::printf("%s: GGUF v%u, %zu metadata keys, %zu tensors (%lld bytes), alignment %u\n",
              g.path().c_str(), g.version(), g.metadata().size(), g.tensors().size(),
              static_cast<long long>(g.tensor_bytes()), g.alignment());
  int rc = 0;
  if (auto c = model::load_model_config(g); c) {
    std::printf(
        "model: %s '%s': %d layers, dim %d, %d heads (%d kv, head %d), ffn %d, vocab %d, "
        "context %d, rope base %g scale %g, rms eps %g, %s output%s\n",
        c->architecture.c_str(), c->name.c_str(), c->n_layers, c->dim, c->n_heads, c->n_kv_heads,
        c->head_dim, c->ffn_dim, c->vocab_size, c->context_length, c->rope_freq_base,
        c->rope_linear_scale, c->rms_eps, c->tied_output ? "tied" : "untied",
        c->qkv_bias ? ", qkv bias" : "");
  } else {
    std::printf("model: %s\n", c.error().message.c_str());
    rc = 1;
  }
  if (auto t = model::load_tokenizer(g); t) {
    std::printf("tokenizer: %d tokens, bos %d, %zu end-of-generation ids\n", (*t)->vocab_size(),
                (*t)->bos_id(), (*t)->eos_ids().size());
  } else {
    std::printf("tokenizer: %s\n", t.error().message.c_str());
    rc = 1;
  }
  auto tmpl = g.get_string_or("tokenizer.chat_template", "");
  model::DetectedChatTemplate d = model::detect_chat_template(tmpl ? *tmpl : "");
  std::printf("chat template: %s%s%s\n", std::string(model::to_string(d.kind)).c_str(),
              d.warning.empty() ? "" : " — ", d.warning.c_str());
  return rc;
}

}  // namespace

int run_model(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string_view sub = argv[1];
  if (sub == "synth") return run_synth(argc - 1, argv + 1);
  if (sub == "info") return run_info(argc - 1, argv + 1);
  if (sub == "-h" || sub == "--help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::fprintf(stderr, "cutline model: unknown subcommand '%s'\n%s", argv[1], kUsage);
  return 2;
}

}  // namespace cutline::tools
