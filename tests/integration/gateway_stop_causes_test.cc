// The real cutline-gateway in front of the scripted cutline-fake-upstream, on loopback. Every
// stop cause a gateway can meet in front of an OpenAI-compatible upstream is provoked and its
// label checked where a user sees it: the response body (last chunk / JSON), the trailer or
// header, the access log and /metrics. Test policies use 150-300 ms limits to stay fast.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "cutline/proto/wire/openai_error.h"
#include "gateway_harness.h"

namespace cutline::test {
namespace {

using proto::Cause;

GatewayEnv* env = nullptr;

std::string policy_yaml(uint16_t fake_port, uint16_t dead_port, const std::string& log_path) {
  return "listen:\n  - address: 127.0.0.1:0\n"
         "admin:\n  address: 127.0.0.1:0\n"
         "access_log: " +
         log_path +
         "\n"
         "upstreams:\n"
         "  - name: fake\n    url: http://127.0.0.1:" +
         std::to_string(fake_port) +
         "\n"
         "    models: [\"fake\", \"fake-*\"]\n"
         "  - name: dead\n    url: http://127.0.0.1:" +
         std::to_string(dead_port) +
         "\n"
         "    models: [\"dead\"]\n"
         "  - name: unresolved\n    url: http://cutline-unresolvable.invalid:9\n"
         "    models: [\"unresolved\"]\n"
         "policies:\n"
         "  - name: budget\n    match: {headers: {x-policy: budget}}\n"
         "    budget: {max_output_tokens: 4}\n"
         "  - name: deadline\n    match: {headers: {x-policy: deadline}}\n    deadline: 250ms\n"
         "  - name: ttft\n    match: {headers: {x-policy: ttft}}\n    ttft_timeout: 150ms\n"
         "  - name: idle\n    match: {headers: {x-policy: idle}}\n    idle_timeout: 150ms\n"
         "  - name: errorcut\n    match: {headers: {x-policy: errorcut}}\n"
         "    ttft_timeout: 150ms\n    idle_timeout: 150ms\n    on_cut: {mode: error}\n"
         "  - name: pool\n    match: {headers: {x-policy: pool}}\n"
         "    budget: {max_output_tokens: 8, global_tokens_per_minute: 10}\n"
         "  - name: admission\n    match: {headers: {x-policy: admission}}\n"
         "    admission: {max_concurrent: 1, queue_depth: 1, queue_timeout: 150ms}\n"
         "  - name: slow\n    match: {headers: {x-policy: slow}}\n    deadline: 2s\n"
         "  - name: default\n    match: {}\n";
}

class GatewayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    env = new GatewayEnv;
    const uint16_t dead_port = free_port();
    ASSERT_TRUE(env->start([dead_port](uint16_t fake_port, const std::string& log) {
      return policy_yaml(fake_port, dead_port, log);
    })) << env->error;
  }
  static void TearDownTestSuite() {
    env->gateway.stop();
    env->fake.stop();
    delete env;
    env = nullptr;
  }

  static std::string url(const std::string& path) {
    return "http://127.0.0.1:" + std::to_string(env->port) + path;
  }

  static proto::HttpResponse post(const std::string& body, const std::string& script = "",
                                  const std::string& policy = "",
                                  const std::string& path = "/v1/chat/completions") {
    proto::HttpHeaders h{{"Content-Type", "application/json"}};
    if (!script.empty()) h.add("X-Fake-Script", script);
    if (!policy.empty()) h.add("X-Policy", policy);
    auto r = proto::http_fetch(url(path), "POST", h, body, 10000);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r).value() : proto::HttpResponse{};
  }

  static std::string chat(bool stream, const std::string& extra = "") {
    return std::string(R"({"model":"fake","messages":[{"role":"user","content":"hi"}],"stream":)") +
           (stream ? "true" : "false") + extra + "}";
  }

  // The record in the last chunk of a streamed body.
  static proto::StopRecord streamed_record(const proto::HttpResponse& r,
                                           std::string* finish_reason = nullptr) {
    proto::ChunkParser p;
    const std::string last = last_chunk(r.body);
    EXPECT_TRUE(p.parse(last).ok()) << last;
    EXPECT_TRUE(p.chunk().cutline.has_value()) << last;
    if (finish_reason) *finish_reason = std::string(p.chunk().finish_reason());
    return p.chunk().cutline.value_or(proto::StopRecord{});
  }

  // The access-log line of `request_id` (waits for it).
  static std::string log_line(const std::string& request_id) {
    std::string line;
    wait_for([&] {
      std::istringstream in(read_file(env->log_path));
      for (std::string l; std::getline(in, l);) {
        if (l.find("\"request_id\":\"" + request_id + "\"") != std::string::npos) {
          line = l;
          return true;
        }
      }
      return false;
    });
    return line;
  }

  static std::string metrics() {
    auto r = proto::http_fetch("http://127.0.0.1:" + std::to_string(env->admin_port) + "/metrics");
    return r.ok() ? r->body : "";
  }

  // Checks one streamed response end to end: finish_reason and record in the last chunk, the
  // trailer, the access-log line and the stops counter.
  static void expect_streamed_cause(const proto::HttpResponse& r, Cause cause,
                                    const std::string& finish_reason) {
    ASSERT_EQ(r.status, 200) << r.body;
    bool done = false;
    sse_payloads(r.body, &done);
    EXPECT_TRUE(done) << "no [DONE]: " << r.body;
    std::string fr;
    const proto::StopRecord rec = streamed_record(r, &fr);
    EXPECT_EQ(proto::to_string(rec.cause), proto::to_string(cause)) << r.body;
    EXPECT_EQ(fr, finish_reason) << r.body;
    auto trailer = r.trailers.get("cutline-stop");
    ASSERT_TRUE(trailer.has_value()) << "no cutline-stop trailer";
    auto parsed = proto::parse_stop_header(*trailer);
    ASSERT_TRUE(parsed.ok()) << *trailer;
    EXPECT_EQ(parsed->cause, cause) << *trailer;
    const std::string line = log_line(rec.request_id);
    EXPECT_NE(line.find("\"cause\":\"" + std::string(proto::to_string(cause)) + "\""),
              std::string::npos)
        << line;
    EXPECT_NE(metrics().find("cutline_stops_total{cause=\"" + std::string(proto::to_string(cause)) +
                             "\""),
              std::string::npos);
  }

  // A streamed answer the upstream broke: it ends as a failed OpenAI stream does, with an error
  // event carrying the record (then [DONE]), and no chunk ever says it finished.
  static proto::StopRecord expect_streamed_failure(const proto::HttpResponse& r, Cause cause) {
    EXPECT_EQ(r.status, 200) << r.body;
    bool done = false;
    const auto payloads = sse_payloads(r.body, &done);
    EXPECT_TRUE(done) << "no [DONE]: " << r.body;
    EXPECT_NE(r.body.find("event: error\n"), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("\"finish_reason\":\"length\""), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("\"finish_reason\":\"stop\""), std::string::npos) << r.body;
    if (payloads.empty()) return {};
    auto parsed = proto::parse_error_body(payloads.back());
    EXPECT_TRUE(parsed.ok() && parsed->cutline.has_value()) << payloads.back();
    if (!parsed.ok() || !parsed->cutline) return {};
    const proto::StopRecord rec = *parsed->cutline;
    EXPECT_EQ(proto::to_string(rec.cause), proto::to_string(cause)) << r.body;
    EXPECT_NE(r.trailers.get("cutline-stop")
                  .value_or("")
                  .find("cause=" + std::string(proto::to_string(cause)) + ";"),
              std::string::npos);
    EXPECT_NE(
        log_line(rec.request_id).find("\"cause\":\"" + std::string(proto::to_string(cause)) + "\""),
        std::string::npos);
    return rec;
  }
};

TEST_F(GatewayTest, EosIsAModelStopWithFinishReasonStop) {
  auto r = post(chat(true), "tokens=3");
  expect_streamed_cause(r, Cause::kEos, "stop");
  // Every content token came through, and the usage chunk the client did not ask for did not.
  const auto payloads = sse_payloads(r.body);
  EXPECT_EQ(payloads.size(), 4u) << r.body;
  EXPECT_EQ(r.body.find("\"usage\":{"), std::string::npos) << r.body;
  EXPECT_EQ(streamed_record(r).output_tokens, 3);
  EXPECT_EQ(streamed_record(r).count_method, proto::CountMethod::kUsage);
}

// finish records the stream (access-log line, metrics) before the client's last bytes go out:
// a client that looks right after its answer finds it, with no waiting.
TEST_F(GatewayTest, AnAnswerIsCountedBeforeItsLastByteArrives) {
  for (bool stream : {true, false}) {
    const std::string m0 = metrics();
    auto r = post(chat(stream), "tokens=2");
    ASSERT_EQ(r.status, 200) << r.body;
    const auto id = r.headers.get("Cutline-Request-Id");
    ASSERT_TRUE(id.has_value());
    // The log is written by its own thread: wait for the line.
    EXPECT_FALSE(log_line(std::string(*id)).empty()) << "no access-log line for " << *id;
    const std::string m1 = metrics();
    EXPECT_NE(m1.find("cutline_active_streams 0"), std::string::npos) << m1;
    EXPECT_NE(m1, m0);  // the request and stop counters moved
  }
}

TEST_F(GatewayTest, UsageChunkIsKeptWhenTheClientAskedForIt) {
  auto r = post(chat(true, R"(,"stream_options":{"include_usage":true})"), "tokens=2");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(last_chunk(r.body).find("\"usage\""), std::string::npos) << r.body;
}

TEST_F(GatewayTest, StopSequence) {
  expect_streamed_cause(post(chat(true), "tokens=3,stop_reason=###"), Cause::kStopSequence, "stop");
}

TEST_F(GatewayTest, ClientMaxTokens) {
  auto r = post(chat(true, R"(,"max_tokens":3)"), "tokens=10");
  expect_streamed_cause(r, Cause::kClientMaxTokens, "length");
}

TEST_F(GatewayTest, GatewayBudgetWhenThePolicyClampedBelowTheClientsLimit) {
  auto r = post(chat(true, R"(,"max_tokens":100)"), "tokens=20", "budget");
  expect_streamed_cause(r, Cause::kGatewayBudget, "length");
  const proto::StopRecord rec = streamed_record(r);
  EXPECT_EQ(rec.requested_max_tokens.value_or(0), 100);
  EXPECT_EQ(rec.effective_max_tokens.value_or(0), 4);
  EXPECT_EQ(rec.output_tokens, 4);
  EXPECT_EQ(rec.rule, "policies[0].budget.max_output_tokens");
  EXPECT_NE(
      metrics().find("cutline_budget_clamped_total{rule=\"policies[0].budget.max_output_tokens\"}"),
      std::string::npos);
}

TEST_F(GatewayTest, GatewayDeadlineCutsALongStream) {
  auto r = post(chat(true), "tokens=200,interval_ms=10", "deadline");
  expect_streamed_cause(r, Cause::kGatewayDeadline, "length");
  const proto::StopRecord rec = streamed_record(r);
  EXPECT_GT(rec.output_tokens, 0);
  EXPECT_LT(rec.output_tokens, 200);
  EXPECT_EQ(rec.limit.value_or(0), 250);
  EXPECT_GE(rec.observed.value_or(0), 250);
}

// The cut comes before the upstream's usage chunk: a client that asked for include_usage still
// gets one (after the finish chunk, carrying the record too), with the tokens it received.
TEST_F(GatewayTest, ADeadlineCutStillGivesTheUsageTheClientAskedFor) {
  auto r = post(chat(true, R"(,"stream_options":{"include_usage":true})"),
                "tokens=200,interval_ms=10", "deadline");
  ASSERT_EQ(r.status, 200) << r.body;
  const auto payloads = sse_payloads(r.body);
  ASSERT_GE(payloads.size(), 3u) << r.body;
  proto::ChunkParser finish;
  ASSERT_TRUE(finish.parse(payloads[payloads.size() - 2]).ok());
  EXPECT_EQ(finish.chunk().finish_reason(), "length") << r.body;
  proto::ChunkParser usage;
  ASSERT_TRUE(usage.parse(payloads.back()).ok());
  ASSERT_TRUE(usage.chunk().usage.has_value()) << payloads.back();
  ASSERT_TRUE(usage.chunk().cutline.has_value()) << payloads.back();
  const proto::StopRecord& rec = *usage.chunk().cutline;
  EXPECT_EQ(rec.cause, Cause::kGatewayDeadline);
  EXPECT_GT(usage.chunk().usage->completion_tokens, 0);
  EXPECT_EQ(usage.chunk().usage->completion_tokens, rec.output_tokens);
  EXPECT_EQ(usage.chunk().usage->total_tokens,
            usage.chunk().usage->prompt_tokens + usage.chunk().usage->completion_tokens);
}

TEST_F(GatewayTest, DeadlineOnANonStreamingRequestLabelsBodyAndHeader) {
  auto r = post(chat(false), "tokens=200,interval_ms=10", "deadline");
  ASSERT_EQ(r.status, 200) << r.body;
  auto header = r.headers.get("Cutline-Stop");
  ASSERT_TRUE(header.has_value());
  EXPECT_NE(header->find("cause=gateway_deadline"), std::string::npos) << *header;
  EXPECT_NE(r.body.find("\"object\":\"chat.completion\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"cause\":\"gateway_deadline\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"finish_reason\":\"length\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("t0 t1 "), std::string::npos) << r.body;  // the content so far
}

TEST_F(GatewayTest, NonStreamingEosAssemblesTheCompletion) {
  auto r = post(chat(false), "tokens=3");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("\"content\":\"t0 t1 t2 \""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"cause\":\"eos\""), std::string::npos) << r.body;
  EXPECT_NE(r.headers.get("Cutline-Stop").value_or("").find("cause=eos"), std::string::npos);
  // The upstream was asked for a stream with usage, whatever the client sent.
  auto seen =
      proto::http_fetch("http://127.0.0.1:" + std::to_string(env->fake_port) + "/fake/requests");
  ASSERT_TRUE(seen.ok());
  EXPECT_NE(seen->body.find(R"(\"stream\":true)"), std::string::npos) << seen->body;
  EXPECT_NE(seen->body.find(R"(\"include_usage\":true)"), std::string::npos);
}

TEST_F(GatewayTest, TtftTimeout) {
  expect_streamed_cause(post(chat(true), "tokens=3,ttft_ms=2000", "ttft"),
                        Cause::kGatewayTtftTimeout, "length");
}

TEST_F(GatewayTest, TtftTimeoutInErrorModeIs504BeforeAnyByte) {
  auto r = post(chat(false), "tokens=3,ttft_ms=2000", "errorcut");
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_NE(r.body.find("\"error\""), std::string::npos);
  EXPECT_NE(r.body.find("\"cause\":\"gateway_ttft_timeout\""), std::string::npos) << r.body;
  EXPECT_NE(r.headers.get("Cutline-Stop").value_or("").find("gateway_ttft_timeout"),
            std::string::npos);
}

TEST_F(GatewayTest, IdleTimeoutInErrorModeMidStreamIsAnSseErrorEvent) {
  auto r = post(chat(true), "tokens=5,stall_at=2,stall_ms=2000", "errorcut");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("event: error"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"cause\":\"gateway_idle_timeout\""), std::string::npos) << r.body;
  EXPECT_NE(r.trailers.get("cutline-stop").value_or("").find("gateway_idle_timeout"),
            std::string::npos);
}

TEST_F(GatewayTest, TokenPoolReservesAtAdmissionAndRefundsTheUnusedRest) {
  // Pool of 10 tokens: a request reserving 8 and using 3 gives 5 back (7 left), so a second
  // request reserving 8 is rejected with 429 while one reserving 7 is admitted.
  auto first = post(chat(true, R"(,"max_tokens":8)"), "tokens=3", "pool");
  expect_streamed_cause(first, Cause::kEos, "stop");
  auto second = post(chat(true, R"(,"max_tokens":8)"), "tokens=3", "pool");
  EXPECT_EQ(second.status, 429) << second.body;
  EXPECT_TRUE(second.headers.get("Retry-After").has_value());
  EXPECT_NE(second.body.find("global_tokens_per_minute"), std::string::npos) << second.body;
  auto third = post(chat(true, R"(,"max_tokens":7)"), "tokens=3", "pool");
  expect_streamed_cause(third, Cause::kEos, "stop");
}

TEST_F(GatewayTest, IdleTimeout) {
  auto r = post(chat(true), "tokens=5,stall_at=2,stall_ms=2000", "idle");
  expect_streamed_cause(r, Cause::kGatewayIdleTimeout, "length");
  EXPECT_EQ(streamed_record(r).output_tokens, 2);
}

TEST_F(GatewayTest, AdmissionRejectedWhenTheQueueWaitIsExceeded) {
  // One slot: a long stream holds it; the next request waits 150 ms and is rejected with 429.
  std::thread holder([] { post(chat(true), "tokens=60,interval_ms=10", "admission"); });
  ASSERT_TRUE(wait_for([] {
    auto r = proto::http_fetch("http://127.0.0.1:" + std::to_string(env->admin_port) +
                               "/v1/cutline/streams");
    return r.ok() && r->body.find("\"phase\":\"relay\"") != std::string::npos;
  }));
  auto r = post(chat(true), "tokens=3", "admission");
  holder.join();
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_TRUE(r.headers.get("Retry-After").has_value());
  EXPECT_NE(r.body.find("\"cause\":\"admission_rejected\""), std::string::npos) << r.body;
  EXPECT_NE(r.headers.get("Cutline-Stop").value_or("").find("admission_rejected"),
            std::string::npos);
  EXPECT_NE(metrics().find("cutline_stops_total{cause=\"admission_rejected\""), std::string::npos);
}

TEST_F(GatewayTest, ClientCancelCancelsTheUpstream) {
  ASSERT_TRUE(proto::http_fetch(env->fake_url("/fake/reset"), "POST").ok());
  {
    RawClient c(env->port);
    ASSERT_TRUE(c.connected());
    c.send_all(http_post_raw("/v1/chat/completions", chat(true),
                             "X-Fake-Script: tokens=500,interval_ms=10\r\n"));
    const std::string got = c.read_until("t1 ", 3000);
    ASSERT_NE(got.find("t1 "), std::string::npos) << got;
  }  // disconnect mid-stream
  EXPECT_TRUE(wait_for(
      [] {
        auto r = proto::http_fetch("http://127.0.0.1:" + std::to_string(env->fake_port) +
                                   "/fake/requests");
        return r.ok() && r->body.find("\"cancelled\":true") != std::string::npos;
      },
      2000))
      << "the upstream request was not cancelled";
  EXPECT_TRUE(wait_for([] {
    return read_file(env->log_path).find("\"cause\":\"client_cancel\"") != std::string::npos;
  }));
  EXPECT_NE(metrics().find(
                "cutline_stops_total{cause=\"client_cancel\",model=\"fake\",origin=\"client\""),
            std::string::npos);
}

TEST_F(GatewayTest, BackendPreemptedFromTheBackendsOwnRecord) {
  auto r = post(chat(true), "tokens=3,finish=length,cutline=backend_preempted");
  expect_streamed_cause(r, Cause::kBackendPreempted, "length");
  const proto::StopRecord rec = streamed_record(r);
  EXPECT_EQ(rec.preemptions.value_or(0), 2);
  ASSERT_TRUE(rec.phases.has_value());
  EXPECT_DOUBLE_EQ(rec.phases->prefill_ms, 2.5);
  EXPECT_EQ(rec.reporter, "gateway");
}

TEST_F(GatewayTest, BackendOom) {
  expect_streamed_cause(post(chat(true), "tokens=2,finish=length,cutline=backend_oom"),
                        Cause::kBackendOom, "length");
}

TEST_F(GatewayTest, ContextLengthIsALengthStopShortOfEveryLimit) {
  expect_streamed_cause(post(chat(true, R"(,"max_tokens":100)"), "tokens=3,finish=length"),
                        Cause::kContextLength, "length");
}

TEST_F(GatewayTest, UpstreamErrorEventMidStream) {
  expect_streamed_failure(post(chat(true), "tokens=5,error_at=2"), Cause::kUpstreamError);
}

TEST_F(GatewayTest, UpstreamErrorStatusAndBodyPassThroughLabeled) {
  auto r = post(chat(true), "status=500");
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_NE(r.body.find("\"message\":\"fake upstream status 500\""), std::string::npos) << r.body;
  EXPECT_NE(r.headers.get("Cutline-Stop").value_or("").find("upstream_error"), std::string::npos);
  const std::string id(r.headers.get("Cutline-Request-Id").value_or(""));
  EXPECT_NE(log_line(id).find("\"cause\":\"upstream_error\""), std::string::npos);
}

TEST_F(GatewayTest, UpstreamRefusingTheConnectionIsALabeled502) {
  auto r = post(R"({"model":"dead","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_NE(r.body.find("\"cause\":\"upstream_error\""), std::string::npos) << r.body;
  EXPECT_NE(
      metrics().find("cutline_upstream_errors_total{kind=\"connect_refused\",upstream=\"dead\"}"),
      std::string::npos);
}

// The gateway's own transport errors do not tell clients the upstream's internal name or
// address (cutline-gateway --upstream-error-detail would); the error stays labeled.
TEST_F(GatewayTest, UpstreamConnectErrorsDoNotRevealInternalAddresses) {
  for (const char* model : {"unresolved", "dead"}) {
    auto r = post(std::string(R"({"model":")") + model +
                  R"(","messages":[{"role":"user","content":"hi"}]})");
    EXPECT_GE(r.status, 500) << r.body;
    EXPECT_NE(r.body.find("\"cause\":\"upstream_error\""), std::string::npos) << r.body;
    EXPECT_NE(r.body.find(std::string("upstream \\\"") + model + "\\\""), std::string::npos)
        << r.body;
    EXPECT_EQ(r.body.find("cutline-unresolvable"), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("127.0.0.1"), std::string::npos) << r.body;
  }
}

TEST_F(GatewayTest, UpstreamDisconnectIsNeverACleanEnd) {
  auto r = post(chat(true), "tokens=5,drop_at=2");
  EXPECT_EQ(expect_streamed_failure(r, Cause::kUpstreamDisconnect).output_tokens, 2);
  EXPECT_EQ(sse_payloads(r.body).size(), 3u) << r.body;  // two tokens, then the error event
}

TEST_F(GatewayTest, DoneWithoutFinishReasonIsUpstreamDisconnect) {
  expect_streamed_failure(post(chat(true), "tokens=2,finish=none"), Cause::kUpstreamDisconnect);
}

// Not streamed, the same broken answer is a 502 carrying the record, never a 200 whose
// finish_reason says it reached a limit.
TEST_F(GatewayTest, AnUnstreamedAnswerTheUpstreamBrokeIsA502) {
  for (const char* script : {"tokens=5,drop_at=2", "tokens=5,error_at=2"}) {
    auto r = post(chat(false), script);
    EXPECT_EQ(r.status, 502) << script << ": " << r.body;
    EXPECT_EQ(r.body.find("\"finish_reason\":"), std::string::npos) << r.body;
    auto parsed = proto::parse_error_body(r.body);
    ASSERT_TRUE(parsed.ok() && parsed->cutline.has_value()) << r.body;
    EXPECT_TRUE(parsed->cutline->cause == Cause::kUpstreamDisconnect ||
                parsed->cutline->cause == Cause::kUpstreamError)
        << r.body;
    EXPECT_EQ(parsed->error.type, "upstream_error") << r.body;
  }
}

TEST_F(GatewayTest, SlowClientIsBoundedByBackPressureAndStillCut) {
  // The client never reads; the upstream would send ~16 MB as fast as it can. Back-pressure must
  // stop the gateway reading the upstream (its token count stops growing while the stream is
  // alive), and the deadline must still end the stream with a label.
  RawClient c(env->port, 4096);
  ASSERT_TRUE(c.connected());
  c.send_all(http_post_raw("/v1/chat/completions", chat(true),
                           "X-Fake-Script: tokens=100000\r\nX-Policy: slow\r\n"));
  const std::string streams_url =
      "http://127.0.0.1:" + std::to_string(env->admin_port) + "/v1/cutline/streams";
  auto tokens_now = [&]() -> long {
    auto r = proto::http_fetch(streams_url);
    if (!r.ok()) return -1;
    const size_t t = r->body.find("\"tokens\":");
    if (t == std::string::npos) return -1;
    return std::atol(r->body.c_str() + t + 9);
  };
  // Once the socket buffers are full the count must stop growing.
  long before = -1;
  long after = -2;
  EXPECT_TRUE(wait_for(
      [&] {
        before = tokens_now();
        std::this_thread::sleep_for(std::chrono::milliseconds(40));  // a measurement interval
        after = tokens_now();
        return before > 0 && after == before;
      },
      1500))  // well inside the 2 s deadline, so a loaded machine still sees the stalled stream
      << "tokens kept flowing to a client that reads nothing: " << before << " -> " << after;
  std::string line;
  ASSERT_TRUE(wait_for(
      [&] {
        const std::string log = read_file(env->log_path);
        const size_t at = log.find("\"policy\":\"slow\"");
        if (at == std::string::npos) return false;
        const size_t begin = log.rfind('\n', at);
        line = log.substr(begin == std::string::npos ? 0 : begin + 1,
                          log.find('\n', at) - (begin == std::string::npos ? 0 : begin + 1));
        return true;
      },
      5000));
  EXPECT_NE(line.find("\"cause\":\"gateway_deadline\""), std::string::npos) << line;
  // The client, reading now, gets the labeled end after what the gateway and the socket buffers
  // held for it, which a 4 KiB window drains slowly on a loaded machine: the bytes must keep
  // coming (no 3 s without one), however long the whole takes.
  const std::string got = c.read_until_flowing("[DONE]", 3000, 40000);
  EXPECT_NE(got.find("gateway_deadline"), std::string::npos) << got.size() << " bytes read";
}

TEST_F(GatewayTest, OtherPathsPassThroughUnchanged) {
  proto::HttpHeaders h{{"X-Test-Header", "kept"}, {"Connection", "keep-alive"}};
  auto r = proto::http_fetch(url("/v1/embeddings?x=1"), "PUT", h, "payload", 5000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers.get("X-Fake-Echo").value_or(""), "1");
  EXPECT_NE(r->body.find("\"method\":\"PUT\""), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("\"body\":\"payload\""), std::string::npos);
  EXPECT_NE(r->body.find("\"x_test_header\":\"kept\""), std::string::npos);
  auto missing = proto::http_fetch(url("/missing"), "GET", {}, "", 5000);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);
  auto models = proto::http_fetch(url("/v1/models"));
  ASSERT_TRUE(models.ok());
  EXPECT_NE(models->body.find("\"id\":\"fake\""), std::string::npos);
}

TEST_F(GatewayTest, AdminEndpoints) {
  const std::string admin = "http://127.0.0.1:" + std::to_string(env->admin_port);
  auto health = proto::http_fetch(admin + "/healthz");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
  auto ready = proto::http_fetch(admin + "/readyz");
  ASSERT_TRUE(ready.ok());
  // The "dead" upstream is unreachable: not ready, and it says which.
  EXPECT_EQ(ready->status, 503) << ready->body;
  EXPECT_NE(ready->body.find("dead"), std::string::npos);
  auto policy = proto::http_fetch(admin + "/v1/cutline/policy");
  ASSERT_TRUE(policy.ok());
  EXPECT_NE(policy->body.find("\"name\":\"deadline\""), std::string::npos) << policy->body;
  EXPECT_NE(policy->body.find("\"deadline_ms\":250"), std::string::npos);
  post(chat(true), "tokens=1");
  // The client has its last byte before the stream's finish phase updates the gauge.
  std::string m;
  EXPECT_TRUE(wait_for([&] {
    m = metrics();
    return m.find("cutline_active_streams 0") != std::string::npos;
  })) << m;
  EXPECT_NE(m.find("cutline_requests_total"), std::string::npos);
}

// ---- bad input: a 4xx OpenAI-style error naming the problem, counted, gateway keeps serving --

TEST_F(GatewayTest, BadInputGetsA4xxNamingTheProblem) {
  struct Case {
    std::string body;
    std::string content_type;
    int status;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {R"({"model":"fake","messages":[)", "application/json", 400, ""},
      {chat(false), "text/plain", 415, "Content-Type"},
      {R"({"model":"nope","messages":[{"role":"user","content":"hi"}]})", "application/json", 404,
       "nope"},
      {R"({"model":"fake"})", "application/json", 400, "messages"},
      {R"({"model":"fake","messages":[{"role":"user","content":"hi"}],"max_tokens":-5})",
       "application/json", 400, "max_tokens"},
      {R"({"model":"fake","messages":[{"role":"user","content":"hi"}],"max_tokens":0})",
       "application/json", 400, "max_tokens"},
      {R"({"model":"fake","messages":[{"role":"user","content":"hi"}],"max_tokens":99999999999})",
       "application/json", 400, "max_tokens"},
      {std::string(R"({"model":"fake","messages":[{"role":"user","content":"bad \xff\xfe"}]})"),
       "application/json", 400, ""},
  };
  for (const Case& c : cases) {
    proto::HttpHeaders h{{"Content-Type", c.content_type}};
    auto r = proto::http_fetch(url("/v1/chat/completions"), "POST", h, c.body, 5000);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, c.status) << c.body << " -> " << r->body;
    EXPECT_NE(r->body.find("\"error\""), std::string::npos) << r->body;
    EXPECT_NE(r->body.find(c.mentions), std::string::npos) << r->body;
    EXPECT_NE(r->headers.get("Cutline-Stop").value_or("").find("cause=invalid_request"),
              std::string::npos);
    EXPECT_NE(r->body.find(R"("cause":"invalid_request","origin":"client")"), std::string::npos)
        << r->body;
  }
  // Over the body limit: 413 from the HTTP layer.
  proto::HttpHeaders h{{"Content-Type", "application/json"}};
  auto big =
      proto::http_fetch(url("/v1/chat/completions"), "POST", h, std::string(17 << 20, 'x'), 10000);
  // The server may answer 413 and close before reading the whole body (then the fetch fails).
  if (big.ok()) {
    EXPECT_EQ(big->status, 413);
  }
  EXPECT_NE(metrics().find("cutline_bad_requests_total{kind=\"bad_request\"}"), std::string::npos);
  // Still serving.
  expect_streamed_cause(post(chat(true), "tokens=1"), Cause::kEos, "stop");
}

TEST_F(GatewayTest, InvalidReloadKeepsThePolicyInForce) {
  const std::string good = read_file(env->config_path);
  // Both results are counted from 0 (an alert sees the first failure as an increase).
  auto reloads = [](const char* result) {
    const std::string text = metrics();
    const std::string key = std::string("cutline_policy_reload_total{result=\"") + result + "\"} ";
    const size_t at = text.find(key);
    return at == std::string::npos ? -1L : std::atol(text.c_str() + at + key.size());
  };
  EXPECT_GE(reloads("error"), 0);
  const long errors_before = reloads("error");
  const long ok_before = reloads("ok");
  std::ofstream(env->config_path) << "listen: [oops\n";
  env->gateway.signal(SIGHUP);
  EXPECT_TRUE(wait_for([&] { return reloads("error") > errors_before; }));
  // The old policy still applies (the deadline rule still cuts).
  auto r = post(chat(true), "tokens=200,interval_ms=10", "deadline");
  std::ofstream(env->config_path) << good;
  expect_streamed_cause(r, Cause::kGatewayDeadline, "length");
  EXPECT_TRUE(wait_for([&] { return reloads("ok") > ok_before; }));
}

}  // namespace
}  // namespace cutline::test
