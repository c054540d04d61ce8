// proto_http_bench: what the libevent core costs per open stream and per relayed chunk.
//   memory: N concurrent chunked streams held open (server connection + client connection in
//           one process, as the gateway holds a downstream and an upstream per stream); prints
//           the RSS growth per stream.
//   chunks: S streams x C chunks of 60 bytes from HttpServer to HttpClient; prints chunks/s and
//           CPU microseconds per chunk (both sides).
// Usage: proto_http_bench [streams_for_memory=4000] [streams=100] [chunks=2000]
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <vector>

#include "cutline/proto/http/http_client.h"
#include "cutline/proto/http/http_server.h"
#include "cutline/proto/net/timer.h"
#include "cutline/proto/net/worker_threads.h"

using namespace cutline::proto;

namespace {

long rss_kib() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

double cpu_seconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Waiter {
  std::mutex m;
  std::condition_variable cv;
  size_t count = 0;
  void add() {
    std::lock_guard<std::mutex> l(m);
    ++count;
    cv.notify_all();
  }
  void wait(size_t n) {
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return count >= n; });
  }
};

void memory_bench(size_t streams) {
  std::vector<std::shared_ptr<ServerStream>> held;
  HttpServer server(ServerOptions{}, [&](std::shared_ptr<ServerStream> s) {
    s->send_head(200, HttpHeaders{{"Content-Type", "text/event-stream"}}, BodyFraming::chunked());
    s->send_body("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n");
    held.push_back(std::move(s));
  });
  if (!server.start().ok()) std::abort();
  WorkerThreads client_loop(1);
  client_loop.start();
  std::unique_ptr<HttpClient> client;
  std::vector<ClientHandle> handles;
  Waiter first_chunks;
  client_loop.run_on_all_and_wait([&](EventLoop& loop) {
    ClientOptions options;
    client = std::make_unique<HttpClient>(loop, options);
  });
  const long before = rss_kib();
  // Start in batches so the listen backlog is not the limit.
  for (size_t started = 0; started < streams;) {
    const size_t batch = std::min<size_t>(500, streams - started);
    client_loop.run_on_all_and_wait([&](EventLoop&) {
      for (size_t i = 0; i < batch; ++i) {
        ClientRequest req;
        req.method = "POST";
        req.host = "127.0.0.1";
        req.port = server.port();
        req.target = "/v1/chat/completions";
        req.body =
            "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
            "}";
        ClientCallbacks cb;
        auto seen = std::make_shared<bool>(false);
        cb.on_body = [&first_chunks, seen](std::string_view) {
          if (!*seen) first_chunks.add();
          *seen = true;
        };
        cb.on_error = [](const ClientError& e) {
          std::fprintf(stderr, "error: %s\n", e.message.c_str());
          std::abort();
        };
        handles.push_back(client->start(std::move(req), std::move(cb)));
      }
    });
    started += batch;
    first_chunks.wait(started);
  }
  const long after = rss_kib();
  std::printf(
      "memory: %zu open streams (server+client connection each): RSS +%ld KiB = %.2f KiB "
      "per stream\n",
      streams, after - before, static_cast<double>(after - before) / static_cast<double>(streams));
  client_loop.run_on_all_and_wait([&](EventLoop&) {
    handles.clear();
    client.reset();
  });
  client_loop.stop();
  server.stop();
}

void chunk_bench(size_t streams, size_t chunks) {
  const std::string chunk = "data: {\"choices\":[{\"delta\":{\"content\":\" tok\"}}]}\n\n";
  HttpServer server(ServerOptions{}, [&](std::shared_ptr<ServerStream> s) {
    s->send_head(200, {}, BodyFraming::chunked());
    // One chunk per loop turn (a 0 ms timer), as tokens arrive one by one.
    auto remaining = std::make_shared<size_t>(chunks);
    auto timer = std::make_shared<std::unique_ptr<Timer>>();
    *timer = std::make_unique<Timer>(s->loop(), [s, remaining, timer, &chunk] {
      s->send_body(chunk);
      if (--*remaining == 0) {
        s->finish({});
        s->loop().post([timer] { timer->reset(); });  // break the cycle outside the callback
        return;
      }
      (*timer)->arm(0);
    });
    (*timer)->arm(0);
  });
  if (!server.start().ok()) std::abort();
  WorkerThreads client_loop(1);
  client_loop.start();
  std::unique_ptr<HttpClient> client;
  std::vector<ClientHandle> handles;
  Waiter done;
  std::atomic<size_t> pieces{0};
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  client_loop.run_on_all_and_wait([&](EventLoop& loop) {
    client = std::make_unique<HttpClient>(loop);
    for (size_t i = 0; i < streams; ++i) {
      ClientRequest req;
      req.host = "127.0.0.1";
      req.port = server.port();
      ClientCallbacks cb;
      cb.on_body = [&](std::string_view) { pieces.fetch_add(1, std::memory_order_relaxed); };
      cb.on_complete = [&](HttpHeaders&) { done.add(); };
      cb.on_error = [](const ClientError& e) {
        std::fprintf(stderr, "error: %s\n", e.message.c_str());
        std::abort();
      };
      handles.push_back(client->start(std::move(req), std::move(cb)));
    }
  });
  done.wait(streams);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cpu_seconds() - cpu0;
  const double total = static_cast<double>(streams * chunks);
  std::printf(
      "chunks: %zu streams x %zu chunks in %.3f s: %.0f chunks/s, %.2f us CPU per chunk "
      "(server+client), %zu body pieces at the client\n",
      streams, chunks, seconds, total / seconds, cpu * 1e6 / total, pieces.load());
  client_loop.run_on_all_and_wait([&](EventLoop&) {
    handles.clear();
    client.reset();
  });
  client_loop.stop();
  server.stop();
}

}  // namespace

int main(int argc, char** argv) {
  const size_t memory_streams = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 4000;
  const size_t streams = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 100;
  const size_t chunks = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 2000;
  memory_bench(memory_streams);
  chunk_bench(streams, chunks);
  return 0;
}
