#include "cutline/base/json_writer.h"

#include <cassert>
#include <charconv>
#include <cmath>

namespace cutline::base {

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (depth_ > 0) {
    const uint64_t bit = uint64_t{1} << (depth_ - 1);
    if (has_elements_ & bit) out_.push_back(',');
    has_elements_ |= bit;
  }
}

JsonWriter& JsonWriter::begin_object() {
  before_value();
  out_.push_back('{');
  assert(depth_ < kMaxDepth);
  ++depth_;
  has_elements_ &= ~(uint64_t{1} << (depth_ - 1));
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  assert(depth_ > 0 && !after_key_);
  --depth_;
  out_.push_back('}');
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value();
  out_.push_back('[');
  assert(depth_ < kMaxDepth);
  ++depth_;
  has_elements_ &= ~(uint64_t{1} << (depth_ - 1));
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  assert(depth_ > 0 && !after_key_);
  --depth_;
  out_.push_back(']');
  return *this;
}

JsonWriter& JsonWriter::key(std::string_view k) {
  assert(!after_key_);
  before_value();
  append_json_string(out_, k);
  out_.push_back(':');
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
  before_value();
  append_json_string(out_, s);
  return *this;
}

JsonWriter& JsonWriter::value(bool b) {
  before_value();
  out_.append(b ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::value(int64_t n) {
  before_value();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, n);
  out_.append(buf, r.ptr);
  return *this;
}

JsonWriter& JsonWriter::value(uint64_t n) {
  before_value();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, n);
  out_.append(buf, r.ptr);
  return *this;
}

JsonWriter& JsonWriter::value(double d) {
  before_value();
  if (!std::isfinite(d)) {
    out_.append("null");
    return *this;
  }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  out_.append(buf, r.ptr);
  return *this;
}

JsonWriter& JsonWriter::null() {
  before_value();
  out_.append("null");
  return *this;
}

JsonWriter& JsonWriter::raw(std::string_view json) {
  before_value();
  out_.append(json);
  return *this;
}

}  // namespace cutline::base
