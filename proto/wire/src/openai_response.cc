#include "cutline/proto/wire/openai_response.h"

#include "json_scan.h"
#include "shared_field_reader.h"

namespace cutline::proto {
namespace {

using simdjson::SUCCESS;
namespace od = simdjson::ondemand;
using json_scan::is_null;

Error response_error(std::string_view field, std::string_view what) {
  std::string msg = "upstream response: ";
  if (!field.empty()) msg.append(field).append(" ");
  msg.append(what);
  return make_error(ErrorKind::kUpstream, std::move(msg));
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
  SharedFieldReader shared("upstream response: ", out.usage, out.cutline);
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
    } else {
      Status s;
      if (shared.read(key, value, s) && !s) return std::move(s).error();
    }
  }
  if (auto e = shared.error(out.object)) out.error = owned(*e);
  return out;
}

}  // namespace cutline::proto
