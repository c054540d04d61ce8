#include "cutline/model/gguf_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "cutline/model/gguf_writer.h"
#include "support/unique_temp_path.h"

namespace cutline::model {
namespace {

std::vector<uint8_t> f32_bytes(std::initializer_list<float> v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.begin(), out.size());
  return out;
}

// A small file with every metadata type and two tensors.
std::vector<uint8_t> sample_image(uint32_t alignment = 32) {
  GgufWriter w(alignment);
  w.set_u8("t.u8", 200);
  w.set_i8("t.i8", -100);
  w.set_u16("t.u16", 60000);
  w.set_i16("t.i16", -30000);
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -2000000000);
  w.set_u64("t.u64", 1ull << 40);
  w.set_i64("t.i64", -(1ll << 40));
  w.set_f32("t.f32", 0.5f);
  w.set_f64("t.f64", 0.25);
  w.set_bool("t.bool", true);
  w.set_string("t.string", "héllo");
  std::vector<std::string> strings = {"a", "", "ccc"};
  w.set_string_array("t.strings", strings);
  std::vector<int32_t> ints = {1, -2, 3};
  w.set_i32_array("t.ints", ints);
  std::vector<float> floats = {1.5f, -2.5f};
  w.set_f32_array("t.floats", floats);
  EXPECT_TRUE(w.add_tensor("a", TensorType::kF32, {3}).ok());
  EXPECT_TRUE(w.add_tensor("b", TensorType::kQ8_0, {32, 2}).ok());
  EXPECT_TRUE(w.begin_memory().ok());
  EXPECT_TRUE(w.write_data(f32_bytes({1, 2, 3})).ok());
  std::vector<uint8_t> q(68, 7);
  EXPECT_TRUE(w.write_data(q).ok());
  EXPECT_TRUE(w.finish().ok());
  return w.take_bytes();
}

std::string error_of(const std::vector<uint8_t>& bytes, const std::string& name = "m.gguf") {
  auto f = GgufFile::from_bytes(bytes, name);
  if (f.ok()) return "";
  return f.error().message;
}

// Builds a header by hand for corruptions the writer cannot produce.
class RawImage {
 public:
  RawImage(uint64_t n_tensors, uint64_t n_kv) {
    bytes_.insert(bytes_.end(), {'G', 'G', 'U', 'F'});
    u32(3);
    u64(n_tensors);
    u64(n_kv);
  }
  RawImage& u32(uint32_t v) { return raw(&v, 4); }
  RawImage& u64(uint64_t v) { return raw(&v, 8); }
  RawImage& str(std::string_view s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  RawImage& raw(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
    return *this;
  }
  RawImage& tensor(std::string_view name, std::initializer_list<uint64_t> shape, uint32_t type,
                   uint64_t offset) {
    str(name);
    u32(static_cast<uint32_t>(shape.size()));
    for (uint64_t d : shape) u64(d);
    u32(type);
    return u64(offset);
  }
  RawImage& pad_data(size_t data_bytes) {
    while (bytes_.size() % 32) bytes_.push_back(0);
    bytes_.resize(bytes_.size() + data_bytes);
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

TEST(GgufFile, ReadsEveryMetadataTypeBack) {
  auto f = GgufFile::from_bytes(sample_image(), "m.gguf");
  ASSERT_TRUE(f.ok()) << f.error().message;
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), 32u);
  EXPECT_EQ(*g.get_int("t.u8"), 200);
  EXPECT_EQ(*g.get_int("t.i8"), -100);
  EXPECT_EQ(*g.get_int("t.u16"), 60000);
  EXPECT_EQ(*g.get_int("t.i16"), -30000);
  EXPECT_EQ(*g.get_int("t.u32"), 4000000000ll);
  EXPECT_EQ(*g.get_int("t.i32"), -2000000000);
  EXPECT_EQ(*g.get_int("t.u64"), 1ll << 40);
  EXPECT_EQ(*g.get_int("t.i64"), -(1ll << 40));
  EXPECT_DOUBLE_EQ(*g.get_float("t.f32"), 0.5);
  EXPECT_DOUBLE_EQ(*g.get_float("t.f64"), 0.25);
  EXPECT_DOUBLE_EQ(*g.get_float("t.u8"), 200.0);  // integers read as numbers too
  EXPECT_TRUE(*g.get_bool("t.bool"));
  EXPECT_EQ(*g.get_string("t.string"), "héllo");
  auto strings = g.get_string_array("t.strings");
  ASSERT_TRUE(strings.ok());
  ASSERT_EQ(strings->size(), 3u);
  EXPECT_EQ((*strings)[0], "a");
  EXPECT_EQ((*strings)[1], "");
  EXPECT_EQ((*strings)[2], "ccc");
  EXPECT_EQ(*g.get_int_array("t.ints"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*g.get_float_array("t.floats"), (std::vector<double>{1.5, -2.5}));
  EXPECT_EQ(g.metadata().size(), 15u);
  EXPECT_EQ(g.metadata().front().key, "t.u8");
  EXPECT_EQ(*g.get_int_or("absent", 7), 7);
  EXPECT_EQ(*g.get_string_or("absent", "x"), "x");
}

TEST(GgufFile, TensorsHaveShapeTypeAndAlignedData) {
  for (uint32_t alignment : {32u, 64u, 256u}) {
    auto f = GgufFile::from_bytes(sample_image(alignment), "m.gguf");
    ASSERT_TRUE(f.ok()) << f.error().message;
    EXPECT_EQ((*f)->alignment(), alignment);
    ASSERT_EQ((*f)->tensors().size(), 2u);
    const GgufTensor* a = (*f)->tensor("a");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->type, TensorType::kF32);
    EXPECT_EQ(a->n_dims, 1);
    EXPECT_EQ(a->n_bytes, 12);
    float v[3];
    std::memcpy(v, a->data, 12);
    EXPECT_EQ(v[2], 3.0f);
    const GgufTensor* b = (*f)->tensor("b");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->type, TensorType::kQ8_0);
    EXPECT_EQ(b->shape[0], 32);
    EXPECT_EQ(b->shape[1], 2);
    EXPECT_EQ(b->rows(), 2);
    EXPECT_EQ(b->n_bytes, 68);
    EXPECT_EQ(b->data[67], 7);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data) % alignment, 0u);
    EXPECT_EQ((*f)->tensor_bytes(), 80);
    EXPECT_EQ((*f)->tensor("c"), nullptr);
  }
}

TEST(GgufFile, ReadsVersion2Files) {
  auto bytes = sample_image();
  bytes[4] = 2;  // v2 and v3 share the little-endian layout
  auto f = GgufFile::from_bytes(bytes);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ((*f)->version(), 2u);
}

TEST(GgufFile, OpensFromDiskThroughMmap) {
  auto bytes = sample_image();
  std::string path = test::unique_temp_path("gguf_file_test.gguf");
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ((*f)->path(), path);
  EXPECT_EQ((*f)->file_bytes(), bytes.size());
  EXPECT_EQ(*(*f)->get_string("t.string"), "héllo");
}

TEST(GgufFile, MissingFileIsNotFound) {
  auto f = GgufFile::open(testing::TempDir() + "/does-not-exist.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().kind, ErrorKind::kNotFound);
  EXPECT_NE(f.error().message.find("does-not-exist.gguf: cannot open"), std::string::npos);
}

TEST(GgufFile, EveryTruncationIsAnErrorNamingTheFile) {
  auto bytes = sample_image();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    auto f = GgufFile::from_bytes(cut, "cut.gguf");
    // Cutting only trailing padding after the last tensor's bytes still leaves a valid file.
    if (f.ok()) {
      EXPECT_GE(n, bytes.size() - 32) << n;
      continue;
    }
    EXPECT_EQ(f.error().message.rfind("cut.gguf: ", 0), 0u) << f.error().message;
  }
}

TEST(GgufFile, TruncatedHeaderSaysWhatWasBeingRead) {
  auto bytes = sample_image();
  bytes.resize(30);  // 15 entries cannot fit in 6 bytes
  EXPECT_EQ(error_of(bytes),
            "m.gguf: header declares 15 metadata entries, more than the 6 remaining bytes can hold "
            "(truncated file?)");
  EXPECT_EQ(
      error_of(RawImage(0, 1).u64(20).raw("abcde", 5).bytes()),
      "m.gguf: file is truncated: need 20 bytes for the key of metadata entry 0 at offset 32, "
      "but only 5 remain");
  bytes.resize(6);
  EXPECT_EQ(error_of(bytes),
            "m.gguf: file is truncated: need 4 bytes for the GGUF version at offset 4, but only 2 "
            "remain");
}

TEST(GgufFile, TruncatedDataNamesTheTensor) {
  auto bytes = sample_image();
  bytes.resize(bytes.size() - 40);
  EXPECT_EQ(error_of(bytes),
            "m.gguf: tensor 'b' (q8_0, 68 bytes at data offset 32) extends past the end of the "
            "file: the data section holds 88 bytes (truncated file?)");
}

TEST(GgufFile, WrongMagicAndVersionsAreRefused) {
  auto bytes = sample_image();
  auto bad = bytes;
  std::memcpy(bad.data(), "GGML", 4);
  EXPECT_EQ(error_of(bad), "m.gguf: not a GGUF file: magic is 'GGML', expected 'GGUF'");
  bad = bytes;
  bad[4] = 1;
  EXPECT_EQ(error_of(bad), "m.gguf: GGUF version 1 is not supported (expected 2 or 3)");
  bad = bytes;
  bad[4] = 0;
  bad[7] = 3;  // version 3 written big-endian
  EXPECT_EQ(error_of(bad),
            "m.gguf: big-endian GGUF files are not supported (version field reads 50331648)");
  EXPECT_EQ(error_of({}),
            "m.gguf: file is truncated: need 4 bytes for the magic 'GGUF' at offset 0, "
            "but only 0 remain");
}

TEST(GgufFile, TypedGettersNameTheKeyAndTheType) {
  auto f = GgufFile::from_bytes(sample_image(), "m.gguf");
  ASSERT_TRUE(f.ok());
  auto missing = (*f)->get_int("llama.block_count");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message,
            "m.gguf: metadata key 'llama.block_count' is missing (expected an integer)");
  auto wrong = (*f)->get_int("t.string");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().message,
            "m.gguf: metadata key 't.string' has type string, expected an integer");
  auto arr = (*f)->get_string_array("t.ints");
  ASSERT_FALSE(arr.ok());
  EXPECT_EQ(arr.error().message,
            "m.gguf: metadata key 't.ints' has type array of int32, expected an array of strings");
  auto opt = (*f)->get_bool_or("t.u8", false);
  ASSERT_FALSE(opt.ok());  // present with the wrong type is an error, not the fallback
  EXPECT_FALSE((*f)->get_int("t.bool").ok());
}

TEST(GgufFile, CorruptTensorInfosNameTheTensor) {
  // A type ggml defines that Cutline cannot compute with is refused by name, with the list.
  EXPECT_EQ(error_of(RawImage(1, 0).tensor("w", {256}, 16, 0).pad_data(128).bytes()),
            "m.gguf: unsupported tensor type iq2_xxs for tensor 'w' (supported: f32, f16, q4_0, "
            "q4_1, q5_0, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, bf16)");
  EXPECT_EQ(error_of(RawImage(1, 0).tensor("w", {32}, 7, 0).pad_data(64).bytes()),
            "m.gguf: unsupported tensor type q5_1 for tensor 'w' (supported: f32, f16, q4_0, "
            "q4_1, q5_0, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs, bf16)");
  EXPECT_EQ(error_of(RawImage(1, 0).tensor("w", {32}, 77, 0).pad_data(64).bytes()),
            "m.gguf: tensor 'w' has unknown type id 77");
  EXPECT_EQ(error_of(RawImage(1, 0).tensor("w", {8}, 0, 16).pad_data(64).bytes()),
            "m.gguf: tensor 'w' offset 16 is not a multiple of the alignment 32");
  EXPECT_EQ(error_of(RawImage(1, 0).tensor("w", {1, 1, 1, 1, 1}, 0, 0).pad_data(64).bytes()),
            "m.gguf: tensor 'w' has 5 dimensions, expected 1 to 4");
  EXPECT_EQ(error_of(RawImage(1, 0).tensor("w", {4, 0}, 0, 0).pad_data(64).bytes()),
            "m.gguf: tensor 'w' dimension 1 is 0, expected 1..2^40 elements in total");
  EXPECT_EQ(error_of(RawImage(1, 0).tensor("w", {16}, 8, 0).pad_data(64).bytes()),
            "m.gguf: tensor 'w' has rows of 16 elements, expected a multiple of the q8_0 block "
            "size 32");
  EXPECT_EQ(
      error_of(RawImage(2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad_data(64).bytes()),
      "m.gguf: duplicate tensor 'w'");
  EXPECT_EQ(
      error_of(RawImage(2, 0).tensor("a", {16}, 0, 0).tensor("b", {8}, 0, 32).pad_data(96).bytes()),
      "m.gguf: tensors 'a' and 'b' overlap in the data section");
  // Huge shapes do not overflow into a small byte size.
  EXPECT_EQ(
      error_of(RawImage(1, 0).tensor("w", {1ull << 32, 1ull << 32}, 0, 0).pad_data(64).bytes()),
      "m.gguf: tensor 'w' dimension 1 is 4294967296, expected 1..2^40 elements in total");
}

TEST(GgufFile, CorruptMetadataNamesTheKey) {
  EXPECT_EQ(error_of(RawImage(0, 1).str("k").u32(99).bytes()),
            "m.gguf: metadata key 'k' has unknown type 99 (expected 0..12)");
  EXPECT_EQ(error_of(RawImage(0, 1).str("k").u32(9).u32(9).u64(1).bytes()),
            "m.gguf: metadata key 'k' is an array of arrays, which is not supported");
  EXPECT_EQ(error_of(RawImage(0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2).bytes()),
            "m.gguf: duplicate metadata key 'k'");
  EXPECT_EQ(error_of(RawImage(0, 1).str("k").u32(7).raw("\x02", 1).bytes()),
            "m.gguf: metadata key 'k' is a bool with byte value 2, expected 0 or 1");
  EXPECT_EQ(error_of(RawImage(0, 1).str("general.alignment").u32(4).u32(48).bytes()),
            "m.gguf: metadata key 'general.alignment' is 48, expected a power of two");
  // An array length far beyond the file is refused before any allocation.
  EXPECT_EQ(error_of(RawImage(0, 1).str("k").u32(9).u32(5).u64(1ull << 60).bytes()),
            "m.gguf: file is truncated: array 'k' declares 1152921504606846976 int32 elements at "
            "offset 49, but only 0 bytes remain");
  EXPECT_EQ(error_of(RawImage(0, 1).str("k").u32(8).u64(1000).raw("abc", 3).bytes()),
            "m.gguf: file is truncated: need 1000 bytes for the value of metadata key 'k' at "
            "offset 45, but only 3 remain");
  EXPECT_EQ(error_of(RawImage(1ull << 40, 0).bytes()),
            "m.gguf: header declares 1099511627776 tensors, more than the 0 remaining bytes can "
            "hold (truncated file?)");
}

}  // namespace
}  // namespace cutline::model
