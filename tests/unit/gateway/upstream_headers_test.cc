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

}  // namespace
}  // namespace cutline::gateway
