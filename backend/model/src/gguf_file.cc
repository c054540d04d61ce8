#include "cutline/model/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "gguf_decode.h"

namespace cutline::model {

namespace {

constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kDefaultAlignment = 32;

using gguf_detail::decode_fixed;
using gguf_detail::fixed_size;
using gguf_detail::is_float;
using gguf_detail::is_integer;
using gguf_detail::is_known_type;

}  // namespace

// ---- parser ----

// Walks the header of a mapped image with bounds checks; every failure becomes an Error that
// names what was being read.
class GgufParser {
 public:
  explicit GgufParser(GgufFile& file) : f_(file) {}

  Status parse();

 private:
  Error fail(ErrorKind kind, const std::string& message) const { return f_.error(kind, message); }
  Error truncated(uint64_t need, const std::string& what) const {
    return fail(ErrorKind::kBadRequest, "file is truncated: need " + std::to_string(need) +
                                            " bytes for " + what + " at offset " +
                                            std::to_string(pos_) + ", but only " +
                                            std::to_string(f_.size_ - pos_) + " remain");
  }
  uint64_t remaining() const { return f_.size_ - pos_; }

  // Reads n bytes; false when past the end.
  bool take(void* out, uint64_t n) {
    if (n > remaining()) return false;
    std::memcpy(out, f_.base_ + pos_, n);
    pos_ += n;
    return true;
  }
  Status read_u32(uint32_t& v, const std::string& what) {
    if (!take(&v, 4)) return truncated(4, what);
    return {};
  }
  Status read_u64(uint64_t& v, const std::string& what) {
    if (!take(&v, 8)) return truncated(8, what);
    return {};
  }
  Status read_string(std::string_view& s, const std::string& what);
  Status read_value(GgufValue& v, GgufValueType type, const std::string& key);
  Status read_array(GgufValue& v, const std::string& key);

  // The parse phases, in file order.
  Status read_header(uint64_t& n_tensors, uint64_t& n_kv);
  Status read_metadata(uint64_t n_kv);
  Status read_alignment();
  Status read_tensor_info(uint64_t k, GgufTensor& t);
  Status read_tensor_shape(GgufTensor& t, const std::string& name);
  Status place_tensors();

  GgufFile& f_;
  uint64_t pos_ = 0;
};

Status GgufParser::read_string(std::string_view& s, const std::string& what) {
  uint64_t len = 0;
  if (auto st = read_u64(len, "the length of " + what); !st) return st;
  if (len > remaining()) return truncated(len, what);
  s = std::string_view(reinterpret_cast<const char*>(f_.base_ + pos_), len);
  pos_ += len;
  return {};
}

Status GgufParser::read_value(GgufValue& v, GgufValueType type, const std::string& key) {
  v.type_ = type;
  const std::string what = "the value of metadata key '" + key + "'";
  if (type == GgufValueType::kString) return read_string(v.string_, what);
  if (type == GgufValueType::kArray) return read_array(v, key);
  size_t size = fixed_size(type);
  uint8_t buf[8] = {};
  if (!take(buf, size)) return truncated(size, what);
  uint64_t u;
  int64_t i;
  double d;
  decode_fixed(type, buf, u, i, d);
  if (type == GgufValueType::kBool && u > 1) {
    return fail(ErrorKind::kBadRequest, "metadata key '" + key + "' is a bool with byte value " +
                                            std::to_string(u) + ", expected 0 or 1");
  }
  if (is_float(type)) {
    v.scalar_.f64 = d;
  } else if (type == GgufValueType::kUint64 || type == GgufValueType::kBool ||
             type == GgufValueType::kUint8 || type == GgufValueType::kUint16 ||
             type == GgufValueType::kUint32) {
    v.scalar_.u64 = u;
    if (type != GgufValueType::kUint64) v.scalar_.i64 = i;
  } else {
    v.scalar_.i64 = i;
  }
  return {};
}

Status GgufParser::read_array(GgufValue& v, const std::string& key) {
  uint32_t elem = 0;
  if (auto st = read_u32(elem, "the element type of array '" + key + "'"); !st) return st;
  if (!is_known_type(elem)) {
    return fail(ErrorKind::kBadRequest, "metadata key '" + key + "' is an array of unknown type " +
                                            std::to_string(elem) + " (expected 0..12)");
  }
  v.array_type_ = static_cast<GgufValueType>(elem);
  if (v.array_type_ == GgufValueType::kArray) {
    return fail(ErrorKind::kUnsupported,
                "metadata key '" + key + "' is an array of arrays, which is not supported");
  }
  uint64_t count = 0;
  if (auto st = read_u64(count, "the length of array '" + key + "'"); !st) return st;
  v.array_size_ = count;
  if (v.array_type_ == GgufValueType::kString) {
    // Every string takes at least its 8-byte length: bound the count before reserving.
    if (count > remaining() / 8) {
      return truncated(count * 8 > count ? count * 8 : std::numeric_limits<uint64_t>::max(),
                       "the " + std::to_string(count) + " strings of array '" + key + "'");
    }
    v.strings_.resize(count);
    for (uint64_t k = 0; k < count; ++k) {
      if (auto st = read_string(v.strings_[k],
                                "element " + std::to_string(k) + " of array '" + key + "'");
          !st) {
        return st;
      }
    }
    return {};
  }
  size_t size = fixed_size(v.array_type_);
  if (count > remaining() / size) {
    return fail(ErrorKind::kBadRequest,
                "file is truncated: array '" + key + "' declares " + std::to_string(count) + " " +
                    gguf_value_type_name(v.array_type_) + " elements at offset " +
                    std::to_string(pos_) + ", but only " + std::to_string(remaining()) +
                    " bytes remain");
  }
  if (v.array_type_ == GgufValueType::kBool) {
    for (uint64_t k = 0; k < count; ++k) {
      if (f_.base_[pos_ + k] > 1) {
        return fail(ErrorKind::kBadRequest, "element " + std::to_string(k) + " of bool array '" +
                                                key + "' is " + std::to_string(f_.base_[pos_ + k]) +
                                                ", expected 0 or 1");
      }
    }
  }
  v.array_data_ = f_.base_ + pos_;
  pos_ += count * size;
  return {};
}

Status GgufParser::parse() {
  uint64_t n_tensors = 0, n_kv = 0;
  if (auto st = read_header(n_tensors, n_kv); !st) return st;
  if (auto st = read_metadata(n_kv); !st) return st;
  if (auto st = read_alignment(); !st) return st;
  f_.tensors_.resize(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    if (auto st = read_tensor_info(k, f_.tensors_[k]); !st) return st;
  }
  return place_tensors();
}

// Magic, version and the two counts, each count bounded by the bytes left.
Status GgufParser::read_header(uint64_t& n_tensors, uint64_t& n_kv) {
  char magic[4];
  if (!take(magic, 4)) return truncated(4, "the magic 'GGUF'");
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    std::string shown;
    for (char c : magic) {
      shown += (c >= 32 && c < 127) ? c : '?';
    }
    return fail(ErrorKind::kBadRequest,
                "not a GGUF file: magic is '" + shown + "', expected 'GGUF'");
  }
  uint32_t version = 0;
  if (auto st = read_u32(version, "the GGUF version"); !st) return st;
  if (version != 2 && version != 3) {
    if ((version & 0xffff) == 0 && version != 0) {
      return fail(ErrorKind::kUnsupported,
                  "big-endian GGUF files are not supported (version field reads " +
                      std::to_string(version) + ")");
    }
    return fail(ErrorKind::kUnsupported,
                "GGUF version " + std::to_string(version) + " is not supported (expected 2 or 3)");
  }
  f_.version_ = version;
  if (auto st = read_u64(n_tensors, "the tensor count"); !st) return st;
  if (auto st = read_u64(n_kv, "the metadata count"); !st) return st;
  // Each metadata entry takes >= 13 bytes and each tensor info >= 32: bound the counts by the
  // bytes left before trusting them.
  if (n_kv > remaining() / 13) {
    return fail(ErrorKind::kBadRequest,
                "header declares " + std::to_string(n_kv) + " metadata entries, more than the " +
                    std::to_string(remaining()) + " remaining bytes can hold (truncated file?)");
  }
  if (n_tensors > remaining() / 32) {
    return fail(ErrorKind::kBadRequest,
                "header declares " + std::to_string(n_tensors) + " tensors, more than the " +
                    std::to_string(remaining()) + " remaining bytes can hold (truncated file?)");
  }
  return {};
}

Status GgufParser::read_metadata(uint64_t n_kv) {
  f_.metadata_order_.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string_view key;
    if (auto st = read_string(key, "the key of metadata entry " + std::to_string(k)); !st) {
      return st;
    }
    std::string key_str(key);
    if (key.empty()) {
      return fail(ErrorKind::kBadRequest,
                  "metadata entry " + std::to_string(k) + " has an empty key");
    }
    if (f_.values_.count(key)) {
      return fail(ErrorKind::kBadRequest, "duplicate metadata key '" + key_str + "'");
    }
    uint32_t type = 0;
    if (auto st = read_u32(type, "the type of metadata key '" + key_str + "'"); !st) return st;
    if (!is_known_type(type)) {
      return fail(ErrorKind::kBadRequest, "metadata key '" + key_str + "' has unknown type " +
                                              std::to_string(type) + " (expected 0..12)");
    }
    GgufValue value;
    if (auto st = read_value(value, static_cast<GgufValueType>(type), key_str); !st) return st;
    auto [it, inserted] = f_.values_.emplace(key, std::move(value));
    f_.metadata_order_.push_back({it->first, &it->second});
  }
  return {};
}

// general.alignment when present (a uint32 power of two), else the GGUF default.
Status GgufParser::read_alignment() {
  const GgufValue* a = f_.find("general.alignment");
  if (!a) {
    f_.alignment_ = kDefaultAlignment;
    return {};
  }
  if (a->type() != GgufValueType::kUint32) {
    return fail(ErrorKind::kBadRequest, "metadata key 'general.alignment' has type " +
                                            gguf_value_type_name(a->type()) + ", expected uint32");
  }
  int64_t align = *a->as_int();
  if (align == 0 || (align & (align - 1)) != 0) {
    return fail(ErrorKind::kBadRequest, "metadata key 'general.alignment' is " +
                                            std::to_string(align) + ", expected a power of two");
  }
  f_.alignment_ = static_cast<uint32_t>(align);
  return {};
}

// Tensor info k: name, shape, type and offset; its data is placed later by place_tensors().
Status GgufParser::read_tensor_info(uint64_t k, GgufTensor& t) {
  if (auto st = read_string(t.name, "the name of tensor " + std::to_string(k)); !st) return st;
  const std::string name(t.name);
  if (t.name.empty()) {
    return fail(ErrorKind::kBadRequest, "tensor " + std::to_string(k) + " has an empty name");
  }
  if (f_.tensor_index_.count(t.name)) {
    return fail(ErrorKind::kBadRequest, "duplicate tensor '" + name + "'");
  }
  if (auto st = read_tensor_shape(t, name); !st) return st;
  uint32_t type = 0;
  if (auto st = read_u32(type, "the type of tensor '" + name + "'"); !st) return st;
  auto traits = tensor_type_traits(type);
  if (!traits) {
    return fail(ErrorKind::kBadRequest,
                "tensor '" + name + "' has unknown type id " + std::to_string(type));
  }
  if (!traits->supported) {
    return fail(ErrorKind::kUnsupported, "unsupported tensor type " + std::string(traits->name) +
                                             " for tensor '" + name +
                                             "' (supported: " + supported_tensor_types() + ")");
  }
  t.type = static_cast<TensorType>(type);
  if (t.shape[0] % traits->block_elems != 0) {
    return fail(ErrorKind::kBadRequest,
                "tensor '" + name + "' has rows of " + std::to_string(t.shape[0]) +
                    " elements, expected a multiple of the " + std::string(traits->name) +
                    " block size " + std::to_string(traits->block_elems));
  }
  t.n_bytes = t.n_elements / traits->block_elems * traits->block_bytes;
  if (auto st = read_u64(t.offset, "the offset of tensor '" + name + "'"); !st) return st;
  if (t.offset % f_.alignment_ != 0) {
    return fail(ErrorKind::kBadRequest, "tensor '" + name + "' offset " + std::to_string(t.offset) +
                                            " is not a multiple of the alignment " +
                                            std::to_string(f_.alignment_));
  }
  f_.tensor_index_.emplace(t.name, k);
  return {};
}

// Rank and extents; sets n_dims, shape and n_elements.
Status GgufParser::read_tensor_shape(GgufTensor& t, const std::string& name) {
  uint32_t n_dims = 0;
  if (auto st = read_u32(n_dims, "the rank of tensor '" + name + "'"); !st) return st;
  if (n_dims == 0 || n_dims > kMaxDims) {
    return fail(ErrorKind::kBadRequest, "tensor '" + name + "' has " + std::to_string(n_dims) +
                                            " dimensions, expected 1 to 4");
  }
  t.n_dims = static_cast<int32_t>(n_dims);
  int64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t extent = 0;
    if (auto st = read_u64(extent, "dimension " + std::to_string(d) + " of tensor '" + name + "'");
        !st) {
      return st;
    }
    // 2^62 total elements is far beyond any file; it keeps byte sizes free of overflow.
    constexpr uint64_t kMaxElements = uint64_t{1} << 40;
    if (extent == 0 || extent > kMaxElements ||
        static_cast<uint64_t>(n_elements) > kMaxElements / extent) {
      return fail(ErrorKind::kBadRequest, "tensor '" + name + "' dimension " + std::to_string(d) +
                                              " is " + std::to_string(extent) +
                                              ", expected 1..2^40 elements in total");
    }
    t.shape[d] = static_cast<int64_t>(extent);
    n_elements *= static_cast<int64_t>(extent);
  }
  t.n_elements = n_elements;
  return {};
}

// Points every tensor at its data, after checking that each lies inside the data section and
// that no two overlap.
Status GgufParser::place_tensors() {
  // The data section starts at the next alignment boundary after the tensor infos.
  uint64_t align = f_.alignment_;
  uint64_t data_offset = (pos_ + align - 1) / align * align;
  f_.data_offset_ = data_offset;
  uint64_t data_bytes = data_offset <= f_.size_ ? f_.size_ - data_offset : 0;

  std::vector<const GgufTensor*> by_offset;
  by_offset.reserve(f_.tensors_.size());
  for (GgufTensor& t : f_.tensors_) {
    if (t.offset > data_bytes || static_cast<uint64_t>(t.n_bytes) > data_bytes - t.offset) {
      return fail(ErrorKind::kBadRequest,
                  "tensor '" + std::string(t.name) + "' (" + tensor_type_name(t.type) + ", " +
                      std::to_string(t.n_bytes) + " bytes at data offset " +
                      std::to_string(t.offset) +
                      ") extends past the end of the file: the data "
                      "section holds " +
                      std::to_string(data_bytes) + " bytes (truncated file?)");
    }
    t.data = f_.base_ + data_offset + t.offset;
    f_.tensor_bytes_ += t.n_bytes;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const GgufTensor* a = by_offset[k - 1];
    const GgufTensor* b = by_offset[k];
    if (a->offset + static_cast<uint64_t>(a->n_bytes) > b->offset) {
      return fail(ErrorKind::kBadRequest, "tensors '" + std::string(a->name) + "' and '" +
                                              std::string(b->name) +
                                              "' overlap in the data "
                                              "section");
    }
  }
  return {};
}

// ---- GgufFile ----

namespace {
void free_aligned(uint8_t* p) { std::free(p); }
}  // namespace

GgufFile::~GgufFile() {
  if (mapping_) munmap(mapping_, size_);
}

Error GgufFile::error(ErrorKind kind, std::string_view message) const {
  return make_error(kind, path_ + ": " + std::string(message));
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return make_error(err == ENOENT ? ErrorKind::kNotFound : ErrorKind::kIo,
                      path + ": cannot open: " + std::strerror(err));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return make_error(ErrorKind::kIo, path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorKind::kBadRequest, path + ": not a regular file");
  }
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ == 0) {
    ::close(fd);
    return make_error(ErrorKind::kBadRequest, path + ": file is empty, expected a GGUF header");
  }
  void* m = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (m == MAP_FAILED) {
    return make_error(ErrorKind::kIo, path + ": cannot map: " + std::strerror(err));
  }
  f->mapping_ = m;
  f->base_ = static_cast<const uint8_t*>(m);
  GgufParser parser(*f);
  if (auto s = parser.parse(); !s) return std::move(s).error();
  return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::from_bytes(std::span<const uint8_t> bytes,
                                                       std::string name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = std::move(name);
  // A page-aligned copy, so tensor data is as aligned as in a mapped file.
  size_t alloc = (bytes.size() + 4095) / 4096 * 4096;
  if (alloc == 0) alloc = 4096;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(4096, alloc));
  if (!p) return make_error(ErrorKind::kExhausted, f->path_ + ": out of memory");
  f->owned_ = std::unique_ptr<uint8_t[], void (*)(uint8_t*)>(p, free_aligned);
  if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
  f->base_ = p;
  f->size_ = bytes.size();
  GgufParser parser(*f);
  if (auto s = parser.parse(); !s) return std::move(s).error();
  return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

namespace {

template <typename T, typename Get>
Result<T> typed(const GgufFile& f, std::string_view key, const char* expected, Get get) {
  const GgufValue* v = f.find(key);
  if (!v) {
    return f.error(ErrorKind::kBadRequest, "metadata key '" + std::string(key) +
                                               "' is missing (expected " + expected + ")");
  }
  auto out = get(*v);
  if (!out) {
    std::string found = gguf_value_type_name(v->type());
    if (v->is_array()) found = "array of " + gguf_value_type_name(v->array_type());
    return f.error(ErrorKind::kBadRequest, "metadata key '" + std::string(key) + "' has type " +
                                               found + ", expected " + expected);
  }
  return T(std::move(*out));
}

}  // namespace

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  return typed<int64_t>(*this, key, "an integer", [](const GgufValue& v) {
    return v.type() == GgufValueType::kBool ? std::nullopt : v.as_int();
  });
}
Result<double> GgufFile::get_float(std::string_view key) const {
  return typed<double>(*this, key, "a number", [](const GgufValue& v) { return v.as_float(); });
}
Result<bool> GgufFile::get_bool(std::string_view key) const {
  return typed<bool>(*this, key, "a bool", [](const GgufValue& v) { return v.as_bool(); });
}
Result<std::string_view> GgufFile::get_string(std::string_view key) const {
  return typed<std::string_view>(*this, key, "a string",
                                 [](const GgufValue& v) { return v.as_string(); });
}
Result<std::span<const std::string_view>> GgufFile::get_string_array(std::string_view key) const {
  return typed<std::span<const std::string_view>>(
      *this, key, "an array of strings", [](const GgufValue& v) { return v.as_string_array(); });
}
Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  return typed<std::vector<int64_t>>(*this, key, "an array of integers",
                                     [](const GgufValue& v) { return v.as_int_array(); });
}
Result<std::vector<double>> GgufFile::get_float_array(std::string_view key) const {
  return typed<std::vector<double>>(*this, key, "an array of numbers",
                                    [](const GgufValue& v) { return v.as_float_array(); });
}
Result<int64_t> GgufFile::get_int_or(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : Result<int64_t>(fallback);
}
Result<double> GgufFile::get_float_or(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : Result<double>(fallback);
}
Result<bool> GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : Result<bool>(fallback);
}
Result<std::string_view> GgufFile::get_string_or(std::string_view key,
                                                 std::string_view fallback) const {
  return has(key) ? get_string(key) : Result<std::string_view>(fallback);
}

const GgufTensor* GgufFile::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace cutline::model
