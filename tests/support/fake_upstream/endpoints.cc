// cutline-fake-upstream: the request handler. Admin (/fake/requests, /fake/reset), the load and
// state a backend reports (--resident), /v1/models, /v1/embeddings, the completions (recorded,
// then answered by stream.cc or responses.cc as their script says), and an echo of anything else.
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cutline/base/json_writer.h"
#include "fake_upstream.h"

namespace cutline::fake_upstream {
namespace {

using cutline::base::JsonWriter;

// /fake/reset forgets every request; /fake/requests (any other /fake/ path) lists them.
void handle_admin(Server* srv, evhttp_request* req, const std::string& path) {
  if (path == "/fake/reset") {
    srv->requests.clear();
    return send_json(req, 200, "{}");
  }
  std::string out;
  JsonWriter w(out);
  w.begin_array();
  for (const auto& r : srv->requests) {
    w.begin_object().field("method", r.method).field("path", r.path).field("target", r.target);
    w.field("script", r.script);
    w.field("body", r.body).field("authorization", r.authorization);
    w.key("headers").begin_object();
    for (const auto& [name, value] : r.headers) w.field(name, value);
    w.end_object();
    w.field("cancelled", r.cancelled).field("completed", r.completed);
    w.end_object();
  }
  w.end_array();
  send_json(req, 200, out);
}

// --resident: the load a backend reports. GET /v1/cutline/state as a Cutline backend (queue_depth
// 0, running = the completions in flight, the resident models), GET /metrics as vLLM's gauges.
void handle_load_report(Server* srv, evhttp_request* req, const std::string& path) {
  int64_t running = 0;
  for (const auto& r : srv->requests) {
    running += r.method == "POST" && !r.completed && !r.cancelled ? 1 : 0;
  }
  if (path == "/metrics") {
    const std::string text = "vllm:num_requests_waiting 0\nvllm:num_requests_running " +
                             std::to_string(running) + "\nvllm:kv_cache_usage_perc 0.1\n";
    evbuffer* buf = evbuffer_new();
    evbuffer_add(buf, text.data(), text.size());
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain");
    evhttp_send_reply(req, 200, "OK", buf);
    evbuffer_free(buf);
    return;
  }
  std::string out;
  JsonWriter w(out);
  w.begin_object().field("queue_depth", int64_t{0}).field("running", running);
  w.key("models").begin_array();
  for (const auto& m : srv->resident)
    w.begin_object().field("name", m).field("resident", true).end_object();
  w.end_array().end_object();
  return send_json(req, 200, out);
}

// Streamed answers go out as a head and then chunks, each its own write: without TCP_NODELAY
// Nagle holds every chunk until the client ACKs the head, and a client that delays its ACK
// (Linux does, up to 40 ms, on a keep-alive connection) sees each answer 40 ms late. Real
// servers (uvicorn, llama.cpp server, Cutline's own) set it; evhttp does not.
void set_nodelay(evhttp_request* req) {
  evhttp_connection* conn = evhttp_request_get_connection(req);
  bufferevent* bev = conn ? evhttp_connection_get_bufferevent(conn) : nullptr;
  const evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
  const int one = 1;
  if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// --lenient-routes: the path a lenient web framework routes `target` as. uvicorn and Starlette
// drop the fragment and decode %-escapes, and Python's `$` also matches before a final newline;
// other routers strip ";parameters" (Tomcat, Spring), match case-insensitively (ASP.NET), trim
// blanks and ignore a trailing '/'. This one does all of it, dot segments resolved last.
std::string lenient_path(const std::string& target) {
  std::string raw = target.substr(0, target.find_first_of("?#"));
  std::string decoded;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '%' && i + 2 < raw.size() &&
        std::isxdigit(static_cast<unsigned char>(raw[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(raw[i + 2]))) {
      decoded.push_back(static_cast<char>(std::stoi(raw.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      decoded.push_back(raw[i]);
    }
  }
  std::vector<std::string> segments;
  size_t at = 0;
  while (at <= decoded.size()) {
    const size_t slash = std::min(decoded.find('/', at), decoded.size());
    std::string seg = decoded.substr(at, slash - at);
    at = slash + 1;
    seg = seg.substr(0, seg.find(';'));
    while (!seg.empty() && std::isspace(static_cast<unsigned char>(seg.back()))) seg.pop_back();
    for (char& c : seg) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (seg == "..") {
      if (!segments.empty()) segments.pop_back();
    } else if (!seg.empty() && seg != ".") {
      segments.push_back(seg);
    }
  }
  std::string path;
  for (const auto& seg : segments) path += "/" + seg;
  return path.empty() ? "/" : path;
}

}  // namespace

void handle(evhttp_request* req, void* arg) {
  auto* srv = static_cast<Server*>(arg);
  set_nodelay(req);
  const char* uri = evhttp_request_get_uri(req);
  const std::string target = uri ? uri : "/";
  std::string path =
      srv->lenient_routes ? lenient_path(target) : target.substr(0, target.find('?'));
  if (path.rfind("/fake/", 0) == 0) return handle_admin(srv, req, path);
  if (!srv->resident.empty() && (path == "/v1/cutline/state" || path == "/metrics")) {
    return handle_load_report(srv, req, path);
  }
  if (srv->vllm_metrics && path == "/metrics") return handle_load_report(srv, req, path);
  if (srv->health_only && (path == "/health" || path == "/healthz")) {
    // Health checks are not recorded (they would count as requests seen).
    return path == "/health" ? send_json(req, 200, "{}")
                             : send_json(req, 404, R"({"detail":"Not Found"})");
  }
  if (srv->vllm_metrics && path == "/v1/cutline/state") {
    return send_json(req, 404, R"({"detail":"Not Found"})");
  }

  RecordedRequest rec = record_request(req, path);
  rec.target = target;
  if (parse_script(rec.script).hang) {
    // A stopped server: the request is read and never answered, on any path.
    srv->requests.push_back(rec);
    return;
  }

  if (path == "/v1/models") {
    srv->requests.push_back(rec);
    return send_json(req, 200,
                     R"({"object":"list","data":[{"id":"fake","object":"model"},)"
                     R"({"id":"fake-secret","object":"model","owned_by":"x"}]})");
  }
  if (path == "/v1/embeddings" && rec.method == "POST") {
    const Script sc = parse_script(rec.script);
    srv->requests.push_back(rec);
    if (sc.status != 0) {
      return send_json(
          req, sc.status,
          error_body("fake upstream status " + std::to_string(sc.status), sc.type, sc.code));
    }
    if (sc.shape == "chat") {
      return send_json(req, 200,
                       R"({"id":"c1","object":"chat.completion","created":1,"model":"fake",)"
                       R"("choices":[{"index":0,"message":{"role":"assistant","content":"hi"},)"
                       R"("finish_reason":"stop"}],"usage":{"prompt_tokens":3,)"
                       R"("completion_tokens":1,"total_tokens":4}})");
    }
    return send_json(req, 200,
                     R"({"object":"list","data":[{"object":"embedding","index":0,)"
                     R"("embedding":[0.25,-0.5,0.125]}],"model":"fake",)"
                     R"("usage":{"prompt_tokens":3,"total_tokens":3}})");
  }
  if (path != "/v1/chat/completions" && path != "/v1/completions" && path != "/v1/responses") {
    std::string out;
    JsonWriter w(out);
    w.begin_object().field("method", rec.method).field("path", path).field("body", rec.body);
    const char* ua = evhttp_find_header(evhttp_request_get_input_headers(req), "X-Test-Header");
    w.field("x_test_header", ua ? ua : "").end_object();
    srv->requests.push_back(rec);
    evhttp_add_header(evhttp_request_get_output_headers(req), "X-Fake-Echo", "1");
    return send_json(req, path == "/missing" ? 404 : 200, out);
  }

  auto s = std::make_unique<FakeStream>();
  s->server = srv;
  s->req = req;
  s->conn = evhttp_request_get_connection(req);
  s->chat = path == "/v1/chat/completions";
  s->responses = path == "/v1/responses";
  const int64_t max_tokens = read_completion_fields(rec.body, *s);
  const bool script_header =
      evhttp_find_header(evhttp_request_get_input_headers(req), "X-Fake-Script") != nullptr;
  if (!script_header && s->model.rfind("fake-", 0) == 0) rec.script = s->model.substr(5);
  s->script = parse_script(rec.script);
  s->record = srv->requests.size();
  srv->requests.push_back(rec);
  if (!s->script.require_key.empty() && rec.authorization != "Bearer " + s->script.require_key) {
    srv->requests.back().completed = true;
    return send_json(req, 401,
                     error_body("fake upstream: missing or wrong API key", "invalid_request_error",
                                "invalid_api_key"));
  }
  if (s->script.status != 0) {
    srv->requests.back().completed = true;
    if (s->script.shape == "text") {
      evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain");
      evbuffer* out = evbuffer_new();
      evbuffer_add(out, "upstream says no", 16);
      evhttp_send_reply(req, s->script.status, "Error", out);
      evbuffer_free(out);
      return;
    }
    return send_json(req, s->script.status,
                     error_body("fake upstream status " + std::to_string(s->script.status),
                                s->script.type, s->script.code, s->script.cutline));
  }
  s->limit = s->script.tokens;
  if (max_tokens >= 0 && max_tokens < s->limit) s->limit = static_cast<int>(max_tokens);

  start_stream(std::move(s));
}

}  // namespace cutline::fake_upstream
