#pragma once
// Reference quantizers the synthesizer writes weights with, producing ggml's block layouts
// exactly (tensor_type.h): F16 (round to nearest even), Q8_0 and Q4_0 (ggml's *_ref rounding).

#include <cstdint>

#include "cutline/model/tensor_type.h"

namespace cutline::model {

uint16_t f32_to_f16_bits(float f);

// Quantizes n elements (a multiple of the type's block size) into `out`
// (tensor_row_bytes(type, n) bytes). type is kF32, kF16, kQ8_0 or kQ4_0.
void quantize_row(TensorType type, const float* in, uint8_t* out, int64_t n);

}  // namespace cutline::model
