#include "cutline/gateway/responses_relay.h"

#include "cutline/base/clock.h"
#include "cutline/base/json_writer.h"
#include "cutline/proto/sse/sse_writer.h"
#include "cutline/proto/wire/openai_error.h"

namespace cutline::gateway {
namespace {

using simdjson::SUCCESS;

proto::SseOptions sse_options() {
  proto::SseOptions o;
  o.max_line_bytes = 4u << 20;
  o.max_event_bytes = 4u << 20;
  return o;
}

bool is_terminal(std::string_view type) {
  return type == "response.completed" || type == "response.incomplete" || type == "response.failed";
}

// Index just past the JSON string starting at s[i] == '"'.
size_t skip_string(std::string_view s, size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return s.size();
}

}  // namespace

std::optional<std::pair<size_t, size_t>> top_level_object(std::string_view s,
                                                          std::string_view key) {
  int depth = 0;
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '"') {
      const size_t end = skip_string(s, i);
      if (depth == 1 && end - i == key.size() + 2 && s.substr(i + 1, key.size()) == key) {
        size_t v = end;
        while (v < s.size() &&
               (s[v] == ' ' || s[v] == ':' || s[v] == '\n' || s[v] == '\t' || s[v] == '\r')) {
          ++v;
        }
        if (v >= s.size() || s[v] != '{') return std::nullopt;
        int d = 0;
        for (size_t j = v; j < s.size();) {
          if (s[j] == '"') {
            j = skip_string(s, j);
            continue;
          }
          if (s[j] == '{' || s[j] == '[') ++d;
          if (s[j] == '}' || s[j] == ']') {
            if (--d == 0) return std::make_pair(v, j + 1);
          }
          ++j;
        }
        return std::nullopt;
      }
      i = end;
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    ++i;
  }
  return std::nullopt;
}

ResponsesRelay::ResponsesRelay(ResponsesRelayOptions options)
    : options_(std::move(options)), sse_(sse_options()) {}

Result<FeedResult> ResponsesRelay::feed(std::string_view bytes, int64_t now_ns, TokenTiming& timing,
                                        std::string& out) {
  FeedResult result;
  while (!done_) {
    const auto step = sse_.next(bytes);
    if (step == proto::SseParser::Step::kNeedMore) break;
    Status s = step == proto::SseParser::Step::kError ? Status(sse_.error())
                                                      : on_event(sse_.event(), now_ns, timing, out);
    if (!s.ok()) {
      error_event_ = true;
      error_message_ = s.error().message;
      done_ = true;
      result.ended = true;
      return s.error();
    }
  }
  result.ended = done_;
  return result;
}

Status ResponsesRelay::on_event(const proto::SseEvent& event, int64_t now_ns, TokenTiming& timing,
                                std::string& out) {
  if (event.done) {  // some servers end with [DONE] as on chat
    done_ = true;
    return {};
  }
  const auto fail = [](std::string what) {
    return make_error(ErrorKind::kUpstream, "responses stream: " + std::move(what));
  };
  padded_.assign(event.data.data(), event.data.size());
  padded_.reserve(event.data.size() + simdjson::SIMDJSON_PADDING);
  simdjson::ondemand::document doc;
  if (parser_.iterate(padded_.data(), event.data.size(), padded_.capacity()).get(doc) != SUCCESS) {
    return fail("an event is not JSON");
  }
  simdjson::ondemand::object obj;
  if (doc.get_object().get(obj) != SUCCESS) return fail("an event is not a JSON object");
  std::string_view type = event.event;
  std::string_view delta;
  bool has_delta = false;
  for (auto field : obj) {
    std::string_view key;
    if (field.unescaped_key().get(key) != SUCCESS) return fail("an event is not valid JSON");
    if (key == "type") {
      std::string_view t;
      if (field.value().get_string().get(t) == SUCCESS && type.empty()) type = t;
    } else if (key == "sequence_number") {
      int64_t n = 0;
      if (field.value().get_int64().get(n) == SUCCESS) sequence_ = n;
    } else if (key == "delta") {
      has_delta = field.value().get_string().get(delta) == SUCCESS;
    } else if (key == "response") {
      simdjson::ondemand::object r;
      if (field.value().get_object().get(r) == SUCCESS) {
        if (Status s = read_response(r); !s.ok()) return s;
      }
    } else if (key == "message" && (type == "error" || event.event == "error")) {
      std::string_view m;
      if (field.value().get_string().get(m) == SUCCESS) error_message_ = std::string(m);
    }
  }
  if (type == "error") {
    error_event_ = true;
    if (error_message_.empty()) error_message_ = "upstream error event";
    done_ = true;
    return {};
  }
  if (has_delta && type.size() > 6 && type.substr(type.size() - 6) == ".delta") {
    timing.on_token(now_ns);
    ++deltas_;
    if (!options_.client_stream && type == "response.output_text.delta") text_.append(delta);
  }
  if (is_terminal(type)) {
    terminal_type_ = std::string(type);
    terminal_data_.assign(event.data);
    done_ = true;
    if (type == "response.failed") {
      error_event_ = true;
      if (error_message_.empty()) error_message_ = "upstream response.failed";
    }
    return {};
  }
  if (options_.client_stream) {
    proto::append_sse_event(out, type, event.data);
    relayed_any_ = true;
  }
  return {};
}

// The fields of a response object the record and a gateway-written end need.
Status ResponsesRelay::read_response(simdjson::ondemand::object r) {
  for (auto field : r) {
    std::string_view key;
    if (field.unescaped_key().get(key) != SUCCESS) break;
    if (key == "id") {
      std::string_view v;
      if (field.value().get_string().get(v) == SUCCESS && id_.empty()) id_ = std::string(v);
    } else if (key == "model") {
      std::string_view v;
      if (field.value().get_string().get(v) == SUCCESS && model_.empty()) model_ = std::string(v);
    } else if (key == "created_at") {
      int64_t n = 0;
      if (field.value().get_int64().get(n) == SUCCESS) created_at_ = n;
    } else if (key == "status") {
      std::string_view v;
      if (field.value().get_string().get(v) == SUCCESS && v == "completed") finish_reason_ = "stop";
    } else if (key == "incomplete_details") {
      simdjson::ondemand::object d;
      if (field.value().get_object().get(d) == SUCCESS) {
        std::string_view reason;
        if (d.find_field_unordered("reason").get_string().get(reason) == SUCCESS) {
          finish_reason_ = reason == "max_output_tokens" ? "length" : std::string(reason);
        }
      }
    } else if (key == "error") {
      simdjson::ondemand::object e;
      if (field.value().get_object().get(e) == SUCCESS) {
        std::string_view m;
        if (e.find_field_unordered("message").get_string().get(m) == SUCCESS) {
          error_message_ = std::string(m);
        }
      }
    } else if (key == "cutline") {
      // A Cutline backend's own record: its facts (phases, preemptions, KV bytes, its cause)
      // are merged into the gateway's, which replaces it at the end (write_end).
      simdjson::ondemand::object c;
      if (field.value().get_object().get(c) == SUCCESS) {
        auto parsed = proto::parse_stop_record(c);
        if (parsed.ok()) backend_record_ = std::move(parsed).value();
      }
    } else if (key == "usage") {
      simdjson::ondemand::object u;
      if (field.value().get_object().get(u) == SUCCESS) {
        for (auto uf : u) {
          std::string_view uk;
          if (uf.unescaped_key().get(uk) != SUCCESS) break;
          int64_t n = 0;
          if (uk == "input_tokens" && uf.value().get_int64().get(n) == SUCCESS) usage_input_ = n;
          if (uk == "output_tokens" && uf.value().get_int64().get(n) == SUCCESS) usage_output_ = n;
        }
      }
    }
  }
  return {};
}

UpstreamEnd ResponsesRelay::upstream_end(bool transport_closed) const {
  UpstreamEnd end;
  if (error_event_) {
    end.kind = UpstreamEndKind::kErrorEvent;
  } else if (!finish_reason_.empty()) {
    end.kind = UpstreamEndKind::kFinished;
    end.finish_reason = finish_reason_;
  } else {
    end.kind = transport_closed ? UpstreamEndKind::kDisconnect : UpstreamEndKind::kNoFinish;
  }
  return end;
}

void ResponsesRelay::write_response_object(const proto::StopRecord& record,
                                           std::string& out) const {
  const std::string id = id_.empty() ? "resp_" + options_.fallback_id : id_;
  base::JsonWriter w(out);
  w.begin_object().field("id", id).field("object", "response");
  w.field("created_at", created_at_ != 0 ? created_at_ : static_cast<int64_t>(base::wall_time_s()));
  w.field("status", "incomplete");
  w.field("model", model_.empty() ? options_.fallback_model : model_);
  w.key("output").begin_array();
  if (!text_.empty()) {
    w.begin_object().field("type", "message").field("id", "msg_" + id);
    w.field("status", "incomplete").field("role", "assistant");
    w.key("content").begin_array().begin_object().field("type", "output_text");
    w.field("text", text_).key("annotations").begin_array().end_array();
    w.end_object().end_array().end_object();
  }
  w.end_array();
  w.key("incomplete_details");
  if (record.cause == proto::Cause::kGatewayBudget ||
      record.cause == proto::Cause::kClientMaxTokens) {
    w.begin_object().field("reason", "max_output_tokens").end_object();
  } else if (record.cause == proto::Cause::kContentFilter) {
    w.begin_object().field("reason", "content_filter").end_object();
  } else {
    w.null();
  }
  w.key("usage");
  if (usage_input_ || usage_output_ || deltas_ > 0) {
    const int64_t in = usage_input_.value_or(0), o = output_tokens();
    w.begin_object().field("input_tokens", in).field("output_tokens", o);
    w.field("total_tokens", in + o).end_object();
  } else {
    w.null();
  }
  w.key("cutline");
  proto::write_stop_record(w, record);
  w.end_object();
}

void ResponsesRelay::write_end(const proto::StopRecord& record, bool gateway_cut,
                               std::string& out) {
  const std::string record_json = proto::stop_record_json(record);
  if (!gateway_cut && has_terminal()) {
    if (auto at = top_level_object(terminal_data_, "response")) {
      // One record per answer, the gateway's: a record the upstream wrote (a Cutline backend's)
      // is replaced in place, as on chat, so that a JSON reader that keeps the last of two
      // members cannot see the upstream's cause instead of the gateway's.
      std::string patched = terminal_data_;
      const std::string_view response(terminal_data_.data() + at->first, at->second - at->first);
      size_t response_end = at->second;
      if (auto own = top_level_object(response, "cutline")) {
        patched.replace(at->first + own->first, own->second - own->first, record_json);
        response_end = response_end - (own->second - own->first) + record_json.size();
      } else {
        const bool empty = patched.find_first_not_of(" \t\r\n", at->first + 1) == at->second - 1;
        const std::string insert = "\"cutline\":" + record_json + (empty ? "" : ",");
        patched.insert(at->first + 1, insert);
        response_end += insert.size();
      }
      if (options_.client_stream) {
        proto::append_sse_event(out, terminal_type_, patched);
      } else {
        out.append(patched, at->first, response_end - at->first);
      }
      return;
    }
  }
  if (!options_.client_stream) {
    write_response_object(record, out);
    return;
  }
  std::string response;
  write_response_object(record, response);
  if (!relayed_any_) {
    // The SDKs' stream helpers need a response.created before anything else.
    std::string created;
    base::JsonWriter w(created);
    w.begin_object().field("type", "response.created").field("sequence_number", ++sequence_);
    w.key("response").raw(response).end_object();
    proto::append_sse_event(out, "response.created", created);
  }
  std::string incomplete;
  base::JsonWriter w(incomplete);
  w.begin_object().field("type", "response.incomplete").field("sequence_number", ++sequence_);
  w.key("response").raw(response).end_object();
  proto::append_sse_event(out, "response.incomplete", incomplete);
}

void ResponsesRelay::write_error_event(const Error& error, const proto::StopRecord& record,
                                       std::string& out) {
  proto::ErrorBodyFields fields;
  fields.cutline = &record;
  proto::append_sse_error(out, proto::error_body(error, fields));
}

}  // namespace cutline::gateway
