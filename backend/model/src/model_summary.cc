#include "cutline/model/model_summary.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "cutline/device/quant.h"
#include "cutline/model/chat_template.h"
#include "cutline/model/tokenizer_loader.h"

namespace cutline::model {

namespace {

std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string mib(int64_t bytes) {
  return format("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

std::string tokenizer_kind(const std::string& model) {
  if (model == "gpt2") return "gpt2 (byte-level BPE)";
  if (model == "llama") return "llama (SentencePiece)";
  return model.empty() ? "none" : model;
}

void add_reason(ModelSummary& s, const std::string& reason) {
  s.servable = false;
  s.not_servable += (s.not_servable.empty() ? "" : "; ") + reason;
}

void summarize_tensors(const GgufFile& f, ModelSummary& s) {
  std::map<std::string, TensorTypeShare> by_type;
  bool bad_type = false;
  for (const GgufTensor& t : f.tensors()) {
    s.parameters += t.n_elements;
    TensorTypeShare& share = by_type[tensor_type_name(t.type)];
    share.type = tensor_type_name(t.type);
    ++share.tensors;
    share.bytes += t.n_bytes;
    if (!device::dtype_from_ggml(static_cast<uint32_t>(t.type)) && !bad_type) {
      bad_type = true;  // the first such tensor is enough to say why
      add_reason(s, "tensor '" + std::string(t.name) + "' has type " + tensor_type_name(t.type) +
                        ", which this build cannot compute");
    }
  }
  for (auto& [name, share] : by_type) {
    share.share = s.tensor_bytes > 0 ? static_cast<double>(share.bytes) / s.tensor_bytes : 0;
    s.types.push_back(share);
  }
  std::sort(s.types.begin(), s.types.end(),
            [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
}

}  // namespace

ModelSummary summarize_model(const GgufFile& f, int32_t context) {
  ModelSummary s;
  s.path = f.path();
  s.gguf_version = f.version();
  s.metadata_keys = f.metadata().size();
  s.tensor_count = f.tensors().size();
  s.tensor_bytes = f.tensor_bytes();
  s.alignment = f.alignment();
  auto arch = f.get_string_or("general.architecture", "");
  s.architecture = arch ? std::string(*arch) : "";
  s.servable = true;
  if (auto c = load_model_config(f); c) {
    s.config = *c;
  } else {
    s.config_error = c.error().message;
    add_reason(s, s.config_error);
  }
  summarize_tensors(f, s);
  auto tok_model = f.get_string_or("tokenizer.ggml.model", "");
  s.tokenizer_model = tok_model ? std::string(*tok_model) : "";
  if (auto t = load_tokenizer(f); t) {
    s.tokenizer_tokens = (*t)->vocab_size();
    s.bos_id = (*t)->bos_id();
    s.eos_ids = (*t)->eos_ids().size();
  } else {
    s.tokenizer_error = t.error().message;
    add_reason(s, s.tokenizer_error);
  }
  auto tmpl = f.get_string_or("tokenizer.chat_template", "");
  s.chat_template_present = tmpl && !tmpl->empty();
  const DetectedChatTemplate d = detect_chat_template(tmpl ? *tmpl : "");
  s.chat_template = std::string(to_string(d.kind));
  s.chat_template_warning = d.warning;
  s.weight_bytes = s.tensor_bytes;
  if (s.config) {
    s.context = context > 0 ? context : s.config->context_length;
    if (s.config->context_length > 0 && s.context > s.config->context_length) {
      add_reason(s, "context " + std::to_string(s.context) +
                        " is beyond the model's context length " +
                        std::to_string(s.config->context_length) +
                        " (the backend refuses positions past it)");
    }
    if (__builtin_mul_overflow(int64_t{s.context}, s.config->kv_bytes_per_token(), &s.kv_bytes)) {
      add_reason(s, "the KV cache at context " + std::to_string(s.context) + " overflows 64 bits");
    }
  }
  return s;
}

std::string render_model_summary(const ModelSummary& s) {
  std::string out =
      format("%s: GGUF v%u, %zu metadata keys, %zu tensors (%lld bytes), alignment %u\n",
             s.path.c_str(), s.gguf_version, s.metadata_keys, s.tensor_count,
             static_cast<long long>(s.tensor_bytes), s.alignment);
  if (const auto& c = s.config) {
    out +=
        format("model: %s '%s': %d layers, dim %d, %d heads (%d kv, head %d), ffn %d, vocab %d, ",
               c->architecture.c_str(), c->name.c_str(), c->n_layers, c->dim, c->n_heads,
               c->n_kv_heads, c->head_dim, c->ffn_dim, c->vocab_size);
    out += format("context %d, rope base %g scale %g, rms eps %g, %s output%s", c->context_length,
                  c->rope_freq_base, c->rope_linear_scale, c->rms_eps,
                  c->tied_output ? "tied" : "untied", c->qkv_bias ? ", qkv bias" : "");
    if (c->sliding_window > 0) {
      out += format(", sliding window %d", c->sliding_window);
      int32_t local = 0;
      for (int32_t i = 0; i < c->n_layers; ++i) local += c->is_local_layer(i);
      out += !c->local_layers.empty() ? format(" on %d of %d layers", local, c->n_layers)
             : c->swa_pattern <= 1
                 ? std::string(" on every layer")
                 : format(" on %d of every %d layers", c->swa_pattern - 1, c->swa_pattern);
    }
    out += "\n";
  } else {
    out += "model: " + s.config_error + "\n";
  }
  if (s.tokenizer_error.empty()) {
    out +=
        format("tokenizer: %d tokens, bos %d, %zu end-of-generation ids, %s\n", s.tokenizer_tokens,
               s.bos_id, s.eos_ids, tokenizer_kind(s.tokenizer_model).c_str());
  } else {
    out += "tokenizer: " + s.tokenizer_error + "\n";
  }
  out += "chat template: " + s.chat_template +
         (s.chat_template_present ? " (from the file)" : " (none in the file)") +
         (s.chat_template_warning.empty() ? "" : " — " + s.chat_template_warning) + "\n";
  out += format("parameters: %.3g M", static_cast<double>(s.parameters) / 1e6);
  out += s.config ? format(", context length %d\n", s.config->context_length) : "\n";
  out += "weight types:";
  for (const TensorTypeShare& t : s.types) {
    out += format(" %s %.1f%% (%d tensors)", t.type.c_str(), 100.0 * t.share, t.tensors);
  }
  out += "\n";
  if (s.servable) {
    out += "serve: yes, memory at context " + std::to_string(s.context) + ": weights " +
           mib(s.weight_bytes) + " + KV " + mib(s.kv_bytes) + " = " +
           mib(s.weight_bytes + s.kv_bytes) + "\n";
  } else {
    out += "serve: no: " + s.not_servable + "\n";
  }
  return out;
}

}  // namespace cutline::model
