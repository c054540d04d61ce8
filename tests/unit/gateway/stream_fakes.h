#pragma once
// Fakes for running a request's phases (Stream, stream.h; Passthrough; ModelsList) without a
// process or a socket: a StreamHost on a ManualClock with a policy from inline YAML and an access
// log in a temp file, a client ServerStream that records what it is sent, an UpstreamCaller whose
// callbacks the test calls, and a worker loop run on the test thread.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cutline/gateway/models_list.h"
#include "cutline/gateway/passthrough.h"
#include "cutline/gateway/stream.h"
#include "cutline/gateway/stream_host.h"
#include "cutline/gateway/upstream_pools.h"
#include "cutline/gateway/worker.h"
#include "cutline/policy/loader.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/net/timer.h"
#include "support/count_of.h"
#include "support/unique_temp_path.h"

namespace cutline::gateway::test {

using ::cutline::test::count_of;

// The process around the streams: everything real but the clock (manual) and the upstream pools
// (none, so that a request goes to its upstream's url, unless the test asks for them with
// use_endpoint_pools()).
class FakeHost final : public StreamHost {
 public:
  explicit FakeHost(std::string_view yaml)
      : log_path_(cutline::test::unique_temp_path("access.log")) {
    policy::LoadResult r = policy::load_policy_text(yaml, "cutline.yaml");
    EXPECT_TRUE(r.ok()) << r.error_text();
    policy_ = r.policy;
    if (policy_) admission_.set_limits(*policy_);
    std::filesystem::remove(log_path_);  // an earlier run of the same test (--gtest_repeat)
    auto log = AccessLog::open(log_path_);
    EXPECT_TRUE(log.ok());
    if (log.ok()) log_ = std::move(log).value();
  }

  const base::Clock& clock() const override { return clock_; }
  GatewayMetrics& metrics() override { return metrics_; }
  AccessLog* access_log() override { return log_.get(); }
  std::shared_ptr<const policy::Policy> policy() const override { return policy_; }
  uint64_t policy_generation() const override { return 1; }
  const UpstreamTlsCache& upstream_tls() const override { return tls_; }
  std::shared_ptr<UpstreamPools> upstream_pools() const override { return pools_; }
  bool upstream_error_detail() const override { return false; }
  AdmissionDispatch& admission() override { return admission_; }

  // The access-log lines written so far (closes the log: call once the streams are done).
  std::vector<std::string> log_lines() {
    log_.reset();  // writes what is queued
    std::ifstream in(log_path_);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    return lines;
  }
  // Requests go through an endpoint pool per upstream, as in a started gateway.
  void use_endpoint_pools() { pools_ = std::make_shared<UpstreamPools>(policy_, clock_); }
  // Requests outstanding on the endpoints of `upstream`'s pool (use_endpoint_pools()).
  int64_t outstanding(std::string_view upstream) const {
    int64_t n = 0;
    if (EndpointPool* pool = pools_ ? pools_->find(upstream) : nullptr) {
      for (const auto& e : pool->endpoints()) n += e->outstanding();
    }
    return n;
  }
  // The admission queue of policies[rule_index].
  policy::AdmissionQueue& queue_of(size_t rule_index) {
    return admission_.queue_for(
        policy_->admission_groups[policy_->rules[rule_index].admission.group_index]);
  }

  base::ManualClock clock_{1'000'000'000};

 private:
  std::string log_path_;
  std::shared_ptr<const policy::Policy> policy_;
  GatewayMetrics metrics_;
  std::unique_ptr<AccessLog> log_;
  UpstreamTlsCache tls_;
  std::shared_ptr<UpstreamPools> pools_;
  AdmissionDispatch admission_{clock_};
};

// The client's side of one exchange: what the stream sent it, and a way to hang up.
class FakeClient final : public proto::ServerStream {
 public:
  FakeClient(proto::EventLoop& loop, proto::HttpRequest request)
      : loop_(loop), request_(std::move(request)) {}

  proto::HttpRequest& request() override { return request_; }
  proto::EventLoop& loop() const override { return loop_; }
  std::string_view protocol() const override { return "HTTP/1.1"; }
  std::string peer_address() const override { return "127.0.0.1:40000"; }
  bool send_head(int status, const proto::HttpHeaders& headers, proto::BodyFraming) override {
    if (closed_ || head_sent_) return false;
    head_sent_ = true;
    status_ = status;
    headers_ = headers;
    return true;
  }
  bool send_body(std::string_view data) override {
    if (closed_ || finished_) return false;
    body_.append(data);
    return true;
  }
  bool finish(const proto::HttpHeaders& trailers) override {
    if (closed_ || finished_ || !head_sent_) return false;
    trailers_ = trailers;
    end();
    return true;
  }
  bool send_simple(int status, const proto::HttpHeaders& headers, std::string_view body) override {
    if (closed_ || finished_ || head_sent_) return false;
    head_sent_ = true;
    status_ = status;
    headers_ = headers;
    body_ = std::string(body);
    end();
    return true;
  }
  void reset() override { closed_ = true; }
  void on_writable(std::function<void()> callback) override { on_writable_ = std::move(callback); }
  void on_close(std::function<void()> callback) override { on_close_ = std::move(callback); }
  bool closed() const override { return closed_; }
  bool head_sent() const override { return head_sent_; }
  bool finished() const override { return finished_; }
  size_t buffered_bytes() const override { return 0; }

  // The client goes away before its answer is complete.
  void hang_up() {
    if (closed_ || finished_) return;
    closed_ = true;
    auto cb = std::move(on_close_);
    on_writable_ = nullptr;
    if (cb) cb();
  }

  int status() const { return status_; }
  const proto::HttpHeaders& headers() const { return headers_; }
  const proto::HttpHeaders& trailers() const { return trailers_; }
  const std::string& body() const { return body_; }
  bool answered() const { return finished_; }
  int ends() const { return ends_; }  // finish() + send_simple() that completed

 private:
  void end() {
    finished_ = true;
    ++ends_;
    on_close_ = nullptr;
    on_writable_ = nullptr;
  }

  proto::EventLoop& loop_;
  proto::HttpRequest request_;
  bool closed_ = false;
  bool head_sent_ = false;
  bool finished_ = false;
  int ends_ = 0;
  int status_ = 0;
  proto::HttpHeaders headers_;
  proto::HttpHeaders trailers_;
  std::string body_;
  std::function<void()> on_writable_;
  std::function<void()> on_close_;
};

// Upstream requests as the streams send them; the test plays the upstream's part by calling
// their callbacks (head, body pieces, complete or error).
class ScriptedUpstream final : public UpstreamCaller {
 public:
  struct Call {
    proto::ClientRequest request;
    proto::ClientCallbacks callbacks;
  };
  proto::ClientHandle start(proto::ClientRequest request,
                            proto::ClientCallbacks callbacks) override {
    calls.push_back(Call{std::move(request), std::move(callbacks)});
    return proto::ClientHandle();
  }
  std::vector<Call> calls;
};

// One worker loop on the test thread with its Worker, the host and a scripted upstream.
class PhaseTest : public ::testing::Test {
 protected:
  explicit PhaseTest(std::string_view yaml) : host_(yaml), worker_(loop_) {
    auto upstream = std::make_unique<ScriptedUpstream>();
    upstream_ = upstream.get();
    worker_.upstream = std::move(upstream);
  }
  ~PhaseTest() override {
    // What lives on the loop (the streams' timers) goes before it.
    worker_.streams.clear();
    worker_.passthroughs.clear();
    worker_.model_lists.clear();
  }

  // A client's request as the HTTP server hands it over.
  std::shared_ptr<FakeClient> client(std::string method, std::string target,
                                     proto::HttpHeaders headers = {}, std::string body = {}) {
    proto::HttpRequest req;
    req.method = std::move(method);
    req.target = std::move(target);
    req.headers = std::move(headers);
    req.body = std::move(body);
    return std::make_shared<FakeClient>(loop_, std::move(req));
  }

  // A client request to `path` with a JSON body, started through the phases.
  struct Started {
    std::shared_ptr<FakeClient> client;
    std::shared_ptr<Stream> stream;
  };
  Started start(Route route, std::string body, proto::HttpHeaders headers = {}) {
    if (!headers.has("Content-Type")) headers.add("Content-Type", "application/json");
    auto c = client("POST", std::string(route_path(route)), std::move(headers), std::move(body));
    auto stream = std::make_shared<Stream>(host_, worker_, c, next_id_++, route);
    worker_.streams.emplace(stream->id(), stream);
    stream->start();
    return {c, stream};
  }

  // Runs the loop until `done` holds or `timeout_ms` of real time passed; then what it says.
  bool run_until(const std::function<bool()>& done, int64_t timeout_ms = 2000) {
    proto::Timer poll(loop_, [&] {
      if (done()) loop_.stop();
    });
    proto::Timer limit(loop_, [&] { loop_.stop(); });
    poll.arm_periodic(1);
    limit.arm(timeout_ms);
    loop_.run();
    return done();
  }
  // Runs what is posted now (the streams' clean-up, a pool's answer).
  void run_posted() {
    loop_.post([this] { loop_.stop(); });
    loop_.run();
  }

  std::string metrics() { return host_.metrics().serialize(); }

  proto::EventLoop loop_;
  FakeHost host_;
  Worker worker_;
  ScriptedUpstream* upstream_ = nullptr;
  uint64_t next_id_ = 1;
};

// The tenants section of a phase test's policy: one tenant, alice, whose key is
// "sk-alice-example" (the digest: printf %s sk-alice-example | sha256sum).
inline const std::string kAliceTenant =
    "tenants:\n  - name: alice\n    api_keys: "
    "[\"sha256:d48fce52832c460238fb82e9f6c57be593ad27ea6ddb5e15d74d1fb4245a76cd\"]\n";

// The sum of the samples of the Prometheus series in `text` whose name and first labels are
// `series_prefix` (e.g. `cutline_stops_total{cause="eos"`): how many stop records were counted.
inline double metric_sum(std::string_view text, std::string_view series_prefix) {
  double sum = 0;
  size_t at = 0;
  while ((at = text.find(series_prefix, at)) != std::string_view::npos) {
    if (at > 0 && text[at - 1] != '\n') {
      at += series_prefix.size();
      continue;
    }
    const size_t eol = text.find('\n', at);
    const std::string_view line = text.substr(at, eol == std::string_view::npos ? eol : eol - at);
    const size_t space = line.rfind(' ');
    if (space != std::string_view::npos) sum += std::stod(std::string(line.substr(space + 1)));
    at += series_prefix.size();
  }
  return sum;
}

}  // namespace cutline::gateway::test
