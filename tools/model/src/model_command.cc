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
#include "cutline/model/gguf_file.h"
#include "cutline/model/model_summary.h"
#include "cutline/model/synth.h"

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
  cmd.add_option("--arch", o.arch, "Architecture (checked when the file is written)")
      ->type_name("llama|qwen2|qwen3|phi3|gemma2|gemma3");
  cmd.add_option("--sliding-window", o.sliding_window, "<arch>.attention.sliding_window")
      ->check(positive);
  cmd.add_option_function<std::string>(
         "--type",
         [&o](const std::string& value) {
           auto t = model::parse_tensor_type(value);
           if (!t) {
             throw CLI::ValidationError(
                 "--type",
                 "must be one of " + model::supported_tensor_types() + ", got '" + value + "'");
           }
           o.type = *t;
         },
         "Type of the 2-D weight matrices")
      ->type_name("f16|q8_0|q4_0|q5_K|q4_K|iq4_xs|...");
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

int run_info(const std::string& path, int32_t context) {
  auto f = model::GgufFile::open(path);
  if (!f) {
    std::fprintf(stderr, "cutline model info: %s\n", f.error().message.c_str());
    return 1;
  }
  const model::ModelSummary s = model::summarize_model(**f, context);
  std::fputs(model::render_model_summary(s).c_str(), stdout);
  return s.config && s.tokenizer_error.empty() ? 0 : 1;
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
      *app, "info",
      "Describe FILE: architecture, parameters, context, weight types, tokenizer, chat template, "
      "and whether this build can serve it (memory for weights + KV)");
  info->add_option("FILE", info_file, "GGUF file")->required()->check(cli::kReadableFile);
  int32_t info_context = 0;
  info->add_option("--context", info_context,
                   "Context for the KV memory estimate (default: the model's)")
      ->check(CLI::Range(1, 1 << 30));
  if (auto rc = cli::parse(*app, argc, argv)) return *rc;
  if (synth->parsed()) return run_synth(synth_options, out);
  return run_info(info_file, info_context);
}

}  // namespace cutline::tools
