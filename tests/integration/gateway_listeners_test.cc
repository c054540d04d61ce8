// Every listen[] entry is served: one gateway with a cleartext and a TLS listener answers on both
// (before, only listen[0] was opened and the rest of the list was silently ignored).

#include <gtest/gtest.h>

#include <vector>

#include "../unit/proto/tls_test_util.h"
#include "cutline/proto/http/http_client.h"
#include "cutline/proto/http/http_fetch.h"
#include "cutline/proto/tls/tls_context.h"
#include "gateway_harness.h"

namespace cutline::test {
namespace {

// The "ports" list of the gateway's ready file.
std::vector<uint16_t> ready_ports(const GatewayEnv& env) {
  const std::string ready = read_file(env.dir + "/ready.json");
  std::vector<uint16_t> ports;
  size_t at = ready.find("\"ports\":[");
  if (at == std::string::npos) return ports;
  at += 9;
  while (at < ready.size() && ready[at] != ']') {
    ports.push_back(static_cast<uint16_t>(std::atoi(ready.c_str() + at)));
    at = ready.find_first_of(",]", at);
    if (at != std::string::npos && ready[at] == ',') ++at;
  }
  return ports;
}

TEST(GatewayListeners, ACleartextAndATlsListenerBothServe) {
  proto::testing::TempDir certs_dir;
  const auto certs = proto::testing::make_self_signed(certs_dir, "gw");
  GatewayEnv env;
  ASSERT_TRUE(env.start([&](uint16_t fake_port, const std::string& log) {
    return "listen:\n  - address: 127.0.0.1:0\n  - address: 127.0.0.1:0\n    tls: {cert: " +
           certs.cert + ", key: " + certs.key +
           "}\nadmin:\n  address: 127.0.0.1:0\naccess_log: " + log +
           "\nupstreams:\n  - name: fake\n    url: http://127.0.0.1:" + std::to_string(fake_port) +
           "\n    models: [\"fake\"]\npolicies:\n  - name: default\n    match: {}\n";
  })) << env.error;
  const std::vector<uint16_t> ports = ready_ports(env);
  ASSERT_EQ(ports.size(), 2u) << read_file(env.dir + "/ready.json");
  EXPECT_EQ(ports[0], env.port);
  EXPECT_NE(ports[1], ports[0]);

  const std::string body = R"({"model":"fake","messages":[{"role":"user","content":"hi"}]})";
  proto::HttpHeaders h{{"Content-Type", "application/json"}, {"X-Fake-Script", "tokens=2"}};
  auto plain = proto::http_fetch(env.url("/v1/chat/completions"), "POST", h, body, 5000);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(plain->status, 200) << plain->body;
  EXPECT_NE(plain->body.find("\"cutline\""), std::string::npos) << plain->body;

  proto::TlsClientConfig tc;
  tc.ca_file = certs.cert;
  auto ctx = proto::TlsContext::client(tc);
  ASSERT_TRUE(ctx.ok()) << ctx.error().message;
  proto::ClientRequest req;
  req.method = "POST";
  req.host = "127.0.0.1";
  req.port = ports[1];
  req.target = "/v1/chat/completions";
  req.headers = h;
  req.headers.set("Content-Type", "application/json");
  req.body = body;
  req.tls = std::move(ctx).value();
  req.tls_server_name = "localhost";
  auto secure = proto::http_fetch(req, 5000);
  ASSERT_TRUE(secure.ok()) << secure.error().message;
  EXPECT_EQ(secure->status, 200) << secure->body;
  EXPECT_NE(secure->body.find("\"cutline\""), std::string::npos) << secure->body;

  // The TLS port speaks only TLS.
  auto cleartext_to_tls =
      proto::http_fetch("http://127.0.0.1:" + std::to_string(ports[1]) + "/v1/chat/completions",
                        "POST", h, body, 3000);
  EXPECT_TRUE(!cleartext_to_tls.ok() || cleartext_to_tls->status != 200);
  env.stop();
}

}  // namespace
}  // namespace cutline::test
