#pragma once
// Reference (plain-loop) codecs of the block types beyond the first ones in quant.cc: Q4_1, Q5_0,
// Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS, one block at a time. quant.cc's dequantize_row and
// quantize_row dispatch to them; layouts in quant.h.
#include "cutline/device/quant.h"

namespace cutline::device::ref {

void dequant_q4_1(const BlockQ4_1& b, float* y);
void dequant_q5_0(const BlockQ5_0& b, float* y);
void dequant_q2_k(const BlockQ2_K& b, float* y);
void dequant_q3_k(const BlockQ3_K& b, float* y);
void dequant_q5_k(const BlockQ5_K& b, float* y);
void dequant_iq4_nl(const BlockIQ4_NL& b, float* y);
void dequant_iq4_xs(const BlockIQ4_XS& b, float* y);

void quant_q4_1(const float* x, BlockQ4_1& b);
void quant_q5_0(const float* x, BlockQ5_0& b);
void quant_q2_k(const float* x, BlockQ2_K& b);
void quant_q3_k(const float* x, BlockQ3_K& b);
void quant_q5_k(const float* x, BlockQ5_K& b);
void quant_iq4_nl(const float* x, BlockIQ4_NL& b);
void quant_iq4_xs(const float* x, BlockIQ4_XS& b);

}  // namespace cutline::device::ref
