#include "cutline/proto/json_writer.h"

#include <gtest/gtest.h>

namespace cutline::proto {
namespace {

TEST(JsonWriter, NestsWithCommas) {
  std::string out;
  JsonWriter w(out);
  w.begin_object().field("a", 1).key("b").begin_array().value("x").value(true).null().end_array();
  w.key("c").begin_object().end_object().field("d", 1.5).end_object();
  EXPECT_EQ(out, R"({"a":1,"b":["x",true,null],"c":{},"d":1.5})");
}

TEST(JsonWriter, EscapesControlAndQuotesKeepsUtf8) {
  std::string out;
  append_json_string(out, std::string("a\"b\\c\n\x01 \xc3\xa9", 10));
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\u0001 \xc3\xa9\"");
}

TEST(JsonWriter, NonFiniteIsNull) {
  std::string out;
  JsonWriter w(out);
  w.begin_array().value(1.0 / 0.0).end_array();
  EXPECT_EQ(out, "[null]");
}

}  // namespace
}  // namespace cutline::proto
