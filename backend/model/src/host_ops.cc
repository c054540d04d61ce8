#include "host_ops.h"

#include <algorithm>
#include <cmath>

namespace cutline::model {

HostView::HostView(device::Device& dev)
    : dev_(dev), in_place_(dev.kind() == device::DeviceKind::kCpu) {
  // Queued ops must have finished before the host reads their outputs (a no-op on the CPU).
  (void)dev_.sync();
}

HostView::~HostView() {
  for (Staged& s : staged_) {
    if (s.write_back) {
      dev_.upload(s.device_ptr, s.host.data(), static_cast<int64_t>(s.host.size()) * 4);
    }
  }
}

float* HostView::map(float* p, int64_t n, bool write_back) {
  if (in_place_) return p;
  Staged& s = staged_.emplace_back(Staged{p, std::vector<float>(n), write_back});
  dev_.download(s.host.data(), p, n * 4);
  (void)dev_.sync();
  return s.host.data();
}

void scale_in_place(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void geglu_tanh(const float* gate, const float* up, int64_t n, float* y) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float gelu = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * g * (1.0f + 0.044715f * g * g)));
    y[i] = gelu * up[i];
  }
}

void soft_cap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void scale_rotated(float* x, int64_t rows, int32_t n_heads, int32_t head_dim, int32_t n_rot,
                   float s) {
  for (int64_t h = 0; h < rows * n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int32_t i = 0; i < n_rot; ++i) v[i] *= s;
  }
}

void windowed_attention(const WindowedAttention& a) {
  const int64_t q_dim = int64_t{a.n_heads} * a.head_dim;
  const int64_t kv_dim = int64_t{a.n_kv_heads} * a.head_dim;
  const int32_t group = a.n_heads / a.n_kv_heads;
  std::vector<float> scores;
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const int32_t pos = a.tokens[t].pos;
    const int32_t* table = a.block_tables + a.tokens[t].table_begin;
    const int32_t first = a.window > 0 ? std::max(0, pos - a.window + 1) : 0;
    scores.resize(static_cast<size_t>(pos - first + 1));
    for (int32_t h = 0; h < a.n_heads; ++h) {
      const float* q = a.q + t * q_dim + int64_t{h} * a.head_dim;
      const int64_t kv_off = int64_t{h / group} * a.head_dim;
      float max_score = -INFINITY;
      for (int32_t p = first; p <= pos; ++p) {
        const int64_t row = int64_t{table[p / a.block_size]} * a.block_size + p % a.block_size;
        const float* k = a.k_cache + row * kv_dim + kv_off;
        float dot = 0.0f;
        for (int32_t i = 0; i < a.head_dim; ++i) dot += q[i] * k[i];
        float s = dot * a.scale;
        if (a.softcap > 0.0f) s = a.softcap * std::tanh(s / a.softcap);
        scores[p - first] = s;
        max_score = std::max(max_score, s);
      }
      float sum = 0.0f;
      for (float& s : scores) sum += (s = std::exp(s - max_score));
      float* out = a.out + t * q_dim + int64_t{h} * a.head_dim;
      std::fill(out, out + a.head_dim, 0.0f);
      for (int32_t p = first; p <= pos; ++p) {
        const int64_t row = int64_t{table[p / a.block_size]} * a.block_size + p % a.block_size;
        const float* v = a.v_cache + row * kv_dim + kv_off;
        const float w = scores[p - first] / sum;
        for (int32_t i = 0; i < a.head_dim; ++i) out[i] += w * v[i];
      }
    }
  }
}

}  // namespace cutline::model
