// cutline-fake-upstream: reading a request (what /fake/requests reports, the completion fields
// the script reads) and writing plain JSON replies.
#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>

#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "cutline/base/json_writer.h"
#include "fake_upstream.h"

namespace cutline::fake_upstream {

using cutline::base::JsonWriter;

const char* method_name(evhttp_cmd_type t) {
  switch (t) {
    case EVHTTP_REQ_GET:
      return "GET";
    case EVHTTP_REQ_POST:
      return "POST";
    case EVHTTP_REQ_PUT:
      return "PUT";
    case EVHTTP_REQ_DELETE:
      return "DELETE";
    case EVHTTP_REQ_HEAD:
      return "HEAD";
    case EVHTTP_REQ_PATCH:
      return "PATCH";
    case EVHTTP_REQ_OPTIONS:
      return "OPTIONS";
    default:
      return "OTHER";
  }
}

std::string body_of(evhttp_request* req) {
  evbuffer* in = evhttp_request_get_input_buffer(req);
  std::string body(evbuffer_get_length(in), '\0');
  evbuffer_copyout(in, body.data(), body.size());
  return body;
}

void send_json(evhttp_request* req, int code, const std::string& json) {
  evkeyvalq* h = evhttp_request_get_output_headers(req);
  evhttp_add_header(h, "Content-Type", "application/json");
  evbuffer* out = evbuffer_new();
  evbuffer_add(out, json.data(), json.size());
  evhttp_send_reply(req, code, code == 200 ? "OK" : "Error", out);
  evbuffer_free(out);
}

std::string error_body(const std::string& message, const std::string& type, const std::string& code,
                       const std::string& cutline) {
  std::string out;
  JsonWriter w(out);
  w.begin_object().key("error").begin_object();
  w.field("message", message).field("type", type).key("param").null();
  if (code.empty()) {
    w.key("code").null();
  } else {
    w.field("code", code);
  }
  if (!cutline.empty()) {
    w.key("cutline").begin_object();
    w.field("v", 1).field("cause", cutline).field("reporter", "backend");
    w.field("output_tokens", 0).field("count_method", "engine").end_object();
  }
  w.end_object().end_object();
  return out;
}

RecordedRequest record_request(evhttp_request* req, const std::string& path) {
  RecordedRequest rec;
  rec.method = method_name(evhttp_request_get_command(req));
  rec.path = path;
  rec.body = body_of(req);
  const char* hdr = evhttp_find_header(evhttp_request_get_input_headers(req), "X-Fake-Script");
  rec.script = hdr ? hdr : "";
  const char* auth = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
  rec.authorization = auth ? auth : "";
  const evkeyvalq* in_headers = evhttp_request_get_input_headers(req);
  for (const evkeyval* kv = in_headers->tqh_first; kv != nullptr; kv = kv->next.tqe_next) {
    std::string name = kv->key;
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    rec.headers.emplace_back(name, kv->value);
  }
  return rec;
}

int64_t read_completion_fields(const std::string& body, FakeStream& s) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  int64_t max_tokens = -1;
  if (parser.iterate(padded).get(doc) == simdjson::SUCCESS) {
    simdjson::ondemand::object obj;
    if (doc.get_object().get(obj) == simdjson::SUCCESS) {
      for (auto field : obj) {
        std::string_view key;
        if (field.unescaped_key().get(key) != simdjson::SUCCESS) break;
        if (key == "model") {
          std::string_view m;
          if (field.value().get_string().get(m) == simdjson::SUCCESS) s.model = std::string(m);
        } else if (key == "stream") {
          bool b = false;
          if (field.value().get_bool().get(b) == simdjson::SUCCESS) s.stream = b;
        } else if (key == "max_tokens" || key == "max_completion_tokens" ||
                   key == "max_output_tokens") {
          int64_t n = 0;
          if (field.value().get_int64().get(n) == simdjson::SUCCESS) max_tokens = n;
        } else if (key == "stream_options") {
          simdjson::ondemand::object so;
          if (field.value().get_object().get(so) == simdjson::SUCCESS) {
            bool b = false;
            if (so["include_usage"].get_bool().get(b) == simdjson::SUCCESS) s.include_usage = b;
          }
        }
      }
    } else {
      s.stream = false;
    }
  }
  return max_tokens;
}

}  // namespace cutline::fake_upstream
