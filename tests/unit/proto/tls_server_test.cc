// HttpServer over TLS (ServerOptions::tls): real handshakes from an OpenSSL client on loopback.

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include "cutline/proto/http/http_server.h"
#include "cutline/proto/tls/tls_context.h"
#include "tls_test_util.h"

namespace cutline::proto {
namespace {

using testing::TlsClient;

class TlsServerTest : public ::testing::Test {
 protected:
  void start(TlsMinVersion min_version = TlsMinVersion::kTls12) {
    testing::ignore_sigpipe();
    files_ = testing::make_self_signed(dir_, "server");
    auto ctx = TlsContext::server({files_.cert, files_.key, min_version, {"http/1.1"}, {}});
    ASSERT_TRUE(ctx.ok()) << ctx.error().message;
    ServerOptions options;
    options.tls = ctx.value();
    server_ = std::make_unique<HttpServer>(options, [](std::shared_ptr<ServerStream> s) {
      s->send_simple(200, HttpHeaders{{"Content-Type", "text/plain"}},
                     "hello over tls " + std::string(s->request().path()));
    });
    ASSERT_TRUE(server_->start().ok());
  }

  TlsClient::Options verifying() const {
    TlsClient::Options o;
    o.ca_file = files_.cert;
    return o;
  }

  static std::string get(TlsClient& client, std::string_view path) {
    client.send("GET " + std::string(path) +
                " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    return client.read_all();
  }

  testing::TempDir dir_;
  testing::CertFiles files_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(TlsServerTest, ServesHttp11OverTls13WithAVerifiedCertificateAndAlpn) {
  start();
  auto options = verifying();
  options.alpn = {"h2", "http/1.1"};  // h2 is not offered by this listener: http/1.1 is chosen
  TlsClient client(server_->port(), options);
  ASSERT_TRUE(client.connected());
  EXPECT_EQ(client.version(), TLS1_3_VERSION);
  EXPECT_EQ(client.alpn(), "http/1.1");
  const std::string response = get(client, "/a");
  EXPECT_EQ(response.rfind("HTTP/1.1 200", 0), 0u) << response;
  EXPECT_NE(response.find("hello over tls /a"), std::string::npos);
}

TEST_F(TlsServerTest, Tls12IsAcceptedWithoutAlpn) {
  start();
  auto options = verifying();
  options.min_version = TLS1_2_VERSION;
  options.max_version = TLS1_2_VERSION;
  TlsClient client(server_->port(), options);
  ASSERT_TRUE(client.connected());
  EXPECT_EQ(client.version(), TLS1_2_VERSION);
  EXPECT_EQ(client.alpn(), "");
  EXPECT_NE(get(client, "/b").find("hello over tls /b"), std::string::npos);
}

TEST_F(TlsServerTest, Tls10And11HandshakesAreRefusedAndTheServerKeepsServing) {
  start();
  for (int version : {TLS1_VERSION, TLS1_1_VERSION}) {
    auto options = verifying();
    options.min_version = version;
    options.max_version = version;
    TlsClient old(server_->port(), options);
    EXPECT_FALSE(old.connected()) << "version " << version;
  }
  TlsClient modern(server_->port(), verifying());
  ASSERT_TRUE(modern.connected());
  EXPECT_NE(get(modern, "/c").find("hello over tls /c"), std::string::npos);
}

TEST_F(TlsServerTest, MinVersion13RefusesTls12) {
  start(TlsMinVersion::kTls13);
  auto options = verifying();
  options.max_version = TLS1_2_VERSION;
  TlsClient old(server_->port(), options);
  EXPECT_FALSE(old.connected());
  TlsClient modern(server_->port(), verifying());
  EXPECT_TRUE(modern.connected());
}

TEST_F(TlsServerTest, ClientTrustingAnotherCaRefusesTheCertificate) {
  start();
  const auto other = testing::make_self_signed(dir_, "other");
  TlsClient::Options options;
  options.ca_file = other.cert;
  TlsClient client(server_->port(), options);
  EXPECT_FALSE(client.connected());
}

TEST_F(TlsServerTest, CleartextHttpOnATlsPortGetsNoHttpAnswer) {
  start();
  const int fd = testing::connect_raw(server_->port());
  ASSERT_GE(fd, 0);
  testing::send_all(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string reply = testing::recv_all(fd, 3000);
  close(fd);
  EXPECT_EQ(reply.find("HTTP/1.1 200"), std::string::npos);
  TlsClient modern(server_->port(), verifying());
  EXPECT_TRUE(modern.connected());
}

}  // namespace
}  // namespace cutline::proto
