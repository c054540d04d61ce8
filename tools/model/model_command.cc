// `cutline model`: synth writes the built-in tiny model (or a larger one for benchmarks) as GGUF;
// info prints what the GGUF reader, config and tokenizer loaders make of a file.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "cutline/cli/cli.h"
#include "cutline/cli/progress.h"
#include "cutline/model/chat_template.h"
#include "cutline/model/gguf_file.h"
#include "cutline/model/model_config.h"
#include "cutline/model/synth.h"
#include "cutline/model/tokenizer_loader.h"

namespace cutline::tools {

namespace {

using model::SynthOptions;

// The command line of `cutline model synth`, declared on `cmd` and bound to `o` / `out`.
void add_synth_options(CLI::App& cmd, SynthOptions& o, std::string& out) {
  cmd.add_option("-o,--out", out, "Where to write the GGUF")->required();
  const auto positive = CLI::Range(1, 1 << 30);
  cmd.add_option("--layers", o.layers, "Transformer blocks")->check(positive);
  cmd.add_option("--dim", o.dim, "Embedding width")->check(positive);
  cmd.add_option("--heads", o.heads, "Attention heads")->check(positive);
  cmd.add_option("--kv-heads", o.kv_heads, "Key/value heads (GQA)")->check(positive);
  cmd.add_option("--vocab", o.vocab, "Vocabulary size (>= 260)")->check(positive);
  cmd.add_option("--ffn", o.ffn, "FFN width (default 8/3 * dim, rounded up to 32)")
      ->check(positive);
  cmd.add_option("--context", o.context, "Context length")->check(positive);
  cmd.add_option("--seed", o.seed, "Weights seed");
  cmd.add_option("--name", o.name, "general.name in the file");
  cmd.add_flag("--tied", o.tied_output, "Omit output.weight (logits from token_embd)");
  cmd.add_option_function<std::string>(
         "--type",
         [&o](const std::string& value) {
           auto t = model::parse_tensor_type(value);
           if (!t || (*t != model::TensorType::kF16 && *t != model::TensorType::kQ8_0 &&
                      *t != model::TensorType::kQ4_0)) {
             throw CLI::ValidationError("--type", "must be f16, q8_0 or q4_0, got '" + value + "'");
           }
           o.type = *t;
         },
         "Type of the 2-D weight matrices")
      ->type_name("f16|q8_0|q4_0");
}

int run_synth(SynthOptions o, const std::string& out) {
  auto start = std::chrono::steady_clock::now();
  // Bytes of tensors written of all, on stderr: a bar on a terminal, a line every 3 s otherwise.
  std::unique_ptr<cli::Progress> progress;
  o.progress = [&progress, &out](int64_t done, int64_t total) {
    if (!progress) {
      progress = std::make_unique<cli::Progress>(stderr, "writing " + out, total,
                                                 isatty(STDERR_FILENO) != 0);
    }
    progress->update(done);
  };
  Status s = model::synthesize_tiny_model(o, out);
  if (progress) progress->finish();
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

int run_info(const std::string& path) {
  auto f = model::GgufFile::open(path);
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
  // argv[0] is "model".
  auto app = cli::make_app("cutline model", "Write or describe GGUF model files.");
  app->require_subcommand(1);
  SynthOptions synth_options;
  std::string out;
  CLI::App* synth = cli::add_command(
      *app, "synth",
      "Write the deterministic tiny Llama GGUF (random weights, byte-level BPE vocabulary)");
  add_synth_options(*synth, synth_options, out);
  std::string info_file;
  CLI::App* info = cli::add_command(
      *app, "info", "Print what the GGUF reader, config and tokenizer loaders make of FILE");
  info->add_option("FILE", info_file, "GGUF file")->required()->check(cli::kReadableFile);
  if (auto rc = cli::parse(*app, argc, argv)) return *rc;
  if (synth->parsed()) return run_synth(synth_options, out);
  return run_info(info_file);
}

}  // namespace cutline::tools
