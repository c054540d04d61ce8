#include <limits>

#include "cutline/model/gguf_file.h"
#include "gguf_decode.h"

namespace cutline::model {

using gguf_detail::decode_fixed;
using gguf_detail::fixed_size;
using gguf_detail::is_float;
using gguf_detail::is_integer;

std::string gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
      return "uint8";
    case GgufValueType::kInt8:
      return "int8";
    case GgufValueType::kUint16:
      return "uint16";
    case GgufValueType::kInt16:
      return "int16";
    case GgufValueType::kUint32:
      return "uint32";
    case GgufValueType::kInt32:
      return "int32";
    case GgufValueType::kFloat32:
      return "float32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "uint64";
    case GgufValueType::kInt64:
      return "int64";
    case GgufValueType::kFloat64:
      return "float64";
  }
  return "type#" + std::to_string(static_cast<uint32_t>(type));
}

// ---- GgufValue ----

std::optional<int64_t> GgufValue::as_int() const {
  if (type_ == GgufValueType::kBool) return static_cast<int64_t>(scalar_.u64);
  if (!is_integer(type_)) return std::nullopt;
  if (type_ == GgufValueType::kUint64 &&
      scalar_.u64 > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return std::nullopt;
  }
  return scalar_.i64;
}

std::optional<double> GgufValue::as_float() const {
  if (is_float(type_)) return scalar_.f64;
  if (is_integer(type_)) {
    if (type_ == GgufValueType::kUint64) return static_cast<double>(scalar_.u64);
    return static_cast<double>(scalar_.i64);
  }
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (type_ != GgufValueType::kBool) return std::nullopt;
  return scalar_.u64 != 0;
}

std::optional<std::string_view> GgufValue::as_string() const {
  if (type_ != GgufValueType::kString) return std::nullopt;
  return string_;
}

std::optional<std::span<const std::string_view>> GgufValue::as_string_array() const {
  if (type_ != GgufValueType::kArray || array_type_ != GgufValueType::kString) return std::nullopt;
  return std::span<const std::string_view>(strings_);
}

std::optional<std::vector<int64_t>> GgufValue::as_int_array() const {
  if (type_ != GgufValueType::kArray) return std::nullopt;
  if (!is_integer(array_type_) && array_type_ != GgufValueType::kBool) return std::nullopt;
  size_t size = fixed_size(array_type_);
  std::vector<int64_t> out(array_size_);
  for (uint64_t k = 0; k < array_size_; ++k) {
    uint64_t u;
    int64_t i;
    double f;
    decode_fixed(array_type_, array_data_ + k * size, u, i, f);
    if (array_type_ == GgufValueType::kUint64 &&
        u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return std::nullopt;
    }
    out[k] = i;
  }
  return out;
}

std::optional<std::vector<double>> GgufValue::as_float_array() const {
  if (type_ != GgufValueType::kArray) return std::nullopt;
  if (!is_integer(array_type_) && !is_float(array_type_)) return std::nullopt;
  size_t size = fixed_size(array_type_);
  std::vector<double> out(array_size_);
  for (uint64_t k = 0; k < array_size_; ++k) {
    uint64_t u;
    int64_t i;
    double f;
    decode_fixed(array_type_, array_data_ + k * size, u, i, f);
    if (is_float(array_type_)) {
      out[k] = f;
    } else if (array_type_ == GgufValueType::kUint64) {
      out[k] = static_cast<double>(u);
    } else {
      out[k] = static_cast<double>(i);
    }
  }
  return out;
}

}  // namespace cutline::model
