// K-quant dequantizers written as plain loops, included by each cpu_kernels_<isa>.cc after it
// defines CUTLINE_KQ_TARGET, so that the compiler vectorizes them for that ISA. Internal linkage
// (anonymous namespace) keeps the ISA variants apart.
namespace {

[[maybe_unused]] CUTLINE_KQ_TARGET void kq_dequant_q4_k(const BlockQ4_K* blocks, float* y,
                                                        int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ4_K& b = blocks[i];
    const float d = f16_to_f32(b.d);
    const float dmin = f16_to_f32(b.dmin);
    const uint8_t* q = b.qs;
    for (int j = 0, is = 0; j < kQK_K; j += 64, is += 2, q += 32) {
      uint8_t sc, m;
      q4_k_scale_min(is, b.scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      q4_k_scale_min(is + 1, b.scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) y[32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
      y += 64;
    }
  }
}

CUTLINE_KQ_TARGET void kq_dequant_q6_k(const BlockQ6_K* blocks, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ6_K& b = blocks[i];
    const float d = f16_to_f32(b.d);
    const uint8_t* ql = b.ql;
    const uint8_t* qh = b.qh;
    const int8_t* sc = b.scales;
    for (int n = 0; n < kQK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int h = 0; h < 2; ++h) {
        const float s0 = d * sc[h], s1 = d * sc[h + 2], s2 = d * sc[h + 4], s3 = d * sc[h + 6];
        for (int l = h * 16; l < h * 16 + 16; ++l) {
          y[l + 0] = s0 * static_cast<float>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
          y[l + 32] =
              s1 * static_cast<float>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
          y[l + 64] = s2 * static_cast<float>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
          y[l + 96] = s3 * static_cast<float>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
      }
    }
  }
}

}  // namespace
