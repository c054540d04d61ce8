#include "cutline/proto/wire/openai_chunk.h"

#include "json_scan.h"
#include "shared_field_reader.h"

namespace cutline::proto {
namespace {

using simdjson::SUCCESS;
namespace od = simdjson::ondemand;
using json_scan::is_null;

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

// Marks `seen` in `mask`; false when it was marked already (a key sent twice).
bool first_time(unsigned& mask, unsigned seen) {
  const bool first = (mask & seen) == 0;
  mask |= seen;
  return first;
}

enum : unsigned {
  kSeenContent = 1,
  kSeenRole = 2,
  kSeenDelta = 4,
  kSeenFinish = 8,
  kSeenIndex = 16
};

Status read_delta(od::value& v, ChunkChoice& c, unsigned& seen) {
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
      if (!first_time(seen, kSeenContent)) c.plain = false;
      if (optional_string(value, c.content, c.has_content) != SUCCESS) {
        return field_error("delta.content", "must be a string or null");
      }
    } else if (key == "role") {
      if (!first_time(seen, kSeenRole)) c.plain = false;
      bool present;
      if (optional_string(value, c.role, present) != SUCCESS) {
        return field_error("delta.role", "must be a string or null");
      }
    } else {
      c.plain = false;  // tool calls, reasoning, refusal, a vendor's field
      if (key == "tool_calls") c.has_tool_calls = !is_null(value);
    }
  }
  return {};
}

Status read_choice(od::value& v, ChunkChoice& c) {
  od::object obj;
  if (v.get_object().get(obj) != SUCCESS) return field_error("choices[]", "must be objects");
  unsigned seen = 0;
  for (auto field : obj) {
    od::field f;
    if (std::move(field).get(f) != SUCCESS) return chunk_error("malformed choice");
    std::string_view key;
    if (f.unescaped_key().get(key) != SUCCESS) return chunk_error("malformed choice key");
    od::value value = f.value();
    if (key == "delta") {
      if (!first_time(seen, kSeenDelta)) c.plain = false;
      if (auto s = read_delta(value, c, seen); !s) return s;
    } else if (key == "text") {
      // Text and delta.content both land in content: plain only with one of them, once.
      if (!first_time(seen, kSeenContent)) c.plain = false;
      if (optional_string(value, c.content, c.has_content) != SUCCESS) {
        return field_error("text", "must be a string or null");
      }
    } else if (key == "finish_reason") {
      if (!first_time(seen, kSeenFinish)) c.plain = false;
      if (optional_string(value, c.finish_reason, c.has_finish_reason) != SUCCESS) {
        return field_error("finish_reason", "must be a string or null");
      }
    } else if (key == "index") {
      if (!first_time(seen, kSeenIndex)) c.plain = false;
      if (read_int(value, c.index) != SUCCESS) return field_error("index", "must be an integer");
    } else if (key != "logprobs" || !is_null(value)) {
      c.plain = false;  // logprobs, a whole message, a vendor's field
    }
  }
  if (c.index < 0) c.plain = false;
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
  c.choices_plain = true;
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

  SharedFieldReader shared("upstream chunk: ", c.usage, c.cutline);
  bool seen_choices = false;
  for (auto field : obj) {
    od::field f;
    if (std::move(field).get(f) != SUCCESS) return chunk_error("not valid JSON");
    std::string_view key;
    if (f.unescaped_key().get(key) != SUCCESS) return chunk_error("has a malformed key");
    od::value value = f.value();
    if (key == "choices") {
      if (seen_choices) c.choices_plain = false;
      seen_choices = true;
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
        if (!choice.plain) c.choices_plain = false;
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
    } else {
      Status s;
      if (shared.read(key, value, s) && !s) return s;
    }
  }
  if (auto e = shared.error(c.object)) {
    c.error = UpstreamErrorView{e->message, e->type, e->param, e->code};
  }
  return {};
}

}  // namespace cutline::proto
