#pragma once
// TensorType: the ggml tensor element types a GGUF file may name, by their on-disk ids, and the
// block layout of each one we support. The GGUF reader validates tensor byte sizes with these;
// the device kernels and the synthesizer use them to walk rows of quantized blocks.
//
// A quantized row of n elements is n / block_elems blocks of block_bytes each; n must be a
// multiple of block_elems.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cutline::model {

enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct TensorTypeTraits {
  std::string_view name;  // ggml's name: "f32", "q8_0", "q4_K", ...
  int32_t block_elems;    // elements per block (1 for plain floats)
  int32_t block_bytes;    // bytes per block
  bool supported;         // Cutline can load and compute with it
};

// Block layouts of the supported quantized types (ggml's, byte for byte, little-endian).
constexpr int32_t kQK8_0 = 32;       // Q8_0: f16 scale d, int8 qs[32]             -> 34 bytes
constexpr int32_t kQK4_0 = 32;       // Q4_0: f16 scale d, uint8 qs[16] (nibbles)  -> 18 bytes
constexpr int32_t kQK_K = 256;       // K-quants super-block
constexpr int32_t kQ4_KBytes = 144;  // f16 d, f16 dmin, uint8 scales[12], uint8 qs[128]
constexpr int32_t kQ6_KBytes = 210;  // uint8 ql[128], uint8 qh[64], int8 scales[16], f16 d
// Q4_1, Q5_0, Q2_K, Q3_K, Q5_K, IQ4_NL and IQ4_XS: see cutline/device/quant.h.

// Traits of a type id read from a file; nullopt for an id ggml never defined.
std::optional<TensorTypeTraits> tensor_type_traits(uint32_t type_id);
inline std::optional<TensorTypeTraits> tensor_type_traits(TensorType type) {
  return tensor_type_traits(static_cast<uint32_t>(type));
}

// "q8_0", or "type#77" for an unknown id.
std::string tensor_type_name(uint32_t type_id);
inline std::string tensor_type_name(TensorType type) {
  return tensor_type_name(static_cast<uint32_t>(type));
}

// The names of the types Cutline can load, in type-id order: "f32, f16, q4_0, ...".
std::string supported_tensor_types();

// Bytes of a row of `n_elements` of a supported type, or -1 when the type is unsupported or
// n_elements is not a multiple of its block size.
int64_t tensor_row_bytes(TensorType type, int64_t n_elements);

// Parses a ggml type name ("f16", "q8_0", "Q4_K", case-insensitive) into a supported type.
std::optional<TensorType> parse_tensor_type(std::string_view name);

}  // namespace cutline::model
