#pragma once
// Private to proto/: the reader behind RequestParser. One BodyReader walks one request body and
// fills a ParsedRequest: its typed-value readers (integers, numbers in range, token limits,
// strings by byte range) word every error the same way. The top-level key dispatch, "stop" and
// "stream_options" live in openai_request.cc; "messages" and "prompt" in request_messages.cc.

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "cutline/proto/wire/openai_request.h"
#include "json_scan.h"

namespace cutline::proto::request_body {

namespace od = simdjson::ondemand;
using json_scan::is_null;
using json_scan::token_of;
using json_scan::type_name;
using simdjson::SUCCESS;

inline Error bad(std::string message) {
  return make_error(ErrorKind::kBadRequest, std::move(message));
}

// Shortens a client-supplied token for an error message.
inline std::string shown(std::string_view token) {
  constexpr size_t kMax = 40;
  if (token.size() <= kMax) return std::string(token);
  return std::string(token.substr(0, kMax)) + "...";
}

inline Error invalid_json(std::string_view where, simdjson::error_code e) {
  return bad("invalid JSON in " + std::string(where) + ": " + simdjson::error_message(e));
}

// Parsing state for one body. `base` is where the bytes being parsed start (the caller's body or
// the padded copy); offsets are relative to it.
class BodyReader {
 public:
  BodyReader(const char* base, ParsedRequest& req) : base_(base), req_(req) {}

  ByteRange range_of(std::string_view token) const {
    size_t begin = static_cast<size_t>(token.data() - base_);
    return ByteRange{begin, begin + token.size()};
  }

  Result<std::optional<int64_t>> integer(std::string_view name, od::value& v) {
    if (is_null(v)) return std::optional<int64_t>();
    std::string_view token = token_of(v);
    int64_t n;
    if (v.get_int64().get(n) == SUCCESS) return std::optional<int64_t>(n);
    if (json_scan::is_json_number(token)) {
      return bad(std::string(name) + " must be an integer, got " + shown(token));
    }
    return bad(std::string(name) + " must be an integer, got " + std::string(type_name(v)));
  }

  Result<std::optional<double>> number(std::string_view name, od::value& v) {
    if (is_null(v)) return std::optional<double>();
    double d;
    if (v.get_double().get(d) == SUCCESS && std::isfinite(d)) return std::optional<double>(d);
    std::string_view token = token_of(v);
    if (json_scan::is_json_number(token)) {
      return bad(std::string(name) + " is out of range, got " + shown(token));
    }
    return bad(std::string(name) + " must be a number, got " + std::string(type_name(v)));
  }

  Status number_in(std::string_view name, od::value& v, std::optional<double>& out, double lo,
                   double hi, bool lo_open = false) {
    auto r = number(name, v);
    if (!r) return std::move(r).error();
    out = *r;
    if (out && (*out < lo || *out > hi || (lo_open && *out == lo))) {
      return bad(std::string(name) + " must be " + (lo_open ? "> " : ">= ") + fmt(lo) +
                 " and <= " + fmt(hi) + ", got " + fmt(*out));
    }
    return {};
  }

  Status limit(std::string_view name, od::value& v, std::optional<int64_t>& out,
               std::optional<ByteRange>& anchor) {
    anchor = range_of(token_of(v));
    if (is_null(v)) return {};
    std::string_view token = token_of(v);
    int64_t n;
    if (v.get_int64().get(n) != SUCCESS) {
      if (json_scan::is_json_number(token)) {
        return bad(std::string(name) + " must be a positive integer, got " + shown(token));
      }
      return bad(std::string(name) + " must be a positive integer, got " +
                 std::string(type_name(v)));
    }
    if (n <= 0) {
      return bad(std::string(name) + " must be a positive integer, got " + std::to_string(n));
    }
    if (n > kMaxTokensLimit) {
      return bad(std::string(name) + " must be at most " + std::to_string(kMaxTokensLimit) +
                 ", got " + std::to_string(n));
    }
    out = n;
    return {};
  }

  Result<std::string> string(std::string_view name, od::value& v) {
    std::string_view s;
    if (v.get_string().get(s) != SUCCESS) {
      std::string_view type = type_name(v);
      if (type == "string") return bad(std::string(name) + " is not a valid JSON string");
      return bad(std::string(name) + " must be a string, got " + std::string(type));
    }
    return std::string(s);
  }

  // A string value recorded by range (validated, not copied).
  Result<ByteRange> string_range(std::string_view name, od::value& v) {
    std::string_view token = token_of(v);
    std::string_view s;
    if (v.get_string().get(s) != SUCCESS) {
      std::string_view type = type_name(v);
      if (type == "string") return bad(std::string(name) + " is not a valid JSON string");
      return bad(std::string(name) + " must be a string, got " + std::string(type));
    }
    return range_of(token);
  }

  Status messages(od::value& v);
  Status message(size_t index, od::value& v);
  Status content_parts(const std::string& where, od::array& parts, ChatMessage& msg);
  Status prompt(od::value& v);
  Status stop(od::value& v);
  Status stream_options(od::value& v);
  Status field(std::string_view key, od::value& v);

  static std::string fmt(double d) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", d);
    return buf;
  }

 private:
  const char* base_;
  ParsedRequest& req_;
};

}  // namespace cutline::proto::request_body
