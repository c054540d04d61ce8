#pragma once
// RoPE scaling as the Device's rope op takes it: per-pair frequency divisors, a position scale,
// and a magnitude factor for the rotated dims (applied by the runner after the rotation).
//
// - Llama 3.1: rope_freqs.weight holds the divisors.
// - linear: freq_scale = 1 / factor.
// - YaRN: between the ramp bounds the angle of pair i is blended from the interpolated
//   (pos / factor) and the original angle, theta_i = pos * base^(-2i/n) * ((1 - m_i) / factor +
//   m_i), which is a divisor 1 / ((1 - m_i) / factor + m_i); mscale = attn_factor * (1 + 0.1 *
//   ln(factor)) (ggml's rope_yarn).
// - phi3 long RoPE: rope_factors_long.weight when the context exceeds the original one, else
//   rope_factors_short.weight; mscale = rope.scaling.attn_factor.

#include <vector>

#include "cutline/model/gguf_file.h"
#include "cutline/model/model_config.h"

namespace cutline::model {

struct RopeFactors {
  std::vector<float> divisors;  // [rope_dim / 2], empty for none
  float freq_scale = 1.0f;
  float mscale = 1.0f;
};

// For global layers (and local ones unless config.local_rope_unscaled).
RopeFactors rope_factors(const GgufFile& file, const ModelConfig& config);

}  // namespace cutline::model
