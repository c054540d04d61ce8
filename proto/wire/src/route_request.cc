#include "cutline/proto/wire/route_request.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "json_scan.h"

namespace cutline::proto {
namespace {

namespace js = json_scan;

Error bad(std::string message) { return make_error(ErrorKind::kBadRequest, std::move(message)); }

ByteRange range_of(std::string_view padded_body, std::string_view token) {
  const size_t begin = static_cast<size_t>(token.data() - padded_body.data());
  return ByteRange{begin, begin + token.size()};
}

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return INT64_MAX;
  return out;
}

// Adds the tokens of one embeddings input value (a string, a token id, or an array of them, as
// deep as it goes) to `tokens`, checking every byte on the way (the value is consumed).
simdjson::error_code add_input_tokens(simdjson::ondemand::value v, int depth, int64_t& tokens) {
  if (depth > 256) return simdjson::DEPTH_ERROR;
  simdjson::ondemand::json_type t;
  if (auto e = v.type().get(t)) return e;
  if (t == simdjson::ondemand::json_type::string) {
    std::string_view text;
    if (auto e = v.get_string().get(text)) return e;
    tokens = saturating_add(tokens, static_cast<int64_t>((text.size() + 3) / 4));
    return simdjson::SUCCESS;
  }
  if (t == simdjson::ondemand::json_type::array) {
    simdjson::ondemand::array a;
    if (auto e = v.get_array().get(a)) return e;
    for (auto element : a) {
      simdjson::ondemand::value x;
      if (auto e = element.get(x)) return e;
      if (auto e = add_input_tokens(x, depth + 1, tokens)) return e;
    }
    return simdjson::SUCCESS;
  }
  // A token id (or anything else the upstream will judge): one token.
  tokens = saturating_add(tokens, 1);
  return js::validate_value(v);
}

}  // namespace

Result<RouteRequest> parse_route_request(RouteKind kind, std::string_view body) {
  thread_local simdjson::ondemand::parser parser;
  thread_local std::string padded;
  js::copy_padded(padded, body);
  RouteRequest r;
  r.kind = kind;
  if (!js::opens_object(body)) return bad("the request body must be a JSON object");
  simdjson::ondemand::document doc;
  if (parser.iterate(padded.data(), body.size(), padded.capacity()).get(doc)) {
    return bad("the request body is not valid JSON");
  }
  simdjson::ondemand::object obj;
  if (doc.get_object().get(obj)) return bad("the request body must be a JSON object");
  const std::string_view text(padded.data(), body.size());
  r.object_open = js::skip_space(text, 0);
  bool has_model = false, has_input = false, any = false;
  for (auto field : obj) {
    any = true;
    std::string_view key;
    if (field.unescaped_key().get(key)) return bad("the request body is not valid JSON");
    simdjson::ondemand::value v;
    if (field.value().get(v)) return bad("the request body is not valid JSON");
    auto once = [&](bool& seen) -> Status {
      if (seen) return bad("\"" + std::string(key) + "\" appears more than once");
      seen = true;
      return {};
    };
    if (key == "model") {
      if (Status s = once(has_model); !s.ok()) return s.error();
      std::string_view m;
      if (v.get_string().get(m) || m.empty()) return bad("model must be a non-empty string");
      r.model = std::string(m);
    } else if (key == "input") {
      if (Status s = once(has_input); !s.ok()) return s.error();
      const std::string_view type = js::type_name(v);
      if (type != "string" && type != "array") {
        return bad("input must be a string or an array, got " + std::string(type));
      }
      if (kind == RouteKind::kEmbeddings) {
        int64_t tokens = 0;
        if (add_input_tokens(v, 0, tokens)) return bad("input is not valid JSON");
        r.input_tokens_estimate = std::max<int64_t>(1, tokens);
      } else if (js::validate_value(v)) {
        return bad("input is not valid JSON");
      }
    } else if (key == "stream" && kind == RouteKind::kResponses) {
      if (r.stream_token) return bad("\"stream\" appears more than once");
      const std::string_view token = js::token_of(v);
      bool b = false;
      if (!js::is_null(v)) {
        if (v.get_bool().get(b)) return bad("stream must be a boolean");
      }
      r.stream = b;
      r.stream_token = range_of(text, token);
    } else if (key == "max_output_tokens" && kind == RouteKind::kResponses) {
      if (r.max_output_tokens_token) return bad("\"max_output_tokens\" appears more than once");
      const std::string_view token = js::token_of(v);
      r.max_output_tokens_token = range_of(text, token);
      if (js::is_null(v)) continue;
      int64_t n = 0;
      if (v.get_int64().get(n) || n < 1 || n > kMaxTokensLimit) {
        return bad("max_output_tokens must be an integer from 1 to " +
                   std::to_string(kMaxTokensLimit) + ", got " + std::string(token));
      }
      r.max_output_tokens = n;
    } else if (js::validate_value(v)) {
      return bad("\"" + std::string(key) + "\" is not valid JSON");
    }
  }
  if (js::check_end(doc)) return bad("unexpected bytes after the JSON object");
  r.object_empty = !any;
  if (!has_model) return bad("missing required field \"model\"");
  if (!has_input) return bad("missing required field \"input\"");
  return r;
}

std::string rewrite_responses_request(std::string_view body, const RouteRequest& req,
                                      std::optional<int64_t> max_output_tokens, bool force_stream) {
  struct Splice {
    size_t begin, end;
    std::string text;
  };
  std::vector<Splice> splices;
  std::string insert;
  if (max_output_tokens) {
    const std::string n = std::to_string(*max_output_tokens);
    if (req.max_output_tokens_token) {
      splices.push_back({req.max_output_tokens_token->begin, req.max_output_tokens_token->end, n});
    } else {
      insert += "\"max_output_tokens\":" + n;
    }
  }
  if (force_stream) {
    if (req.stream_token) {
      splices.push_back({req.stream_token->begin, req.stream_token->end, "true"});
    } else {
      if (!insert.empty()) insert += ',';
      insert += "\"stream\":true";
    }
  }
  if (!insert.empty()) {
    if (!req.object_empty) insert += ',';
    splices.push_back({req.object_open + 1, req.object_open + 1, insert});
  }
  std::sort(splices.begin(), splices.end(),
            [](const Splice& a, const Splice& b) { return a.begin < b.begin; });
  std::string out;
  out.reserve(body.size() + insert.size() + 16);
  size_t at = 0;
  for (const Splice& s : splices) {
    out.append(body.substr(at, s.begin - at));
    out.append(s.text);
    at = s.end;
  }
  out.append(body.substr(at));
  return out;
}

}  // namespace cutline::proto
