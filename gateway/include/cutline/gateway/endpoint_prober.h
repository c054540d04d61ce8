#pragma once
// EndpointProber: the active side of one upstream pool (endpoint_pool.h), on one EventLoop:
//   - health: GET upstreams[i].health.path on every endpoint at start() (a reload starts a new
//     prober: its endpoints are checked at once too), on an address DNS adds as soon as it
//     appears, and then each interval; a 2xx marks it healthy, anything else (status,
//     transport error, no answer within timeout) unhealthy. An endpoint is routable before its
//     first check completes. When the first round ends with no endpoint healthy, the log says
//     so (the pool then routes in panic, endpoint_pool.h);
//   - load: GET /v1/cutline/state (load_report: cutline) or /metrics (vllm) each interval,
//     parsed (load_report.h) into the endpoint's report; a garbage or missing answer clears it,
//     so the endpoint counts as "no report" rather than as idle; answers over 1 MiB are cut off.
//     With load_report: auto each endpoint is asked in the format it last answered (a Cutline
//     backend first); a failed poll makes the next one try the other format, so a pool of
//     Cutline backends and vLLM servers reports from every endpoint;
//   - DNS: for `endpoints: {dns: ...}`, resolves the name at start and every resolve_interval
//     (DnsResolver, never blocking); a failure keeps the last addresses and is shown in
//     /v1/cutline/upstreams.
// One probe per endpoint and kind is in flight at a time: a hung endpoint costs one request,
// not one per interval.
//
// Threading: construct, start() and destroy on the loop thread. The pool may be used from any
// thread meanwhile.

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "cutline/gateway/dns_resolver.h"
#include "cutline/gateway/endpoint_pool.h"
#include "cutline/proto/http/http_client.h"
#include "cutline/proto/net/timer.h"
#include "cutline/proto/tls/tls_context.h"

namespace cutline::gateway {

class EndpointProber {
 public:
  // `client` and `resolver` belong to `loop` and outlive the prober. `tls`: the client context
  // for an https:// upstream (null for cleartext).
  EndpointProber(proto::EventLoop& loop, proto::HttpClient& client, DnsResolver& resolver,
                 std::shared_ptr<EndpointPool> pool,
                 std::shared_ptr<const proto::TlsContext> tls = nullptr);
  ~EndpointProber();
  EndpointProber(const EndpointProber&) = delete;
  EndpointProber& operator=(const EndpointProber&) = delete;

  // Runs every check once now and then on its interval.
  void start();

  // Probe rounds completed (tests wait on these).
  uint64_t health_rounds() const { return health_rounds_; }
  uint64_t load_polls() const { return load_polls_; }
  uint64_t resolutions() const { return resolutions_; }

  struct Probe;  // implementation detail

 private:
  enum class Kind : uint8_t { kHealth, kLoad };
  void check_health();
  void poll_load();
  void resolve();
  void probe(const std::shared_ptr<PoolEndpoint>& endpoint, Kind kind);
  void finish(uint64_t key, bool ok, int status, const std::string& body);
  void note_first_round() const;
  // The format to ask `endpoint` for its load in (load_report: auto: the one it last answered).
  policy::LoadReportKind report_kind(const PoolEndpoint& endpoint) const;

  proto::EventLoop& loop_;
  proto::HttpClient& client_;
  DnsResolver& resolver_;
  std::shared_ptr<EndpointPool> pool_;
  std::shared_ptr<const proto::TlsContext> tls_;
  std::unique_ptr<proto::Timer> health_timer_;
  std::unique_ptr<proto::Timer> load_timer_;
  std::unique_ptr<proto::Timer> dns_timer_;
  std::map<uint64_t, std::unique_ptr<Probe>> probes_;  // key: endpoint id * 2 + kind
  // load_report: auto: the format each endpoint (by id) is asked in next; kCutline when absent.
  std::map<uint64_t, policy::LoadReportKind> auto_kinds_;
  std::shared_ptr<bool> alive_;
  bool first_round_over_ = false;
  uint64_t health_rounds_ = 0;
  uint64_t load_polls_ = 0;
  uint64_t resolutions_ = 0;
};

}  // namespace cutline::gateway
