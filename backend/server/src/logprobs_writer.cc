#include "cutline/server/logprobs_writer.h"

#include <charconv>
#include <cmath>

#include "cutline/base/json_writer.h"

namespace cutline::server {

namespace {

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    for (size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n + 1;
  }
  return true;
}

void write_logprob(base::JsonWriter& w, float logprob) {
  // JSON has no -Infinity; a token the model gives probability 0 is written as OpenAI does
  // for such tokens (-9999.0).
  if (!std::isfinite(logprob)) logprob = -9999.0f;
  // The float's shortest spelling (-0.31725305, not its double widening -0.3172530531883240).
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, logprob);
  w.raw(std::string_view(buf, static_cast<size_t>(r.ptr - buf)));
}

void write_bytes(base::JsonWriter& w, std::string_view bytes) {
  w.begin_array();
  for (unsigned char c : bytes) w.value(static_cast<int64_t>(c));
  w.end_array();
}

void write_chat_entry(base::JsonWriter& w, const model::Tokenizer& tok, int32_t token,
                      float logprob) {
  w.field("token", logprob_token_text(tok, token));
  w.key("logprob");
  write_logprob(w, logprob);
  w.key("bytes");
  write_bytes(w, tok.token_bytes(token));
}

// Appends `raw` to a comma-separated list.
void append_item(std::string& list, std::string_view raw) {
  if (!list.empty()) list += ',';
  list.append(raw);
}

}  // namespace

std::string logprob_token_text(const model::Tokenizer& tokenizer, int32_t token) {
  const std::string_view bytes = tokenizer.token_bytes(token);
  if (valid_utf8(bytes)) return std::string(bytes);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "bytes:";
  for (unsigned char c : bytes) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

void append_chat_logprobs_items(std::string& out, std::span<const engine::TokenLogprobs> tokens,
                                const model::Tokenizer& tok) {
  for (const engine::TokenLogprobs& t : tokens) {
    std::string item;
    base::JsonWriter w(item);
    w.begin_object();
    write_chat_entry(w, tok, t.token, t.logprob);
    w.key("top_logprobs").begin_array();
    for (const engine::TopLogprob& alt : t.top) {
      w.begin_object();
      write_chat_entry(w, tok, alt.token, alt.logprob);
      w.end_object();
    }
    w.end_array().end_object();
    append_item(out, item);
  }
}

std::string chat_logprobs_object(std::string_view items) {
  std::string out = "{\"content\":[";
  out.append(items);
  out += "]}";
  return out;
}

void CompletionLogprobs::add(std::span<const engine::TokenLogprobs> tokens) {
  for (const engine::TokenLogprobs& t : tokens) {
    std::string v;
    base::append_json_string(v, logprob_token_text(tokenizer_, t.token));
    append_item(tokens_, v);
    v.clear();
    base::JsonWriter lw(v);
    write_logprob(lw, t.logprob);
    append_item(token_logprobs_, v);
    v.clear();
    base::JsonWriter tw(v);
    tw.begin_object();
    bool sampled_listed = false;
    for (const engine::TopLogprob& alt : t.top) {
      tw.key(logprob_token_text(tokenizer_, alt.token));
      write_logprob(tw, alt.logprob);
      sampled_listed = sampled_listed || alt.token == t.token;
    }
    // As OpenAI and vLLM do here: the sampled token is always among them (up to logprobs + 1).
    if (!sampled_listed) {
      tw.key(logprob_token_text(tokenizer_, t.token));
      write_logprob(tw, t.logprob);
    }
    tw.end_object();
    append_item(top_logprobs_, v);
    append_item(text_offset_, std::to_string(offset_));
    if (!tokenizer_.is_control(t.token))
      offset_ += static_cast<int64_t>(tokenizer_.token_bytes(t.token).size());
  }
}

std::string CompletionLogprobs::object() const {
  return "{\"tokens\":[" + tokens_ + "],\"token_logprobs\":[" + token_logprobs_ +
         "],\"top_logprobs\":[" + top_logprobs_ + "],\"text_offset\":[" + text_offset_ + "]}";
}

void CompletionLogprobs::clear() {
  tokens_.clear();
  token_logprobs_.clear();
  top_logprobs_.clear();
  text_offset_.clear();
}

bool insert_choice_logprobs(std::string& json, std::string_view object) {
  constexpr std::string_view kEnd = "}]}";
  if (json.size() < kEnd.size() || std::string_view(json).substr(json.size() - 3) != kEnd)
    return false;
  std::string field = ",\"logprobs\":";
  field.append(object);
  json.insert(json.size() - kEnd.size(), field);
  return true;
}

void append_top_level(std::string& json, std::string_view key, std::string_view raw) {
  if (json.empty() || json.back() != '}') return;
  json.pop_back();
  json += ',';
  base::append_json_string(json, key);
  json += ':';
  json.append(raw);
  json += '}';
}

}  // namespace cutline::server
