// Stream's phases up to route, with fake collaborators and no socket: a request refused at
// classify, authenticate or admit, or ended while it waits for a slot, gets its one answer with
// exactly one stop record (body and Cutline-Stop header), one access-log line and its metrics;
// the admission slots add up afterwards. The end-to-end versions are in
// tests/integration/gateway_{stop_causes,auth}_test.cc.
#include <gtest/gtest.h>

#include "cutline/proto/wire/stop_record.h"
#include "stream_fakes.h"

namespace cutline::gateway::test {
namespace {

using proto::Cause;

// Without tenants: an admission rule picked by a header, and the default. With them: the default
// only (a rule picked by a header must name the tenants that may pick it).
std::string policy_yaml(bool tenants) {
  std::string y =
      "listen:\n  - address: 127.0.0.1:0\n"
      "upstreams:\n  - name: up\n    url: http://127.0.0.1:9\n    models: [\"m\"]\n";
  if (tenants) {
    return y + kAliceTenant + "policies:\n  - name: default\n    match: {}\n";
  }
  return y +
         "policies:\n"
         "  - name: admission\n    match: {headers: {x-policy: admission}}\n"
         "    admission: {max_concurrent: 1, queue_depth: 1, queue_timeout: 40ms}\n"
         "  - name: default\n    match: {}\n";
}

std::string chat(std::string_view extra = "") {
  return R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true)" +
         std::string(extra) + "}";
}

proto::HttpHeaders admission_headers() {
  return proto::HttpHeaders{{"Content-Type", "application/json"}, {"X-Policy", "admission"}};
}

// The record in the Cutline-Stop header of an error answer, checked to be the body's too.
proto::StopRecord error_record(const FakeClient& c) {
  EXPECT_TRUE(c.answered());
  EXPECT_EQ(c.ends(), 1);
  EXPECT_EQ(count_of(c.body(), "\"cutline\":{"), 1u) << c.body();
  const auto header = c.headers().get("Cutline-Stop");
  EXPECT_TRUE(header.has_value());
  auto parsed = proto::parse_stop_header(header.value_or(""));
  EXPECT_TRUE(parsed.ok()) << header.value_or("");
  if (!parsed.ok()) return {};
  EXPECT_NE(c.body().find("\"cause\":\"" + std::string(proto::to_string(parsed->cause)) + "\""),
            std::string::npos)
      << c.body();
  proto::StopRecord rec = std::move(parsed).value();
  // The header's record is the short form; the id is the answer's Cutline-Request-Id.
  rec.request_id = std::string(c.headers().get("Cutline-Request-Id").value_or(""));
  EXPECT_NE(c.body().find("\"request_id\":\"" + rec.request_id + "\""), std::string::npos)
      << c.body();
  return rec;
}

class StreamPhases : public PhaseTest {
 protected:
  explicit StreamPhases(bool tenants = false) : PhaseTest(policy_yaml(tenants)) {}

  // The one access-log line of `request_id` (closes the log).
  std::string only_log_line(const std::string& request_id) {
    std::string found;
    size_t n = 0;
    for (const std::string& l : host_.log_lines()) {
      if (l.find("\"request_id\":\"" + request_id + "\"") != std::string::npos) {
        found = l;
        ++n;
      }
    }
    EXPECT_EQ(n, 1u) << request_id;
    return found;
  }
};

TEST_F(StreamPhases, MalformedJsonIsA400InvalidRequestWithOneRecordAndOneLogLine) {
  auto s = start(Route::kChatCompletions, R"({"model":"m","messages":[)");
  ASSERT_TRUE(s.client->answered());  // classify answers at once: no upstream, no wait
  EXPECT_EQ(s.client->status(), 400);
  EXPECT_NE(s.client->body().find("\"type\":\"invalid_request_error\""), std::string::npos)
      << s.client->body();
  const proto::StopRecord rec = error_record(*s.client);
  EXPECT_EQ(rec.cause, Cause::kInvalidRequest);
  EXPECT_EQ(rec.rule, "request");
  EXPECT_TRUE(upstream_->calls.empty());
  EXPECT_EQ(s.stream->phase(), Phase::kDone);

  const std::string line = only_log_line(rec.request_id);
  EXPECT_NE(line.find("\"cause\":\"invalid_request\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"status\":400"), std::string::npos) << line;
  const std::string m = metrics();
  EXPECT_NE(m.find("cutline_stops_total{cause=\"invalid_request\""), std::string::npos);
  EXPECT_NE(m.find("cutline_active_streams 0"), std::string::npos);
  run_posted();
  EXPECT_TRUE(worker_.streams.empty());  // dropped after finish, from the loop
}

TEST_F(StreamPhases, WrongContentTypeIs415BeforeTheBodyIsRead) {
  proto::HttpHeaders h{{"Content-Type", "text/plain"}};
  auto s = start(Route::kChatCompletions, chat(), std::move(h));
  EXPECT_EQ(s.client->status(), 415);
  EXPECT_EQ(error_record(*s.client).cause, Cause::kInvalidRequest);
}

class StreamPhasesWithTenants : public StreamPhases {
 protected:
  StreamPhasesWithTenants() : StreamPhases(true) {}
};

TEST_F(StreamPhasesWithTenants, AKeyThatMatchesNoTenantIs401WithItsRecord) {
  for (const char* auth : {"", "Bearer sk-wrong"}) {
    proto::HttpHeaders h{{"Content-Type", "application/json"}};
    if (*auth) h.add("Authorization", auth);
    auto s = start(Route::kChatCompletions, chat(), std::move(h));
    ASSERT_TRUE(s.client->answered()) << auth;
    EXPECT_EQ(s.client->status(), 401) << auth;
    EXPECT_NE(s.client->body().find("authentication_error"), std::string::npos);
    const proto::StopRecord rec = error_record(*s.client);
    EXPECT_EQ(rec.cause, Cause::kAdmissionRejected) << auth;
    EXPECT_EQ(rec.rule, "tenants");
    EXPECT_TRUE(upstream_->calls.empty());
  }
  // The right key passes authenticate and goes upstream, its key not with it.
  auto ok =
      start(Route::kChatCompletions, chat(),
            {{"Content-Type", "application/json"}, {"Authorization", "Bearer sk-alice-example"}});
  EXPECT_FALSE(ok.client->answered());
  ASSERT_EQ(upstream_->calls.size(), 1u);
  EXPECT_EQ(upstream_->calls[0].request.headers.get("Authorization").value_or(""), "");
  EXPECT_EQ(host_.log_lines().size(), 2u);  // the two refusals; the third is still running
}

TEST_F(StreamPhases, AFullAdmissionQueueIs429WithRetryAfter) {
  auto running = start(Route::kChatCompletions, chat(), admission_headers());
  auto waiting = start(Route::kChatCompletions, chat(), admission_headers());
  auto refused = start(Route::kChatCompletions, chat(), admission_headers());
  EXPECT_EQ(upstream_->calls.size(), 1u);  // only the first holds the slot
  EXPECT_EQ(running.stream->phase(), Phase::kRoute);
  EXPECT_EQ(waiting.stream->phase(), Phase::kAdmit);
  EXPECT_FALSE(waiting.client->answered());

  ASSERT_TRUE(refused.client->answered());
  EXPECT_EQ(refused.client->status(), 429);
  EXPECT_EQ(refused.client->headers().get("Retry-After").value_or(""), "1");
  const proto::StopRecord rec = error_record(*refused.client);
  EXPECT_EQ(rec.cause, Cause::kAdmissionRejected);
  EXPECT_EQ(rec.rule, "policies[0].admission.queue_depth");
  EXPECT_EQ(rec.limit, 1.0);
  EXPECT_EQ(rec.policy, "admission");
  EXPECT_EQ(host_.queue_of(0).in_flight(), 1);
  EXPECT_EQ(host_.queue_of(0).depth(), 1);
  EXPECT_NE(metrics().find("cutline_stops_total{cause=\"admission_rejected\""), std::string::npos);
}

TEST_F(StreamPhases, AQueuedClientThatLeavesIsAClientCancelAndGivesUpItsPlace) {
  auto running = start(Route::kChatCompletions, chat(), admission_headers());
  auto waiting = start(Route::kChatCompletions, chat(), admission_headers());
  ASSERT_EQ(waiting.stream->phase(), Phase::kAdmit);
  host_.clock_.advance_ms(7);
  waiting.client->hang_up();
  EXPECT_EQ(waiting.stream->phase(), Phase::kDone);
  EXPECT_EQ(waiting.client->ends(), 0);  // nothing is sent to a client that is gone
  auto& queue = host_.queue_of(0);
  EXPECT_EQ(queue.depth(), 0);
  EXPECT_EQ(queue.in_flight(), 1);

  // The running request ends: its slot is free (no waiter is served), and the next request is
  // admitted at once.
  running.client->hang_up();
  run_posted();
  EXPECT_EQ(queue.in_flight(), 0);
  auto next = start(Route::kChatCompletions, chat(), admission_headers());
  EXPECT_EQ(next.stream->phase(), Phase::kRoute);
  EXPECT_EQ(queue.in_flight(), 1);

  std::vector<std::string> lines = host_.log_lines();
  ASSERT_EQ(lines.size(), 2u);  // the two that ended
  EXPECT_NE(lines[0].find("\"cause\":\"client_cancel\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"status\":499"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"observed\":7"), std::string::npos) << lines[0];
  EXPECT_NE(metrics().find("cutline_stops_total{cause=\"client_cancel\""), std::string::npos);
}

TEST_F(StreamPhases, TheQueueTimerRefusesAWaiterWith429) {
  auto running = start(Route::kChatCompletions, chat(), admission_headers());
  auto waiting = start(Route::kChatCompletions, chat(), admission_headers());
  ASSERT_EQ(waiting.stream->phase(), Phase::kAdmit);
  host_.clock_.advance_ms(45);  // what the record measures; the timer waits 40 ms of real time
  ASSERT_TRUE(run_until([&] { return waiting.client->answered(); }));
  EXPECT_EQ(waiting.client->status(), 429);
  EXPECT_EQ(waiting.client->headers().get("Retry-After").value_or(""), "1");
  const proto::StopRecord rec = error_record(*waiting.client);
  EXPECT_EQ(rec.cause, Cause::kAdmissionRejected);
  EXPECT_EQ(rec.rule, "policies[0].admission.queue_timeout");
  EXPECT_EQ(rec.limit, 40.0);
  EXPECT_EQ(rec.observed, 45.0);
  EXPECT_EQ(rec.unit, "ms");
  EXPECT_EQ(host_.queue_of(0).depth(), 0);
  EXPECT_EQ(host_.queue_of(0).in_flight(), 1);  // the running request's slot only
  EXPECT_EQ(running.stream->phase(), Phase::kRoute);
}

}  // namespace
}  // namespace cutline::gateway::test
