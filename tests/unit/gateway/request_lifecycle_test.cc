// RequestLifecycle, the part of every request's phases that Stream, Passthrough and ModelsList
// share: the request id a client sends is kept when valid, the tenant comes from the Bearer key
// (or the 401 ending), and finish lets the first end event through and writes one record.
#include "cutline/gateway/request_lifecycle.h"

#include <gtest/gtest.h>

#include "stream_fakes.h"

namespace cutline::gateway::test {
namespace {

const std::string kPolicy =
    "listen:\n  - address: 127.0.0.1:0\n"
    "upstreams:\n  - name: up\n    url: http://127.0.0.1:9\n    models: [\"m\"]\n" +
    kAliceTenant + "policies:\n  - name: files\n    match: {routes: [\"/v1/files\"]}\n";

TEST(RequestLifecycle, AcceptKeepsAValidClientRequestIdAndReplacesAnInvalidOne) {
  FakeHost host(kPolicy);
  RequestLifecycle kept(host, 1);
  kept.accept({{"X-Request-Id", "trace-42"}});
  EXPECT_EQ(kept.request_id(), "trace-42");
  EXPECT_EQ(kept.phase(), Phase::kAccept);
  EXPECT_EQ(kept.policy_ptr(), host.policy());

  RequestLifecycle replaced(host, 2);
  replaced.accept({{"X-Request-Id", "has\"quote"}});
  EXPECT_EQ(replaced.request_id().rfind("cl-", 0), 0u) << replaced.request_id();
  EXPECT_EQ(replaced.request_id().size(), 35u);

  host.clock_.advance_ms(7);  // the arrival is on the host's clock
  EXPECT_EQ(kept.elapsed_ms(), 7.0);
}

TEST(RequestLifecycle, AuthenticateNamesTheTenantOrEndsWith401) {
  FakeHost host(kPolicy);
  RequestLifecycle missing(host, 1);
  missing.accept({});
  std::optional<Ending> refused = missing.authenticate({});
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->cause, proto::Cause::kAdmissionRejected);
  EXPECT_EQ(refused->rule, "tenants");
  EXPECT_EQ(refused->message, "missing API key");
  ASSERT_TRUE(refused->error.has_value());
  EXPECT_EQ(refused->error->status(), 401);

  RequestLifecycle wrong(host, 2);
  wrong.accept({});
  refused = wrong.authenticate({{"Authorization", "Bearer sk-wrong"}});
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->message, "invalid API key");

  RequestLifecycle alice(host, 3);
  const proto::HttpHeaders headers{{"Authorization", "Bearer sk-alice-example"}};
  alice.accept(headers);
  EXPECT_FALSE(alice.authenticate(headers).has_value());
  EXPECT_EQ(alice.tenant(), "alice");
  const policy::Rule* rule = alice.match("/v1/files", "", headers);
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ(rule->name, "files");
  EXPECT_EQ(alice.match("/v1/batches", "", headers), nullptr);
}

TEST(RequestLifecycle, FinishLetsTheFirstEndThroughAndWritesOneRecord) {
  FakeHost host(kPolicy);
  RequestLifecycle life(host, 1);
  life.accept({{"X-Request-Id", "r-1"}});
  life.enter(Phase::kRelay);
  host.clock_.advance_ms(3);

  ASSERT_TRUE(life.begin_finish());
  EXPECT_TRUE(life.finishing());
  EXPECT_FALSE(life.begin_finish());  // a second end event (the upstream failing too): no-op
  Ending e;
  e.cause = proto::Cause::kClientCancel;
  e.message = "client disconnected";
  proto::StopRecord record = life.record_for(e);
  EXPECT_EQ(record.request_id, "r-1");
  EXPECT_EQ(record.reporter, "gateway");
  EXPECT_EQ(record.duration_ms, 3.0);
  ResponseEnd end;
  end.log.stop = &record;
  end.log.status = 499;
  end.log.method = "GET";
  end.log.path = "/v1/files";
  end.route = "other";
  life.record(end);
  life.done();
  EXPECT_EQ(life.phase(), Phase::kDone);
  EXPECT_FALSE(life.begin_finish());

  const std::vector<std::string> lines = host.log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"request_id\":\"r-1\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"cause\":\"client_cancel\""), std::string::npos) << lines[0];
  EXPECT_EQ(metric_sum(host.metrics().serialize(), "cutline_stops_total{"), 1.0);
}

}  // namespace
}  // namespace cutline::gateway::test
