#include "cutline/proto/wire/openai_error.h"

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

}  // namespace cutline::proto
