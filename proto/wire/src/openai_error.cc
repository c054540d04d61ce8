#include "cutline/proto/wire/openai_error.h"

#include <algorithm>
#include <vector>

#include "cutline/base/json_writer.h"
#include "json_scan.h"

namespace cutline::proto {
namespace {

using simdjson::SUCCESS;
namespace od = simdjson::ondemand;

Error body_error(std::string_view what) {
  return make_error(ErrorKind::kUpstream, "error body: " + std::string(what));
}

}  // namespace

std::string_view openai_error_type(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kBadRequest:
    case ErrorKind::kNotFound:
    case ErrorKind::kTooLarge:
    case ErrorKind::kHeadersTooLarge:
    case ErrorKind::kUnsupported:
    case ErrorKind::kRequestTimeout:
      return "invalid_request_error";
    case ErrorKind::kUnauthorized:
      return "authentication_error";
    case ErrorKind::kRateLimited:
      return "rate_limit_error";
    case ErrorKind::kUpstream:
      return "upstream_error";
    case ErrorKind::kTimeout:
      return "timeout_error";
    case ErrorKind::kIo:
    case ErrorKind::kInternal:
      return "server_error";
    case ErrorKind::kExhausted:
      return "service_unavailable_error";
  }
  return "server_error";
}

void write_error_body(std::string& out, const Error& error, const ErrorBodyFields& fields) {
  base::JsonWriter w(out);
  w.begin_object().key("error").begin_object();
  w.field("message", error.message)
      .field("type", fields.type.empty() ? openai_error_type(error.kind) : fields.type);
  w.key("param");
  if (fields.param.empty()) {
    w.null();
  } else {
    w.value(fields.param);
  }
  w.field("code", fields.code.empty() ? to_string(error.kind) : fields.code);
  if (fields.cutline) {
    w.key("cutline");
    write_stop_record(w, *fields.cutline);
  }
  w.end_object().end_object();
}

std::string error_body(const Error& error, const ErrorBodyFields& fields) {
  std::string out;
  write_error_body(out, error, fields);
  return out;
}

Result<ParsedErrorBody> parse_error_body(std::string_view body) {
  od::parser parser;
  simdjson::padded_string padded(body);
  od::document doc;
  if (parser.iterate(padded).get(doc) != SUCCESS) return body_error("not valid JSON");
  od::object obj;
  if (doc.get_object().get(obj) != SUCCESS) {
    return body_error(json_scan::opens_object(body) ? "not valid JSON" : "not a JSON object");
  }

  ParsedErrorBody out;
  json_scan::ErrorFields top;
  bool have_error = false;
  std::string_view object_type;
  auto read_cutline = [&](od::value& v) -> Status {
    od::object cobj;
    if (v.get_object().get(cobj) != SUCCESS) return body_error("cutline must be an object");
    auto rec = parse_stop_record(cobj);
    if (!rec) return body_error(rec.error().message);
    out.cutline = std::move(*rec);
    return {};
  };
  auto assign = [](UpstreamError& e, const json_scan::ErrorFields& f) {
    e = UpstreamError{std::string(f.message), std::string(f.type), std::string(f.param),
                      std::string(f.code)};
  };

  for (auto field : obj) {
    od::field f;
    if (std::move(field).get(f) != SUCCESS) return body_error("not valid JSON");
    std::string_view key;
    if (f.unescaped_key().get(key) != SUCCESS) return body_error("has a malformed key");
    od::value value = f.value();
    if (key == "error") {
      std::string_view message;
      if (value.get_string().get(message) == SUCCESS) {
        out.error.message.assign(message);
        have_error = true;
        continue;
      }
      od::object eobj;
      if (value.get_object().get(eobj) != SUCCESS) return body_error("error must be an object");
      json_scan::ErrorFields ef;
      for (auto ef_field : eobj) {
        od::field g;
        if (std::move(ef_field).get(g) != SUCCESS) return body_error("error is malformed");
        std::string_view gkey;
        if (g.unescaped_key().get(gkey) != SUCCESS) return body_error("error is malformed");
        od::value gv = g.value();
        if (gkey == "cutline") {
          if (auto s = read_cutline(gv); !s) return std::move(s).error();
          continue;
        }
        simdjson::error_code e = SUCCESS;
        if (json_scan::read_error_field(gkey, gv, ef, e) && e) {
          return body_error("error." + std::string(gkey) + " must be a string, a number or null");
        }
      }
      assign(out.error, ef);
      have_error = true;
    } else if (key == "cutline") {
      if (auto s = read_cutline(value); !s) return std::move(s).error();
    } else if (key == "object") {
      if (value.get_string().get(object_type) != SUCCESS) {
        return body_error("object must be a string");
      }
    } else {
      simdjson::error_code e = SUCCESS;
      if (json_scan::read_error_field(key, value, top, e) && e) {
        return body_error(std::string(key) + " must be a string, a number or null");
      }
    }
  }
  if (!have_error && object_type == "error") {
    assign(out.error, top);
    have_error = true;
  }
  if (!have_error) return body_error("no error object");
  return out;
}

namespace {

// The span of a "cutline" value as it stands in the body (an object or array whole).
Result<std::string_view> value_span(od::value value) {
  std::string_view raw;
  od::json_type t;
  if (value.type().get(t) != SUCCESS) return body_error("cutline is malformed");
  if (t == od::json_type::object) {
    od::object o;
    if (value.get_object().get(o) != SUCCESS || o.raw_json().get(raw) != SUCCESS)
      return body_error("cutline is malformed");
  } else if (t == od::json_type::array) {
    od::array a;
    if (value.get_array().get(a) != SUCCESS || a.raw_json().get(raw) != SUCCESS)
      return body_error("cutline is malformed");
  } else {
    raw = json_scan::token_of(value);
    if (json_scan::validate_value(value) != SUCCESS) return body_error("cutline is malformed");
  }
  return json_scan::trim_token(raw);
}

struct Span {
  size_t begin = 0;
  size_t end = 0;
};

}  // namespace

Status put_error_record(std::string_view body, const StopRecord& record, std::string& out) {
  od::parser parser;
  simdjson::padded_string padded(body);
  const char* base = padded.data();
  const size_t open = json_scan::skip_space(body, 0);
  if (open == body.size() || body[open] != '{') return body_error("not a JSON object");
  od::document doc;
  if (parser.iterate(padded).get(doc) != SUCCESS) return body_error("not valid JSON");
  od::object obj;
  if (doc.get_object().get(obj) != SUCCESS) return body_error("not a JSON object");

  std::vector<Span> over;           // cutline values to write the record over
  std::optional<size_t> insert_at;  // where "cutline": is inserted when none was found
  bool insert_comma = false;
  std::optional<size_t> error_open;  // the error object's '{'
  bool error_has_cutline = false;
  bool top_has_cutline = false;
  auto span_of = [&](od::value v) -> Status {
    auto raw = value_span(v);
    if (!raw.ok()) return std::move(raw).error();
    const auto at = static_cast<size_t>(raw->data() - base);
    over.push_back({at, at + raw->size()});
    return {};
  };
  for (auto field : obj) {
    od::field f;
    if (std::move(field).get(f) != SUCCESS) return body_error("not valid JSON");
    std::string_view key;
    if (f.unescaped_key().get(key) != SUCCESS) return body_error("has a malformed key");
    od::value value = f.value();
    od::json_type t;
    if (value.type().get(t) != SUCCESS) return body_error("not valid JSON");
    if (key == "cutline") {
      if (top_has_cutline) return body_error("has two cutline keys");
      top_has_cutline = true;
      if (Status s = span_of(value); !s.ok()) return s;
    } else if (key == "error" && t == od::json_type::object && !error_open) {
      error_open = static_cast<size_t>(json_scan::token_of(value).data() - base);
      od::object eobj;
      if (value.get_object().get(eobj) != SUCCESS) return body_error("error is malformed");
      for (auto efield : eobj) {
        od::field g;
        if (std::move(efield).get(g) != SUCCESS) return body_error("error is malformed");
        std::string_view gkey;
        if (g.unescaped_key().get(gkey) != SUCCESS) return body_error("error is malformed");
        if (gkey == "cutline") {
          if (error_has_cutline) return body_error("has two error.cutline keys");
          error_has_cutline = true;
          if (Status s = span_of(g.value()); !s.ok()) return s;
        } else if (json_scan::validate_value(g.value()) != SUCCESS) {
          return body_error("error is malformed");
        }
      }
    } else if (json_scan::validate_value(value) != SUCCESS) {
      return body_error("not valid JSON");
    }
  }
  if (json_scan::check_end(doc) != SUCCESS) return body_error("not valid JSON");
  const size_t inner_open = error_open ? *error_open : open;
  if (error_open ? !error_has_cutline : !top_has_cutline) {
    insert_at = inner_open + 1;
    const size_t next = json_scan::skip_space(body, inner_open + 1);
    insert_comma = next < body.size() && body[next] != '}';
  }

  std::sort(over.begin(), over.end(), [](Span a, Span b) { return a.begin < b.begin; });
  out.clear();
  out.reserve(body.size() + 512);
  auto write_record = [&] {
    base::JsonWriter w(out);
    write_stop_record(w, record);
  };
  size_t pos = 0;
  auto copy_to = [&](size_t at) {
    out.append(body.data() + pos, at - pos);
    pos = at;
  };
  auto insert = [&] {
    copy_to(*insert_at);
    out.append("\"cutline\":");
    write_record();
    if (insert_comma) out.push_back(',');
  };
  for (const Span& s : over) {
    if (insert_at && *insert_at <= s.begin) {
      insert();
      insert_at.reset();
    }
    copy_to(s.begin);
    write_record();
    pos = s.end;
  }
  if (insert_at) insert();
  out.append(body.data() + pos, body.size() - pos);
  return {};
}

}  // namespace cutline::proto
