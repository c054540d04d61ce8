// fill_upstream_target: upstreams[i] (scheme, protocol, tls) -> the ClientRequest the gateway
// sends, for every combination a policy can state; client TLS contexts built at load (a bad file
// named with its YAML line); the cache keeping an older policy's contexts while a stream holds
// that snapshot.

#include "cutline/gateway/upstream_target.h"

#include <gtest/gtest.h>

#include "../proto/tls_test_util.h"
#include "cutline/policy/loader.h"

namespace cutline::gateway {
namespace {

using proto::ClientProtocol;
using proto::testing::CertFiles;
using proto::testing::make_self_signed;
using proto::testing::TempDir;

std::shared_ptr<const policy::Policy> load(const std::string& upstreams) {
  const std::string yaml = "listen:\n  - address: 127.0.0.1:0\nupstreams:\n" + upstreams +
                           "policies:\n  - name: default\n    match: {}\n";
  policy::LoadResult r = policy::load_policy_text(yaml, "test.yaml");
  EXPECT_TRUE(r.ok()) << r.error_text();
  return r.policy;
}

struct Target {
  Status status;
  proto::ClientRequest req;
};

Target target(const std::shared_ptr<const policy::Policy>& p, const UpstreamTlsCache& cache,
              size_t i = 0) {
  Target t;
  t.status = fill_upstream_target(p->upstreams[i], cache, t.req);
  return t;
}

TEST(UpstreamTarget, CleartextSchemesAndProtocols) {
  auto p = load(
      "  - {name: a, url: \"http://10.0.0.1:8081/v1\"}\n"
      "  - {name: b, url: \"http://10.0.0.2\", protocol: h2}\n"
      "  - {name: c, url: \"h2c://[::1]:9000\"}\n"
      "  - {name: d, url: \"http://10.0.0.4:1\", protocol: http1}\n");
  UpstreamTlsCache cache;
  auto contexts = UpstreamTlsContexts::build(*p);
  ASSERT_TRUE(contexts.ok());
  cache.add(p, contexts.value());
  Target a = target(p, cache, 0), b = target(p, cache, 1), c = target(p, cache, 2),
         d = target(p, cache, 3);
  for (const Target* t : {&a, &b, &c, &d}) {
    EXPECT_TRUE(t->status.ok());
    EXPECT_EQ(t->req.tls, nullptr);
  }
  EXPECT_EQ(a.req.host, "10.0.0.1");
  EXPECT_EQ(a.req.port, 8081);
  EXPECT_EQ(a.req.protocol, ClientProtocol::kHttp1);
  EXPECT_EQ(b.req.port, 80);
  EXPECT_EQ(b.req.protocol, ClientProtocol::kHttp2);  // h2c by prior knowledge
  EXPECT_EQ(c.req.host, "::1");
  EXPECT_EQ(c.req.port, 9000);
  EXPECT_EQ(c.req.protocol, ClientProtocol::kHttp2);
  EXPECT_EQ(d.req.protocol, ClientProtocol::kHttp1);
}

TEST(UpstreamTarget, HttpsGetsItsContextServerNameAndProtocol) {
  TempDir dir;
  const CertFiles ca = make_self_signed(dir, "ca");
  auto p = load("  - name: a\n    url: https://10.0.0.1\n    tls: {ca_file: " + ca.cert +
                ", server_name: llm.internal}\n"
                "  - name: b\n    url: https://10.0.0.2:8443\n    protocol: h2\n"
                "    tls: {ca_file: " +
                ca.cert +
                "}\n"
                "  - name: c\n    url: https://10.0.0.3\n    protocol: http1\n"
                "    tls: {ca_file: " +
                ca.cert + "}\n");
  UpstreamTlsCache cache;
  auto contexts = UpstreamTlsContexts::build(*p);
  ASSERT_TRUE(contexts.ok()) << contexts.error().message;
  cache.add(p, contexts.value());
  Target a = target(p, cache, 0), b = target(p, cache, 1), c = target(p, cache, 2);
  ASSERT_TRUE(a.status.ok());
  EXPECT_NE(a.req.tls, nullptr);
  EXPECT_EQ(a.req.port, 443);
  EXPECT_EQ(a.req.tls_server_name, "llm.internal");
  EXPECT_EQ(a.req.protocol, ClientProtocol::kAuto);  // ALPN decides
  EXPECT_EQ(b.req.port, 8443);
  EXPECT_EQ(b.req.tls_server_name, "");  // the URL's host
  EXPECT_EQ(b.req.protocol, ClientProtocol::kHttp2);
  EXPECT_EQ(c.req.protocol, ClientProtocol::kHttp1);
  EXPECT_NE(a.req.tls, b.req.tls);  // one context per upstream
}

TEST(UpstreamTarget, UnreadableFilesAreNamedWithTheYamlLine) {
  TempDir dir;
  const CertFiles client = make_self_signed(dir, "client");
  auto p = load(
      "  - name: ok\n    url: http://10.0.0.1\n"
      "  - name: bad\n    url: https://10.0.0.2\n    tls: {ca_file: " +
      dir.file("missing.pem") + "}\n");
  auto built = UpstreamTlsContexts::build(*p);
  ASSERT_FALSE(built.ok());
  EXPECT_NE(built.error().message.find("test.yaml:6: upstreams[1].tls"), std::string::npos)
      << built.error().message;
  EXPECT_NE(built.error().message.find("missing.pem"), std::string::npos);

  const CertFiles other = make_self_signed(dir, "other");
  auto mismatched = load("  - name: m\n    url: https://10.0.0.2\n    tls: {cert: " + client.cert +
                         ", key: " + other.key + "}\n");
  auto refused = UpstreamTlsContexts::build(*mismatched);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("does not match"), std::string::npos)
      << refused.error().message;
}

TEST(UpstreamTarget, AnHttpsUpstreamWithoutAContextIsAnErrorNotCleartext) {
  auto p = load("  - name: a\n    url: https://10.0.0.1\n    tls: {verify: false}\n");
  UpstreamTlsCache empty;
  Target t = target(p, empty);
  EXPECT_FALSE(t.status.ok());
  EXPECT_EQ(t.req.tls, nullptr);
}

TEST(UpstreamTarget, CacheKeepsAnOlderSnapshotsContextsWhileItIsHeld) {
  TempDir dir;
  const CertFiles ca = make_self_signed(dir, "ca");
  const std::string upstreams =
      "  - name: a\n    url: https://10.0.0.1\n    tls: {ca_file: " + ca.cert + "}\n";
  UpstreamTlsCache cache;
  auto old_policy = load(upstreams);
  cache.add(old_policy, UpstreamTlsContexts::build(*old_policy).value());
  Target before = target(old_policy, cache);
  // A reload: the new policy's contexts are added; a stream still holds the old snapshot.
  auto new_policy = load(upstreams);
  cache.add(new_policy, UpstreamTlsContexts::build(*new_policy).value());
  Target old_stream = target(old_policy, cache);
  Target new_stream = target(new_policy, cache);
  ASSERT_TRUE(old_stream.status.ok());
  ASSERT_TRUE(new_stream.status.ok());
  EXPECT_EQ(old_stream.req.tls, before.req.tls);
  EXPECT_NE(new_stream.req.tls, before.req.tls);
}

}  // namespace
}  // namespace cutline::gateway
