#pragma once
// Little-endian decoding of fixed-size GGUF metadata values, shared by the GGUF parser and
// GgufValue's accessors.

#include <cstdint>
#include <cstring>

#include "cutline/model/gguf_file.h"

namespace cutline::model::gguf_detail {

// Fixed element size of a non-string, non-array value type; 0 otherwise.
inline size_t fixed_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

inline bool is_known_type(uint32_t id) {
  return id <= static_cast<uint32_t>(GgufValueType::kFloat64);
}

inline bool is_integer(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
      return true;
    default:
      return false;
  }
}

inline bool is_float(GgufValueType t) {
  return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64;
}

// Decodes one fixed-size little-endian element into the scalar union slots.
inline void decode_fixed(GgufValueType type, const uint8_t* p, uint64_t& u, int64_t& i, double& f) {
  u = 0;
  i = 0;
  f = 0;
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kBool:
      u = p[0];
      i = static_cast<int64_t>(u);
      break;
    case GgufValueType::kInt8: {
      int8_t v;
      std::memcpy(&v, p, 1);
      i = v;
      break;
    }
    case GgufValueType::kUint16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      u = v;
      i = v;
      break;
    }
    case GgufValueType::kInt16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      i = v;
      break;
    }
    case GgufValueType::kUint32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      u = v;
      i = v;
      break;
    }
    case GgufValueType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      i = v;
      break;
    }
    case GgufValueType::kUint64:
      std::memcpy(&u, p, 8);
      i = static_cast<int64_t>(u);
      break;
    case GgufValueType::kInt64:
      std::memcpy(&i, p, 8);
      break;
    case GgufValueType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      f = v;
      break;
    }
    case GgufValueType::kFloat64:
      std::memcpy(&f, p, 8);
      break;
    default:
      break;
  }
}

}  // namespace cutline::model::gguf_detail
