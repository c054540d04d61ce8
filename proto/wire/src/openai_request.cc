#include "cutline/proto/wire/openai_request.h"

#include <string>

#include "cutline/base/json_string.h"
#include "json_scan.h"
#include "request_body_reader.h"

namespace cutline::proto {

// The fields of one body other than "messages" and "prompt" (request_messages.cc).
namespace request_body {

Status BodyReader::stop(od::value& v) {
  od::json_type t;
  if (auto e = v.type().get(t)) return invalid_json("stop", e);
  if (t == od::json_type::null) {
    if (!is_null(v)) return invalid_json("stop", simdjson::N_ATOM_ERROR);
    return {};
  }
  if (t == od::json_type::string) {
    auto r = string("stop", v);
    if (!r) return std::move(r).error();
    req_.stop.push_back(std::move(*r));
    return {};
  }
  if (t != od::json_type::array) {
    return bad("stop must be a string or an array of strings, got " + std::string(type_name(v)));
  }
  od::array arr;
  if (auto e = v.get_array().get(arr)) return invalid_json("stop", e);
  size_t index = 0;
  for (auto element : arr) {
    od::value x;
    if (auto e = element.get(x)) return invalid_json("stop", e);
    auto r = string("stop[" + std::to_string(index++) + "]", x);
    if (!r) return std::move(r).error();
    req_.stop.push_back(std::move(*r));
  }
  return {};
}

Status BodyReader::stream_options(od::value& v) {
  auto& a = req_.anchors;
  std::string_view token = token_of(v);
  if (is_null(v)) {
    a.stream_options = range_of(token);
    return {};
  }
  od::object obj;
  if (v.get_object().get(obj) != SUCCESS) {
    return bad("stream_options must be an object, got " + std::string(type_name(v)));
  }
  a.stream_options = range_of(token);  // the '{' only: the value's end is not needed
  a.stream_options_open = static_cast<size_t>(token.data() - base_);
  bool empty = true;
  for (auto field : obj) {
    empty = false;
    od::field f;
    if (auto e = std::move(field).get(f)) return invalid_json("stream_options", e);
    std::string_view key;
    if (auto e = f.unescaped_key().get(key)) return invalid_json("stream_options", e);
    od::value value = f.value();
    if (key == "include_usage") {
      if (a.include_usage) return bad("stream_options.include_usage appears twice");
      a.include_usage = range_of(token_of(value));
      if (is_null(value)) continue;
      bool b;
      if (value.get_bool().get(b) != SUCCESS) {
        return bad("stream_options.include_usage must be a boolean, got " +
                   std::string(type_name(value)));
      }
      req_.include_usage = b;
    } else if (auto e = json_scan::validate_value(value)) {
      return invalid_json("stream_options." + std::string(key), e);
    }
  }
  a.stream_options_empty = empty;
  return {};
}

Status BodyReader::field(std::string_view key, od::value& v) {
  auto& r = req_;
  const bool chat = r.endpoint == Endpoint::kChatCompletions;
  if (key == "model") {
    auto s = string("model", v);
    if (!s) return std::move(s).error();
    if (s->empty()) return bad("model must be a non-empty string");
    r.model = std::move(*s);
  } else if (key == "messages" && chat) {
    return messages(v);
  } else if (key == "prompt" && !chat) {
    return prompt(v);
  } else if (key == "stream") {
    r.anchors.stream = range_of(token_of(v));
    if (is_null(v)) return {};
    bool b;
    if (v.get_bool().get(b) != SUCCESS) {
      return bad("stream must be a boolean, got " + std::string(type_name(v)));
    }
    r.stream = b;
  } else if (key == "stream_options") {
    return stream_options(v);
  } else if (key == "max_tokens") {
    return limit("max_tokens", v, r.max_tokens, r.anchors.max_tokens);
  } else if (key == "max_completion_tokens") {
    return limit("max_completion_tokens", v, r.max_completion_tokens,
                 r.anchors.max_completion_tokens);
  } else if (key == "temperature") {
    return number_in("temperature", v, r.temperature, 0, 100);
  } else if (key == "top_p") {
    return number_in("top_p", v, r.top_p, 0, 1, /*lo_open=*/true);
  } else if (key == "min_p") {
    return number_in("min_p", v, r.min_p, 0, 1);
  } else if (key == "presence_penalty") {
    return number_in("presence_penalty", v, r.presence_penalty, -2, 2);
  } else if (key == "frequency_penalty") {
    return number_in("frequency_penalty", v, r.frequency_penalty, -2, 2);
  } else if (key == "repetition_penalty") {
    return number_in("repetition_penalty", v, r.repetition_penalty, 0, 100, /*lo_open=*/true);
  } else if (key == "top_k") {
    auto n = integer("top_k", v);
    if (!n) return std::move(n).error();
    if (*n && **n < -1)
      return bad("top_k must be -1 (disabled) or >= 0, got " + std::to_string(**n));
    r.top_k = *n;
  } else if (key == "seed") {
    auto n = integer("seed", v);
    if (!n) return std::move(n).error();
    r.seed = *n;
  } else if (key == "n") {
    auto n = integer("n", v);
    if (!n) return std::move(n).error();
    if (*n && **n < 1) return bad("n must be a positive integer, got " + std::to_string(**n));
    if (*n && **n > kMaxChoices) {
      return bad("n must be at most " + std::to_string(kMaxChoices) + ", got " +
                 std::to_string(**n));
    }
    if (*n) r.n = **n;
  } else if (key == "best_of") {
    auto n = integer("best_of", v);
    if (!n) return std::move(n).error();
    if (*n && **n < 1) return bad("best_of must be a positive integer, got " + std::to_string(**n));
    if (*n && **n > kMaxChoices) {
      return bad("best_of must be at most " + std::to_string(kMaxChoices) + ", got " +
                 std::to_string(**n));
    }
    if (*n) r.best_of = **n;
  } else if (key == "stop") {
    return stop(v);
  } else if (key == "user") {
    if (is_null(v)) return {};
    auto s = string("user", v);
    if (!s) return std::move(s).error();
    r.user = std::move(*s);
  } else if (key == "tools") {
    od::json_type t;
    if (auto e = v.type().get(t)) return invalid_json("tools", e);
    if (t == od::json_type::array) {
      od::array tools;
      if (auto e = v.get_array().get(tools)) return invalid_json("tools", e);
      for (auto tool : tools) {
        od::value x;
        if (auto e = tool.get(x)) return invalid_json("tools", e);
        if (auto e = json_scan::validate_value(x)) return invalid_json("tools", e);
        r.has_tools = true;
      }
    } else if (auto e = json_scan::validate_value(v)) {
      return invalid_json("tools", e);
    }
  } else if (auto e = json_scan::validate_value(v)) {
    return invalid_json(key, e);
  }
  return {};
}

}  // namespace request_body

namespace {

using simdjson::SUCCESS;
namespace od = simdjson::ondemand;
using request_body::bad;
using request_body::BodyReader;
using request_body::invalid_json;

// Top-level keys Cutline reads; each may appear once.
enum KnownKey : uint32_t {
  kModel = 1u << 0,
  kMessages = 1u << 1,
  kPrompt = 1u << 2,
  kStream = 1u << 3,
  kStreamOptions = 1u << 4,
  kMaxTokens = 1u << 5,
  kMaxCompletionTokens = 1u << 6,
  kTemperature = 1u << 7,
  kTopP = 1u << 8,
  kTopK = 1u << 9,
  kMinP = 1u << 10,
  kPresencePenalty = 1u << 11,
  kFrequencyPenalty = 1u << 12,
  kRepetitionPenalty = 1u << 13,
  kSeed = 1u << 14,
  kStop = 1u << 15,
  kN = 1u << 16,
  kUser = 1u << 17,
  kTools = 1u << 18,
  kBestOf = 1u << 19,
};

struct KeyInfo {
  std::string_view name;
  KnownKey bit;
};
constexpr KeyInfo kKeys[] = {
    {"model", kModel},
    {"messages", kMessages},
    {"prompt", kPrompt},
    {"stream", kStream},
    {"stream_options", kStreamOptions},
    {"max_tokens", kMaxTokens},
    {"max_completion_tokens", kMaxCompletionTokens},
    {"temperature", kTemperature},
    {"top_p", kTopP},
    {"top_k", kTopK},
    {"min_p", kMinP},
    {"presence_penalty", kPresencePenalty},
    {"frequency_penalty", kFrequencyPenalty},
    {"repetition_penalty", kRepetitionPenalty},
    {"seed", kSeed},
    {"stop", kStop},
    {"n", kN},
    {"best_of", kBestOf},
    {"user", kUser},
    {"tools", kTools},
};

uint32_t key_bit(std::string_view key) {
  for (const auto& k : kKeys) {
    if (k.name == key) return k.bit;
  }
  return 0;
}

}  // namespace

std::string_view to_string(Endpoint endpoint) {
  return endpoint == Endpoint::kChatCompletions ? "chat.completions" : "completions";
}

std::string ParsedRequest::message_role(size_t i) const {
  std::string out;
  base::decode_json_string(raw(messages.at(i).role), out);
  return out;
}

void ParsedRequest::append_message_text(size_t i, std::string& out) const {
  const ChatMessage& m = messages.at(i);
  for (uint32_t p = m.first_part; p < m.first_part + m.part_count; ++p) {
    base::decode_json_string(raw(text_parts[p]), out);
  }
}

std::string ParsedRequest::message_text(size_t i) const {
  std::string out;
  append_message_text(i, out);
  return out;
}

std::string ParsedRequest::prompt_text(size_t i) const {
  std::string out;
  base::decode_json_string(raw(prompts.at(i)), out);
  return out;
}

Result<ParsedRequest> RequestParser::parse(std::string_view body, Endpoint endpoint) {
  json_scan::copy_padded(padded_, body);
  auto r =
      parse_padded(std::string_view(padded_.data(), body.size()), padded_.capacity(), endpoint);
  if (r) r->body = body;
  return r;
}

Result<ParsedRequest> RequestParser::parse_in_place(std::string& body, Endpoint endpoint) {
  if (body.capacity() < body.size() + simdjson::SIMDJSON_PADDING) {
    body.reserve(body.size() + simdjson::SIMDJSON_PADDING);
  }
  return parse_padded(body, body.capacity(), endpoint);
}

Result<ParsedRequest> RequestParser::parse_padded(std::string_view body, size_t capacity,
                                                  Endpoint endpoint) {
  ParsedRequest req;
  req.endpoint = endpoint;
  req.body = body;

  const size_t open = json_scan::skip_space(body, 0);
  if (open == body.size()) return bad("request body is empty");
  if (body[open] != '{') return bad("request body must be a JSON object");
  req.anchors.object_open = open;
  const size_t first = json_scan::skip_space(body, open + 1);
  req.anchors.object_empty = first < body.size() && body[first] == '}';

  od::document doc;
  if (auto e = parser_.iterate(body.data(), body.size(), capacity).get(doc)) {
    if (e == simdjson::UTF8_ERROR) return bad("request body is not valid UTF-8");
    return bad(std::string("request body is not valid JSON: ") + simdjson::error_message(e));
  }
  od::object obj;
  if (auto e = doc.get_object().get(obj)) {
    if (e == simdjson::UTF8_ERROR) return bad("request body is not valid UTF-8");
    return bad(std::string("request body is not valid JSON: ") + simdjson::error_message(e));
  }

  BodyReader reader(body.data(), req);
  uint32_t seen = 0;
  for (auto field : obj) {
    od::field f;
    if (auto e = std::move(field).get(f)) return invalid_json("request body", e);
    std::string_view key;
    if (auto e = f.unescaped_key().get(key)) return invalid_json("request body", e);
    if (uint32_t bit = key_bit(key)) {
      if (seen & bit) return bad("duplicate key \"" + std::string(key) + "\"");
      seen |= bit;
    }
    od::value v = f.value();
    if (auto s = reader.field(key, v); !s) return std::move(s).error();
  }
  if (auto e = json_scan::check_end(doc)) {
    if (e == simdjson::TRAILING_CONTENT) return bad("request body has bytes after the JSON object");
    return invalid_json("request body", e);
  }

  if (!(seen & kModel)) return bad("model is required");
  if (endpoint == Endpoint::kChatCompletions && !(seen & kMessages)) {
    return bad("messages is required");
  }
  if (endpoint == Endpoint::kCompletions && !(seen & kPrompt)) return bad("prompt is required");
  return req;
}

Result<ParsedRequest> parse_openai_request(std::string_view body, Endpoint endpoint) {
  RequestParser parser;
  return parser.parse(body, endpoint);
}

}  // namespace cutline::proto
