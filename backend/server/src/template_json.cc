#include "cutline/server/template_json.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>

#include <simdjson.h>

namespace cutline::server {

namespace {

void append_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void append_value(std::string& out, simdjson::dom::element e) {
  using simdjson::dom::element_type;
  switch (e.type()) {
    case element_type::OBJECT: {
      out.push_back('{');
      bool first = true;
      simdjson::dom::object object = e.get_object().value_unsafe();
      for (auto [key, value] : object) {
        if (!first) out += ", ";
        first = false;
        append_string(out, key);
        out += ": ";
        append_value(out, value);
      }
      out.push_back('}');
      return;
    }
    case element_type::ARRAY: {
      out.push_back('[');
      bool first = true;
      simdjson::dom::array array = e.get_array().value_unsafe();
      for (simdjson::dom::element v : array) {
        if (!first) out += ", ";
        first = false;
        append_value(out, v);
      }
      out.push_back(']');
      return;
    }
    case element_type::STRING:
      append_string(out, e.get_string().value_unsafe());
      return;
    case element_type::BOOL:
      out += e.get_bool().value_unsafe() ? "true" : "false";
      return;
    case element_type::NULL_VALUE:
      out += "null";
      return;
    case element_type::INT64:
      out += std::to_string(e.get_int64().value_unsafe());
      return;
    case element_type::UINT64:
      out += std::to_string(e.get_uint64().value_unsafe());
      return;
    case element_type::DOUBLE:
      out += python_float_repr(e.get_double().value_unsafe());
      return;
  }
}

}  // namespace

std::string python_float_repr(double value) {
  // Shortest round-trip digits, then Python's layout: positional when -4 <= exponent < 16.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  const size_t e_pos = sci.find('e');
  const int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  std::string digits;
  bool negative = false;
  for (char c : sci.substr(0, e_pos)) {
    if (c == '-') negative = true;
    if (c >= '0' && c <= '9') digits.push_back(c);
  }
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exponent) + 1) + "." +
             digits.substr(static_cast<size_t>(exponent) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

Result<std::string> template_tojson(std::string_view json) {
  // The DOM keeps object members in document order. Numbers come back as Python reads them:
  // integers (64-bit here) and floats ("1e5" is 100000.0).
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  simdjson::dom::element root;
  if (auto error = parser.parse(padded).get(root); error)
    return make_error(ErrorKind::kBadRequest,
                      std::string("not valid JSON: ") + simdjson::error_message(error));
  std::string out;
  append_value(out, root);
  return out;
}

}  // namespace cutline::server
