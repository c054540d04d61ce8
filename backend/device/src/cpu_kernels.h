#pragma once
// The CPU device's inner kernels, one table per instruction set, chosen at run time
// (__builtin_cpu_supports) — the build's baseline stays SSE4.2; the AVX2 and AVX-512 variants are
// compiled with per-function target attributes.
//
// Batch invariance lives here: dot_rows computes each row's dot product with the same fixed
// sequence of operations whatever `nr` is, so one activation row gives the same bits alone or in
// a tile with others.

#include <cstdint>
#include <string_view>

#include "cutline/device/quant.h"

namespace cutline::device::cpu {

// One activation row quantized for the integer kernels (dot_block_q): int16 values in blocks of
// kQBlock elements, x[i] ~= d[i / kQBlock] * q[i] (d = amax / 32767, round to nearest), and
// sums[g] = d * (sum of q over the 32 elements of group g) for the K-quants' min terms. q is
// zero from k up to the next multiple of kQBlock. Relative error of a dot product against the
// F32 one: about 1e-5 (half a step of amax / 32767 per element).
//
// Kernels that read int8 activations (Kernels::reads_x8) get q8, d8, sums8 and sums16 instead:
// the same row as int8 per kQBlock elements, x[i] ~= d8[i / kQBlock] * q8[i] (d8 = amax / 127,
// round to nearest), zero-padded like q, and sums8[g] = d8 * (sum of q8 over group g), so that a
// K-quant's min term sees the same activations as its scale term and their rounding errors cancel.
// Relative error of a dot product against the F32 one: about 1e-4 of sum|w*x|.
//
// Kernels that read int8 activations per group (Kernels::reads_xg) get only qg and dg: the row as
// int8 per kQGroup elements, as llama.cpp quantizes the activations of its Q8_0 dot products:
// x[i] ~= dg[4 * (i / kQGroup)] * (v[i] - 128) (amax / 127 over the group, round to nearest),
// where v is stored plus 128 as unsigned bytes (vpdpbusd's unsigned operand), in quads of four
// groups: elements 0-15 of the quad's groups at bytes 0, 16, 32 and 48, elements 16-31 at 64, 80,
// 96 and 112, so that one 64-byte vector holds a slice of all four. Each group's scale is stored
// 4 times in a row (one F32 lane per int32 lane of that vector). Zero-padded (v = 128, scale 0)
// up to qrow_padded(k).
struct QuantRow {
  const int16_t* q = nullptr;
  const float* d = nullptr;
  const float* sums = nullptr;
  const int8_t* q8 = nullptr;
  // With q8: the same bytes with each 128 elements in the order of kernels that hold one
  // 32-element block per 128-bit lane: elements 0-15, 32-47, 64-79, 96-111 (the four blocks'
  // first halves), then 16-31, 48-63, 80-95, 112-127 (their second halves).
  const int8_t* q8p = nullptr;
  // With q8: the same bytes with each 256 elements in the order of kernels that take a Q2_K or
  // Q3_K super-block's 64 code bytes in one load: for j = 0..3, elements 32j..32j+31, then
  // 128+32j..128+32j+31 (the codes at bits 2j of the load's low and high 32 bytes).
  const int8_t* q8h = nullptr;
  const float* d8 = nullptr;
  const float* sums8 = nullptr;
  // With q8: the integer sum of q8 over each 16 elements (|.| <= 16 * 127), for the types with
  // 16-element sub-blocks (Q2_K's mins, Q3_K's and Q6_K's offsets), taken out exactly in
  // integers.
  const int16_t* sums16 = nullptr;
  const uint8_t* qg = nullptr;
  const float* dg = nullptr;
};
constexpr int64_t kQBlock = 256;
constexpr int64_t kQGroup = 32;
inline int64_t qrow_padded(int64_t k) { return (k + kQBlock - 1) / kQBlock * kQBlock; }

// Weight rows to prefetch: `rows` rows of `bytes` bytes, `stride` bytes apart.
struct PrefetchRows {
  const void* w = nullptr;
  int64_t stride = 0;
  int rows = 0;
  int64_t bytes = 0;
};

// The interleaved weight layout (Kernels::interleave): blocks of this many rows, k-major; a dot
// product runs one multiply-add chain per kInterleaveKBlock input positions.
constexpr int kInterleaveRows = 16;
constexpr int64_t kInterleaveKBlock = 256;
// dot_interleaved's activations come in tiles of this many rows (pack_interleaved_x), and a
// tile of that many rows takes this many row blocks at a time.
constexpr int kInterleaveTileRows = 8;
constexpr int kInterleaveTileBlocks = 3;

// Where element i of weight row `row` (k elements per row) lies in the interleaved layout, in
// elements from the weight's start: F16 and F32 position-major within a block of kInterleaveRows
// rows; BF16 by pairs of positions, each row's elements 2p and 2p + 1 side by side (one 32-bit
// lane), the rows' lanes side by side.
inline int64_t interleaved_index(DType type, int64_t k, int64_t row, int64_t i) {
  const int64_t r = row % kInterleaveRows, block = row / kInterleaveRows * kInterleaveRows * k;
  return type == DType::kBF16 ? block + i / 2 * 2 * kInterleaveRows + 2 * r + i % 2
                              : block + i * kInterleaveRows + r;
}

enum class Isa { kScalar, kAvx2, kAvx512 };

struct Kernels {
  Isa isa = Isa::kScalar;
  int dot_tile = 1;  // the most rows one dot_rows call takes
  // out[r] = sum_i w[i] * xs[r][i] for r < nr <= dot_tile.
  void (*dot_rows)(const float* w, const float* const* xs, int nr, int64_t k, float* out) = nullptr;
  // Dequantizes n elements (a multiple of block_elems(type)) of one row to F32.
  void (*dequant)(DType type, const void* src, float* dst, int64_t n) = nullptr;
  // Optional: dot_rows reading the weight row's blocks directly, bitwise equal to dequant +
  // dot_rows; returns false when it has no kernel for this type or k (the caller falls back).
  // With nr == 0 it only answers whether it has one.
  bool (*dot_rows_typed)(DType type, const void* w, const float* const* xs, int nr, int64_t k,
                         float* out) = nullptr;
  // Optional register-blocked tile: out[r * ldo + n] = dot(weight row n, xs[r]) for n < nw <=
  // kTileW (kPanelW for a type read in place, when nr > 2) and r < nr <= kTileRows, weight rows
  // `w_stride` bytes apart, read in place. Each weight vector is loaded (and converted) once for
  // all nr rows. Every (n, r) pair gets the bits dot_rows(dequantized row n, xs[r]) would give,
  // whatever nw and nr are, so tiling never breaks batch invariance. Returns false when it has no
  // kernel for this type or k; nr == 0 only asks. `next` names the weight rows the caller reads
  // next: a panel brings them into the cache while it runs.
  bool (*dot_block)(DType type, const void* w, int64_t w_stride, int nw, const float* const* xs,
                    int nr, int64_t k, float* out, int64_t ldo, const PrefetchRows& next) = nullptr;
  // Optional integer path: quantizes one activation row (k elements) as QuantRow describes, into
  // q[qrow_padded(k)], d[qrow_padded(k) / kQBlock], sums[qrow_padded(k) / kQGroup].
  void (*quantize_row_x)(const float* x, int64_t k, int16_t* q, float* d, float* sums) = nullptr;
  // Optional: which weight types' dot_block_q reads QuantRow::q8, d8 and sums8, and the quantizer
  // that writes them (q8[qrow_padded(k)], d8[qrow_padded(k) / kQBlock], sums8[qrow_padded(k) /
  // kQGroup]). Both set or both null.
  bool (*reads_x8)(DType type) = nullptr;
  void (*quantize_row_x8)(const float* x, int64_t k, int8_t* q8, float* d8, float* sums8) = nullptr;
  // Optional: which weight types' dot_block_q reads only QuantRow::qg and dg, and the quantizer
  // that writes them (qg[qrow_padded(k)], dg[4 * qrow_padded(k) / kQGroup]). Both set or both
  // null.
  bool (*reads_xg)(DType type) = nullptr;
  void (*quantize_row_xg)(const float* x, int64_t k, uint8_t* qg, float* dg) = nullptr;
  // Optional integer path: out[r * ldo + n] = dot(weight row n, xs[r]) for n < nw, r < nr <=
  // kTileRows, with the weight blocks read in place and the activations quantized by
  // quantize_row_x. Each weight block is decoded once for all nr rows; each (n, r) pair gets the
  // same bits whatever nw and nr are. Returns false when it has no kernel for this type or k;
  // nr == 0 only asks. The matmul uses it for a type whenever it answers true, whatever the
  // batch size, except for prefill batches of the types packed_q_bytes answers for.
  bool (*dot_block_q)(DType type, const void* w, int64_t w_stride, int nw, const QuantRow* xs,
                      int nr, int64_t k, float* out, int64_t ldo) = nullptr;
  // Optional prefill path of the integer kernels, for batches of more than kTileRows rows of the
  // types it answers packed_q_bytes for (the bytes of one prepared weight row, 0 when there is
  // none): pack_wq prepares nw weight rows once in the form the kernel reads, and dot_packed_q
  // runs up to kTileRows activation rows over them, each (n, r) pair with the bits dot_block_q
  // would give, so batch invariance holds.
  int64_t (*packed_q_bytes)(DType type, int64_t k) = nullptr;
  void (*pack_wq)(DType type, const void* w, int64_t w_stride, int nw, int64_t k,
                  void* dst) = nullptr;
  void (*dot_packed_q)(DType type, const void* wp, int nw, const QuantRow* xs, int nr, int64_t k,
                       float* out, int64_t ldo) = nullptr;
  // Optional prefill path, for batches of more than kTileRows rows of the types it answers
  // packed_bytes for. The activation rows are copied once per matmul into stripe order
  // (pack_x: for each of the 4 accumulators j of dot_rows, its 16-element chunks j, j + 4, j + 8,
  // ... one after the other), and a panel of at most kPackPanelW weight rows is copied once into
  // the same order, 4 rows interleaved (pack_w), so that dot_packed reads both sequentially and
  // runs each accumulator over the whole row in one pass. packed_bytes(type, k) is the size of one
  // packed weight row, or 0 when there is no packed kernel for this type or k. dot_packed writes
  // out[r * ldo + n] for n < nw <= kPackPanelW and r < nr (any count), each pair with the bits
  // dot_rows(dequantized row n, xs[r]) would give, so batch invariance holds.
  int64_t (*packed_bytes)(DType type, int64_t k) = nullptr;
  void (*pack_x)(const float* x, int64_t k, float* dst) = nullptr;
  void (*pack_w)(DType type, const void* w, int64_t w_stride, int nw, int64_t k,
                 void* dst) = nullptr;
  // `next` names the weight rows the caller packs next: dot_packed brings them into L2 a few
  // lines at a time while it runs, so that packing them does not wait on memory.
  void (*dot_packed)(DType type, const void* wp, int nw, const float* const* xps, int nr, int64_t k,
                     float* out, int64_t ldo, const PrefetchRows& next) = nullptr;
  // Optional layout for the types it answers interleaved_bytes for (the bytes of a rows x k
  // weight in that layout, 0 when it has none): the device copies such a weight once at load,
  // block by block (interleave writes row blocks [block_begin, block_end) of kInterleaveRows rows,
  // k-major: position i of the block's rows side by side, then position i + 1; BF16 by pairs of
  // positions, interleaved_index), and every matmul over it runs dot_interleaved:
  // out[r * ldo + n] for the nb * kInterleaveRows rows of the blocks starting at wi and r < nr
  // (any count). Each output is the sum, in order, of one multiply-add chain per
  // kInterleaveKBlock positions, whatever nb and nr are, so batch invariance holds; one weight
  // vector serves a whole tile of activation rows and no output needs a horizontal reduction. Its
  // activations xp are packed: tile j (rows from j * kInterleaveTileRows, nt of them, the last tile
  // possibly fewer) at xp + j * kInterleaveTileRows * k, k-major (pack_interleaved_x writes one
  // tile of nt rows of x, k apart: xp[i * nt + r] = x[r * k + i]). A single row is its own packed
  // tile.
  int64_t (*interleaved_bytes)(DType type, int64_t rows, int64_t k) = nullptr;
  void (*interleave)(DType type, const void* w, int64_t k, int64_t block_begin, int64_t block_end,
                     void* dst) = nullptr;
  void (*pack_interleaved_x)(const float* x, int nt, int64_t k, float* xp) = nullptr;
  void (*dot_interleaved)(DType type, const void* wi, int64_t k, int nb, const float* xp, int nr,
                          float* out, int64_t ldo) = nullptr;
  // acc[r][i] += p[r] * v[i] for i < n, r < nr <= 4 (attention's V accumulation; one order per
  // element, independent of nr).
  void (*axpy_rows)(const float* v, const float* p, int nr, int64_t n, float* const* acc) = nullptr;
};

constexpr int kTileW = 4;
constexpr int kTileRows = 8;
// dot_block takes up to this many weight rows (instead of kTileW) when it reads them in place
// and nr > 2: a segment of the activation rows then stays in L1 for all of them. Batches of more
// than kTileRows rows (prefill) take panels of kPrefillPanelW rows instead, over longer segments
// (measured faster there, slower for decode batches). The bits do not depend on the panel.
constexpr int kPanelW = 16;
constexpr int kPrefillPanelW = 8;
// The most weight rows one packed panel holds (pack_w, dot_packed).
constexpr int kPackPanelW = 48;

// The best ISA this CPU supports, capped by the environment variable CUTLINE_CPU_ISA
// (scalar|avx2|avx512, or avx512-vnni|avx512-base, below) when set.
Isa detect_isa();
// The AVX-512 extensions (and GFNI) some kernels take where the CPU has them.
// CUTLINE_CPU_ISA=avx512-vnni allows VNNI only, avx512-base none of them, so that the kernels for
// CPUs without them run (and are tested) on one that has them.
enum class Avx512Extension { kVnni, kVbmi, kBitalg, kGfni };
bool avx512_extension_allowed(Avx512Extension ext);
std::string_view isa_name(Isa isa);
// Kernels for `isa`; isa must be supported by this CPU.
const Kernels& kernels_for(Isa isa);

const Kernels& scalar_kernels();
const Kernels& avx2_kernels();
const Kernels& avx512_kernels();

}  // namespace cutline::device::cpu
