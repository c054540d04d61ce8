#include "cutline/model/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cutline::model {

namespace {

void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}
template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  put_bytes(out, &v, sizeof v);
}
void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}
template <typename T>
std::vector<uint8_t> scalar(GgufValueType type, T v) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, static_cast<uint32_t>(type));
  put(out, v);
  return out;
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment == 0 ? 32 : alignment) {
  if (alignment_ != 32) set_u32("general.alignment", alignment_);
}

GgufWriter::~GgufWriter() {
  if (file_) std::fclose(file_);
}

void GgufWriter::set_kv(std::string_view key, std::vector<uint8_t> encoded) {
  for (Kv& kv : kvs_) {
    if (kv.key == key) {
      kv.encoded = std::move(encoded);
      return;
    }
  }
  kvs_.push_back({std::string(key), std::move(encoded)});
}

void GgufWriter::set_u8(std::string_view k, uint8_t v) {
  set_kv(k, scalar(GgufValueType::kUint8, v));
}
void GgufWriter::set_i8(std::string_view k, int8_t v) {
  set_kv(k, scalar(GgufValueType::kInt8, v));
}
void GgufWriter::set_u16(std::string_view k, uint16_t v) {
  set_kv(k, scalar(GgufValueType::kUint16, v));
}
void GgufWriter::set_i16(std::string_view k, int16_t v) {
  set_kv(k, scalar(GgufValueType::kInt16, v));
}
void GgufWriter::set_u32(std::string_view k, uint32_t v) {
  set_kv(k, scalar(GgufValueType::kUint32, v));
}
void GgufWriter::set_i32(std::string_view k, int32_t v) {
  set_kv(k, scalar(GgufValueType::kInt32, v));
}
void GgufWriter::set_u64(std::string_view k, uint64_t v) {
  set_kv(k, scalar(GgufValueType::kUint64, v));
}
void GgufWriter::set_i64(std::string_view k, int64_t v) {
  set_kv(k, scalar(GgufValueType::kInt64, v));
}
void GgufWriter::set_f32(std::string_view k, float v) {
  set_kv(k, scalar(GgufValueType::kFloat32, v));
}
void GgufWriter::set_f64(std::string_view k, double v) {
  set_kv(k, scalar(GgufValueType::kFloat64, v));
}
void GgufWriter::set_bool(std::string_view k, bool v) {
  set_kv(k, scalar(GgufValueType::kBool, static_cast<uint8_t>(v ? 1 : 0)));
}
void GgufWriter::set_string(std::string_view k, std::string_view v) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kString));
  put_string(out, v);
  set_kv(k, std::move(out));
}
void GgufWriter::set_string_array(std::string_view k, std::span<const std::string> v) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kArray));
  put<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kString));
  put<uint64_t>(out, v.size());
  for (const std::string& s : v) put_string(out, s);
  set_kv(k, std::move(out));
}
void GgufWriter::set_raw_array(std::string_view k, GgufValueType element_type, uint64_t count,
                               std::span<const uint8_t> packed) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kArray));
  put<uint32_t>(out, static_cast<uint32_t>(element_type));
  put<uint64_t>(out, count);
  put_bytes(out, packed.data(), packed.size());
  set_kv(k, std::move(out));
}
void GgufWriter::set_i32_array(std::string_view k, std::span<const int32_t> v) {
  set_raw_array(k, GgufValueType::kInt32, v.size(),
                {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4});
}
void GgufWriter::set_f32_array(std::string_view k, std::span<const float> v) {
  set_raw_array(k, GgufValueType::kFloat32, v.size(),
                {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4});
}

Status GgufWriter::add_tensor(std::string_view name, TensorType type,
                              std::span<const int64_t> shape) {
  if (begun_) return make_error(ErrorKind::kInternal, "gguf writer: add_tensor after begin");
  if (name.empty()) return make_error(ErrorKind::kBadRequest, "gguf writer: empty tensor name");
  for (const TensorDecl& t : tensors_) {
    if (t.name == name) {
      return make_error(ErrorKind::kBadRequest,
                        "gguf writer: duplicate tensor '" + std::string(name) + "'");
    }
  }
  if (shape.empty() || shape.size() > 4) {
    return make_error(ErrorKind::kBadRequest,
                      "gguf writer: tensor '" + std::string(name) + "' needs 1 to 4 dimensions");
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) {
      return make_error(ErrorKind::kBadRequest, "gguf writer: tensor '" + std::string(name) +
                                                    "' has a non-positive dimension");
    }
    n *= d;
  }
  int64_t row = tensor_row_bytes(type, shape[0]);
  if (row < 0) {
    return make_error(ErrorKind::kBadRequest, "gguf writer: tensor '" + std::string(name) +
                                                  "' of type " + tensor_type_name(type) +
                                                  " cannot have rows of " +
                                                  std::to_string(shape[0]) + " elements");
  }
  TensorDecl t{std::string(name), type, {shape.begin(), shape.end()}, row * (n / shape[0]), 0};
  t.offset = data_bytes_;
  data_bytes_ += (static_cast<uint64_t>(t.n_bytes) + alignment_ - 1) / alignment_ * alignment_;
  tensors_.push_back(std::move(t));
  return {};
}

Status GgufWriter::emit(const void* data, size_t n) {
  if (n == 0) return {};
  if (to_memory_) {
    put_bytes(memory_, data, n);
  } else if (std::fwrite(data, 1, n, file_) != n) {
    return make_error(ErrorKind::kIo, path_ + ": write failed: " + std::strerror(errno));
  }
  written_ += n;
  return {};
}

Status GgufWriter::pad_to_alignment() {
  static const uint8_t kZeros[256] = {};
  uint64_t pad = (alignment_ - written_ % alignment_) % alignment_;
  while (pad > 0) {
    size_t n = pad > sizeof kZeros ? sizeof kZeros : pad;
    if (auto s = emit(kZeros, n); !s) return s;
    pad -= n;
  }
  return {};
}

Status GgufWriter::begin_file(const std::string& path) {
  if (begun_) return make_error(ErrorKind::kInternal, "gguf writer: begun twice");
  path_ = path;
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) {
    return make_error(ErrorKind::kIo, path + ": cannot create: " + std::strerror(errno));
  }
  // Large sequential writes: a bigger stdio buffer saves syscalls on multi-GiB files.
  std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
  return begin_memory_or_file();
}

Status GgufWriter::begin_memory() {
  if (begun_) return make_error(ErrorKind::kInternal, "gguf writer: begun twice");
  to_memory_ = true;
  path_ = "<memory>";
  return begin_memory_or_file();
}

Status GgufWriter::begin_memory_or_file() {
  begun_ = true;
  std::vector<uint8_t> h;
  h.insert(h.end(), {'G', 'G', 'U', 'F'});
  put<uint32_t>(h, 3);
  put<uint64_t>(h, tensors_.size());
  put<uint64_t>(h, kvs_.size());
  for (const Kv& kv : kvs_) {
    put_string(h, kv.key);
    put_bytes(h, kv.encoded.data(), kv.encoded.size());
  }
  for (const TensorDecl& t : tensors_) {
    put_string(h, t.name);
    put<uint32_t>(h, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) put<uint64_t>(h, static_cast<uint64_t>(d));
    put<uint32_t>(h, static_cast<uint32_t>(t.type));
    put<uint64_t>(h, t.offset);
  }
  if (to_memory_) memory_.reserve(h.size() + alignment_ + data_bytes_);
  if (auto s = emit(h.data(), h.size()); !s) return s;
  if (auto s = pad_to_alignment(); !s) return s;
  data_start_ = written_;
  current_tensor_ = 0;
  current_written_ = 0;
  return {};
}

Status GgufWriter::write_data(std::span<const uint8_t> bytes) {
  if (!begun_) return make_error(ErrorKind::kInternal, "gguf writer: write_data before begin");
  while (!bytes.empty()) {
    if (current_tensor_ >= tensors_.size()) {
      return make_error(ErrorKind::kBadRequest,
                        "gguf writer: more tensor bytes written than declared");
    }
    const TensorDecl& t = tensors_[current_tensor_];
    size_t n = std::min<size_t>(bytes.size(), static_cast<size_t>(t.n_bytes - current_written_));
    if (auto s = emit(bytes.data(), n); !s) return s;
    current_written_ += static_cast<int64_t>(n);
    bytes = bytes.subspan(n);
    if (current_written_ == t.n_bytes) {
      if (auto s = pad_to_alignment(); !s) return s;
      ++current_tensor_;
      current_written_ = 0;
    }
  }
  return {};
}

Status GgufWriter::finish() {
  if (!begun_) return make_error(ErrorKind::kInternal, "gguf writer: finish before begin");
  if (current_tensor_ < tensors_.size()) {
    return make_error(ErrorKind::kBadRequest,
                      "gguf writer: tensor '" + tensors_[current_tensor_].name + "' got " +
                          std::to_string(current_written_) + " of its " +
                          std::to_string(tensors_[current_tensor_].n_bytes) + " bytes");
  }
  if (file_) {
    bool ok = std::fflush(file_) == 0;
    ok = std::fclose(file_) == 0 && ok;
    file_ = nullptr;
    if (!ok) return make_error(ErrorKind::kIo, path_ + ": write failed: " + std::strerror(errno));
  }
  return {};
}

}  // namespace cutline::model
