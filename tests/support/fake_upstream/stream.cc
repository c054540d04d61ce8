// cutline-fake-upstream: a chat or text completion answered as its script says, one token per
// timer tick (streaming) or all at once, with the script's stalls, errors, drops, tool calls and
// Cutline stop record.
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>

#include "cutline/base/json_writer.h"
#include "fake_upstream.h"

namespace cutline::fake_upstream {
namespace {

using cutline::base::JsonWriter;

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

int64_t mono_us() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000 + ts.tv_nsec / 1000;
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
  answer_json(s, out);
}

// Streaming: one token per tick; script events happen when `sent` reaches their index.
void on_tick(evutil_socket_t, short, void* arg) {
  auto* s = static_cast<FakeStream*>(arg);
  const Script& sc = s->script;
  if (s->responses) return s->stream ? responses_tick(s) : responses_answer(s);
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
    return answer_json(s, out);
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

}  // namespace

std::string token_text(int i) { return "t" + std::to_string(i) + " "; }

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

void answer_json(FakeStream* s, const std::string& json) {
  s->server->requests[s->record].completed = true;
  evhttp_connection_set_closecb(s->conn, nullptr, nullptr);
  send_json(s->req, 200, json);
  event_free(s->timer);
  delete s;
}

void start_stream(std::unique_ptr<FakeStream> s) {
  FakeStream* raw = s.release();
  raw->timer = evtimer_new(raw->server->base, on_tick, raw);
  evhttp_connection_set_closecb(raw->conn, on_close, raw);
  if (raw->stream) {
    evkeyvalq* h = evhttp_request_get_output_headers(raw->req);
    evhttp_add_header(h, "Content-Type", "text/event-stream");
    evhttp_add_header(h, "Cache-Control", "no-cache");
    evhttp_send_reply_start(raw->req, 200, "OK");
  }
  schedule(raw, raw->script.ttft_ms, true);
}

}  // namespace cutline::fake_upstream
