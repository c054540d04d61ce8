// The "messages" (chat) and "prompt" (completions) fields: each message's role and content
// (a string or an array of parts), each prompt a string, a token array or an array of either,
// recorded by byte range.
#include <string>

#include "request_body_reader.h"

namespace cutline::proto::request_body {

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

}  // namespace cutline::proto::request_body
