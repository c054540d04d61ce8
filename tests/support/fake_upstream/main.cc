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
//                     (default server_error); the message names the status. With cutline=CAUSE
//                     the error object carries a Cutline backend's error.cutline; with
//                     shape=text the body is plain text ("upstream says no"), not JSON
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
//   hang=1            read the request and never answer it, on any path (a stopped server; set
//                     by the X-Fake-Script header only)
//   cutline=CAUSE     last chunk (or status='s error body) carries a Cutline backend "cutline"
//   object with this cause,
//                     preemptions, kv bytes and TTFT phases (e.g. backend_preempted, backend_oom)
//
// Streams whenever the request has "stream": true; otherwise answers one JSON body.
// POST /v1/responses answers as the Responses API: response.created, output_item.added,
// content_part.added, one response.output_text.delta per token, the .done events, then
// response.completed (or response.incomplete with incomplete_details.reason max_output_tokens
// when max_output_tokens capped it), every event with `event:` and a sequence_number, no [DONE];
// not streaming: the response object. POST /v1/embeddings answers one embedding per request
// with usage.prompt_tokens 3 (status= applies to both; shape=chat answers it with a chat
// completion instead, an upstream that got the route wrong).
// --resident M1,M2 makes it report load as a backend does: GET /v1/cutline/state answers a
// Cutline backend's state (queue_depth 0, running = its streams in flight, models M1, M2
// resident) and GET /metrics vLLM's gauges (vllm:num_requests_waiting 0,
// vllm:num_requests_running, vllm:kv_cache_usage_perc 0.1), for the gateway's load-aware and
// residency routing. --vllm-metrics makes it report as a vLLM server does instead: the same
// gauges at GET /metrics, and 404 at GET /v1/cutline/state. Without either those paths are
// echoed like any other.
// --lenient-routes makes it match paths as a lenient web framework would (uvicorn/Starlette drop
// the fragment and decode escapes; others also strip ";parameters", trailing blanks and a
// trailing '/', ignore letter case and resolve dot segments): "/V1/chat/completions;x=1#y" is
// served as chat. Without it the path is the request-target up to '?', as sent.
// Admin: GET /fake/requests returns every request received ({path (as routed), target (as
// received), script, body, cancelled, authorization, completed}); POST /fake/reset clears it. Any
// other path echoes method, path and body as JSON with header X-Fake-Echo: 1 (for passthrough
// tests).
//
// Usage: cutline-fake-upstream [--port N] (0 = any free port) [--bind IPV4] (default 127.0.0.1;
// 0.0.0.0 answers on every loopback address too) [--tls-cert FILE --tls-key FILE
// [--tls-client-ca FILE]] (HTTPS with proto's TlsContext; with a client CA, clients must present
// a certificate it issued: mTLS). Prints "PORT <n>" on stdout once listening.
// Single-threaded libevent evhttp: a test tool, not a production server.
//
// The parts: fake_upstream.h lists the files.

#include <arpa/inet.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "cutline/proto/tls/tls_context.h"
#include "fake_upstream.h"

namespace {

// evhttp's bufferevent factory for HTTPS: each accepted connection does a TLS handshake first.
bufferevent* tls_bufferevent(event_base* base, void* arg) {
  const auto* tls = static_cast<const cutline::proto::TlsContext*>(arg);
  bufferevent* bev = bufferevent_openssl_socket_new(
      base, -1, tls->new_ssl(), BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
  if (bev != nullptr) bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
  return bev;
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  const char* bind_ip = "127.0.0.1";
  std::string resident;
  bool vllm_metrics = false;
  bool health_only = false;
  bool lenient_routes = false;
  cutline::proto::TlsServerConfig tls_config;
  tls_config.alpn = {"http/1.1"};  // evhttp speaks HTTP/1.1 only
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--port") == 0 && i + 1 < argc) port = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--bind") == 0 && i + 1 < argc) bind_ip = argv[++i];
    if (std::strcmp(argv[i], "--resident") == 0 && i + 1 < argc) resident = argv[++i];
    if (std::strcmp(argv[i], "--vllm-metrics") == 0) vllm_metrics = true;
    if (std::strcmp(argv[i], "--health-only") == 0) health_only = true;
    if (std::strcmp(argv[i], "--lenient-routes") == 0) lenient_routes = true;
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
  cutline::fake_upstream::Server srv;
  srv.vllm_metrics = vllm_metrics;
  srv.health_only = health_only;
  srv.lenient_routes = lenient_routes;
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
  evhttp_set_gencb(http, cutline::fake_upstream::handle, &srv);
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
