#include "cutline/server/prompt_encoding.h"

#include <simdjson.h>

#include <string>

#include "cutline/model/special_tokens.h"

namespace cutline::server {

Result<PromptEncoding> prompt_encoding_of(std::string_view body, bool parse_special_default,
                                          std::string& param) {
  PromptEncoding e;
  e.parse_special = parse_special_default;
  const bool has_add = body.find("\"add_special_tokens\"") != std::string_view::npos;
  const bool has_parse = body.find("\"parse_special\"") != std::string_view::npos;
  if (!has_add && !has_parse) return e;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body.data(), body.size(), true).get(doc) != simdjson::SUCCESS ||
      !doc.is_object())
    return make_error(ErrorKind::kBadRequest, "the body is not a JSON object");
  struct Field {
    const char* name;
    bool* value;
  };
  for (Field f : {Field{"add_special_tokens", &e.add_special_tokens},
                  Field{"parse_special", &e.parse_special}}) {
    simdjson::dom::element v;
    if (doc.at_key(f.name).get(v) != simdjson::SUCCESS || v.is_null()) continue;
    if (!v.is_bool()) {
      param = f.name;
      return make_error(ErrorKind::kBadRequest, std::string(f.name) + " must be a boolean");
    }
    *f.value = v.get_bool().value_unsafe();
  }
  return e;
}

std::vector<int32_t> encode_prompt(const model::Tokenizer& tokenizer, std::string_view text,
                                   const PromptEncoding& encoding) {
  // Not parsing special tokens still splits out user-defined ones, as llama.cpp does.
  return model::encode_with_special_tokens(tokenizer, text, encoding.add_special_tokens,
                                           encoding.parse_special);
}

}  // namespace cutline::server
