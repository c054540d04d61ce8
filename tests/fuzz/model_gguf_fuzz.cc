// Fuzz target for the GGUF reader and the model loader: any byte string either parses into a file
// whose accessors are all safe to call (every tensor's bytes readable, metadata decodable, config
// and tokenizer loaders returning values or errors), or is refused with an error. A file the config
// loader accepts is then loaded by LlamaRunner on the CPU device (with its warm-up step) and run
// for one more step of two tokens: the runner either refuses it with an error or computes logits.
// Never a crash or a read or write out of bounds (run under ASan by tests/fuzz/run.sh).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cutline/device/device.h"
#include "cutline/model/gguf_file.h"
#include "cutline/model/llama_runner.h"
#include "cutline/model/model_config.h"
#include "cutline/model/tokenizer_loader.h"

using cutline::model::GgufFile;

namespace {

// Files bigger than this in weights are not run (a fuzz input is small anyway; this keeps a
// corpus entry from costing seconds per step).
constexpr int64_t kMaxRunBytes = 16 << 20;

void run_model(std::shared_ptr<const GgufFile> file) {
  auto config = cutline::model::load_model_config(*file);
  if (!config.ok() || file->tensor_bytes() > kMaxRunBytes) return;
  static std::shared_ptr<cutline::device::Device> cpu(
      cutline::device::make_device(
          {.kind = cutline::device::DeviceKind::kCpu, .cpu_threads = 1, .cpu_isa = ""})
          .value());
  auto runner = cutline::model::LlamaRunner::load(file, cpu);
  if (!runner.ok()) return;
  if (!(*runner)->allocate_kv(2, 4).ok()) return;
  const int32_t tokens[2] = {0, config->vocab_size - 1};
  const int32_t table[2] = {1, 0};
  cutline::model::ForwardBatch batch;
  batch.steps.push_back({.seq_id = 1,
                         .tokens = tokens,
                         .start_pos = config->context_length > 2 ? 1 : 0,
                         .block_table = table,
                         .want_logits = true});
  std::vector<float> logits;
  auto s = (*runner)->forward(batch, logits);
  if (s.ok() && logits.size() != static_cast<size_t>(config->vocab_size)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = GgufFile::from_bytes(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!file.ok()) return 0;
  const GgufFile& f = **file;
  volatile uint64_t sink = 0;
  for (const auto& entry : f.metadata()) {
    const auto& v = *entry.value;
    sink = sink + entry.key.size();
    if (auto i = v.as_int()) sink = sink + static_cast<uint64_t>(*i);
    if (auto s = v.as_string()) sink = sink + s->size();
    if (auto a = v.as_string_array()) {
      for (std::string_view s : *a) sink = sink + s.size();
    }
    if (auto a = v.as_int_array()) sink = sink + a->size();
    if (auto a = v.as_float_array()) sink = sink + a->size();
  }
  for (const auto& t : f.tensors()) {
    if (t.n_bytes > 0) sink = sink + t.data[0] + t.data[t.n_bytes - 1];
    if (f.tensor(t.name) == nullptr) __builtin_trap();
  }
  auto tokenizer = cutline::model::load_tokenizer(f);
  if (tokenizer.ok()) {
    auto ids = (*tokenizer)->encode("Hello, world! 123 \xE4\xB8\x96", true);
    sink = sink + (*tokenizer)->decode(ids).size();
  }
  run_model(std::shared_ptr<const GgufFile>(std::move(file).value()));
  return 0;
}
