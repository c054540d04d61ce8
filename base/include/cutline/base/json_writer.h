#pragma once
// JsonWriter: appends compact JSON to a caller-owned std::string. Used for every body Cutline
// writes itself (stop records, chunks, error bodies, admin endpoints). Parsing is simdjson's job;
// writing is this small class so that the per-token path appends into a reused buffer and does not
// allocate once the buffer has grown.
//
// The writer tracks commas itself; the caller only nests begin/end calls correctly (asserted).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cutline/base/json_string.h"

namespace cutline::base {

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  // Object key; the next call writes its value.
  JsonWriter& key(std::string_view k);

  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b);
  JsonWriter& value(int64_t n);
  JsonWriter& value(uint64_t n);
  JsonWriter& value(int n) { return value(static_cast<int64_t>(n)); }
  JsonWriter& value(double d);  // non-finite values are written as null
  JsonWriter& null();
  // Copies already-serialized JSON verbatim (e.g. an object passed through from upstream).
  JsonWriter& raw(std::string_view json);

  // key + value in one call.
  template <typename V>
  JsonWriter& field(std::string_view k, const V& v) {
    key(k);
    return value(v);
  }
  // Writes the field only when the optional holds a value.
  template <typename V>
  JsonWriter& optional_field(std::string_view k, const std::optional<V>& v) {
    if (v) field(k, *v);
    return *this;
  }

 private:
  void before_value();

  // Containers nest at most this deep (asserted); a bit per level keeps the writer allocation-free.
  static constexpr int kMaxDepth = 64;

  std::string& out_;
  // Bit d of has_elements_ is set once the container open at depth d (1-based) holds an element.
  uint64_t has_elements_ = 0;
  int depth_ = 0;
  bool after_key_ = false;
};

}  // namespace cutline::base
