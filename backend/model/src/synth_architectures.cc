#include "synth_architectures.h"

#include <cmath>

#include "cutline/model/model_config.h"

namespace cutline::model {

namespace {

bool is_gemma(const SynthOptions& o) { return o.arch == "gemma2" || o.arch == "gemma3"; }

bool tied(const SynthOptions& o) { return o.tied_output || is_gemma(o); }

int32_t window_of(const SynthOptions& o) {
  if (o.sliding_window > 0) return o.sliding_window;
  return is_gemma(o) ? 32 : 0;
}

Error bad(const std::string& message) {
  return make_error(ErrorKind::kBadRequest, "synth: " + message);
}

}  // namespace

Status validate_architecture_options(const SynthOptions& o) {
  const std::string supported = supported_architectures();
  bool known = false;
  for (const char* a : {"llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"})
    known |= o.arch == a;
  if (!known) return bad("--arch '" + o.arch + "' is not one of " + supported);
  if (o.sliding_window < 0) return bad("--sliding-window must be positive (or 0 for none)");
  if (!o.rope_scaling.empty() && o.rope_scaling != "linear" && o.rope_scaling != "yarn") {
    return bad("--rope-scaling must be linear or yarn (got '" + o.rope_scaling + "')");
  }
  if (o.rope_scaling.empty() && o.rope_factor != 1.0f) {
    return bad("--rope-factor needs --rope-scaling");
  }
  if (!(o.rope_factor >= 1.0f) || !std::isfinite(o.rope_factor)) {
    return bad("--rope-factor must be a number >= 1");
  }
  if (o.long_rope && o.arch != "phi3") return bad("--long-rope is for --arch phi3");
  if (o.rope_freq_factors && o.rope_scaling == "yarn") {
    return bad("--rope-freqs and --rope-scaling yarn exclude each other");
  }
  return {};
}

void set_architecture_metadata(const SynthOptions& o, GgufWriter& w) {
  const std::string p = o.arch + ".";
  const auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  const int32_t head_dim = o.dim / o.heads;
  w.set_u32(p + "context_length", u32(o.context));
  w.set_u32(p + "embedding_length", u32(o.dim));
  w.set_u32(p + "block_count", u32(o.layers));
  w.set_u32(p + "feed_forward_length", u32(synth_ffn_dim(o)));
  w.set_u32(p + "attention.head_count", u32(o.heads));
  w.set_u32(p + "attention.head_count_kv", u32(o.kv_heads));
  w.set_u32(p + "rope.dimension_count", u32(head_dim));
  const bool llama = o.arch == "llama";
  w.set_f32(p + "rope.freq_base",
            llama || o.arch == "gemma2" || o.arch == "phi3" ? 10000.0f : 1000000.0f);
  w.set_f32(p + "attention.layer_norm_rms_epsilon", is_gemma(o) ? 1e-6f : 1e-5f);
  if (llama) w.set_u32(p + "vocab_size", u32(o.vocab));
  if (o.arch == "qwen3" || is_gemma(o)) {
    w.set_u32(p + "attention.key_length", u32(head_dim));
    w.set_u32(p + "attention.value_length", u32(head_dim));
  }
  if (window_of(o) > 0) w.set_u32(p + "attention.sliding_window", u32(window_of(o)));
  if (o.arch == "gemma2") {
    w.set_f32(p + "attn_logit_softcapping", o.attn_softcap > 0 ? o.attn_softcap : 50.0f);
    w.set_f32(p + "final_logit_softcapping", o.final_softcap > 0 ? o.final_softcap : 30.0f);
  }
  if (!o.rope_scaling.empty()) {
    w.set_string(p + "rope.scaling.type", o.rope_scaling);
    w.set_f32(p + "rope.scaling.factor", o.rope_factor);
  }
  if (o.rope_scaling == "yarn" || o.long_rope) {
    const int32_t original = o.rope_original_context > 0 ? o.rope_original_context : o.context / 4;
    w.set_u32(p + "rope.scaling.original_context_length", u32(std::max(1, original)));
  }
  if (o.long_rope) w.set_f32(p + "rope.scaling.attn_factor", 1.19f);
}

std::vector<TensorPlan> plan_tensors(const SynthOptions& o) {
  const int64_t dim = o.dim, vocab = o.vocab, ffn = synth_ffn_dim(o);
  const int64_t head_dim = dim / o.heads, q = o.heads * head_dim, kv = o.kv_heads * head_dim;
  // Fan-in scaled weights (std 1/sqrt(fan_in) as U[-a, a) with a = sqrt(3 / fan_in)) keep
  // activations O(1) through the layers; the output projection is ~3x hotter so that logits
  // spread over several units and sampling is varied rather than uniform.
  auto a = [](int64_t fan_in) { return std::sqrt(3.0f / static_cast<float>(fan_in)); };
  const TensorType f32 = TensorType::kF32;
  std::vector<TensorPlan> t;
  t.push_back({"token_embd.weight", o.type, {dim, vocab}, 0.0f, 1.0f});
  t.push_back({"output_norm.weight", f32, {dim}, 1.0f, 0.1f});
  if (!tied(o)) t.push_back({"output.weight", o.type, {dim, vocab}, 0.0f, 3.0f * a(dim)});
  const int64_t half_rot = head_dim / 2;
  if (o.rope_freq_factors) t.push_back({"rope_freqs.weight", f32, {half_rot}, 4.0f, 3.0f});
  if (o.long_rope) {
    t.push_back({"rope_factors_long.weight", f32, {half_rot}, 6.0f, 5.0f});
    t.push_back({"rope_factors_short.weight", f32, {half_rot}, 1.5f, 0.5f});
  }
  for (int32_t l = 0; l < o.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    t.push_back({b + "attn_norm.weight", f32, {dim}, 1.0f, 0.1f});
    if (o.arch == "phi3") {
      t.push_back({b + "attn_qkv.weight", o.type, {dim, q + 2 * kv}, 0.0f, 2.0f * a(dim)});
    } else {
      t.push_back({b + "attn_q.weight", o.type, {dim, q}, 0.0f, 2.0f * a(dim)});
      t.push_back({b + "attn_k.weight", o.type, {dim, kv}, 0.0f, 2.0f * a(dim)});
      t.push_back({b + "attn_v.weight", o.type, {dim, kv}, 0.0f, a(dim)});
    }
    if (o.arch == "qwen2") {
      t.push_back({b + "attn_q.bias", f32, {q}, 0.0f, 0.5f});
      t.push_back({b + "attn_k.bias", f32, {kv}, 0.0f, 0.5f});
      t.push_back({b + "attn_v.bias", f32, {kv}, 0.0f, 0.5f});
    }
    if (o.arch == "qwen3" || o.arch == "gemma3") {
      t.push_back({b + "attn_q_norm.weight", f32, {head_dim}, 1.0f, 0.3f});
      t.push_back({b + "attn_k_norm.weight", f32, {head_dim}, 1.0f, 0.3f});
    }
    t.push_back({b + "attn_output.weight", o.type, {q, dim}, 0.0f, a(q)});
    t.push_back({b + "ffn_norm.weight", f32, {dim}, 1.0f, 0.1f});
    if (o.arch == "phi3") {
      t.push_back({b + "ffn_up.weight", o.type, {dim, 2 * ffn}, 0.0f, a(dim)});
    } else {
      t.push_back({b + "ffn_gate.weight", o.type, {dim, ffn}, 0.0f, a(dim)});
      t.push_back({b + "ffn_up.weight", o.type, {dim, ffn}, 0.0f, a(dim)});
    }
    t.push_back({b + "ffn_down.weight", o.type, {ffn, dim}, 0.0f, a(ffn)});
    if (is_gemma(o)) {
      t.push_back({b + "post_attention_norm.weight", f32, {dim}, 1.0f, 0.1f});
      t.push_back({b + "post_ffw_norm.weight", f32, {dim}, 1.0f, 0.1f});
    }
  }
  return t;
}

}  // namespace cutline::model
