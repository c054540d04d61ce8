// EndpointProber against small HTTP servers on loopback (libevent evhttp on the same loop):
// health checks mark endpoints up and down, load reports are parsed or dropped when garbage, an
// endpoint that never answers is timed out without stalling anything, and a DNS pool gets its
// addresses from the resolver.
#include "cutline/gateway/endpoint_prober.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>

#include "cutline/policy/loader.h"
#include "cutline/proto/net/event_loop.h"

namespace cutline::gateway {
namespace {

// A tiny server: GET /health answers health_status (the default health path); GET /v1/cutline/state
// answers `state` (404 when empty, as a vLLM server would); any other path answers `metrics`.
struct MiniServer {
  int health_status = 200;
  int requests = 0;
  std::string metrics;
  std::string state;
  evhttp* http = nullptr;
  uint16_t port = 0;

  explicit MiniServer(proto::EventLoop& loop) {
    http = evhttp_new(loop.base());
    evhttp_bound_socket* s = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0);
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    getsockname(evhttp_bound_socket_get_fd(s), reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    evhttp_set_gencb(
        http,
        [](evhttp_request* req, void* arg) {
          auto* self = static_cast<MiniServer*>(arg);
          const std::string uri = evhttp_request_get_uri(req);
          evbuffer* out = evbuffer_new();
          ++self->requests;
          if (uri == "/health") {
            evhttp_send_reply(req, self->health_status, "x", out);
          } else if (uri == "/v1/cutline/state") {
            evbuffer_add(out, self->state.data(), self->state.size());
            evhttp_send_reply(req, self->state.empty() ? 404 : 200, "x", out);
          } else {
            evbuffer_add(out, self->metrics.data(), self->metrics.size());
            evhttp_send_reply(req, 200, "OK", out);
          }
          evbuffer_free(out);
        },
        this);
  }
  ~MiniServer() { evhttp_free(http); }
};

// A socket that accepts connections (the kernel does) and never answers.
struct SilentServer {
  int fd = -1;
  uint16_t port = 0;
  SilentServer() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(fd, 16);
    socklen_t len = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~SilentServer() { close(fd); }
};

std::shared_ptr<const policy::Policy> load(const std::string& upstream) {
  auto r = policy::load_policy_text(
      "listen:\n  - address: 127.0.0.1:8080\nupstreams:\n"
      "  - name: pool\n" +
          upstream + "policies:\n  - name: all\n",
      "cutline.yaml");
  EXPECT_TRUE(r.ok()) << r.error_text();
  return r.policy;
}

// Runs the loop until `done()` or the timeout; false on timeout.
bool run_until(proto::EventLoop& loop, const std::function<bool()>& done, int64_t timeout_ms) {
  bool ok = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  proto::Timer poll(loop, [&] {
    if (done()) {
      ok = true;
      loop.stop();
    } else if (std::chrono::steady_clock::now() > deadline) {
      loop.stop();
    }
  });
  poll.arm_periodic(5);
  loop.run();
  return ok;
}

TEST(EndpointProber, HealthAndLoadReportsComeFromTheEndpoints) {
  proto::EventLoop loop;
  base::MonotonicClock clock;
  MiniServer good(loop), sick(loop);
  SilentServer silent;
  good.metrics =
      "vllm:num_requests_waiting{model_name=\"m\"} 2\nvllm:num_requests_running 3\n"
      "vllm:kv_cache_usage_perc 0.5\n";
  sick.health_status = 503;
  sick.metrics = "<html>not metrics</html>\n";
  auto policy = load("    endpoints: [\"http://127.0.0.1:" + std::to_string(good.port) +
                     "\", \"http://127.0.0.1:" + std::to_string(sick.port) +
                     "\", \"http://127.0.0.1:" + std::to_string(silent.port) + "\"]\n" +
                     "    health: {interval: 10s, timeout: 200ms, panic_threshold: 0}\n"
                     "    load_report: {from: vllm, interval: 300ms}\n");
  ASSERT_TRUE(policy);
  auto pool = EndpointPool::create(policy->upstreams[0], clock);
  proto::HttpClient client(loop);
  DnsResolver resolver(loop);
  auto prober = std::make_unique<EndpointProber>(loop, client, resolver, pool);
  prober->start();
  std::shared_ptr<PoolEndpoint> good_ep, sick_ep, silent_ep;
  for (auto& e : pool->endpoints()) {
    if (e->address().port == good.port) good_ep = e;
    if (e->address().port == sick.port) sick_ep = e;
    if (e->address().port == silent.port) silent_ep = e;
  }
  ASSERT_TRUE(good_ep && sick_ep && silent_ep);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(run_until(
      loop, [&] { return !sick_ep->healthy() && !silent_ep->healthy(); }, 3000));
  // The silent endpoint cost its 200 ms timeout, nothing more.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
  EXPECT_TRUE(good_ep->healthy());
  ASSERT_TRUE(run_until(
      loop, [&] { return good_ep->load(clock.now_ns(), 1000000000).has_value(); }, 3000));
  auto l = good_ep->load(clock.now_ns(), 1000000000);
  EXPECT_EQ(l->waiting, 2);
  EXPECT_EQ(l->running, 3);
  EXPECT_DOUBLE_EQ(l->kv_usage, 0.5);
  EXPECT_FALSE(sick_ep->load(clock.now_ns(), 1000000000));  // garbage: no report
  // Only the healthy endpoint is picked.
  for (int i = 0; i < 5; ++i) {
    EndpointLease lease = pool->pick({});
    ASSERT_TRUE(lease);
    EXPECT_EQ(lease.endpoint().address().port, good.port);
  }
  prober.reset();
}

// With a long interval, the first check still runs at start(): a sick endpoint is out of
// rotation at once (not an interval later), the healthy ones are checked, and the pool's first
// round is over (what /readyz waits for).
TEST(EndpointProber, TheFirstHealthCheckRunsAtOnce) {
  proto::EventLoop loop;
  base::MonotonicClock clock;
  MiniServer a(loop), b(loop), sick(loop);
  sick.health_status = 503;
  auto policy = load("    endpoints: [\"http://127.0.0.1:" + std::to_string(a.port) +
                     "\", \"http://127.0.0.1:" + std::to_string(b.port) +
                     "\", \"http://127.0.0.1:" + std::to_string(sick.port) + "\"]\n" +
                     "    health: {interval: 600s, timeout: 30s}\n");
  ASSERT_TRUE(policy);
  EXPECT_EQ(policy->upstreams[0].health->path, "/health");
  auto pool = EndpointPool::create(policy->upstreams[0], clock);
  EXPECT_FALSE(pool->health_settled());
  proto::HttpClient client(loop);
  DnsResolver resolver(loop);
  auto prober = std::make_unique<EndpointProber>(loop, client, resolver, pool);
  prober->start();
  // Generous: an hour-long interval is what would otherwise pass first.
  ASSERT_TRUE(run_until(
      loop,
      [&] {
        for (const auto& e : pool->endpoints()) {
          if (!e->checked()) return false;
        }
        return true;
      },
      20000));
  EXPECT_TRUE(pool->health_settled());
  EXPECT_EQ(prober->health_rounds(), 1u);
  for (const auto& e : pool->endpoints()) {
    EXPECT_EQ(e->healthy(), e->address().port != sick.port) << e->address().label;
  }
  EXPECT_EQ(a.requests, 1);
  EXPECT_EQ(sick.requests, 1);
  prober.reset();
}

TEST(EndpointProber, AutoReportsReadEachEndpointInTheFormatItAnswers) {
  proto::EventLoop loop;
  base::MonotonicClock clock;
  MiniServer cutline(loop), vllm(loop);
  cutline.state =
      R"({"queue_depth":1,"running":2,"draining":false,"kv_blocks":{"used":10,"free":90},)"
      R"("models":[{"name":"model-a","resident":true,"loading":false}]})";
  cutline.metrics = "cutline_backend_running 2\n";  // not vLLM's: never asked for
  vllm.metrics =
      "vllm:num_requests_waiting 4\nvllm:num_requests_running 5\n"
      "vllm:kv_cache_usage_perc 0.25\n";
  auto policy = load("    endpoints: [\"http://127.0.0.1:" + std::to_string(cutline.port) +
                     "\", \"http://127.0.0.1:" + std::to_string(vllm.port) + "\"]\n" +
                     "    health: off\n"
                     "    load_report: {from: auto, interval: 100ms}\n");
  ASSERT_TRUE(policy);
  auto pool = EndpointPool::create(policy->upstreams[0], clock);
  proto::HttpClient client(loop);
  DnsResolver resolver(loop);
  auto prober = std::make_unique<EndpointProber>(loop, client, resolver, pool);
  prober->start();
  std::shared_ptr<PoolEndpoint> cutline_ep, vllm_ep;
  for (auto& e : pool->endpoints()) {
    if (e->address().port == cutline.port) cutline_ep = e;
    if (e->address().port == vllm.port) vllm_ep = e;
  }
  ASSERT_TRUE(cutline_ep && vllm_ep);
  const int64_t stale = 1000000000;
  ASSERT_TRUE(run_until(
      loop,
      [&] {
        return cutline_ep->load(clock.now_ns(), stale).has_value() &&
               vllm_ep->load(clock.now_ns(), stale).has_value();
      },
      3000));
  auto c = cutline_ep->load(clock.now_ns(), stale);
  EXPECT_EQ(c->waiting, 1);
  EXPECT_EQ(c->running, 2);
  EXPECT_TRUE(c->reports_models);
  EXPECT_TRUE(c->resident("model-a"));
  auto v = vllm_ep->load(clock.now_ns(), stale);
  EXPECT_EQ(v->waiting, 4);
  EXPECT_EQ(v->running, 5);
  EXPECT_DOUBLE_EQ(v->kv_usage, 0.25);
  EXPECT_FALSE(v->reports_models);
  // Once learned, each keeps its format: the reports stay fresh poll after poll.
  const uint64_t polls = prober->load_polls();
  ASSERT_TRUE(run_until(
      loop, [&] { return prober->load_polls() >= polls + 3; }, 3000));
  EXPECT_TRUE(cutline_ep->load(clock.now_ns(), 250000000).has_value());
  EXPECT_TRUE(vllm_ep->load(clock.now_ns(), 250000000).has_value());
  prober.reset();
}

TEST(EndpointProber, ADnsPoolTakesEveryAddressOfTheName) {
  proto::EventLoop loop;
  base::MonotonicClock clock;
  auto policy = load(
      "    endpoints: {dns: \"localhost:8081\", resolve_interval: 1s}\n    health: off\n"
      "    outlier: off\n");
  ASSERT_TRUE(policy);
  auto pool = EndpointPool::create(policy->upstreams[0], clock);
  EndpointLease none = pool->pick({});
  EXPECT_FALSE(none);
  EXPECT_NE(none.error().find("DNS name localhost has not resolved"), std::string::npos)
      << none.error();
  proto::HttpClient client(loop);
  DnsResolver resolver(loop);
  auto prober = std::make_unique<EndpointProber>(loop, client, resolver, pool);
  prober->start();
  ASSERT_TRUE(run_until(
      loop, [&] { return prober->resolutions() > 0; }, 3000));
  auto eps = pool->endpoints();
  ASSERT_FALSE(eps.empty()) << pool->resolve_error();
  bool v4 = false;
  for (auto& e : eps) {
    EXPECT_EQ(e->address().port, 8081);
    v4 |= e->address().host == "127.0.0.1";
  }
  EXPECT_TRUE(v4);
  EXPECT_TRUE(pool->pick({}));
  prober.reset();
}

TEST(EndpointProber, AFailedResolutionKeepsTheLastAddressesAndSaysWhy) {
  proto::EventLoop loop;
  base::MonotonicClock clock;
  auto policy = load("    endpoints: {dns: \"no-such-host.invalid:8081\"}\n    health: off\n");
  ASSERT_TRUE(policy);
  auto pool = EndpointPool::create(policy->upstreams[0], clock);
  pool->set_addresses({{"10.1.2.3", 8081, "", "10.1.2.3:8081"}});
  proto::HttpClient client(loop);
  DnsResolver resolver(loop);
  auto prober = std::make_unique<EndpointProber>(loop, client, resolver, pool);
  prober->start();
  ASSERT_TRUE(run_until(
      loop, [&] { return prober->resolutions() > 0; }, 10000));
  EXPECT_NE(pool->resolve_error().find("cannot resolve no-such-host.invalid"), std::string::npos)
      << pool->resolve_error();
  ASSERT_EQ(pool->endpoints().size(), 1u);
  EXPECT_EQ(pool->endpoints()[0]->address().host, "10.1.2.3");
  prober.reset();
}

}  // namespace
}  // namespace cutline::gateway
