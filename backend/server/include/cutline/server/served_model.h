#pragma once
// ServedModel: one resident model as the backend server runs it — the GGUF file, the LlamaRunner
// on the device, the tokenizer, the chat template, the Engine (with its own KV pool of
// --kv-memory and its own engine thread) and the EventRouter carrying its token events to the
// HTTP streams. Residency owns it (as a ResidentModel) and destroys it on eviction, which stops
// the engine thread and frees weights and KV.
//
// load_served_model() is the residency Loader: it times the pipeline through the PhaseRecorder:
// read (prefetch_file's large sequential reads, then the runner's page touch), convert, upload and
// warm-up from the runner's LoadReport, KV allocation around Engine::create.

#include <cstdint>
#include <memory>
#include <string>

#include "cutline/device/device.h"
#include "cutline/engine/engine.h"
#include "cutline/model/chat_template.h"
#include "cutline/model/gguf_file.h"
#include "cutline/model/model_runner.h"
#include "cutline/model/tokenizer.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/residency/residency.h"
#include "cutline/server/completion_request.h"
#include "cutline/server/event_router.h"

namespace cutline::server {

struct ServedModelOptions {
  int64_t kv_memory_bytes = 256ll << 20;
  int32_t block_size = 16;
  int32_t max_step_tokens = 512;
  int32_t attention_positions_per_token = 0;  // engine::EngineConfig's
  std::string chat_template;                  // override by name; empty = detect from the GGUF
  bool parse_special = true;                  // ModelTextInfo's default for prompts
  // Runs on the dispatch loop after each drain of this model's events (metrics sampling);
  // `last_steps` is per-model state for the callback (the engine step count it saw last).
  std::function<void(engine::Engine&, int64_t& last_steps)> on_drained;
};

class ServedModel final : public residency::ResidentModel {
 public:
  ~ServedModel() override;

  int64_t weight_bytes() const override;
  // Stops the engine thread and the event routing (at shutdown, before the HTTP loops go away).
  // Idempotent; the destructor does it too.
  void stop();
  const std::string& name() const { return name_; }
  engine::Engine& engine() { return *engine_; }
  EventRouter& router() { return *router_; }
  const model::Tokenizer& tokenizer() const { return *tokenizer_; }
  const model::ModelInfo& info() const { return runner_->info(); }
  ModelTextInfo text_info() const;
  int64_t device_free_bytes() const { return runner_->device_free_bytes(); }

 private:
  friend Result<std::unique_ptr<residency::ResidentModel>> load_served_model(
      const residency::ModelSpec&, const ServedModelOptions&, std::shared_ptr<device::Device>,
      proto::EventLoop&, residency::PhaseRecorder&);
  ServedModel() = default;

  std::string name_;
  std::shared_ptr<const model::GgufFile> file_;
  std::unique_ptr<model::Tokenizer> tokenizer_;
  std::unique_ptr<model::ModelRunner> runner_;
  model::ChatTemplateKind chat_template_ = model::ChatTemplateKind::kChatMl;
  bool parse_special_ = true;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<EventRouter> router_;
};

// Loads the GGUF at spec.path onto `device` and starts its engine. Errors name the file.
Result<std::unique_ptr<residency::ResidentModel>> load_served_model(
    const residency::ModelSpec& spec, const ServedModelOptions& options,
    std::shared_ptr<device::Device> device, proto::EventLoop& dispatch,
    residency::PhaseRecorder& recorder);

}  // namespace cutline::server
