// The gateway's TLS client listener (listen[].tls): the context built from the policy, and an
// in-process gateway served over HTTPS to curl (the way a user's client reaches it), relaying a
// streamed chat completion from an in-process upstream and labeling it as on cleartext.

#include "cutline/gateway/listener_tls.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <cstdio>
#include <fstream>

#include "../proto/tls_test_util.h"
#include "cutline/gateway/gateway.h"
#include "cutline/proto/http/http_server.h"

namespace cutline::gateway {
namespace {

using proto::testing::CertFiles;
using proto::testing::make_self_signed;
using proto::testing::TempDir;
using proto::testing::TlsClient;

policy::ListenerTls listener_tls(const CertFiles& files) {
  policy::ListenerTls tls;
  tls.cert_file = files.cert;
  tls.key_file = files.key;
  tls.ref.path = "listen[0].tls";
  return tls;
}

TEST(ListenerTlsTest, BuildsAServerContextWithTheConfiguredFloor) {
  TempDir dir;
  auto tls = listener_tls(make_self_signed(dir, "gw"));
  tls.min_version = policy::TlsVersion::kTls13;
  auto ctx = listener_tls_context(tls);
  ASSERT_TRUE(ctx.ok()) << ctx.error().message;
  EXPECT_EQ(SSL_CTX_get_min_proto_version(ctx.value()->native()), TLS1_3_VERSION);
}

TEST(ListenerTlsTest, MismatchedKeyIsRefusedNamingTheYamlPathAndFiles) {
  TempDir dir;
  const auto a = make_self_signed(dir, "a");
  const auto b = make_self_signed(dir, "b");
  auto tls = listener_tls(a);
  tls.key_file = b.key;
  auto ctx = listener_tls_context(tls);
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.error().message.rfind("listen[0].tls: ", 0), 0u) << ctx.error().message;
  EXPECT_NE(ctx.error().message.find("does not match"), std::string::npos);
  EXPECT_NE(ctx.error().message.find(b.key), std::string::npos);
}

// An upstream that streams two content chunks, a finish_reason and usage, like an OpenAI server.
std::unique_ptr<proto::HttpServer> start_sse_upstream() {
  auto server = std::make_unique<proto::HttpServer>(
      proto::ServerOptions{}, [](std::shared_ptr<proto::ServerStream> s) {
        const std::string head =
            R"(data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"fake",)";
        std::string body;
        body += head + R"("choices":[{"index":0,"delta":{"content":"hel"},"finish_reason":null}]})"
                       "\n\n";
        body += head + R"("choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]})"
                       "\n\n";
        body += head + R"("choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})"
                       "\n\n";
        body +=
            head +
            R"("choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}})"
            "\n\n";
        body += "data: [DONE]\n\n";
        s->send_simple(200, proto::HttpHeaders{{"Content-Type", "text/event-stream"}}, body);
      });
  if (!server->start().ok()) return nullptr;
  return server;
}

std::string run(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

class GatewayTlsTest : public ::testing::Test {
 protected:
  // Writes the policy with a TLS listener (cert/key as given) in front of the SSE upstream.
  Result<std::unique_ptr<Gateway>> make_gateway(const CertFiles& files) {
    const std::string config = dir_.file("cutline.yaml");
    std::ofstream(config) << "listen:\n  - address: 127.0.0.1:0\n    tls:\n      cert: "
                          << files.cert << "\n      key: " << files.key
                          << "\n      min_version: \"1.2\"\n"
                             "access_log: off\n"
                             "upstreams:\n  - name: fake\n    url: http://127.0.0.1:"
                          << upstream_->port()
                          << "\n    models: [\"fake\"]\n"
                             "policies:\n  - name: default\n    match: {}\n";
    GatewayOptions options;
    options.config_path = config;
    options.port_override = 0;
    options.admin_port_override = 0;
    options.workers = 1;
    return Gateway::create(options);
  }

  void SetUp() override {
    proto::testing::ignore_sigpipe();
    upstream_ = start_sse_upstream();
    ASSERT_NE(upstream_, nullptr);
  }

  TempDir dir_;
  std::unique_ptr<proto::HttpServer> upstream_;
};

TEST_F(GatewayTlsTest, CurlOverHttpsGetsTheStreamLabeledInBodyAndTrailer) {
  const auto files = make_self_signed(dir_, "gw");
  auto gw = make_gateway(files);
  ASSERT_TRUE(gw.ok()) << gw.error().message;
  ASSERT_TRUE(gw.value()->start().ok());
  const std::string url =
      "https://127.0.0.1:" + std::to_string(gw.value()->port()) + "/v1/chat/completions";
  // --raw keeps the chunked framing, so the cutline-stop trailer is visible after the last chunk.
  const std::string out = run("curl -sS --raw --http1.1 --cacert " + files.cert +
                              " -H 'Content-Type: application/json' " +
                              "-d "
                              "'{\"model\":\"fake\",\"stream\":true,\"messages\":[{\"role\":"
                              "\"user\",\"content\":\"hi\"}]}' " +
                              url + " 2>&1");
  EXPECT_NE(out.find("\"content\":\"hel\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"cutline\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"cause\":\"eos\""), std::string::npos) << out;
  EXPECT_NE(out.find("data: [DONE]"), std::string::npos) << out;
  EXPECT_NE(out.find("cutline-stop:"), std::string::npos) << out;
  gw.value()->stop();
}

TEST_F(GatewayTlsTest, OldProtocolsAndUntrustingClientsAreRefused) {
  const auto files = make_self_signed(dir_, "gw");
  auto gw = make_gateway(files);
  ASSERT_TRUE(gw.ok()) << gw.error().message;
  ASSERT_TRUE(gw.value()->start().ok());
  const uint16_t port = gw.value()->port();
  for (int version : {TLS1_VERSION, TLS1_1_VERSION}) {
    TlsClient::Options o;
    o.ca_file = files.cert;
    o.min_version = version;
    o.max_version = version;
    EXPECT_FALSE(TlsClient(port, o).connected()) << "version " << version;
  }
  // curl trusting another CA refuses the gateway's certificate.
  const auto other = make_self_signed(dir_, "other");
  const std::string refused = run("curl -sS -o /dev/null -w '%{http_code}' --cacert " + other.cert +
                                  " https://127.0.0.1:" + std::to_string(port) + "/v1/models 2>&1");
  EXPECT_NE(refused.find("SSL certificate problem"), std::string::npos) << refused;
  // The right CA, TLS 1.2 at most: served.
  TlsClient::Options ok;
  ok.ca_file = files.cert;
  ok.max_version = TLS1_2_VERSION;
  EXPECT_TRUE(TlsClient(port, ok).connected());
  gw.value()->stop();
}

TEST_F(GatewayTlsTest, MismatchedKeyFailsTheStartWithAClearError) {
  const auto a = make_self_signed(dir_, "a");
  const auto b = make_self_signed(dir_, "b");
  auto gw = make_gateway(CertFiles{a.cert, b.key});
  ASSERT_TRUE(gw.ok()) << gw.error().message;
  const Status started = gw.value()->start();
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.error().message.find("does not match"), std::string::npos)
      << started.error().message;
  EXPECT_NE(started.error().message.find("listen[0].tls"), std::string::npos)
      << started.error().message;
  gw.value()->stop();
}

}  // namespace
}  // namespace cutline::gateway
