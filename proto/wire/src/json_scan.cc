#include "json_scan.h"

namespace cutline::proto::json_scan {

using simdjson::SUCCESS;
namespace od = simdjson::ondemand;

std::string_view type_name(od::value& v) {
  od::json_type t;
  if (v.type().get(t) != SUCCESS) return "invalid";
  switch (t) {
    case od::json_type::array:
      return "array";
    case od::json_type::object:
      return "object";
    case od::json_type::number:
      return "number";
    case od::json_type::string:
      return "string";
    case od::json_type::boolean:
      return "boolean";
    case od::json_type::null:
      return "null";
  }
  return "invalid";
}

bool is_json_number(std::string_view s) {
  size_t i = 0;
  auto digit = [&](size_t k) { return k < s.size() && s[k] >= '0' && s[k] <= '9'; };
  if (i < s.size() && s[i] == '-') ++i;
  if (!digit(i)) return false;
  if (s[i] == '0') {
    ++i;
  } else {
    while (digit(i)) ++i;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digit(i)) return false;
    while (digit(i)) ++i;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digit(i)) return false;
    while (digit(i)) ++i;
  }
  return i == s.size();
}

simdjson::error_code validate_value(od::value v, int max_depth) {
  if (max_depth <= 0) return simdjson::DEPTH_ERROR;
  od::json_type t;
  if (auto e = v.type().get(t)) return e;
  switch (t) {
    case od::json_type::array: {
      od::array a;
      if (auto e = v.get_array().get(a)) return e;
      for (auto element : a) {
        od::value x;
        if (auto e = element.get(x)) return e;
        if (auto e = validate_value(x, max_depth - 1)) return e;
      }
      return SUCCESS;
    }
    case od::json_type::object: {
      od::object o;
      if (auto e = v.get_object().get(o)) return e;
      for (auto field : o) {
        od::field f;
        if (auto e = std::move(field).get(f)) return e;
        std::string_view key;
        if (auto e = f.unescaped_key().get(key)) return e;
        if (auto e = validate_value(f.value(), max_depth - 1)) return e;
      }
      return SUCCESS;
    }
    case od::json_type::number:
      return is_json_number(token_of(v)) ? SUCCESS : simdjson::NUMBER_ERROR;
    case od::json_type::string: {
      std::string_view s;
      return v.get_string().get(s);
    }
    case od::json_type::boolean: {
      bool b;
      return v.get_bool().get(b);
    }
    case od::json_type::null: {
      bool is_null = false;
      if (auto e = v.is_null().get(is_null)) return e;
      return is_null ? SUCCESS : simdjson::N_ATOM_ERROR;
    }
  }
  return simdjson::INCORRECT_TYPE;
}

simdjson::error_code scalar_text(od::value v, std::string_view& out) {
  od::json_type t;
  if (auto e = v.type().get(t)) return e;
  switch (t) {
    case od::json_type::string:
      return v.get_string().get(out);
    case od::json_type::number:
      out = token_of(v);
      return is_json_number(out) ? SUCCESS : simdjson::NUMBER_ERROR;
    case od::json_type::null:
      out = {};
      return SUCCESS;
    default:
      return simdjson::INCORRECT_TYPE;
  }
}

bool read_error_field(std::string_view key, od::value v, ErrorFields& out,
                      simdjson::error_code& e) {
  if (key == "message") {
    e = scalar_text(v, out.message);
  } else if (key == "type") {
    e = scalar_text(v, out.type);
  } else if (key == "param") {
    e = scalar_text(v, out.param);
  } else if (key == "code") {
    e = scalar_text(v, out.code);
  } else {
    return false;
  }
  return true;
}

simdjson::error_code read_error_object(od::object obj, ErrorFields& out) {
  for (auto field : obj) {
    od::field f;
    if (auto e = std::move(field).get(f)) return e;
    std::string_view key;
    if (auto e = f.unescaped_key().get(key)) return e;
    simdjson::error_code e = SUCCESS;
    read_error_field(key, f.value(), out, e);
    if (e) return e;
  }
  return SUCCESS;
}

simdjson::error_code read_int(od::value& v, int64_t& out) {
  if (v.get_int64().get(out) == SUCCESS) return SUCCESS;
  bool null = false;
  if (v.is_null().get(null) == SUCCESS && null) {
    out = 0;
    return SUCCESS;
  }
  double d;
  if (auto e = v.get_double().get(d)) return e;
  if (!(d > -9.2e18 && d < 9.2e18)) return simdjson::NUMBER_OUT_OF_RANGE;
  out = static_cast<int64_t>(d);
  return SUCCESS;
}

simdjson::error_code read_usage(od::value& v, std::optional<Usage>& out,
                                std::string_view& bad_key) {
  bool null = false;
  if (v.is_null().get(null) == SUCCESS && null) return SUCCESS;
  od::object obj;
  bad_key = "usage";
  if (auto e = v.get_object().get(obj)) return e;
  Usage u;
  for (auto field : obj) {
    od::field f;
    if (auto e = std::move(field).get(f)) return e;
    std::string_view key;
    if (auto e = f.unescaped_key().get(key)) return e;
    od::value value = f.value();
    int64_t* target = key == "prompt_tokens"       ? &u.prompt_tokens
                      : key == "completion_tokens" ? &u.completion_tokens
                      : key == "total_tokens"      ? &u.total_tokens
                                                   : nullptr;
    if (!target) continue;
    if (auto e = read_int(value, *target)) {
      bad_key = key == "prompt_tokens"       ? "usage.prompt_tokens"
                : key == "completion_tokens" ? "usage.completion_tokens"
                                             : "usage.total_tokens";
      return e;
    }
  }
  out = u;
  return SUCCESS;
}

simdjson::error_code check_end(od::document& doc) {
  const char* loc = nullptr;
  auto e = doc.current_location().get(loc);
  if (e == simdjson::OUT_OF_BOUNDS) return SUCCESS;
  if (e) return e;
  return simdjson::TRAILING_CONTENT;
}

}  // namespace cutline::proto::json_scan
