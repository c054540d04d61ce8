// gateway_load: drives N concurrent streaming chat requests at one HTTP target (the gateway,
// nginx, or the fake upstream directly) and reports what a client sees. The fake upstream stamps
// every token with its send time (X-Fake-Script stamp=1, CLOCK_MONOTONIC, same machine), so the
// per-token latency measured here is upstream send -> client receive: what a proxy adds shows up
// as the difference between paths.
//
//   gateway_load --port P --streams N [--tokens T] [--interval-ms I] [--ramp-ms R] [--trace FILE]
//                [--pid PID]...
//
// --trace FILE writes one line per token: stream, token index, upstream stamp and receive time
// (CLOCK_MONOTONIC ns), for looking at where a latency percentile comes from.
//
// --ramp-ms spreads the streams' starts evenly over R ms (default 0: all at once). With R equal
// to the token interval the streams' ticks are spread over the interval, as independent clients'
// would be; with 0 they stay nearly in phase and every interval brings a burst of N tokens.
//
// Prints one JSON object: ttft p50/p99 (request sent -> first token), token latency p50/p99,
// streams/s, completed/failed streams, tokens received, and for the --pid processes their CPU
// seconds during the run and their RSS with all streams open (sampled at the midpoint).

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

struct Run;

struct Conn {
  Run* run = nullptr;
  bufferevent* bev = nullptr;
  int64_t sent_ns = 0;
  bool first = true;
  bool done = false;
  std::string carry;  // unparsed tail
  int index = 0;      // in start order
  int received = 0;   // tokens so far
};

struct Run {
  event_base* base = nullptr;
  std::string request;
  int open = 0;
  int completed = 0;
  int failed = 0;
  int64_t tokens = 0;
  std::vector<double> ttft_ms;
  std::vector<double> latency_ms;
  struct Token {
    int64_t stamp_ns, received_ns;
    int stream, index;
  };
  std::vector<Token> trace;  // --trace only
  bool tracing = false;
  std::vector<Conn*> conns;
  sockaddr_in addr{};
};

void finish(Conn* c, bool ok) {
  if (c->done) return;
  c->done = true;
  (ok ? c->run->completed : c->run->failed)++;
  bufferevent_free(c->bev);
  c->bev = nullptr;
  if (--c->run->open == 0) event_base_loopexit(c->run->base, nullptr);
}

void on_read(bufferevent* bev, void* arg);
void on_event(bufferevent*, short what, void* arg);

// Connects one stream and queues its request.
void open_stream(Conn* c) {
  Run& run = *c->run;
  c->bev = bufferevent_socket_new(run.base, -1, BEV_OPT_CLOSE_ON_FREE);
  bufferevent_setcb(c->bev, on_read, nullptr, on_event, c);
  bufferevent_enable(c->bev, EV_READ | EV_WRITE);
  c->sent_ns = mono_ns();
  if (bufferevent_socket_connect(c->bev, reinterpret_cast<sockaddr*>(&run.addr), sizeof run.addr) !=
      0) {
    finish(c, false);
    return;
  }
  bufferevent_write(c->bev, run.request.data(), run.request.size());
}

// Scans for "@<ns>" stamps and the [DONE] sentinel.
void on_read(bufferevent* bev, void* arg) {
  auto* c = static_cast<Conn*>(arg);
  evbuffer* in = bufferevent_get_input(bev);
  const int64_t now = mono_ns();
  const size_t n = evbuffer_get_length(in);
  c->carry.resize(c->carry.size() + n);
  evbuffer_remove(in, c->carry.data() + c->carry.size() - n, n);
  size_t pos = 0;
  for (;;) {
    const size_t at = c->carry.find('@', pos);
    if (at == std::string::npos) break;
    size_t end = at + 1;
    while (end < c->carry.size() && c->carry[end] >= '0' && c->carry[end] <= '9') ++end;
    if (end == c->carry.size()) break;  // the number may continue in the next read
    const int64_t stamp = std::strtoll(c->carry.c_str() + at + 1, nullptr, 10);
    c->run->latency_ms.push_back((now - stamp) / 1e6);
    if (c->run->tracing) c->run->trace.push_back({stamp, now, c->index, c->received});
    ++c->received;
    ++c->run->tokens;
    if (c->first) {
      c->first = false;
      c->run->ttft_ms.push_back((now - c->sent_ns) / 1e6);
    }
    pos = end;
  }
  const bool done = c->carry.find("[DONE]") != std::string::npos;
  // Keep an unfinished stamp, or the last bytes (a "[DONE]" split across reads).
  const size_t partial = c->carry.find('@', pos);
  const size_t tail = c->carry.size() > 16 ? c->carry.size() - 16 : 0;
  c->carry.erase(0, partial != std::string::npos ? partial : std::max(pos, tail));
  if (done) finish(c, true);
}

void on_event(bufferevent*, short what, void* arg) {
  auto* c = static_cast<Conn*>(arg);
  if (what & BEV_EVENT_CONNECTED) {
    c->sent_ns = mono_ns();
    return;
  }
  if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) finish(c, false);
}

double pct(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return v[i];
}

struct ProcSample {
  double cpu_s = 0;
  long rss_kb = 0;
};

ProcSample sample(const std::vector<int>& pids) {
  ProcSample s;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  for (int pid : pids) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t rp = line.rfind(')');
    if (rp != std::string::npos) {
      std::istringstream ss(line.substr(rp + 2));
      std::string f;
      long utime = 0, stime = 0;
      for (int i = 3; i <= 15 && ss >> f; ++i) {
        if (i == 14) utime = std::atol(f.c_str());
        if (i == 15) stime = std::atol(f.c_str());
      }
      s.cpu_s += (utime + stime) / tick;
    }
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    while (std::getline(status, line)) {
      if (line.rfind("VmRSS:", 0) == 0) s.rss_kb += std::atol(line.c_str() + 6);
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0, streams = 100, tokens = 200, interval_ms = 25, ramp_ms = 0;
  std::vector<int> pids;
  std::string trace_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--port")
      port = v;
    else if (a == "--streams")
      streams = v;
    else if (a == "--tokens")
      tokens = v;
    else if (a == "--interval-ms")
      interval_ms = v;
    else if (a == "--ramp-ms")
      ramp_ms = v;
    else if (a == "--trace")
      trace_path = argv[i + 1];
    else if (a == "--pid")
      pids.push_back(v);
  }
  Run run;
  run.base = event_base_new();
  const std::string body =
      R"({"model":"fake","messages":[{"role":"user","content":"hi"}],"stream":true})";
  run.request =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nX-Fake-Script: stamp=1,tokens=" +
      std::to_string(tokens) + ",interval_ms=" + std::to_string(interval_ms) +
      "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  run.tracing = !trace_path.empty();
  run.latency_ms.reserve(static_cast<size_t>(streams) * static_cast<size_t>(tokens));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const ProcSample before = sample(pids);
  const int64_t start = mono_ns();
  // Every stream is opened at once (ramp 0: the upstream's ticks then stay nearly in phase, so
  // the proxy sees N tokens arrive in one burst per interval), or spread evenly over ramp_ms.
  run.addr = addr;
  run.conns.reserve(static_cast<size_t>(streams));
  for (int i = 0; i < streams; ++i) {
    auto* c = new Conn;
    c->run = &run;
    c->index = i;
    run.conns.push_back(c);
    ++run.open;
    const int64_t at_us = ramp_ms > 0 ? int64_t{ramp_ms} * 1000 * i / streams : 0;
    if (at_us == 0) {
      open_stream(c);
      continue;
    }
    const timeval tv{static_cast<time_t>(at_us / 1000000),
                     static_cast<suseconds_t>(at_us % 1000000)};
    event_base_once(
        run.base, -1, EV_TIMEOUT,
        [](evutil_socket_t, short, void* arg) { open_stream(static_cast<Conn*>(arg)); }, c, &tv);
  }
  // RSS with every stream open: sampled halfway through the expected stream duration.
  ProcSample mid;
  std::pair<std::vector<int>*, ProcSample*> probe_arg{&pids, &mid};
  event_callback_fn on_probe = [](evutil_socket_t, short, void* arg) {
    auto* p = static_cast<std::pair<std::vector<int>*, ProcSample*>*>(arg);
    *p->second = sample(*p->first);
  };
  event* probe = evtimer_new(run.base, on_probe, &probe_arg);
  const int half_ms = tokens * interval_ms / 2;
  timeval tv{half_ms / 1000, (half_ms % 1000) * 1000};
  evtimer_add(probe, &tv);
  if (run.open > 0) event_base_dispatch(run.base);
  const double elapsed_s = (mono_ns() - start) / 1e9;
  const ProcSample after = sample(pids);
  const double cpu_s = after.cpu_s - before.cpu_s;
  event_free(probe);
  for (Conn* c : run.conns) {
    if (c->bev) bufferevent_free(c->bev);
    delete c;
  }
  event_base_free(run.base);
  if (FILE* f = run.tracing ? std::fopen(trace_path.c_str(), "w") : nullptr) {
    for (const Run::Token& t : run.trace) {
      std::fprintf(f, "%d %d %lld %lld\n", t.stream, t.index, static_cast<long long>(t.stamp_ns),
                   static_cast<long long>(t.received_ns));
    }
    std::fclose(f);
  }
  std::printf(
      "{\"streams\":%d,\"completed\":%d,\"failed\":%d,\"tokens\":%lld,\"elapsed_s\":%.3f,"
      "\"streams_per_s\":%.1f,\"ttft_p50_ms\":%.3f,\"ttft_p99_ms\":%.3f,"
      "\"token_latency_p50_ms\":%.3f,\"token_latency_p99_ms\":%.3f,\"proxy_cpu_s\":%.3f,"
      "\"cpu_us_per_token\":%.3f,\"proxy_rss_kb_mid\":%ld,\"proxy_rss_kb_before\":%ld}\n",
      streams, run.completed, run.failed, static_cast<long long>(run.tokens), elapsed_s,
      run.completed / elapsed_s, pct(run.ttft_ms, 0.5), pct(run.ttft_ms, 0.99),
      pct(run.latency_ms, 0.5), pct(run.latency_ms, 0.99), cpu_s,
      run.tokens > 0 ? cpu_s * 1e6 / static_cast<double>(run.tokens) : 0.0, mid.rss_kb,
      before.rss_kb);
  return run.failed == 0 ? 0 : 1;
}
