#pragma once
// ModelSummary: what `cutline model info FILE` reports about a GGUF, gathered here so that the
// command stays a thin call: the file, the architecture and its hyper-parameters (or why the
// config loader refuses it), parameter count, weight types with their share of the tensor bytes,
// the tokenizer and chat template, whether this build can serve the file (every tensor type
// computable, config and tokenizer accepted; else why not), and the memory it needs at a context
// length: weights (as the CPU device holds them, zero-copy from the file) + the F32 KV cache.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cutline/model/gguf_file.h"
#include "cutline/model/model_config.h"

namespace cutline::model {

struct TensorTypeShare {
  std::string type;  // "q8_0", "f32", ...
  int32_t tensors = 0;
  int64_t bytes = 0;
  double share = 0;  // of all tensor bytes
};

struct ModelSummary {
  std::string path;
  uint32_t gguf_version = 0;
  size_t metadata_keys = 0;
  size_t tensor_count = 0;
  int64_t tensor_bytes = 0;
  uint32_t alignment = 0;
  std::string architecture;           // general.architecture ("" when absent)
  std::optional<ModelConfig> config;  // nullopt: config_error says why
  std::string config_error;
  int64_t parameters = 0;              // elements of every tensor
  std::vector<TensorTypeShare> types;  // largest share first
  std::string tokenizer_model;         // tokenizer.ggml.model: "gpt2", "llama", ...
  int32_t tokenizer_tokens = 0;
  int32_t bos_id = -1;
  size_t eos_ids = 0;
  std::string tokenizer_error;         // non-empty when the tokenizer loader refuses it
  bool chat_template_present = false;  // tokenizer.chat_template in the file
  std::string chat_template;           // the template family used ("chatml", "llama3", ...)
  std::string chat_template_warning;
  bool servable = false;
  std::string not_servable;  // why not, "; "-separated (names the tensor, key or architecture)
  int32_t context = 0;       // context length of the memory estimate
  int64_t weight_bytes = 0;
  int64_t kv_bytes = 0;
};

// `context` 0: the model's context length. A context beyond the model's makes it not servable
// (not_servable says so): the backend refuses positions past the trained context.
ModelSummary summarize_model(const GgufFile& file, int32_t context = 0);

// The report `cutline model info` prints (several lines, each ending in '\n').
std::string render_model_summary(const ModelSummary& summary);

}  // namespace cutline::model
