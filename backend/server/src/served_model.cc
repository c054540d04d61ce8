#include "cutline/server/served_model.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <utility>

#include "cutline/cli/progress.h"
#include "cutline/model/llama_runner.h"
#include "cutline/model/model_config.h"
#include "cutline/model/tokenizer_loader.h"
#include "cutline/server/file_prefetch.h"

namespace cutline::server {

namespace {

// The read phase: the whole file through the page cache, its progress on stderr (a bar on a
// terminal, a line every 3 s otherwise).
Status read_file_phase(const residency::ModelSpec& spec, residency::PhaseRecorder& recorder) {
  recorder.begin(residency::LoadPhase::kRead);
  std::unique_ptr<cli::Progress> progress;
  auto prefetched = prefetch_file(spec.path, kPrefetchChunkBytes, [&](int64_t done, int64_t total) {
    if (!progress) {
      progress = std::make_unique<cli::Progress>(stderr, "cutline-backend: reading " + spec.name,
                                                 total, isatty(STDERR_FILENO) != 0);
    }
    progress->update(done);
  });
  if (progress && prefetched.ok()) progress->finish();
  recorder.end(prefetched.ok() ? *prefetched : 0);
  if (!prefetched.ok()) return std::move(prefetched).error();
  return {};
}

// --chat-template when given, else the template the GGUF's tokenizer.chat_template looks like
// (a warning on stderr when it falls back to ChatML).
Result<model::ChatTemplateKind> choose_chat_template(const std::string& name,
                                                     const ServedModelOptions& options,
                                                     const model::GgufFile& file) {
  if (!options.chat_template.empty()) {
    auto kind = model::chat_template_from_name(options.chat_template);
    if (!kind)
      return make_error(ErrorKind::kBadRequest,
                        "unknown --chat-template '" + options.chat_template +
                            "' (known: chatml, llama3, llama2, mistral, gemma, phi3, phi4, "
                            "phi4-mini, qwen3, qwen3-no-think, qwen2.5, hermes)");
    return *kind;
  }
  auto source = file.get_string_or("tokenizer.chat_template", "");
  auto detected = model::detect_chat_template(source.ok() ? *source : std::string_view());
  if (!detected.warning.empty())
    std::fprintf(stderr, "cutline-backend: model '%s': %s\n", name.c_str(),
                 detected.warning.c_str());
  // A second template for requests with tools (Hermes 2 Pro / Hermes 3 ship one).
  auto tool_use = file.get_string_or("tokenizer.chat_template.tool_use", "");
  if (tool_use.ok() && !tool_use->empty())
    return model::with_tool_use_template(detected.kind, *tool_use);
  return detected.kind;
}

}  // namespace

void ServedModel::stop() {
  // Engine thread first (no more wakes), then the router (pending drains become no-ops).
  if (engine_) engine_->stop();
  if (router_) router_->close();
}

ServedModel::~ServedModel() {
  // Then the engine, runner, tokenizer and file in reverse order of their dependencies.
  stop();
  router_.reset();
  engine_.reset();
  runner_.reset();
  tokenizer_.reset();
  file_.reset();
}

int64_t ServedModel::weight_bytes() const { return runner_->info().weight_bytes; }

ModelTextInfo ServedModel::text_info() const {
  ModelTextInfo t;
  t.tokenizer = tokenizer_.get();
  t.chat_template = chat_template_;
  t.context_length = runner_->info().context_length;
  t.parse_special = parse_special_;
  return t;
}

Result<std::unique_ptr<residency::ResidentModel>> load_served_model(
    const residency::ModelSpec& spec, const ServedModelOptions& options,
    std::shared_ptr<device::Device> device, proto::EventLoop& dispatch,
    residency::PhaseRecorder& recorder) {
  using residency::LoadPhase;
  auto served = std::unique_ptr<ServedModel>(new ServedModel());
  served->name_ = spec.name;

  // Large sequential reads first: the mmap below then finds every page in memory.
  if (Status s = read_file_phase(spec, recorder); !s.ok()) return std::move(s).error();

  auto file = model::GgufFile::open(spec.path);
  if (!file.ok()) return std::move(file).error();
  served->file_ = std::shared_ptr<const model::GgufFile>(std::move(file).value());
  auto config = model::load_model_config(*served->file_);
  if (!config.ok()) return std::move(config).error();
  auto tokenizer = model::load_tokenizer(*served->file_);
  if (!tokenizer.ok()) return std::move(tokenizer).error();
  served->tokenizer_ = std::move(tokenizer).value();
  served->parse_special_ = options.parse_special;

  auto chat_template = choose_chat_template(spec.name, options, *served->file_);
  if (!chat_template.ok()) return std::move(chat_template).error();
  served->chat_template_ = *chat_template;

  model::LlamaLoadOptions load_options;
  load_options.name = spec.name;
  auto runner = model::LlamaRunner::load(served->file_, std::move(device), load_options);
  if (!runner.ok()) return std::move(runner).error();
  const model::LoadReport& r = (*runner)->load_report();
  // The runner's own read phase touches the (now cached) pages; its bytes were counted above.
  recorder.add(LoadPhase::kRead, r.read_ms, 0);
  recorder.add(LoadPhase::kConvert, r.convert_ms);
  recorder.add(LoadPhase::kUpload, r.upload_ms, (*runner)->info().weight_bytes);
  recorder.add(LoadPhase::kWarmup, r.warmup_ms);
  served->runner_ = std::move(runner).value();

  engine::EngineConfig config_e;
  config_e.block_size = options.block_size;
  config_e.kv_memory_bytes = options.kv_memory_bytes;
  config_e.max_step_tokens = options.max_step_tokens;
  config_e.attention_positions_per_token = options.attention_positions_per_token;
  recorder.begin(LoadPhase::kKvAlloc);
  auto engine = engine::Engine::create(*served->runner_, *served->tokenizer_, config_e);
  if (!engine.ok()) {
    recorder.end();
    return std::move(engine).error();
  }
  served->engine_ = std::move(engine).value();
  recorder.end(static_cast<int64_t>(served->engine_->num_blocks()) * options.block_size *
               served->runner_->info().kv_bytes_per_token);

  std::function<void()> on_drained;
  if (options.on_drained) {
    engine::Engine* e = served->engine_.get();
    on_drained = [cb = options.on_drained, e, last_steps = int64_t{0}]() mutable {
      cb(*e, last_steps);
    };
  }
  served->router_ = std::make_unique<EventRouter>(*served->engine_, dispatch, on_drained);
  EventRouter* router = served->router_.get();
  served->engine_->set_wake_callback([router] { router->wake(); });
  served->engine_->start();
  return std::unique_ptr<residency::ResidentModel>(std::move(served));
}

}  // namespace cutline::server
