#pragma once
// A reference forward pass written with plain loops in double precision, independent of the
// runner and the device kernels (weights read with the reference dequantizers), for every
// architecture ModelConfig describes. It follows the reference implementation's definitions
// directly: RoPE angles (with linear, Llama 3.1, YaRN and phi3 long-RoPE scaling recomputed here
// from the GGUF), q/k head norms, fused tensors sliced by rows, sliding windows, soft-caps, GeGLU
// with the tanh GELU, post-norms and the embedding scale.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "cutline/device/quant.h"
#include "cutline/model/gguf_file.h"
#include "cutline/model/model_config.h"

namespace cutline::model::reference {

using Vec = std::vector<double>;

inline Vec tensor(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.tensor(name);
  if (t == nullptr) return {};
  const device::DType type = *device::dtype_from_ggml(static_cast<uint32_t>(t->type));
  std::vector<float> tmp(t->n_elements);
  const int64_t cols = t->shape[0], rows = t->n_elements / cols;
  for (int64_t r = 0; r < rows; ++r) {
    device::dequantize_row(type, t->data + r * device::row_bytes(type, cols), tmp.data() + r * cols,
                           cols);
  }
  return Vec(tmp.begin(), tmp.end());
}

inline Vec rows(const Vec& m, int64_t cols, int64_t begin, int64_t n) {
  return Vec(m.begin() + begin * cols, m.begin() + (begin + n) * cols);
}

struct Layer {
  Vec attn_norm, ffn_norm, wq, wk, wv, wo, gate, up, down, bq, bk, bv, q_norm, k_norm, post_attn,
      post_ffn;
};

struct Model {
  ModelConfig c;
  Vec embd, out, out_norm;
  std::vector<Layer> layers;
  Vec inv_freq;        // per pair, global layers, everything but the position folded in
  Vec inv_freq_local;  // local layers
  double mscale = 1.0, mscale_local = 1.0;
};

// Angles per position unit for each rotated pair, from the file's metadata and tensors.
inline void rope_setup(const GgufFile& f, Model& m) {
  const ModelConfig& c = m.c;
  const int half = c.rope_dim / 2;
  auto base_freq = [&](double base, int i) { return std::pow(base, -2.0 * i / c.rope_dim); };
  m.inv_freq.assign(half, 0.0);
  m.inv_freq_local.assign(half, 0.0);
  const std::string p = c.architecture + ".";
  const double attn_factor = f.get_float_or(p + "rope.scaling.attn_factor", 1.0).value();
  const auto type = f.get_string_or(p + "rope.scaling.type", "none").value();
  const double factor = f.get_float_or(p + "rope.scaling.factor", 1.0).value();
  Vec div(half, 1.0);
  if (f.tensor("rope_freqs.weight")) div = tensor(f, "rope_freqs.weight");
  const int64_t orig =
      f.get_int_or(p + "rope.scaling.original_context_length", c.context_length).value();
  if (f.tensor("rope_factors_long.weight")) {
    div = tensor(
        f, c.context_length > orig ? "rope_factors_long.weight" : "rope_factors_short.weight");
  }
  // Local (sliding-window) layers: their own base when the file says so (gemma3: 10000), and
  // gemma3's are not scaled.
  const bool gemma3 = c.architecture == "gemma3";
  const double local_base =
      f.get_float_or(p + "rope.freq_base_swa", gemma3 ? 10000.0 : double(c.rope_freq_base)).value();
  auto angles = [&](double base, Vec& inv) {
    for (int i = 0; i < half; ++i) {
      const double extrap = base_freq(base, i) / div[i];
      if (type == "linear") {
        inv[i] = extrap / factor;
      } else if (type == "yarn") {
        // YaRN (Peng et al.; ggml's rope_yarn): a linear ramp between the dims whose wavelength
        // makes beta_fast and beta_slow rotations over the original context.
        auto corr = [&](double rotations) {
          return c.rope_dim * std::log(orig / (rotations * 2 * std::numbers::pi)) /
                 (2 * std::log(base));
        };
        const double lo = std::max(0.0, std::floor(corr(32.0)));
        const double hi = std::min(double(c.rope_dim - 1), std::ceil(corr(1.0)));
        const double ramp = 1.0 - std::clamp((i - lo) / std::max(0.001, hi - lo), 0.0, 1.0);
        inv[i] = extrap / factor * (1.0 - ramp) + extrap * ramp;
      } else {
        inv[i] = extrap;
      }
    }
  };
  angles(c.rope_freq_base, m.inv_freq);
  angles(local_base, m.inv_freq_local);
  m.mscale = type == "yarn" ? attn_factor * (1.0 + 0.1 * std::log(factor)) : attn_factor;
  m.mscale_local = m.mscale;
  if (gemma3) {
    for (int i = 0; i < half; ++i) m.inv_freq_local[i] = base_freq(local_base, i);
    m.mscale_local = 1.0;
  }
}

inline Model load(const GgufFile& f) {
  Model m;
  m.c = load_model_config(f).value();
  const ModelConfig& c = m.c;
  m.embd = tensor(f, "token_embd.weight");
  m.out = f.tensor("output.weight") ? tensor(f, "output.weight") : m.embd;
  m.out_norm = tensor(f, "output_norm.weight");
  rope_setup(f, m);
  const int64_t q = c.q_dim(), kv = c.kv_dim();
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    Layer l;
    l.attn_norm = tensor(f, p + "attn_norm.weight");
    l.ffn_norm = tensor(f, p + "ffn_norm.weight");
    if (f.tensor(p + "attn_qkv.weight")) {
      const Vec qkv = tensor(f, p + "attn_qkv.weight");
      l.wq = rows(qkv, c.dim, 0, q);
      l.wk = rows(qkv, c.dim, q, kv);
      l.wv = rows(qkv, c.dim, q + kv, kv);
    } else {
      l.wq = tensor(f, p + "attn_q.weight");
      l.wk = tensor(f, p + "attn_k.weight");
      l.wv = tensor(f, p + "attn_v.weight");
    }
    l.wo = tensor(f, p + "attn_output.weight");
    if (f.tensor(p + "ffn_gate.weight")) {
      l.gate = tensor(f, p + "ffn_gate.weight");
      l.up = tensor(f, p + "ffn_up.weight");
    } else {
      const Vec gate_up = tensor(f, p + "ffn_up.weight");
      l.gate = rows(gate_up, c.dim, 0, c.ffn_dim);
      l.up = rows(gate_up, c.dim, c.ffn_dim, c.ffn_dim);
    }
    l.down = tensor(f, p + "ffn_down.weight");
    l.bq = tensor(f, p + "attn_q.bias");
    l.bk = tensor(f, p + "attn_k.bias");
    l.bv = tensor(f, p + "attn_v.bias");
    l.q_norm = tensor(f, p + "attn_q_norm.weight");
    l.k_norm = tensor(f, p + "attn_k_norm.weight");
    l.post_attn = tensor(f, p + "post_attention_norm.weight");
    l.post_ffn = tensor(f, p + "post_ffw_norm.weight");
    m.layers.push_back(std::move(l));
  }
  return m;
}

inline Vec matvec(const Vec& w, const Vec& x, size_t n_rows) {
  Vec y(n_rows, 0.0);
  for (size_t r = 0; r < n_rows; ++r)
    for (size_t i = 0; i < x.size(); ++i) y[r] += w[r * x.size() + i] * x[i];
  return y;
}

inline void rmsnorm(double* x, size_t n, const Vec& w, double eps) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double s = 1.0 / std::sqrt(ss / n + eps);
  for (size_t i = 0; i < n; ++i) x[i] = x[i] * s * w[i];
}
inline Vec rmsnorm(Vec x, const Vec& w, double eps) {
  rmsnorm(x.data(), x.size(), w, eps);
  return x;
}

inline void rope(Vec& x, int heads, const Model& m, bool local, int pos) {
  const ModelConfig& c = m.c;
  const int half = c.rope_dim / 2;
  const bool neox = c.architecture != "llama";
  const Vec& inv = local ? m.inv_freq_local : m.inv_freq;
  const double mscale = local ? m.mscale_local : m.mscale;
  for (int h = 0; h < heads; ++h) {
    double* v = x.data() + h * c.head_dim;
    for (int i = 0; i < half; ++i) {
      const double theta = pos * inv[i];
      const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
      const double x0 = v[a], x1 = v[b];
      v[a] = (x0 * std::cos(theta) - x1 * std::sin(theta)) * mscale;
      v[b] = (x0 * std::sin(theta) + x1 * std::cos(theta)) * mscale;
    }
  }
}

inline double gelu_tanh(double x) {
  return 0.5 * x *
         (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

// Logits after each token of `tokens` (one sequence, positions 0..n-1).
inline std::vector<Vec> forward(const Model& m, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = m.c;
  const bool gemma = c.architecture == "gemma2" || c.architecture == "gemma3";
  const double attn_cap = c.architecture == "gemma2" ? c.attn_softcap : 0.0;
  std::vector<std::vector<Vec>> kc(c.n_layers), vc(c.n_layers);
  std::vector<Vec> all;
  for (size_t t = 0; t < tokens.size(); ++t) {
    Vec x(m.embd.begin() + tokens[t] * c.dim, m.embd.begin() + (tokens[t] + 1) * c.dim);
    if (gemma) {
      for (double& e : x) e *= std::sqrt(double(c.dim));
    }
    for (int li = 0; li < c.n_layers; ++li) {
      const Layer& l = m.layers[li];
      const bool local =
          c.sliding_window > 0 &&
          (c.local_layers.empty() ? c.swa_pattern <= 1 || li % c.swa_pattern < c.swa_pattern - 1
                                  : c.local_layers[li] != 0);
      Vec h = rmsnorm(x, l.attn_norm, c.rms_eps);
      Vec q = matvec(l.wq, h, c.q_dim()), k = matvec(l.wk, h, c.kv_dim()),
          v = matvec(l.wv, h, c.kv_dim());
      for (size_t i = 0; i < l.bq.size(); ++i) q[i] += l.bq[i];
      for (size_t i = 0; i < l.bk.size(); ++i) k[i] += l.bk[i], v[i] += l.bv[i];
      if (!l.q_norm.empty()) {
        for (int hd = 0; hd < c.n_heads; ++hd)
          rmsnorm(q.data() + hd * c.head_dim, c.head_dim, l.q_norm, c.rms_eps);
        for (int hd = 0; hd < c.n_kv_heads; ++hd)
          rmsnorm(k.data() + hd * c.head_dim, c.head_dim, l.k_norm, c.rms_eps);
      }
      rope(q, c.n_heads, m, local, static_cast<int>(t));
      rope(k, c.n_kv_heads, m, local, static_cast<int>(t));
      kc[li].push_back(k);
      vc[li].push_back(v);
      const size_t first = local && t + 1 > size_t(c.sliding_window) ? t + 1 - c.sliding_window : 0;
      Vec attn(c.q_dim(), 0.0);
      for (int hd = 0; hd < c.n_heads; ++hd) {
        const int kvh = hd / (c.n_heads / c.n_kv_heads);
        Vec s(t + 1 - first);
        double mx = -1e300, sum = 0;
        for (size_t j = first; j <= t; ++j) {
          double d = 0;
          for (int i = 0; i < c.head_dim; ++i)
            d += q[hd * c.head_dim + i] * kc[li][j][kvh * c.head_dim + i];
          d /= std::sqrt(double(c.head_dim));  // query_pre_attn_scalar = head size below 27B
          if (attn_cap > 0) d = attn_cap * std::tanh(d / attn_cap);
          s[j - first] = d;
          mx = std::max(mx, d);
        }
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (size_t j = first; j <= t; ++j)
          for (int i = 0; i < c.head_dim; ++i)
            attn[hd * c.head_dim + i] += s[j - first] / sum * vc[li][j][kvh * c.head_dim + i];
      }
      Vec o = matvec(l.wo, attn, c.dim);
      if (!l.post_attn.empty()) o = rmsnorm(o, l.post_attn, c.rms_eps);
      for (int i = 0; i < c.dim; ++i) x[i] += o[i];
      h = rmsnorm(x, l.ffn_norm, c.rms_eps);
      Vec g = matvec(l.gate, h, c.ffn_dim);
      const Vec u = matvec(l.up, h, c.ffn_dim);
      for (int i = 0; i < c.ffn_dim; ++i)
        g[i] = (gemma ? gelu_tanh(g[i]) : g[i] / (1.0 + std::exp(-g[i]))) * u[i];
      Vec d = matvec(l.down, g, c.dim);
      if (!l.post_ffn.empty()) d = rmsnorm(d, l.post_ffn, c.rms_eps);
      for (int i = 0; i < c.dim; ++i) x[i] += d[i];
    }
    Vec logits = matvec(m.out, rmsnorm(x, m.out_norm, c.rms_eps), c.vocab_size);
    if (c.architecture == "gemma2" && c.final_softcap > 0) {
      for (double& e : logits) e = c.final_softcap * std::tanh(e / c.final_softcap);
    }
    all.push_back(std::move(logits));
  }
  return all;
}

inline double rel_error(const float* got, const Vec& ref) {
  double diff = 0, mag = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::fabs(got[i] - ref[i]));
    mag = std::max(mag, std::fabs(ref[i]));
  }
  return diff / mag;
}

}  // namespace cutline::model::reference
