#include "cutline/base/json_writer.h"

#include <gtest/gtest.h>

namespace cutline::base {
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
}  // namespace cutline::base

namespace cutline::base {
namespace {

TEST(JsonWriter, DeepNestingTracksCommasPerLevel) {
  std::string out;
  JsonWriter w(out);
  for (int i = 0; i < 40; ++i) w.begin_array().value(i);
  for (int i = 0; i < 40; ++i) w.end_array();
  // Every level holds its number and the nested array: "[0,[1,[2,...]]]".
  EXPECT_EQ(out.substr(0, 10), "[0,[1,[2,[");
  EXPECT_EQ(out.substr(out.size() - 42), "39" + std::string(40, ']'));
  std::string again;
  JsonWriter w2(again);
  w2.begin_object().key("a").begin_array().end_array().field("b", 1).end_object();
  EXPECT_EQ(again, R"({"a":[],"b":1})");
}

}  // namespace
}  // namespace cutline::base
