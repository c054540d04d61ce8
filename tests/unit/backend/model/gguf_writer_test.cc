#include "cutline/model/gguf_writer.h"

#include <gtest/gtest.h>

#include <cstring>

namespace cutline::model {
namespace {

TEST(GgufWriter, RefusesBadTensorDeclarations) {
  GgufWriter w;
  ASSERT_TRUE(w.add_tensor("a", TensorType::kQ4_0, {64, 2}).ok());
  EXPECT_EQ(w.tensor_bytes(0), 72);
  EXPECT_EQ(w.add_tensor("a", TensorType::kF32, {1}).error().message,
            "gguf writer: duplicate tensor 'a'");
  EXPECT_EQ(w.add_tensor("b", TensorType::kQ8_0, {33}).error().message,
            "gguf writer: tensor 'b' of type q8_0 cannot have rows of 33 elements");
  EXPECT_EQ(w.add_tensor("c", TensorType::kF32, {1, 1, 1, 1, 1}).error().message,
            "gguf writer: tensor 'c' needs 1 to 4 dimensions");
  EXPECT_EQ(w.add_tensor("d", TensorType::kQ5_1, {32}).error().message,  // unsupported type
            "gguf writer: tensor 'd' of type q5_1 cannot have rows of 32 elements");
  ASSERT_TRUE(w.add_tensor("e", TensorType::kQ5_K, {256, 2}).ok());
  EXPECT_EQ(w.tensor_bytes(1), 2 * 176);
}

TEST(GgufWriter, CountsTheBytesOfEveryTensor) {
  GgufWriter w;
  ASSERT_TRUE(w.add_tensor("a", TensorType::kF32, {2}).ok());
  ASSERT_TRUE(w.begin_memory().ok());
  std::vector<uint8_t> four(4, 1);
  ASSERT_TRUE(w.write_data(four).ok());
  EXPECT_EQ(w.finish().error().message, "gguf writer: tensor 'a' got 4 of its 8 bytes");
  std::vector<uint8_t> eight(8, 1);
  EXPECT_EQ(w.write_data(eight).error().message,
            "gguf writer: more tensor bytes written than declared");
}

TEST(GgufWriter, SplitWritesLandInOrderWithPadding) {
  GgufWriter w(64);
  w.set_string("k", "v");
  w.set_string("k", "w");  // replaced in place, not duplicated
  ASSERT_TRUE(w.add_tensor("a", TensorType::kF32, {3}).ok());
  ASSERT_TRUE(w.add_tensor("b", TensorType::kF32, {2}).ok());
  ASSERT_TRUE(w.begin_memory().ok());
  float v[5] = {1, 2, 3, 4, 5};
  auto* b = reinterpret_cast<const uint8_t*>(v);
  ASSERT_TRUE(w.write_data({b, 7}).ok());      // part of a
  ASSERT_TRUE(w.write_data({b + 7, 9}).ok());  // rest of a, start of b
  ASSERT_TRUE(w.write_data({b + 16, 4}).ok());
  ASSERT_TRUE(w.finish().ok());
  auto f = GgufFile::from_bytes(w.take_bytes());
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(*(*f)->get_string("k"), "w");
  EXPECT_EQ(*(*f)->get_int("general.alignment"), 64);
  EXPECT_EQ((*f)->tensor("b")->offset, 64u);
  float got[2];
  std::memcpy(got, (*f)->tensor("b")->data, 8);
  EXPECT_EQ(got[0], 4.0f);
  EXPECT_EQ(got[1], 5.0f);
}

}  // namespace
}  // namespace cutline::model
