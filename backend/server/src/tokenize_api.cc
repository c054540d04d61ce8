#include "cutline/server/tokenize_api.h"

#include <simdjson.h>

#include <vector>

#include "cutline/base/json_writer.h"
#include "cutline/model/chat_template.h"
#include "cutline/model/special_tokens.h"
#include "cutline/server/prompt_encoding.h"

namespace cutline::server {

namespace {

Error bad(std::string& param, std::string field, std::string message) {
  param = std::move(field);
  return make_error(ErrorKind::kBadRequest, std::move(message));
}

Result<simdjson::dom::element> parse_object(simdjson::dom::parser& parser, std::string_view body) {
  simdjson::dom::element doc;
  if (parser.parse(body.data(), body.size(), true).get(doc) != simdjson::SUCCESS)
    return make_error(ErrorKind::kBadRequest, "the body is not valid JSON");
  if (!doc.is_object()) return make_error(ErrorKind::kBadRequest, "the body is not a JSON object");
  return doc;
}

// An optional boolean field: `fallback` when absent or null.
Result<bool> bool_field(simdjson::dom::element doc, const char* name, bool fallback,
                        std::string& param) {
  simdjson::dom::element v;
  if (doc.at_key(name).get(v) != simdjson::SUCCESS || v.is_null()) return fallback;
  if (!v.is_bool()) return bad(param, name, std::string(name) + " must be a boolean");
  return v.get_bool().value_unsafe();
}

bool valid_utf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

Result<std::vector<model::ChatMessage>> messages_of(simdjson::dom::element value,
                                                    std::string& param) {
  simdjson::dom::array array;
  if (value.get_array().get(array) != simdjson::SUCCESS || array.size() == 0)
    return bad(param, "messages", "messages must be a non-empty array");
  std::vector<model::ChatMessage> out;
  size_t i = 0;
  for (simdjson::dom::element m : array) {
    std::string_view role, content;
    const std::string where = "messages[" + std::to_string(i++) + "]";
    if (m.at_key("role").get_string().get(role) != simdjson::SUCCESS)
      return bad(param, "messages", where + ".role must be a string");
    simdjson::dom::element c;
    if (m.at_key("content").get(c) != simdjson::SUCCESS || c.is_null()) {
      content = {};
    } else if (c.get_string().get(content) != simdjson::SUCCESS) {
      return bad(param, "messages", where + ".content must be a string");
    }
    out.push_back({std::string(role), std::string(content)});
  }
  return out;
}

void write_tokens(base::JsonWriter& w, const model::Tokenizer& tok, std::span<const int32_t> ids,
                  bool with_pieces) {
  w.key("tokens").begin_array();
  for (int32_t id : ids) {
    if (!with_pieces) {
      w.value(static_cast<int64_t>(id));
      continue;
    }
    w.begin_object().field("id", static_cast<int64_t>(id)).key("piece");
    std::string_view piece = model::token_display_text(tok, id);
    if (valid_utf8(piece)) {
      w.value(piece);
    } else {
      w.begin_array();
      for (char c : piece) w.value(static_cast<int64_t>(static_cast<uint8_t>(c)));
      w.end_array();
    }
    w.end_object();
  }
  w.end_array();
}

}  // namespace

Result<std::optional<std::string>> tokenize_model_of(std::string_view body) {
  simdjson::dom::parser parser;
  auto doc = parse_object(parser, body);
  if (!doc.ok()) return std::move(doc).error();
  simdjson::dom::element v;
  if (doc->at_key("model").get(v) != simdjson::SUCCESS || v.is_null())
    return std::optional<std::string>();
  std::string_view name;
  if (v.get_string().get(name) != simdjson::SUCCESS)
    return make_error(ErrorKind::kBadRequest, "model must be a string");
  return std::optional<std::string>(std::string(name));
}

Result<std::string> tokenize_json(std::string_view body, const ModelTextInfo& model,
                                  std::string& param) {
  const model::Tokenizer& tok = *model.tokenizer;
  simdjson::dom::parser parser;
  auto doc = parse_object(parser, body);
  if (!doc.ok()) return std::move(doc).error();
  simdjson::dom::element prompt, messages;
  const bool has_prompt = doc->at_key("prompt").get(prompt) == simdjson::SUCCESS;
  const bool has_messages = doc->at_key("messages").get(messages) == simdjson::SUCCESS;
  if (has_prompt == has_messages)
    return bad(param, has_prompt ? "messages" : "prompt",
               "give exactly one of prompt (a string) and messages (an array)");
  auto with_pieces = bool_field(*doc, "with_pieces", false, param);
  if (!with_pieces.ok()) return std::move(with_pieces).error();
  std::vector<int32_t> ids;
  if (has_prompt) {
    std::string_view text;
    if (prompt.get_string().get(text) != simdjson::SUCCESS)
      return bad(param, "prompt", "prompt must be a string");
    auto encoding = prompt_encoding_of(body, model.parse_special, param);
    if (!encoding.ok()) return std::move(encoding).error();
    ids = encode_prompt(tok, text, *encoding);
  } else {
    auto list = messages_of(messages, param);
    if (!list.ok()) return std::move(list).error();
    auto add_generation = bool_field(*doc, "add_generation_prompt", true, param);
    if (!add_generation.ok()) return std::move(add_generation).error();
    auto add_special = bool_field(*doc, "add_special_tokens", false, param);
    if (!add_special.ok()) return std::move(add_special).error();
    auto rendered = model::render_chat(model.chat_template, *list, *add_generation);
    if (!rendered.ok()) return bad(param, "messages", rendered.error().message);
    if (*add_special) ids = tok.encode({}, true);
    std::vector<int32_t> chat = model::encode_chat(tok, *rendered);
    ids.insert(ids.end(), chat.begin(), chat.end());
  }
  std::string out;
  base::JsonWriter w(out);
  w.begin_object();
  write_tokens(w, tok, ids, *with_pieces);
  w.field("count", static_cast<int64_t>(ids.size()));
  w.field("max_model_len", static_cast<int64_t>(model.context_length));
  w.end_object();
  return out;
}

Result<std::string> detokenize_json(std::string_view body, const ModelTextInfo& model,
                                    std::string& param) {
  const model::Tokenizer& tok = *model.tokenizer;
  simdjson::dom::parser parser;
  auto doc = parse_object(parser, body);
  if (!doc.ok()) return std::move(doc).error();
  simdjson::dom::array tokens;
  if (doc->at_key("tokens").get_array().get(tokens) != simdjson::SUCCESS)
    return bad(param, "tokens", "tokens must be an array of token ids");
  model::Utf8Streamer utf8;
  std::string text;
  size_t i = 0;
  for (simdjson::dom::element t : tokens) {
    int64_t id = 0;
    if (t.get_int64().get(id) != simdjson::SUCCESS)
      return bad(param, "tokens", "tokens[" + std::to_string(i) + "] is not an integer");
    if (id < 0 || id >= tok.vocab_size())
      return bad(param, "tokens",
                 "tokens[" + std::to_string(i) + "] = " + std::to_string(id) +
                     " is out of range [0, " + std::to_string(tok.vocab_size()) + ")");
    text += utf8.push(model::token_display_text(tok, static_cast<int32_t>(id)));
    ++i;
  }
  text += utf8.flush();
  std::string out;
  base::JsonWriter w(out);
  w.begin_object().field("prompt", text).end_object();
  return out;
}

}  // namespace cutline::server
