#include "cutline/model/tensor_type.h"

#include <gtest/gtest.h>

namespace cutline::model {
namespace {

TEST(TensorType, BlockLayoutsMatchGgml) {
  EXPECT_EQ(tensor_row_bytes(TensorType::kF32, 10), 40);
  EXPECT_EQ(tensor_row_bytes(TensorType::kF16, 10), 20);
  EXPECT_EQ(tensor_row_bytes(TensorType::kBF16, 10), 20);
  EXPECT_EQ(tensor_row_bytes(TensorType::kQ8_0, 64), 68);
  EXPECT_EQ(tensor_row_bytes(TensorType::kQ4_0, 64), 36);
  EXPECT_EQ(tensor_row_bytes(TensorType::kQ4_K, 512), 288);
  EXPECT_EQ(tensor_row_bytes(TensorType::kQ6_K, 256), 210);
  EXPECT_EQ(tensor_row_bytes(TensorType::kQ4_1, 64), 40);
  EXPECT_EQ(tensor_row_bytes(TensorType::kQ5_0, 64), 44);
  EXPECT_EQ(tensor_row_bytes(TensorType::kQ2_K, 256), 84);
  EXPECT_EQ(tensor_row_bytes(TensorType::kQ3_K, 256), 110);
  EXPECT_EQ(tensor_row_bytes(TensorType::kQ5_K, 512), 352);
  EXPECT_EQ(tensor_row_bytes(TensorType::kIQ4_NL, 64), 36);
  EXPECT_EQ(tensor_row_bytes(TensorType::kIQ4_XS, 256), 136);
  EXPECT_EQ(tensor_row_bytes(TensorType::kQ8_0, 40), -1);      // not a whole block
  EXPECT_EQ(tensor_row_bytes(TensorType::kQ5_1, 32), -1);      // known but unsupported
  EXPECT_EQ(tensor_row_bytes(TensorType::kIQ2_XXS, 256), -1);  // known but unsupported
}

TEST(TensorType, NamesAndParsing) {
  EXPECT_EQ(tensor_type_name(TensorType::kQ4_K), "q4_K");
  EXPECT_EQ(tensor_type_name(77), "type#77");
  EXPECT_EQ(parse_tensor_type("Q8_0"), TensorType::kQ8_0);
  EXPECT_EQ(parse_tensor_type("q4_k"), TensorType::kQ4_K);
  EXPECT_EQ(parse_tensor_type("bf16"), TensorType::kBF16);
  EXPECT_EQ(parse_tensor_type("q5_K"), TensorType::kQ5_K);
  EXPECT_EQ(parse_tensor_type("IQ4_XS"), TensorType::kIQ4_XS);
  EXPECT_FALSE(parse_tensor_type("iq2_xxs").has_value());
  EXPECT_FALSE(parse_tensor_type("").has_value());
  ASSERT_TRUE(tensor_type_traits(16).has_value());
  EXPECT_FALSE(tensor_type_traits(16)->supported);
  EXPECT_FALSE(tensor_type_traits(4).has_value());  // a removed ggml type id
}

}  // namespace
}  // namespace cutline::model
