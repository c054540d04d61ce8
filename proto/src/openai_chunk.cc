#include "cutline/proto/openai_chunk.h"

#include "json_scan.h"

namespace cutline::proto {
namespace {

using simdjson::SUCCESS;
namespace od = simdjson::ondemand;

Error chunk_error(std::string_view what) {
  std::string msg = "upstream chunk: ";
  msg.append(what);
  return make_error(ErrorKind::kUpstream, std::move(msg));
}

Error field_error(std::string_view field, std::string_view what) {
  std::string msg = "upstream chunk: ";
  msg.append(field).append(" ").append(what);
  return make_error(ErrorKind::kUpstream, std::move(msg));
}

bool is_null(od::value& v) {
  bool null = false;
  return v.is_null().get(null) == SUCCESS && null;
}

// A string or null; `present` false for null.
simdjson::error_code optional_string(od::value& v, std::string_view& out, bool& present) {
  // The string case first: it is the common one, and a failed get_string leaves v unread.
  if (v.get_string().get(out) == SUCCESS) {
    present = true;
    return SUCCESS;
  }
  present = false;
  out = {};
  return is_null(v) ? SUCCESS : simdjson::INCORRECT_TYPE;
}

using json_scan::read_int;

Status read_delta(od::value& v, ChunkChoice& c) {
  od::object delta;
  if (v.get_object().get(delta) != SUCCESS) {
    if (is_null(v)) return {};
    return field_error("delta", "must be an object");
  }
  for (auto field : delta) {
    od::field f;
    if (std::move(field).get(f) != SUCCESS) return chunk_error("malformed delta");
    std::string_view key;
    if (f.unescaped_key().get(key) != SUCCESS) return chunk_error("malformed delta key");
    od::value value = f.value();
    if (key == "content") {
      if (optional_string(value, c.content, c.has_content) != SUCCESS) {
        return field_error("delta.content", "must be a string or null");
      }
    } else if (key == "role") {
      bool present;
      if (optional_string(value, c.role, present) != SUCCESS) {
        return field_error("delta.role", "must be a string or null");
      }
    } else if (key == "tool_calls") {
      c.has_tool_calls = !is_null(value);
    }
  }
  return {};
}

Status read_choice(od::value& v, ChunkChoice& c) {
  od::object obj;
  if (v.get_object().get(obj) != SUCCESS) return field_error("choices[]", "must be objects");
  for (auto field : obj) {
    od::field f;
    if (std::move(field).get(f) != SUCCESS) return chunk_error("malformed choice");
    std::string_view key;
    if (f.unescaped_key().get(key) != SUCCESS) return chunk_error("malformed choice key");
    od::value value = f.value();
    if (key == "delta") {
      if (auto s = read_delta(value, c); !s) return s;
    } else if (key == "text") {
      if (optional_string(value, c.content, c.has_content) != SUCCESS) {
        return field_error("text", "must be a string or null");
      }
    } else if (key == "finish_reason") {
      if (optional_string(value, c.finish_reason, c.has_finish_reason) != SUCCESS) {
        return field_error("finish_reason", "must be a string or null");
      }
    } else if (key == "index") {
      if (read_int(value, c.index) != SUCCESS) return field_error("index", "must be an integer");
    }
  }
  return {};
}

}  // namespace

std::string_view ParsedChunk::finish_reason() const {
  for (const auto& c : choices) {
    if (c.has_finish_reason) return c.finish_reason;
  }
  return {};
}

Status ChunkParser::parse(std::string_view data) {
  ParsedChunk& c = chunk_;
  c.id = c.object = c.model = {};
  c.created = 0;
  c.choices.clear();
  c.usage.reset();
  c.error.reset();
  c.cutline.reset();

  json_scan::copy_padded(padded_, data);
  od::document doc;
  if (parser_.iterate(padded_.data(), data.size(), padded_.capacity()).get(doc) != SUCCESS) {
    return chunk_error("not valid JSON");
  }
  od::object obj;
  if (doc.get_object().get(obj) != SUCCESS) {
    return chunk_error(json_scan::opens_object(data) ? "not valid JSON" : "not a JSON object");
  }

  json_scan::ErrorFields top_error;  // vLLM's {"object":"error","message":...}
  for (auto field : obj) {
    od::field f;
    if (std::move(field).get(f) != SUCCESS) return chunk_error("not valid JSON");
    std::string_view key;
    if (f.unescaped_key().get(key) != SUCCESS) return chunk_error("has a malformed key");
    od::value value = f.value();
    if (key == "choices") {
      od::array arr;
      if (value.get_array().get(arr) != SUCCESS) {
        if (is_null(value)) continue;
        return field_error("choices", "must be an array");
      }
      for (auto element : arr) {
        od::value cv;
        if (element.get(cv) != SUCCESS) return chunk_error("malformed choices");
        ChunkChoice& choice = c.choices.emplace_back();
        choice = ChunkChoice{};
        if (auto s = read_choice(cv, choice); !s) return s;
      }
    } else if (key == "id") {
      bool present;
      if (optional_string(value, c.id, present) != SUCCESS) {
        return field_error("id", "must be a string");
      }
    } else if (key == "object") {
      bool present;
      if (optional_string(value, c.object, present) != SUCCESS) {
        return field_error("object", "must be a string");
      }
    } else if (key == "model") {
      bool present;
      if (optional_string(value, c.model, present) != SUCCESS) {
        return field_error("model", "must be a string");
      }
    } else if (key == "created") {
      if (read_int(value, c.created) != SUCCESS)
        return field_error("created", "must be an integer");
    } else if (key == "usage") {
      std::string_view bad_key;
      if (json_scan::read_usage(value, c.usage, bad_key) != SUCCESS) {
        return field_error(bad_key, "must be an object of integers");
      }
    } else if (key == "error") {
      if (is_null(value)) continue;
      json_scan::ErrorFields ef;
      std::string_view message;
      od::object eobj;
      if (value.get_string().get(message) == SUCCESS) {
        ef.message = message;  // {"error": "text"} from simpler servers
      } else if (value.get_object().get(eobj) != SUCCESS ||
                 json_scan::read_error_object(eobj, ef) != SUCCESS) {
        return field_error("error", "must be an object with string fields");
      }
      c.error = UpstreamErrorView{ef.message, ef.type, ef.param, ef.code};
    } else if (key == "cutline") {
      od::object cobj;
      if (value.get_object().get(cobj) != SUCCESS)
        return field_error("cutline", "must be an object");
      auto rec = parse_stop_record(cobj);
      if (!rec) return make_error(ErrorKind::kUpstream, "upstream chunk: " + rec.error().message);
      c.cutline = std::move(*rec);
    } else {
      simdjson::error_code e = SUCCESS;
      if (json_scan::read_error_field(key, value, top_error, e) && e) {
        return field_error(key, "must be a string, a number or null");
      }
    }
  }
  if (!c.error && c.object == "error") {
    c.error = UpstreamErrorView{top_error.message, top_error.type, top_error.param, top_error.code};
  }
  return {};
}

}  // namespace cutline::proto
