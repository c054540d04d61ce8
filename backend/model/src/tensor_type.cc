#include "cutline/model/tensor_type.h"

#include <cctype>
#include <string>

namespace cutline::model {
namespace {

struct Entry {
  uint32_t id;
  TensorTypeTraits traits;
};

// ggml's type table. Sizes of types we do not support are given where known so that error
// messages and tools can still describe a file; `supported` decides what loads.
constexpr Entry kTypes[] = {
    {0, {"f32", 1, 4, true}},
    {1, {"f16", 1, 2, true}},
    {2, {"q4_0", kQK4_0, 18, true}},
    {3, {"q4_1", 32, 20, true}},
    {6, {"q5_0", 32, 22, true}},
    {7, {"q5_1", 32, 24, false}},
    {8, {"q8_0", kQK8_0, 34, true}},
    {9, {"q8_1", 32, 36, false}},
    {10, {"q2_K", kQK_K, 84, true}},
    {11, {"q3_K", kQK_K, 110, true}},
    {12, {"q4_K", kQK_K, kQ4_KBytes, true}},
    {13, {"q5_K", kQK_K, 176, true}},
    {14, {"q6_K", kQK_K, kQ6_KBytes, true}},
    {15, {"q8_K", kQK_K, 292, false}},
    {16, {"iq2_xxs", kQK_K, 66, false}},
    {17, {"iq2_xs", kQK_K, 74, false}},
    {18, {"iq3_xxs", kQK_K, 98, false}},
    {19, {"iq1_s", kQK_K, 50, false}},
    {20, {"iq4_nl", 32, 18, true}},
    {21, {"iq3_s", kQK_K, 110, false}},
    {22, {"iq2_s", kQK_K, 82, false}},
    {23, {"iq4_xs", kQK_K, 136, true}},
    {24, {"i8", 1, 1, false}},
    {25, {"i16", 1, 2, false}},
    {26, {"i32", 1, 4, false}},
    {27, {"i64", 1, 8, false}},
    {28, {"f64", 1, 8, false}},
    {29, {"iq1_m", kQK_K, 56, false}},
    {30, {"bf16", 1, 2, true}},
    {34, {"tq1_0", kQK_K, 54, false}},
    {35, {"tq2_0", kQK_K, 66, false}},
    {39, {"mxfp4", 32, 17, false}},
};

}  // namespace

std::optional<TensorTypeTraits> tensor_type_traits(uint32_t type_id) {
  for (const Entry& e : kTypes) {
    if (e.id == type_id) return e.traits;
  }
  return std::nullopt;
}

std::string tensor_type_name(uint32_t type_id) {
  if (auto t = tensor_type_traits(type_id)) return std::string(t->name);
  return "type#" + std::to_string(type_id);
}

std::string supported_tensor_types() {
  std::string out;
  for (const Entry& e : kTypes) {
    if (!e.traits.supported) continue;
    if (!out.empty()) out += ", ";
    out += e.traits.name;
  }
  return out;
}

int64_t tensor_row_bytes(TensorType type, int64_t n_elements) {
  auto t = tensor_type_traits(type);
  if (!t || !t->supported || n_elements < 0 || n_elements % t->block_elems != 0) return -1;
  return n_elements / t->block_elems * t->block_bytes;
}

std::optional<TensorType> parse_tensor_type(std::string_view name) {
  for (const Entry& e : kTypes) {
    if (!e.traits.supported || e.traits.name.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(name[i])) !=
          std::tolower(static_cast<unsigned char>(e.traits.name[i]))) {
        same = false;
        break;
      }
    }
    if (same) return static_cast<TensorType>(e.id);
  }
  return std::nullopt;
}

}  // namespace cutline::model
