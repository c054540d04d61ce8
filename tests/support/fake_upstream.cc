// cutline-fake-upstream: a scripted OpenAI-compatible server for gateway tests.
//
// Behaviour is chosen per request by a script: the `X-Fake-Script` header, or else the model name
// when it starts with "fake-" (e.g. "fake-tokens=50,interval_ms=5,finish=length"). Script keys:
//   tokens=N          content tokens to emit (default 5); the request's max_tokens caps it (then
//                     finish_reason is "length")
//   interval_ms=I     gap between tokens (default 0)
//   ttft_ms=T         stall before the first token (default 0)
//   stall_at=K,stall_ms=S  stall S ms after K tokens
//   finish=R          finish_reason of the last chunk (default "stop"); "none" sends no
//                     finish_reason but still [DONE]
//   stop_reason=S     vLLM-style choices[].stop_reason (a matched stop string)
//   usage=0|1         force sending (or not) the usage chunk; default: stream_options.include_usage
//   status=C          answer HTTP status C with an OpenAI error body, no stream
//   code=X            that error body's error.code (default null); type=T its error.type
//                     (default server_error); the message names the status
//   tools=N           the answer is N parallel tool calls (call_0.. calling get_weather_<i>), each
//                     one's arguments split over two chunks; finish_reason "tool_calls" unless
//                     finish= says otherwise. Non-streaming: message.tool_calls, content null
//   event=NAME        before the first token, one SSE event of that type ({"note":"x"}) that no
//                     OpenAI client knows
//   require_key=K     answer 401 unless the request carries Authorization: Bearer K
//   error_at=K        after K tokens send an SSE error event and end the stream
//   drop_at=K         after K tokens close the connection (no finish_reason, no [DONE])
//   stamp=1           each token's text carries its send time: "t<i>@<CLOCK_MONOTONIC ns> "
//                     (benchmarks measure per-token latency through a proxy with it)
//   cutline=CAUSE     last chunk carries a Cutline backend "cutline" object with this cause,
//                     preemptions, kv bytes and TTFT phases (e.g. backend_preempted, backend_oom)
//
// Streams whenever the request has "stream": true; otherwise answers one JSON body.
// POST /v1/responses answers as the Responses API: response.created, output_item.added,
// content_part.added, one response.output_text.delta per token, the .done events, then
// response.completed (or response.incomplete with incomplete_details.reason max_output_tokens
// when max_output_tokens capped it), every event with `event:` and a sequence_number, no [DONE];
// not streaming: the response object. POST /v1/embeddings answers one embedding per request
// with usage.prompt_tokens 3 (status= applies to both).
// --resident M1,M2 makes it report load as a backend does: GET /v1/cutline/state answers a
// Cutline backend's state (queue_depth 0, running = its streams in flight, models M1, M2
// resident) and GET /metrics vLLM's gauges (vllm:num_requests_waiting 0,
// vllm:num_requests_running, vllm:kv_cache_usage_perc 0.1), for the gateway's load-aware and
// residency routing. Without it those paths are echoed like any other.
// Admin: GET /fake/requests returns every request received ({path, script, body, cancelled,
// authorization, completed}); POST /fake/reset clears it. Any other path echoes method, path and
// body as JSON with header X-Fake-Echo: 1 (for passthrough tests).
//
// Usage: cutline-fake-upstream [--port N] (0 = any free port) [--bind IPV4] (default 127.0.0.1;
// 0.0.0.0 answers on every loopback address too) [--tls-cert FILE --tls-key FILE
// [--tls-client-ca FILE]] (HTTPS with proto's TlsContext; with a client CA, clients must present
// a certificate it issued: mTLS). Prints "PORT <n>" on stdout once listening.
// Single-threaded libevent evhttp: a test tool, not a production server.

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <simdjson.h>

#include "cutline/base/json_writer.h"
#include "cutline/proto/tls/tls_context.h"

namespace {

using cutline::base::JsonWriter;

struct Script {
  int tokens = 5;
  int interval_ms = 0;
  int ttft_ms = 0;
  int stall_at = -1;
  int stall_ms = 0;
  std::string finish = "stop";
  std::string stop_reason;
  int usage = -1;  // -1: as requested
  int status = 0;
  int error_at = -1;
  int drop_at = -1;
  std::string cutline;
  bool stamp = false;
  std::string code;
  std::string type = "server_error";
  int tools = 0;
  std::string event;
  std::string require_key;
  bool finish_set = false;
};

Script parse_script(const std::string& text) {
  Script s;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(pos, end - pos);
    pos = end + 1;
    size_t eq = item.find('=');
    if (eq == std::string::npos) continue;
    std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    int n = std::atoi(v.c_str());
    if (k == "tokens")
      s.tokens = n;
    else if (k == "interval_ms")
      s.interval_ms = n;
    else if (k == "ttft_ms")
      s.ttft_ms = n;
    else if (k == "stall_at")
      s.stall_at = n;
    else if (k == "stall_ms")
      s.stall_ms = n;
    else if (k == "finish") {
      s.finish = v;
      s.finish_set = true;
    } else if (k == "code")
      s.code = v;
    else if (k == "type")
      s.type = v;
    else if (k == "tools")
      s.tools = n;
    else if (k == "event")
      s.event = v;
    else if (k == "require_key")
      s.require_key = v;
    else if (k == "stop_reason")
      s.stop_reason = v;
    else if (k == "usage")
      s.usage = n;
    else if (k == "status")
      s.status = n;
    else if (k == "error_at")
      s.error_at = n;
    else if (k == "drop_at")
      s.drop_at = n;
    else if (k == "cutline")
      s.cutline = v;
    else if (k == "stamp")
      s.stamp = n != 0;
  }
  return s;
}

struct RecordedRequest {
  std::string method;
  std::string path;
  std::string script;
  std::string body;
  std::string authorization;  // the Authorization header as received ("" when absent)
  std::vector<std::pair<std::string, std::string>> headers;  // every header, as received
  bool cancelled = false;
  bool completed = false;
};

struct Server;

struct FakeStream {
  Server* server = nullptr;
  evhttp_request* req = nullptr;
  evhttp_connection* conn = nullptr;
  event* timer = nullptr;
  Script script;
  size_t record = 0;
  bool chat = true;
  bool stream = false;
  bool include_usage = false;
  int limit = 0;  // tokens to emit after max_tokens
  bool event_sent = false;
  bool responses = false;  // POST /v1/responses
  int sequence = 0;        // responses: the next sequence_number
  int sent = 0;
  int64_t due_us = 0;  // CLOCK_MONOTONIC time the next tick is due
  std::string model;
  std::string text;  // assembled content (non-streaming)
};

struct Server {
  event_base* base = nullptr;
  std::vector<RecordedRequest> requests;
  // Over TLS, two SSE chunks written from back-to-back zero-delay timers leave evhttp's
  // bufferevent_openssl output unsent (the stream stalls); a 1 ms floor between ticks avoids it.
  int min_delay_ms = 0;
  std::vector<std::string> resident;  // --resident: models reported resident
};

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

std::string error_body(const std::string& message, const std::string& type,
                       const std::string& code = "") {
  std::string out;
  JsonWriter w(out);
  w.begin_object().key("error").begin_object();
  w.field("message", message).field("type", type).key("param").null();
  if (code.empty()) {
    w.key("code").null();
  } else {
    w.field("code", code);
  }
  w.end_object().end_object();
  return out;
}

// Tool call i's arguments, and the two pieces they are streamed in.
std::string tool_arguments(int i) { return "{\"city\":\"City " + std::to_string(i) + "\"}"; }

void write_cutline(JsonWriter& w, const std::string& cause, int tokens) {
  w.key("cutline").begin_object();
  w.field("v", 1).field("cause", cause).field("reporter", "backend");
  w.field("output_tokens", tokens).field("count_method", "engine");
  w.field("preemptions", cause == "backend_preempted" ? 2 : 0);
  w.field("kv_bytes_peak", static_cast<int64_t>(1048576));
  w.field("device_free_bytes", static_cast<int64_t>(2097152));
  w.key("phases").begin_object();
  w.field("queue", 1.5).field("load", 0.0).field("warmup", 0.0).field("prefill", 2.5);
  w.field("first_decode", 0.5).end_object();
  w.end_object();
}

// One SSE chunk: a token (content non-empty), the finish chunk, or the usage chunk. With
// `tool` >= 0 (chat): a tool-call delta, `part` 0 (id, name, first half of the arguments) or 1
// (the rest of the arguments).
std::string chunk_json(const FakeStream& s, const std::string* content, const char* finish,
                       bool usage_only, int tool = -1, int part = 0) {
  std::string out;
  JsonWriter w(out);
  w.begin_object();
  w.field("id", "fake-1").field("object", s.chat ? "chat.completion.chunk" : "text_completion");
  w.field("created", static_cast<int64_t>(1700000000)).field("model", s.model);
  w.key("choices").begin_array();
  if (!usage_only) {
    w.begin_object().field("index", 0);
    if (s.chat) {
      w.key("delta").begin_object();
      if (s.sent == 0 && (content || (tool >= 0 && part == 0 && tool == 0))) {
        w.field("role", "assistant");
      }
      if (content) w.field("content", *content);
      if (tool >= 0) {
        const std::string args = tool_arguments(tool);
        const size_t half = args.size() / 2;
        w.key("tool_calls").begin_array().begin_object().field("index", tool);
        if (part == 0) {
          w.field("id", "call_" + std::to_string(tool)).field("type", "function");
          w.key("function").begin_object().field("name", "get_weather_" + std::to_string(tool));
          w.field("arguments", args.substr(0, half)).end_object();
        } else {
          w.key("function").begin_object().field("arguments", args.substr(half)).end_object();
        }
        w.end_object().end_array();
      }
      w.end_object();
    } else {
      w.field("text", content ? *content : std::string());
    }
    if (finish) {
      w.field("finish_reason", finish);
      if (!s.script.stop_reason.empty()) w.field("stop_reason", s.script.stop_reason);
    } else {
      w.key("finish_reason").null();
    }
    w.end_object();
  }
  w.end_array();
  if (usage_only) {
    w.key("usage").begin_object();
    w.field("prompt_tokens", 5).field("completion_tokens", s.sent);
    w.field("total_tokens", 5 + s.sent).end_object();
  }
  if (finish && !s.script.cutline.empty()) write_cutline(w, s.script.cutline, s.sent);
  w.end_object();
  return out;
}

void send_event(FakeStream& s, const std::string& data) {
  evbuffer* out = evbuffer_new();
  evbuffer_add_printf(out, "data: %s\n\n", data.c_str());
  evhttp_send_reply_chunk(s.req, out);
  evbuffer_free(out);
}

void on_close(evhttp_connection*, void* arg);

void finish_stream(FakeStream* s, bool drop) {
  s->server->requests[s->record].completed = true;
  evhttp_connection_set_closecb(s->conn, nullptr, nullptr);
  if (drop) {
    // Abrupt close: the chunked body never gets its terminating chunk.
    bufferevent* bev = evhttp_connection_get_bufferevent(s->conn);
    bufferevent_flush(bev, EV_WRITE, BEV_FLUSH);
    shutdown(bufferevent_getfd(bev), SHUT_RDWR);
  } else {
    evhttp_send_reply_end(s->req);
  }
  if (s->timer) event_free(s->timer);
  delete s;
}

std::string token_text(int i) { return "t" + std::to_string(i) + " "; }

void on_tick(evutil_socket_t, short, void* arg);

int64_t mono_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000;
}

// Ticks keep a fixed cadence, as a model's decode steps do: token k+1 is due one interval after
// token k was due, not after its callback ran, so a late tick does not delay the ones after it
// and streams that started apart stay apart (rescheduling from the loop's cached time would pull
// every stream handled in one loop turn into the same phase). A stall or the first token's delay
// (`from_now`) counts from now.
void schedule(FakeStream* s, int delay_ms, bool from_now) {
  const int64_t now = mono_us();
  s->due_us = (from_now ? now : s->due_us) + int64_t{delay_ms} * 1000;
  const int64_t wait_us = std::max(s->due_us - now, int64_t{s->server->min_delay_ms} * 1000);
  timeval tv{static_cast<time_t>(wait_us / 1000000), static_cast<suseconds_t>(wait_us % 1000000)};
  // evtimer_add counts from the loop's cached time, which lags `now` by however long this loop
  // turn has run (long under a sanitizer): without a fresh cache the timer fires that much early.
  event_base_update_cache_time(s->server->base);
  evtimer_add(s->timer, &tv);
}

void send_named_event(FakeStream& s, const std::string& event, const std::string& data) {
  evbuffer* out = evbuffer_new();
  evbuffer_add_printf(out, "event: %s\ndata: %s\n\n", event.c_str(), data.c_str());
  evhttp_send_reply_chunk(s.req, out);
  evbuffer_free(out);
}

// tools=N: the whole answer at once. Streaming: every call's first delta, then every call's
// second one (parallel calls interleave, as OpenAI's do), the finish chunk, usage, [DONE].
void answer_tools(FakeStream* s) {
  const Script& sc = s->script;
  const std::string finish = sc.finish_set ? sc.finish : "tool_calls";
  const bool usage = sc.usage == -1 ? s->include_usage : sc.usage == 1;
  if (s->stream) {
    for (int part = 0; part < 2; ++part) {
      for (int i = 0; i < sc.tools; ++i) {
        send_event(*s, chunk_json(*s, nullptr, nullptr, false, i, part));
        ++s->sent;
      }
    }
    send_event(*s, chunk_json(*s, nullptr, finish.c_str(), false));
    if (usage) send_event(*s, chunk_json(*s, nullptr, nullptr, true));
    send_event(*s, "[DONE]");
    return finish_stream(s, false);
  }
  s->sent = 2 * sc.tools;
  std::string out;
  JsonWriter w(out);
  w.begin_object().field("id", "fake-1").field("object", "chat.completion");
  w.field("created", static_cast<int64_t>(1700000000)).field("model", s->model);
  w.key("choices").begin_array().begin_object().field("index", 0);
  w.key("message").begin_object().field("role", "assistant").key("content").null();
  w.key("tool_calls").begin_array();
  for (int i = 0; i < sc.tools; ++i) {
    w.begin_object().field("id", "call_" + std::to_string(i)).field("type", "function");
    w.key("function").begin_object().field("name", "get_weather_" + std::to_string(i));
    w.field("arguments", tool_arguments(i)).end_object().end_object();
  }
  w.end_array().end_object();
  w.field("finish_reason", finish).end_object().end_array();
  w.key("usage").begin_object().field("prompt_tokens", 5).field("completion_tokens", s->sent);
  w.field("total_tokens", 5 + s->sent).end_object().end_object();
  s->server->requests[s->record].completed = true;
  evhttp_connection_set_closecb(s->conn, nullptr, nullptr);
  send_json(s->req, 200, out);
  event_free(s->timer);
  delete s;
}

// The Responses API's response object (status "in_progress", "completed" or "incomplete").
void write_response_object(JsonWriter& w, const FakeStream& s, const std::string& status) {
  w.begin_object().field("id", "resp_fake").field("object", "response");
  w.field("created_at", static_cast<int64_t>(1700000000)).field("status", status);
  w.field("model", s.model).key("output").begin_array();
  if (status != "in_progress") {
    w.begin_object().field("id", "msg_fake").field("type", "message").field("status", status);
    w.field("role", "assistant").key("content").begin_array().begin_object();
    w.field("type", "output_text").field("text", s.text).key("annotations").begin_array();
    w.end_array().end_object().end_array().end_object();
  }
  w.end_array().key("incomplete_details");
  if (status == "incomplete") {
    w.begin_object().field("reason", "max_output_tokens").end_object();
  } else {
    w.null();
  }
  w.key("usage");
  if (status == "in_progress") {
    w.null();
  } else {
    w.begin_object().field("input_tokens", 5).field("output_tokens", s.sent);
    w.field("total_tokens", 5 + s.sent).end_object();
  }
  w.end_object();
}

// One Responses API event: `fill` writes the fields after type and sequence_number.
template <typename Fill>
void send_responses_event(FakeStream& s, const std::string& type, Fill fill) {
  std::string out;
  JsonWriter w(out);
  w.begin_object().field("type", type).field("sequence_number", s.sequence++);
  fill(w);
  w.end_object();
  send_named_event(s, type, out);
}

void responses_item_fields(JsonWriter& w) {
  w.field("item_id", "msg_fake").field("output_index", 0).field("content_index", 0);
}

// Responses API streaming: the preamble before the first token, a delta per token, the end.
void responses_tick(FakeStream* s) {
  const Script& sc = s->script;
  if (s->sent == 0 && s->sequence == 0) {
    send_responses_event(*s, "response.created", [&](JsonWriter& w) {
      w.key("response");
      write_response_object(w, *s, "in_progress");
    });
    send_responses_event(*s, "response.output_item.added", [&](JsonWriter& w) {
      w.field("output_index", 0).key("item").begin_object().field("id", "msg_fake");
      w.field("type", "message").field("status", "in_progress").field("role", "assistant");
      w.key("content").begin_array().end_array().end_object();
    });
    send_responses_event(*s, "response.content_part.added", [&](JsonWriter& w) {
      responses_item_fields(w);
      w.key("part").begin_object().field("type", "output_text").field("text", "");
      w.key("annotations").begin_array().end_array().end_object();
    });
    if (!sc.event.empty()) send_named_event(*s, sc.event, R"({"note":"x"})");
  }
  if (s->sent == sc.drop_at) return finish_stream(s, true);
  if (s->sent < s->limit) {
    const std::string t = token_text(s->sent);
    send_responses_event(*s, "response.output_text.delta", [&](JsonWriter& w) {
      responses_item_fields(w);
      w.field("delta", t);
    });
    s->text += t;
    ++s->sent;
    const bool stall = s->sent == sc.stall_at;
    if (s->sent < s->limit || sc.drop_at == s->sent) {
      return schedule(s, stall ? sc.stall_ms : sc.interval_ms, stall);
    }
  }
  const std::string status = s->limit < sc.tokens ? "incomplete" : "completed";
  send_responses_event(*s, "response.output_text.done", [&](JsonWriter& w) {
    responses_item_fields(w);
    w.field("text", s->text);
  });
  send_responses_event(*s, "response." + status, [&](JsonWriter& w) {
    w.key("response");
    write_response_object(w, *s, status);
  });
  finish_stream(s, false);
}

// Streaming: one token per tick; script events happen when `sent` reaches their index.
void on_tick(evutil_socket_t, short, void* arg) {
  auto* s = static_cast<FakeStream*>(arg);
  const Script& sc = s->script;
  if (s->responses && !s->stream) {
    // Not streaming: the whole answer at once.
    while (s->sent < s->limit) s->text += token_text(s->sent++);
    std::string out;
    JsonWriter w(out);
    write_response_object(w, *s, s->limit < sc.tokens ? "incomplete" : "completed");
    s->server->requests[s->record].completed = true;
    evhttp_connection_set_closecb(s->conn, nullptr, nullptr);
    send_json(s->req, 200, out);
    event_free(s->timer);
    delete s;
    return;
  }
  if (s->responses) return responses_tick(s);
  if (s->stream && s->sent == 0 && !sc.event.empty() && !s->event_sent) {
    s->event_sent = true;
    send_named_event(*s, sc.event, R"({"note":"x"})");
  }
  if (sc.tools > 0 && s->chat) return answer_tools(s);
  if (s->sent == sc.drop_at) return finish_stream(s, true);
  if (s->sent == sc.error_at) {
    send_event(*s, error_body("fake upstream error event", "server_error"));
    return finish_stream(s, false);
  }
  if (s->sent < s->limit) {
    std::string t = token_text(s->sent);
    if (sc.stamp) {
      timespec ts{};
      clock_gettime(CLOCK_MONOTONIC, &ts);
      t.insert(t.size() - 1, "@" + std::to_string(int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec));
    }
    if (s->stream) send_event(*s, chunk_json(*s, &t, nullptr, false));
    s->text += t;
    ++s->sent;
    const bool stall = s->sent == sc.stall_at;
    if (s->sent < s->limit || sc.drop_at == s->sent || sc.error_at == s->sent) {
      return schedule(s, stall ? sc.stall_ms : sc.interval_ms, stall);
    }
    // fall through to finish without waiting once the last token went out
  }
  const bool capped = s->limit < sc.tokens;
  std::string finish = capped ? "length" : sc.finish;
  const bool usage = sc.usage == -1 ? s->include_usage : sc.usage == 1;
  if (!s->stream) {
    std::string out;
    JsonWriter w(out);
    w.begin_object().field("id", "fake-1");
    w.field("object", s->chat ? "chat.completion" : "text_completion");
    w.field("created", static_cast<int64_t>(1700000000)).field("model", s->model);
    w.key("choices").begin_array().begin_object().field("index", 0);
    if (s->chat) {
      w.key("message").begin_object().field("role", "assistant").field("content", s->text);
      w.end_object();
    } else {
      w.field("text", s->text);
    }
    w.field("finish_reason", finish).end_object().end_array();
    w.key("usage").begin_object().field("prompt_tokens", 5).field("completion_tokens", s->sent);
    w.field("total_tokens", 5 + s->sent).end_object().end_object();
    s->server->requests[s->record].completed = true;
    evhttp_connection_set_closecb(s->conn, nullptr, nullptr);
    send_json(s->req, 200, out);
    event_free(s->timer);
    delete s;
    return;
  }
  if (finish != "none") send_event(*s, chunk_json(*s, nullptr, finish.c_str(), false));
  if (usage) send_event(*s, chunk_json(*s, nullptr, nullptr, true));
  send_event(*s, "[DONE]");
  finish_stream(s, false);
}

void on_close(evhttp_connection*, void* arg) {
  auto* s = static_cast<FakeStream*>(arg);
  s->server->requests[s->record].cancelled = true;
  if (s->timer) event_free(s->timer);
  delete s;
}

void handle_admin(Server* srv, evhttp_request* req, const std::string& path) {
  if (path == "/fake/reset") {
    srv->requests.clear();
    return send_json(req, 200, "{}");
  }
  std::string out;
  JsonWriter w(out);
  w.begin_array();
  for (const auto& r : srv->requests) {
    w.begin_object().field("method", r.method).field("path", r.path).field("script", r.script);
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

void handle(evhttp_request* req, void* arg) {
  auto* srv = static_cast<Server*>(arg);
  const char* uri = evhttp_request_get_uri(req);
  std::string path = uri ? uri : "/";
  if (auto q = path.find('?'); q != std::string::npos) path.resize(q);
  if (path.rfind("/fake/", 0) == 0) return handle_admin(srv, req, path);
  if (!srv->resident.empty() && (path == "/v1/cutline/state" || path == "/metrics")) {
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
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(rec.body);
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
          if (field.value().get_string().get(m) == simdjson::SUCCESS) s->model = std::string(m);
        } else if (key == "stream") {
          bool b = false;
          if (field.value().get_bool().get(b) == simdjson::SUCCESS) s->stream = b;
        } else if (key == "max_tokens" || key == "max_completion_tokens" ||
                   key == "max_output_tokens") {
          int64_t n = 0;
          if (field.value().get_int64().get(n) == simdjson::SUCCESS) max_tokens = n;
        } else if (key == "stream_options") {
          simdjson::ondemand::object so;
          if (field.value().get_object().get(so) == simdjson::SUCCESS) {
            bool b = false;
            if (so["include_usage"].get_bool().get(b) == simdjson::SUCCESS) s->include_usage = b;
          }
        }
      }
    } else {
      s->stream = false;
    }
  }
  if (!hdr && s->model.rfind("fake-", 0) == 0) rec.script = s->model.substr(5);
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
    return send_json(req, s->script.status,
                     error_body("fake upstream status " + std::to_string(s->script.status),
                                s->script.type, s->script.code));
  }
  s->limit = s->script.tokens;
  if (max_tokens >= 0 && max_tokens < s->limit) s->limit = static_cast<int>(max_tokens);

  FakeStream* raw = s.release();
  raw->timer = evtimer_new(srv->base, on_tick, raw);
  evhttp_connection_set_closecb(raw->conn, on_close, raw);
  if (raw->stream) {
    evkeyvalq* h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", "text/event-stream");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_send_reply_start(req, 200, "OK");
  }
  schedule(raw, raw->script.ttft_ms, true);
}

}  // namespace

// evhttp's bufferevent factory for HTTPS: each accepted connection does a TLS handshake first.
bufferevent* tls_bufferevent(event_base* base, void* arg) {
  const auto* tls = static_cast<const cutline::proto::TlsContext*>(arg);
  bufferevent* bev = bufferevent_openssl_socket_new(
      base, -1, tls->new_ssl(), BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
  if (bev != nullptr) bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
  return bev;
}

int main(int argc, char** argv) {
  int port = 0;
  const char* bind_ip = "127.0.0.1";
  std::string resident;
  cutline::proto::TlsServerConfig tls_config;
  tls_config.alpn = {"http/1.1"};  // evhttp speaks HTTP/1.1 only
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--port") == 0 && i + 1 < argc) port = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--bind") == 0 && i + 1 < argc) bind_ip = argv[++i];
    if (std::strcmp(argv[i], "--resident") == 0 && i + 1 < argc) resident = argv[++i];
    if (std::strcmp(argv[i], "--tls-cert") == 0 && i + 1 < argc) tls_config.cert_file = argv[++i];
    if (std::strcmp(argv[i], "--tls-key") == 0 && i + 1 < argc) tls_config.key_file = argv[++i];
    if (std::strcmp(argv[i], "--tls-client-ca") == 0 && i + 1 < argc) {
      tls_config.client_ca_file = argv[++i];
    }
  }
  std::shared_ptr<const cutline::proto::TlsContext> tls;
  if (!tls_config.cert_file.empty()) {
    auto built = cutline::proto::TlsContext::server(tls_config);
    if (!built.ok()) {
      std::fprintf(stderr, "cutline-fake-upstream: %s\n", built.error().message.c_str());
      return 1;
    }
    tls = std::move(built).value();
  }
  signal(SIGPIPE, SIG_IGN);
  Server srv;
  for (size_t at = 0; at < resident.size();) {
    const size_t comma = std::min(resident.find(',', at), resident.size());
    if (comma > at) srv.resident.push_back(resident.substr(at, comma - at));
    at = comma + 1;
  }
  srv.base = event_base_new();
  evhttp* http = evhttp_new(srv.base);
  evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                       EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH | EVHTTP_REQ_OPTIONS |
                                       EVHTTP_REQ_HEAD);
  evhttp_set_gencb(http, handle, &srv);
  if (tls) {
    srv.min_delay_ms = 1;
    evhttp_set_bevcb(http, tls_bufferevent, const_cast<cutline::proto::TlsContext*>(tls.get()));
  }
  // A deep accept backlog: benchmarks open thousands of connections at once.
  sockaddr_in bind_addr{};
  bind_addr.sin_family = AF_INET;
  bind_addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, bind_ip, &bind_addr.sin_addr) != 1) {
    std::fprintf(stderr, "cutline-fake-upstream: --bind wants an IPv4 address, not %s\n", bind_ip);
    return 2;
  }
  evconnlistener* listener =
      evconnlistener_new_bind(srv.base, nullptr, nullptr, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
                              16384, reinterpret_cast<sockaddr*>(&bind_addr), sizeof bind_addr);
  evhttp_bound_socket* sock = listener ? evhttp_bind_listener(http, listener) : nullptr;
  if (!sock) {
    std::fprintf(stderr, "cutline-fake-upstream: cannot bind %s:%d\n", bind_ip, port);
    return 1;
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(evhttp_bound_socket_get_fd(sock), reinterpret_cast<sockaddr*>(&ss), &len);
  int bound = ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  std::printf("PORT %d\n", bound);
  std::fflush(stdout);
  event_base_dispatch(srv.base);
  evhttp_free(http);
  event_base_free(srv.base);
  return 0;
}
