#include "cutline/proto/openai_response.h"

#include "json_scan.h"

namespace cutline::proto {
namespace {

using simdjson::SUCCESS;
namespace od = simdjson::ondemand;

Error response_error(std::string_view field, std::string_view what) {
  std::string msg = "upstream response: ";
  if (!field.empty()) msg.append(field).append(" ");
  msg.append(what);
  return make_error(ErrorKind::kUpstream, std::move(msg));
}

bool is_null(od::value& v) {
  bool null = false;
  return v.is_null().get(null) == SUCCESS && null;
}

// A string or null into `out`; `present` false for null.
Status read_string(std::string_view name, od::value& v, std::string& out, bool* present = nullptr) {
  if (is_null(v)) {
    if (present) *present = false;
    return {};
  }
  std::string_view s;
  if (v.get_string().get(s) != SUCCESS) return response_error(name, "must be a string or null");
  out.assign(s);
  if (present) *present = true;
  return {};
}

Status read_message(od::value& v, ParsedCompletion& out) {
  od::object obj;
  if (v.get_object().get(obj) != SUCCESS) return response_error("message", "must be an object");
  for (auto field : obj) {
    od::field f;
    if (std::move(field).get(f) != SUCCESS) return response_error("message", "is malformed");
    std::string_view key;
    if (f.unescaped_key().get(key) != SUCCESS) return response_error("message", "is malformed");
    od::value value = f.value();
    if (key == "content") {
      if (auto s = read_string("message.content", value, out.content, &out.has_content); !s) {
        return s;
      }
    } else if (key == "role") {
      if (auto s = read_string("message.role", value, out.role); !s) return s;
    } else if (key == "tool_calls") {
      out.has_tool_calls = !is_null(value);
    }
  }
  return {};
}

Status read_first_choice(od::value& v, ParsedCompletion& out) {
  od::object obj;
  if (v.get_object().get(obj) != SUCCESS) return response_error("choices[0]", "must be an object");
  for (auto field : obj) {
    od::field f;
    if (std::move(field).get(f) != SUCCESS) return response_error("choices[0]", "is malformed");
    std::string_view key;
    if (f.unescaped_key().get(key) != SUCCESS) return response_error("choices[0]", "is malformed");
    od::value value = f.value();
    if (key == "message") {
      if (auto s = read_message(value, out); !s) return s;
    } else if (key == "text") {
      if (auto s = read_string("choices[0].text", value, out.content, &out.has_content); !s) {
        return s;
      }
    } else if (key == "finish_reason") {
      if (auto s = read_string("choices[0].finish_reason", value, out.finish_reason); !s) return s;
    }
  }
  return {};
}

UpstreamError owned(const json_scan::ErrorFields& f) {
  return UpstreamError{std::string(f.message), std::string(f.type), std::string(f.param),
                       std::string(f.code)};
}

}  // namespace

Result<ParsedCompletion> parse_completion_response(std::string_view body) {
  od::parser parser;
  simdjson::padded_string padded(body);
  od::document doc;
  if (parser.iterate(padded).get(doc) != SUCCESS) return response_error("", "is not valid JSON");
  od::object obj;
  if (doc.get_object().get(obj) != SUCCESS) {
    return response_error(
        "", json_scan::opens_object(body) ? "is not valid JSON" : "is not a JSON object");
  }

  ParsedCompletion out;
  json_scan::ErrorFields top_error;
  for (auto field : obj) {
    od::field f;
    if (std::move(field).get(f) != SUCCESS) return response_error("", "is not valid JSON");
    std::string_view key;
    if (f.unescaped_key().get(key) != SUCCESS) return response_error("", "has a malformed key");
    od::value value = f.value();
    if (key == "id") {
      if (auto s = read_string("id", value, out.id); !s) return std::move(s).error();
    } else if (key == "object") {
      if (auto s = read_string("object", value, out.object); !s) return std::move(s).error();
    } else if (key == "model") {
      if (auto s = read_string("model", value, out.model); !s) return std::move(s).error();
    } else if (key == "created") {
      if (json_scan::read_int(value, out.created) != SUCCESS) {
        return response_error("created", "must be an integer");
      }
    } else if (key == "choices") {
      if (is_null(value)) continue;
      od::array arr;
      if (value.get_array().get(arr) != SUCCESS)
        return response_error("choices", "must be an array");
      for (auto element : arr) {
        od::value cv;
        if (element.get(cv) != SUCCESS) return response_error("choices", "is malformed");
        if (out.choice_count++ == 0) {
          if (auto s = read_first_choice(cv, out); !s) return std::move(s).error();
        }
      }
    } else if (key == "usage") {
      std::string_view bad_key;
      if (json_scan::read_usage(value, out.usage, bad_key) != SUCCESS) {
        return response_error(bad_key, "must be an object of integers");
      }
    } else if (key == "cutline") {
      od::object cobj;
      if (value.get_object().get(cobj) != SUCCESS) {
        return response_error("cutline", "must be an object");
      }
      auto rec = parse_stop_record(cobj);
      if (!rec)
        return make_error(ErrorKind::kUpstream, "upstream response: " + rec.error().message);
      out.cutline = std::move(*rec);
    } else if (key == "error") {
      if (is_null(value)) continue;
      json_scan::ErrorFields ef;
      std::string_view message;
      od::object eobj;
      if (value.get_string().get(message) == SUCCESS) {
        ef.message = message;
      } else if (value.get_object().get(eobj) != SUCCESS ||
                 json_scan::read_error_object(eobj, ef) != SUCCESS) {
        return response_error("error", "must be an object with string fields");
      }
      out.error = owned(ef);
    } else {
      simdjson::error_code e = SUCCESS;
      if (json_scan::read_error_field(key, value, top_error, e) && e) {
        return response_error(key, "must be a string, a number or null");
      }
    }
  }
  if (!out.error && out.object == "error") out.error = owned(top_error);
  return out;
}

}  // namespace cutline::proto
