#include "cutline/proto/openai_request.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "json_scan.h"

namespace cutline::proto {
namespace {

using simdjson::SUCCESS;
namespace od = simdjson::ondemand;
using json_scan::token_of;
using json_scan::type_name;

Error bad(std::string message) { return make_error(ErrorKind::kBadRequest, std::move(message)); }

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
    {"user", kUser},
    {"tools", kTools},
};

uint32_t key_bit(std::string_view key) {
  for (const auto& k : kKeys) {
    if (k.name == key) return k.bit;
  }
  return 0;
}

// Shortens a client-supplied token for an error message.
std::string shown(std::string_view token) {
  constexpr size_t kMax = 40;
  if (token.size() <= kMax) return std::string(token);
  return std::string(token.substr(0, kMax)) + "...";
}

bool is_null(od::value& v) {
  bool null = false;
  return v.is_null().get(null) == SUCCESS && null;
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

Error invalid_json(std::string_view where, simdjson::error_code e) {
  return bad("invalid JSON in " + std::string(where) + ": " + simdjson::error_message(e));
}

Status BodyReader::messages(od::value& v) {
  od::array arr;
  if (v.get_array().get(arr) != SUCCESS) {
    return bad("messages must be an array, got " + std::string(type_name(v)));
  }
  size_t index = 0;
  for (auto element : arr) {
    od::value m;
    if (auto e = element.get(m)) return invalid_json("messages", e);
    if (auto s = message(index, m); !s) return s;
    ++index;
  }
  if (index == 0) return bad("messages must be a non-empty array");
  return {};
}

Status BodyReader::message(size_t index, od::value& v) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  od::object obj;
  if (v.get_object().get(obj) != SUCCESS) {
    return bad(where + " must be an object, got " + std::string(type_name(v)));
  }
  ChatMessage msg;
  bool have_role = false;
  bool have_content = false;
  for (auto field : obj) {
    od::field f;
    if (auto e = std::move(field).get(f)) return invalid_json(where, e);
    std::string_view key;
    if (auto e = f.unescaped_key().get(key)) return invalid_json(where, e);
    od::value value = f.value();
    if (key == "role") {
      if (have_role) return bad(where + ".role appears twice");
      have_role = true;
      auto r = string_range(where + ".role", value);
      if (!r) return std::move(r).error();
      msg.role = *r;
    } else if (key == "content") {
      if (have_content) return bad(where + ".content appears twice");
      have_content = true;
      od::json_type t;
      if (auto e = value.type().get(t)) return invalid_json(where + ".content", e);
      if (t == od::json_type::null) {
        if (!is_null(value)) return invalid_json(where + ".content", simdjson::N_ATOM_ERROR);
        msg.content_kind = ChatMessage::ContentKind::kNull;
      } else if (t == od::json_type::string) {
        auto r = string_range(where + ".content", value);
        if (!r) return std::move(r).error();
        msg.content_kind = ChatMessage::ContentKind::kString;
        msg.first_part = static_cast<uint32_t>(req_.text_parts.size());
        msg.part_count = 1;
        req_.text_parts.push_back(*r);
      } else if (t == od::json_type::array) {
        od::array parts;
        if (auto e = value.get_array().get(parts)) return invalid_json(where + ".content", e);
        msg.content_kind = ChatMessage::ContentKind::kParts;
        if (auto s = content_parts(where + ".content", parts, msg); !s) return s;
      } else {
        return bad(where + ".content must be a string, an array of parts or null, got " +
                   std::string(type_name(value)));
      }
    } else if (key == "tool_calls") {
      od::json_type t;
      if (auto e = value.type().get(t)) return invalid_json(where + ".tool_calls", e);
      if (t == od::json_type::array) {
        od::array calls;
        if (auto e = value.get_array().get(calls)) return invalid_json(where + ".tool_calls", e);
        for (auto call : calls) {
          od::value c;
          if (auto e = call.get(c)) return invalid_json(where + ".tool_calls", e);
          if (auto e = json_scan::validate_value(c)) return invalid_json(where + ".tool_calls", e);
          msg.has_tool_calls = true;
        }
      } else if (auto e = json_scan::validate_value(value)) {
        return invalid_json(where + ".tool_calls", e);
      }
    } else if (auto e = json_scan::validate_value(value)) {
      return invalid_json(where + "." + std::string(key), e);
    }
  }
  if (!have_role) return bad(where + ".role is required");
  req_.messages.push_back(msg);
  return {};
}

Status BodyReader::content_parts(const std::string& where, od::array& parts, ChatMessage& msg) {
  msg.first_part = static_cast<uint32_t>(req_.text_parts.size());
  size_t index = 0;
  for (auto element : parts) {
    const std::string part_where = where + "[" + std::to_string(index++) + "]";
    od::value pv;
    if (auto e = element.get(pv)) return invalid_json(part_where, e);
    od::object part;
    if (pv.get_object().get(part) != SUCCESS) {
      return bad(part_where + " must be an object, got " + std::string(type_name(pv)));
    }
    // Keys may come in any order: remember the text and decide once "type" is known.
    std::optional<ByteRange> text;
    std::string type;
    for (auto field : part) {
      od::field f;
      if (auto e = std::move(field).get(f)) return invalid_json(part_where, e);
      std::string_view key;
      if (auto e = f.unescaped_key().get(key)) return invalid_json(part_where, e);
      od::value value = f.value();
      if (key == "type") {
        auto r = string(part_where + ".type", value);
        if (!r) return std::move(r).error();
        type = std::move(*r);
      } else if (key == "text") {
        od::json_type t;
        if (auto e = value.type().get(t)) return invalid_json(part_where + ".text", e);
        if (t == od::json_type::string) {
          auto r = string_range(part_where + ".text", value);
          if (!r) return std::move(r).error();
          text = *r;
        } else if (auto e = json_scan::validate_value(value)) {
          return invalid_json(part_where + ".text", e);
        }
      } else if (auto e = json_scan::validate_value(value)) {
        return invalid_json(part_where + "." + std::string(key), e);
      }
    }
    if (type.empty()) return bad(part_where + ".type is required");
    if (type == "text") {
      if (!text) return bad(part_where + ".text must be a string");
      req_.text_parts.push_back(*text);
      ++msg.part_count;
    } else {
      msg.has_non_text_parts = true;
    }
  }
  return {};
}

Status BodyReader::prompt(od::value& v) {
  od::json_type t;
  if (auto e = v.type().get(t)) return invalid_json("prompt", e);
  if (t == od::json_type::string) {
    auto r = string_range("prompt", v);
    if (!r) return std::move(r).error();
    req_.prompt_kind = PromptKind::kString;
    req_.prompts.push_back(*r);
    return {};
  }
  if (t != od::json_type::array) {
    return bad("prompt must be a string, an array of strings or an array of token ids, got " +
               std::string(type_name(v)));
  }
  od::array arr;
  if (auto e = v.get_array().get(arr)) return invalid_json("prompt", e);
  size_t index = 0;
  for (auto element : arr) {
    const std::string where = "prompt[" + std::to_string(index) + "]";
    od::value x;
    if (auto e = element.get(x)) return invalid_json(where, e);
    od::json_type xt;
    if (auto e = x.type().get(xt)) return invalid_json(where, e);
    PromptKind kind = xt == od::json_type::string   ? PromptKind::kStrings
                      : xt == od::json_type::number ? PromptKind::kTokens
                      : xt == od::json_type::array  ? PromptKind::kTokenBatches
                                                    : PromptKind::kAbsent;
    if (kind == PromptKind::kAbsent) {
      return bad(where + " must be a string, a token id or an array of token ids, got " +
                 std::string(type_name(x)));
    }
    if (index > 0 && kind != req_.prompt_kind) {
      return bad("prompt must not mix strings, token ids and arrays (" + where + ")");
    }
    req_.prompt_kind = kind;
    if (kind == PromptKind::kStrings) {
      auto r = string_range(where, x);
      if (!r) return std::move(r).error();
      req_.prompts.push_back(*r);
    } else if (kind == PromptKind::kTokens) {
      int64_t id;
      if (x.get_int64().get(id) != SUCCESS || id < 0) {
        return bad(where + " must be a non-negative integer token id, got " + shown(token_of(x)));
      }
      req_.prompt_tokens.push_back(id);
    } else {
      od::array batch;
      if (auto e = x.get_array().get(batch)) return invalid_json(where, e);
      for (auto id_result : batch) {
        int64_t id;
        if (id_result.get_int64().get(id) != SUCCESS || id < 0) {
          return bad(where + " must hold non-negative integer token ids");
        }
      }
    }
    ++index;
  }
  if (index == 0) return bad("prompt must not be empty");
  return {};
}

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
    if (*n) r.n = **n;
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

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool read_hex4(std::string_view s, size_t pos, uint32_t& out) {
  if (pos + 4 > s.size()) return false;
  out = 0;
  for (size_t i = pos; i < pos + 4; ++i) {
    char c = s[i];
    out <<= 4;
    if (c >= '0' && c <= '9') {
      out |= static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      out |= static_cast<uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      out |= static_cast<uint32_t>(c - 'A' + 10);
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string_view to_string(Endpoint endpoint) {
  return endpoint == Endpoint::kChatCompletions ? "chat.completions" : "completions";
}

bool decode_json_string(std::string_view token, std::string& out) {
  if (token.size() < 2 || token.front() != '"' || token.back() != '"') return false;
  std::string_view s = token.substr(1, token.size() - 2);
  size_t i = 0;
  while (i < s.size()) {
    size_t esc = s.find('\\', i);
    if (esc == std::string_view::npos) esc = s.size();
    out.append(s.data() + i, esc - i);
    if (esc == s.size()) break;
    if (esc + 1 >= s.size()) return false;
    char c = s[esc + 1];
    i = esc + 2;
    switch (c) {
      case '"':
        out.push_back('"');
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '/':
        out.push_back('/');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'u': {
        uint32_t cp;
        if (!read_hex4(s, i, cp)) return false;
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t lo;
          if (i + 6 <= s.size() && s[i] == '\\' && s[i + 1] == 'u' && read_hex4(s, i + 2, lo) &&
              lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          } else {
            cp = 0xFFFD;  // a lone high surrogate
          }
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          cp = 0xFFFD;  // a lone low surrogate
        }
        append_utf8(out, cp);
        break;
      }
      default:
        return false;
    }
  }
  return true;
}

std::string ParsedRequest::message_role(size_t i) const {
  std::string out;
  decode_json_string(raw(messages.at(i).role), out);
  return out;
}

void ParsedRequest::append_message_text(size_t i, std::string& out) const {
  const ChatMessage& m = messages.at(i);
  for (uint32_t p = m.first_part; p < m.first_part + m.part_count; ++p) {
    decode_json_string(raw(text_parts[p]), out);
  }
}

std::string ParsedRequest::message_text(size_t i) const {
  std::string out;
  append_message_text(i, out);
  return out;
}

std::string ParsedRequest::prompt_text(size_t i) const {
  std::string out;
  decode_json_string(raw(prompts.at(i)), out);
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
