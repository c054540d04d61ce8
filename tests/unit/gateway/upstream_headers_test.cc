#include "cutline/gateway/upstream_headers.h"

#include <gtest/gtest.h>

namespace cutline::gateway {
namespace {

policy::Upstream upstream_with_key() {
  policy::Upstream u;
  u.name = "openai";
  u.api_key = policy::Secret{"sk-upstream", "env:OPENAI_API_KEY"};
  u.headers.push_back(policy::UpstreamHeader{"OpenAI-Organization", {"org-1", "env:ORG"}});
  return u;
}

proto::HttpHeaders client_headers() {
  return proto::HttpHeaders{
      {"Authorization", "Bearer tenant-key"},
      {"Connection", "keep-alive"},
      {"Host", "gw"},
      {"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
      {"tracestate", "vendor=x"},
      {"X-Forwarded-For", "6.6.6.6"},
      {"Forwarded", "for=6.6.6.6"},
      {"Cutline-Deadline-Ms", "100"},
      {"X-Other", "kept"}};
}

TEST(UpstreamHeaders, TheUpstreamsOwnKeyReplacesTheClients) {
  proto::HttpHeaders h = client_headers();
  UpstreamHeaderOptions o;
  o.request_id = "cl-1";
  o.peer_address = "10.0.0.7:5555";
  build_upstream_headers(upstream_with_key(), o, h);
  EXPECT_EQ(h.get("Authorization").value_or(""), "Bearer sk-upstream");
  EXPECT_EQ(h.get("OpenAI-Organization").value_or(""), "org-1");
  EXPECT_EQ(h.get("X-Request-Id").value_or(""), "cl-1");
  EXPECT_EQ(h.get("traceparent").value_or(""),
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  EXPECT_EQ(h.get("tracestate").value_or(""), "vendor=x");
  // A client that is not a trusted proxy cannot claim another address.
  EXPECT_EQ(h.get("X-Forwarded-For").value_or(""), "10.0.0.7");
  EXPECT_EQ(h.get("Forwarded").value_or(""), "for=10.0.0.7");
  EXPECT_FALSE(h.has("Connection"));
  EXPECT_FALSE(h.has("Host"));
  EXPECT_FALSE(h.has("Cutline-Deadline-Ms"));
  EXPECT_EQ(h.get("X-Other").value_or(""), "kept");
}

TEST(UpstreamHeaders, TheClientsKeyGoesOnlyWhenARuleSaysSo) {
  policy::Upstream plain;
  proto::HttpHeaders h = client_headers();
  build_upstream_headers(plain, UpstreamHeaderOptions{}, h);
  EXPECT_FALSE(h.has("Authorization"));
  h = client_headers();
  UpstreamHeaderOptions o;
  o.forward_client_key = true;
  build_upstream_headers(plain, o, h);
  EXPECT_EQ(h.get("Authorization").value_or(""), "Bearer tenant-key");
}

TEST(UpstreamHeaders, ATrustedProxysForwardingHeadersAreAppendedTo) {
  policy::Policy p;
  p.trusted_proxies = {"10.0.0.1"};
  proto::HttpHeaders h = client_headers();
  build_upstream_headers(policy::Upstream{},
                         upstream_header_options(p, nullptr, "10.0.0.1:4000", "cl-2"), h);
  EXPECT_EQ(h.get("X-Forwarded-For").value_or(""), "6.6.6.6, 10.0.0.1");
  EXPECT_EQ(h.get("Forwarded").value_or(""), "for=6.6.6.6, for=10.0.0.1");
  EXPECT_EQ(peer_ip("[::1]:80"), "::1");
  EXPECT_EQ(peer_ip("127.0.0.1:80"), "127.0.0.1");
}

TEST(UpstreamHeaders, XRealIpIsTheClientsAddressNotItsClaim) {
  proto::HttpHeaders h = client_headers();
  h.add("X-Real-IP", "6.6.6.6");
  build_upstream_headers(policy::Upstream{},
                         upstream_header_options(policy::Policy{}, nullptr, "10.0.0.7:5", "i"), h);
  EXPECT_EQ(h.get("X-Real-IP").value_or(""), "10.0.0.7");
  int count = 0;
  for (const auto& e : h) count += proto::iequals(e.name, "X-Real-IP") ? 1 : 0;
  EXPECT_EQ(count, 1);

  policy::Policy p;  // a trusted proxy says who its client was
  p.trusted_proxies = {"10.0.0.1"};
  h = client_headers();
  h.add("X-Real-IP", "6.6.6.6");
  build_upstream_headers(policy::Upstream{}, upstream_header_options(p, nullptr, "10.0.0.1:5", "i"),
                         h);
  EXPECT_EQ(h.get("X-Real-IP").value_or(""), "6.6.6.6");
}

TEST(UpstreamHeaders, TraceparentFollowsTheW3cGrammar) {
  const std::string ok = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  EXPECT_TRUE(valid_traceparent(ok));
  EXPECT_TRUE(valid_traceparent("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-later"));
  EXPECT_FALSE(valid_traceparent(ok + "-extra"));  // version 00 is exactly 55 bytes
  EXPECT_FALSE(valid_traceparent("ff" + ok.substr(2)));
  EXPECT_FALSE(valid_traceparent("00-00000000000000000000000000000000-b7ad6b7169203331-01"));
  EXPECT_FALSE(valid_traceparent("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"));
  EXPECT_FALSE(valid_traceparent("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01"));
  EXPECT_FALSE(valid_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g"));
  EXPECT_FALSE(valid_traceparent("00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
  EXPECT_FALSE(valid_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-01"));
  EXPECT_FALSE(valid_traceparent("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" +
                                 std::string(5000, 'a')));
  EXPECT_FALSE(valid_traceparent(""));
}

TEST(UpstreamHeaders, TracestateFollowsTheW3cGrammarAndLimits) {
  EXPECT_TRUE(valid_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
  EXPECT_TRUE(valid_tracestate("tenant1@vendor=a b, , x=1"));
  EXPECT_TRUE(valid_tracestate(""));
  EXPECT_FALSE(valid_tracestate("Rojo=1"));                            // keys are lower case
  EXPECT_FALSE(valid_tracestate("rojo"));                              // no value
  EXPECT_FALSE(valid_tracestate("rojo="));                             // empty value
  EXPECT_FALSE(valid_tracestate("rojo=a=b"));                          // '=' in a value
  EXPECT_FALSE(valid_tracestate("rojo=a\tb"));                         // control character
  EXPECT_FALSE(valid_tracestate("t@" + std::string(15, 'v') + "=1"));  // system-id over 14
  std::string many;
  for (int i = 0; i < 33; ++i) many += (i ? ",k" : "k") + std::to_string(i) + "=v";
  EXPECT_FALSE(valid_tracestate(many));
  EXPECT_TRUE(valid_tracestate(many.substr(0, many.rfind(','))));  // 32 members
  EXPECT_FALSE(valid_tracestate("k=" + std::string(600, 'v')));
}

TEST(UpstreamHeaders, AnInvalidTraceparentIsDroppedWithItsTracestate) {
  proto::HttpHeaders h = client_headers();
  h.set("traceparent", "00-" + std::string(4997, 'a'));  // 5,000 bytes
  build_upstream_headers(policy::Upstream{},
                         upstream_header_options(policy::Policy{}, nullptr, "10.0.0.7:5", "i"), h);
  EXPECT_FALSE(h.has("traceparent"));
  EXPECT_FALSE(h.has("tracestate"));
  EXPECT_EQ(h.get("X-Other").value_or(""), "kept");

  h = client_headers();  // a valid traceparent with an invalid tracestate keeps the former
  h.set("tracestate", "Not Valid");
  build_upstream_headers(policy::Upstream{},
                         upstream_header_options(policy::Policy{}, nullptr, "10.0.0.7:5", "i"), h);
  EXPECT_EQ(h.get("traceparent").value_or(""),
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  EXPECT_FALSE(h.has("tracestate"));

  h = client_headers();  // two traceparents: which is meant is unknown
  h.add("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203332-01");
  build_upstream_headers(policy::Upstream{},
                         upstream_header_options(policy::Policy{}, nullptr, "10.0.0.7:5", "i"), h);
  EXPECT_FALSE(h.has("traceparent"));
  EXPECT_FALSE(h.has("tracestate"));

  h = client_headers();  // valid ones pass unchanged
  build_upstream_headers(policy::Upstream{},
                         upstream_header_options(policy::Policy{}, nullptr, "10.0.0.7:5", "i"), h);
  EXPECT_EQ(h.get("tracestate").value_or(""), "vendor=x");
}

}  // namespace
}  // namespace cutline::gateway
