#include "rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

namespace cutline::model {

namespace {

std::vector<float> read_f32(const GgufFile& f, const char* name, int64_t n) {
  const GgufTensor* t = f.tensor(name);
  std::vector<float> v(static_cast<size_t>(n));
  // validate_model_tensors checked the shape [n] and the type f32.
  std::memcpy(v.data(), t->data, static_cast<size_t>(n) * 4);  // data may be unaligned
  return v;
}

// The dimension (of n_dims) at which the wavelength covers `n_rot` rotations over the original
// context (ggml's rope_yarn_corr_dim).
double yarn_corr_dim(int32_t n_dims, int32_t n_ctx_orig, double n_rot, double base) {
  return n_dims * std::log(n_ctx_orig / (n_rot * 2 * std::numbers::pi)) / (2 * std::log(base));
}

}  // namespace

RopeFactors rope_factors(const GgufFile& f, const ModelConfig& c) {
  RopeFactors r;
  const int32_t half = c.rope_dim / 2;
  r.mscale = c.rope_attn_factor;
  if (c.rope_freq_factors) r.divisors = read_f32(f, "rope_freqs.weight", half);
  if (c.rope_long_short_factors) {
    const bool long_ctx = c.context_length > c.yarn_original_context;
    r.divisors =
        read_f32(f, long_ctx ? "rope_factors_long.weight" : "rope_factors_short.weight", half);
  }
  if (c.rope_scaling == RopeScaling::kLinear) r.freq_scale = 1.0f / c.rope_linear_scale;
  if (c.rope_scaling == RopeScaling::kYarn) {
    const double scale = 1.0 / c.yarn_factor;
    const double low = std::max(0.0, std::floor(yarn_corr_dim(c.rope_dim, c.yarn_original_context,
                                                              c.yarn_beta_fast, c.rope_freq_base)));
    const double high = std::min(static_cast<double>(c.rope_dim - 1),
                                 std::ceil(yarn_corr_dim(c.rope_dim, c.yarn_original_context,
                                                         c.yarn_beta_slow, c.rope_freq_base)));
    r.divisors.resize(half);
    for (int32_t i = 0; i < half; ++i) {
      const double y = (i - low) / std::max(0.001, high - low);
      const double mix = 1.0 - std::clamp(y, 0.0, 1.0);
      r.divisors[i] = static_cast<float>(1.0 / (scale * (1.0 - mix) + mix));
    }
    r.mscale = static_cast<float>(c.rope_attn_factor * (1.0 + 0.1 * std::log(c.yarn_factor)));
  }
  return r;
}

}  // namespace cutline::model
