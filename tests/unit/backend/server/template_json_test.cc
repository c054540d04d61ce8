#include "cutline/server/template_json.h"

#include <gtest/gtest.h>

namespace cutline::server {
namespace {

TEST(TemplateJson, PrintsAsPythonJsonDumps) {
  auto out = template_tojson(
      R"({"b":1,"a":[true,false,null],"s":"q\"\\\n\t\u0001 é <x>","f":1.50,"e":1e2,"n":-0})");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(
      *out,
      "{\"b\": 1, \"a\": [true, false, null], \"s\": \"q\\\"\\\\\\n\\t\\u0001 \xc3\xa9 <x>\", "
      "\"f\": 1.5, \"e\": 100.0, \"n\": 0}");
  EXPECT_EQ(*template_tojson("[]"), "[]");
  EXPECT_EQ(*template_tojson("{}"), "{}");
  EXPECT_FALSE(template_tojson("{\"a\":").ok());
}

TEST(TemplateJson, FloatsAsPythonRepr) {
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(100000.0), "100000.0");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(python_float_repr(1.5e-5), "1.5e-05");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(-2.5), "-2.5");
  EXPECT_EQ(python_float_repr(0.0), "0.0");
  EXPECT_EQ(python_float_repr(1.7976931348623157e308), "1.7976931348623157e+308");
}

}  // namespace
}  // namespace cutline::server
