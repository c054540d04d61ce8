#pragma once
// GgufWriter: writes a GGUF v3 file (or an in-memory image) that GgufFile reads back. Used by the
// tiny-model synthesizer and by tests that need model files.
//
// Usage: set metadata, declare every tensor (name, type, shape), then begin_file()/begin_memory()
// writes the header, and the tensors' bytes are streamed in declaration order through
// write_data() (any number of calls per tensor; padding between tensors is inserted by the
// writer), then finish(). Nothing is held in memory but the header, so multi-GiB files stream.

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/model/gguf_file.h"
#include "cutline/model/tensor_type.h"

namespace cutline::model {

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = 32);
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  // Metadata (a key set twice keeps the last value, in its first position). general.alignment is
  // written automatically when the alignment is not 32.
  void set_u8(std::string_view key, uint8_t v);
  void set_i8(std::string_view key, int8_t v);
  void set_u16(std::string_view key, uint16_t v);
  void set_i16(std::string_view key, int16_t v);
  void set_u32(std::string_view key, uint32_t v);
  void set_i32(std::string_view key, int32_t v);
  void set_u64(std::string_view key, uint64_t v);
  void set_i64(std::string_view key, int64_t v);
  void set_f32(std::string_view key, float v);
  void set_f64(std::string_view key, double v);
  void set_bool(std::string_view key, bool v);
  void set_string(std::string_view key, std::string_view v);
  void set_string_array(std::string_view key, std::span<const std::string> v);
  void set_i32_array(std::string_view key, std::span<const int32_t> v);
  void set_f32_array(std::string_view key, std::span<const float> v);
  // Any array of fixed-size elements, given as packed little-endian bytes.
  void set_raw_array(std::string_view key, GgufValueType element_type, uint64_t count,
                     std::span<const uint8_t> packed);

  // Declares a tensor; shape in ggml order (innermost first), 1 to 4 dims. kBadRequest for an
  // empty or duplicate name, a bad shape, an unsupported type or a row not a multiple of the
  // block size.
  Status add_tensor(std::string_view name, TensorType type, std::span<const int64_t> shape);
  Status add_tensor(std::string_view name, TensorType type, std::initializer_list<int64_t> shape) {
    return add_tensor(name, type, std::span<const int64_t>(shape.begin(), shape.size()));
  }
  // Bytes the declared tensor at `index` takes.
  int64_t tensor_bytes(size_t index) const { return tensors_[index].n_bytes; }
  size_t tensor_count() const { return tensors_.size(); }

  // Writes the header to `path` (created or truncated) / to an in-memory buffer.
  Status begin_file(const std::string& path);
  Status begin_memory();
  // Appends tensor bytes in declaration order; kBadRequest when more bytes than declared.
  Status write_data(std::span<const uint8_t> bytes);
  // Checks every declared byte was written, pads, and closes the file.
  Status finish();
  // The image written by begin_memory() ... finish().
  std::vector<uint8_t> take_bytes() { return std::move(memory_); }

 private:
  struct Kv {
    std::string key;
    std::vector<uint8_t> encoded;  // type id + value, as on disk
  };
  struct TensorDecl {
    std::string name;
    TensorType type;
    std::vector<int64_t> shape;
    int64_t n_bytes;
    uint64_t offset;
  };
  void set_kv(std::string_view key, std::vector<uint8_t> encoded);
  Status emit(const void* data, size_t n);
  Status pad_to_alignment();
  Status begin_memory_or_file();

  uint32_t alignment_;
  std::vector<Kv> kvs_;
  std::vector<TensorDecl> tensors_;
  uint64_t data_bytes_ = 0;  // total data section size including padding

  std::FILE* file_ = nullptr;
  std::string path_;
  bool to_memory_ = false;
  bool begun_ = false;
  std::vector<uint8_t> memory_;
  uint64_t written_ = 0;         // bytes emitted so far (whole file)
  uint64_t data_start_ = 0;      // file offset of the data section
  size_t current_tensor_ = 0;    // tensor receiving write_data()
  int64_t current_written_ = 0;  // bytes written for it
};

}  // namespace cutline::model
