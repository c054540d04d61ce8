// How a response ends outside the phases: a request refused before it became a stream gets an
// OpenAI-style error with its one stop record (body and header), one access-log line and its
// metrics; and the bearer-key step every path authenticates with.
#include "cutline/gateway/response_end.h"

#include <gtest/gtest.h>

#include "cutline/gateway/bearer_auth.h"
#include "stream_fakes.h"

namespace cutline::gateway::test {
namespace {

const std::string kPolicy =
    "listen:\n  - address: 127.0.0.1:0\n"
    "upstreams:\n  - name: up\n    url: http://127.0.0.1:9\n    models: [\"m\"]\n" +
    kAliceTenant + "policies:\n  - name: default\n    match: {}\n";

TEST(ResponseEnd, ARequestRefusedBeforeItsPhasesCarriesOneRecordEverywhere) {
  FakeHost host(kPolicy);
  proto::HttpRequest req;
  req.method = "POST";
  req.target = "/v1/chat/completions";
  req.headers.add("X-Request-Id", "client-id-1");
  req.body = std::string(100, 'x');
  proto::HttpHeaders headers{{"Content-Type", "application/json"}};
  std::string body;
  answer_refused(host, req, make_error(ErrorKind::kTooLarge, "request body over 64 bytes"),
                 proto::Cause::kInvalidRequest, "limits.max_body_bytes", 64.0, headers, body);

  EXPECT_EQ(count_of(body, "\"cutline\":{"), 1u) << body;
  EXPECT_NE(body.find("\"rule\":\"limits.max_body_bytes\""), std::string::npos) << body;
  EXPECT_NE(body.find("\"unit\":\"bytes\""), std::string::npos) << body;
  auto rec = proto::parse_stop_header(headers.get("Cutline-Stop").value_or(""));
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->cause, proto::Cause::kInvalidRequest);
  EXPECT_EQ(headers.get("Cutline-Request-Id").value_or(""), "client-id-1");
  EXPECT_EQ(headers.get("X-Request-Id").value_or(""), "client-id-1");
  EXPECT_EQ(headers.get("Content-Type").value_or(""), "application/json");

  const std::vector<std::string> lines = host.log_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("\"request_id\":\"client-id-1\""), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"status\":413"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"bytes_in\":100"), std::string::npos) << lines[0];
  const std::string m = host.metrics().serialize();
  EXPECT_NE(m.find("route=\"/v1/chat/completions\""), std::string::npos);
  EXPECT_NE(m.find("cutline_stops_total{cause=\"invalid_request\""), std::string::npos);
}

TEST(ResponseEnd, RecordHeadersNameTheRecordAndTheRequestIdTwice) {
  const proto::HttpHeaders h = record_headers("text/plain", "cause=eos", "id-7");
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h.get("Content-Type").value_or(""), "text/plain");
  EXPECT_EQ(h.get("Cutline-Stop").value_or(""), "cause=eos");
  EXPECT_EQ(h.get("Cutline-Request-Id").value_or(""), "id-7");
  EXPECT_EQ(h.get("X-Request-Id").value_or(""), "id-7");
}

TEST(BearerAuth, OnlyABearerKeyOfATenantAuthenticates) {
  FakeHost host(kPolicy);
  const policy::Policy& p = *host.policy();
  auto auth = [&p](std::string_view value) {
    proto::HttpHeaders h;
    if (!value.empty()) h.add("Authorization", value);
    return authenticate_bearer(p, h);
  };
  EXPECT_EQ(auth("").tenant, nullptr);
  EXPECT_FALSE(auth("").key_sent);
  EXPECT_FALSE(auth("Bearer ").key_sent);  // no key after the scheme
  EXPECT_FALSE(auth("Basic c2stYWxpY2UtZXhhbXBsZQ==").key_sent);
  EXPECT_TRUE(auth("Bearer sk-wrong").key_sent);
  EXPECT_EQ(auth("Bearer sk-wrong").tenant, nullptr);
  ASSERT_NE(auth("Bearer sk-alice-example").tenant, nullptr);
  EXPECT_EQ(auth("bearer sk-alice-example").tenant->name, "alice");  // the scheme is any case
}

}  // namespace
}  // namespace cutline::gateway::test
