#pragma once
// The parts of cutline-fake-upstream (main.cc describes the tool: its script language, endpoints
// and command line). One libevent loop owns all of it:
//   script.cc     the X-Fake-Script text -> Script
//   request.cc    reading a request (method, body, headers, the completion fields the script
//                 reads) and writing plain JSON replies
//   stream.cc     a completion answered as the script says, token by token (chat/completions)
//   responses.cc  the same for POST /v1/responses (the Responses API's events and object)
//   endpoints.cc  the request handler: admin (/fake/*), load and state reporting (--resident),
//                 /v1/models, /v1/embeddings, echo, and the completions it hands to stream.cc

#include <event2/event.h>
#include <event2/http.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cutline::fake_upstream {

// What one request asks of the fake (the script keys main.cc lists).
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
  std::string shape;  // "chat": answer /v1/embeddings with a chat completion (a wrong answer)
  bool finish_set = false;
  bool hang = false;
};

// Parses "key=value,key=value"; unknown keys are ignored.
Script parse_script(const std::string& text);

// One request received, as GET /fake/requests reports it.
struct RecordedRequest {
  std::string method;
  std::string path;    // the path it was routed as
  std::string target;  // the request-target as received
  std::string script;
  std::string body;
  std::string authorization;  // the Authorization header as received ("" when absent)
  std::vector<std::pair<std::string, std::string>> headers;  // every header, as received
  bool cancelled = false;
  bool completed = false;
};

struct Server;

// One completion being answered: created by the handler, then owned by its ticks until it
// finishes or its client closes the connection.
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

// The process's state (main owns it): the loop, every request received, the --resident models.
struct Server {
  event_base* base = nullptr;
  std::vector<RecordedRequest> requests;
  // Over TLS, two SSE chunks written from back-to-back zero-delay timers leave evhttp's
  // bufferevent_openssl output unsent (the stream stalls); a 1 ms floor between ticks avoids it.
  int min_delay_ms = 0;
  std::vector<std::string> resident;  // --resident: models reported resident
  bool vllm_metrics = false;          // --vllm-metrics: /metrics only, as vLLM
  bool health_only = false;           // --health-only: GET /health 200, /healthz 404, as vLLM
  bool lenient_routes = false;        // --lenient-routes: paths matched as a lenient router does
};

// ---- request.cc ----

const char* method_name(evhttp_cmd_type t);
std::string body_of(evhttp_request* req);
// The request as /fake/requests reports it: method, path, body, script header, Authorization and
// every header (names lower-cased).
RecordedRequest record_request(evhttp_request* req, const std::string& path);
// Reads the completion request's model, stream and stream_options.include_usage into `s`;
// returns its max_tokens (max_completion_tokens, max_output_tokens), -1 when absent.
int64_t read_completion_fields(const std::string& body, FakeStream& s);
void send_json(evhttp_request* req, int code, const std::string& json);
// An OpenAI error body; `code` "" writes "code": null. A non-empty `cutline` (a cause) adds a
// Cutline backend's stop record as error.cutline.
std::string error_body(const std::string& message, const std::string& type,
                       const std::string& code = "", const std::string& cutline = "");

// ---- stream.cc ----

// Answers the completion `s` (its script and limit set) from now on: the stream's headers, then
// the first token after the script's ttft_ms. The stream owns itself from here.
void start_stream(std::unique_ptr<FakeStream> s);
// The i-th content token's text.
std::string token_text(int i);
// Schedules the next tick `delay_ms` after the previous one was due (`from_now`: after now).
void schedule(FakeStream* s, int delay_ms, bool from_now);
void send_named_event(FakeStream& s, const std::string& event, const std::string& data);
// Ends the stream (`drop`: closes the connection without the terminating chunk) and frees it.
void finish_stream(FakeStream* s, bool drop);
// Answers a non-streaming request with `json` (200) and frees the stream.
void answer_json(FakeStream* s, const std::string& json);

// ---- responses.cc ----

// POST /v1/responses, streaming: one tick (the preamble before the first token, a delta per
// token, the end events).
void responses_tick(FakeStream* s);
// POST /v1/responses, not streaming: the whole response object at once.
void responses_answer(FakeStream* s);

// ---- endpoints.cc ----

// evhttp's handler for every request (`arg`: the Server).
void handle(evhttp_request* req, void* arg);

}  // namespace cutline::fake_upstream
