#pragma once
// GgufFile: a read-only view of a GGUF (v2 or v3, little-endian) model file, memory-mapped.
// Opening parses and validates the whole header up front — every metadata value, every tensor
// info (name, rank <= 4, shape, type, offset in range and aligned, byte size matching type and
// shape) — so that a file that opens is safe to read through its accessors. A truncated, corrupt
// or unsupported file is an Error naming the file, the key or tensor, and what was expected.
//
// Who calls it: the model config and tokenizer loaders (metadata), the device layer (tensor data
// pointers, which stay valid for the GgufFile's lifetime), the fuzz target (from_bytes).
// Immutable after open; safe to share across threads.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/model/tensor_type.h"

namespace cutline::model {

// GGUF metadata value types (on-disk ids).
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "uint32", "string", "array", ... ("type#N" for an unknown id).
std::string gguf_value_type_name(GgufValueType type);

// One metadata value. Scalars are stored decoded; strings and string arrays are views into the
// file; numeric arrays keep a pointer to their packed little-endian elements in the file.
class GgufValue {
 public:
  GgufValueType type() const { return type_; }
  bool is_array() const { return type_ == GgufValueType::kArray; }
  // For arrays: the element type (nested arrays are refused at open).
  GgufValueType array_type() const { return array_type_; }

  // Any integer type (or bool) as int64; nullopt for other types or a uint64 above INT64_MAX.
  std::optional<int64_t> as_int() const;
  // float32/float64, and integer types converted; nullopt for strings, arrays, bool.
  std::optional<double> as_float() const;
  std::optional<bool> as_bool() const;
  std::optional<std::string_view> as_string() const;
  // String arrays: the elements (views into the file). nullopt for other types.
  std::optional<std::span<const std::string_view>> as_string_array() const;
  // Integer arrays (any integer element type, converted); nullopt otherwise or on overflow.
  std::optional<std::vector<int64_t>> as_int_array() const;
  // Float arrays (float32/float64; integers converted); nullopt otherwise.
  std::optional<std::vector<double>> as_float_array() const;

 private:
  friend class GgufParser;
  GgufValueType type_ = GgufValueType::kUint8;
  GgufValueType array_type_ = GgufValueType::kUint8;
  uint64_t array_size_ = 0;
  union {
    uint64_t u64;
    int64_t i64;
    double f64;
  } scalar_{0};
  std::string_view string_;
  const uint8_t* array_data_ = nullptr;  // numeric arrays: packed elements
  std::vector<std::string_view> strings_;
};

// One tensor. shape[0] is the innermost dimension (ggml order: a weight matrix of `rows` rows of
// `cols` elements has shape {cols, rows}); unused dimensions are 1.
struct GgufTensor {
  std::string_view name;
  TensorType type = TensorType::kF32;
  int32_t n_dims = 0;
  std::array<int64_t, 4> shape{1, 1, 1, 1};
  int64_t n_elements = 0;
  uint64_t offset = 0;  // from the start of the data section
  int64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // valid for the GgufFile's lifetime; aligned to alignment()

  int64_t rows() const { return n_elements / shape[0]; }
};

struct GgufMetadataEntry {
  std::string_view key;
  const GgufValue* value;
};

class GgufFile {
 public:
  // Maps and parses a file. kNotFound when it does not exist, kIo when it cannot be read,
  // kBadRequest when it is not valid GGUF, kUnsupported for a valid file we cannot use.
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path);
  // Parses a copy of an in-memory image; `name` stands for the file in error messages.
  static Result<std::unique_ptr<GgufFile>> from_bytes(std::span<const uint8_t> bytes,
                                                      std::string name = "<memory>");

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t file_bytes() const { return size_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section

  // ---- metadata ----
  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Metadata in file order.
  const std::vector<GgufMetadataEntry>& metadata() const { return metadata_order_; }

  // Typed getters: kBadRequest naming the file and key when missing or of the wrong type
  // ("model.gguf: metadata key 'llama.block_count' is a string, expected an integer").
  Result<int64_t> get_int(std::string_view key) const;
  Result<double> get_float(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string_view> get_string(std::string_view key) const;
  Result<std::span<const std::string_view>> get_string_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;
  Result<std::vector<double>> get_float_array(std::string_view key) const;
  // Optional keys: the fallback when absent, an error when present with the wrong type.
  Result<int64_t> get_int_or(std::string_view key, int64_t fallback) const;
  Result<double> get_float_or(std::string_view key, double fallback) const;
  Result<bool> get_bool_or(std::string_view key, bool fallback) const;
  Result<std::string_view> get_string_or(std::string_view key, std::string_view fallback) const;

  // ---- tensors ----
  const GgufTensor* tensor(std::string_view name) const;
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  // Sum of all tensors' byte sizes.
  int64_t tensor_bytes() const { return tensor_bytes_; }

  // "<path>: <message>" as a kBadRequest error; used by loaders to name the file.
  Error error(ErrorKind kind, std::string_view message) const;

 private:
  friend class GgufParser;
  GgufFile() = default;

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;  // mmap'd region (nullptr for from_bytes)
  std::unique_ptr<uint8_t[], void (*)(uint8_t*)> owned_{nullptr, nullptr};  // from_bytes copy
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  int64_t tensor_bytes_ = 0;

  std::unordered_map<std::string_view, GgufValue> values_;
  std::vector<GgufMetadataEntry> metadata_order_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace cutline::model
