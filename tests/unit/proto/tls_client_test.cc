// HttpClient over TLS (ClientRequest::tls): verification against a CA file, the name checked
// (SNI / tls_server_name), pooling per context, and a client certificate for mTLS. The server is
// HttpServer over TLS (tls_server_test.cc covers it from a plain OpenSSL client).

#include <gtest/gtest.h>

#include "cutline/proto/http/http_client.h"
#include "cutline/proto/http/http_server.h"
#include "cutline/proto/tls/tls_context.h"
#include "tls_test_util.h"

namespace cutline::proto {
namespace {

using testing::ClientThread;
using testing::Notes;

struct Outcome {
  Notes notes;
  int status = 0;
  std::string body;
  std::optional<ClientError> error;
  bool done = false;

  ClientCallbacks callbacks() {
    ClientCallbacks cb;
    cb.on_head = [this](int st, HttpHeaders&) { notes.update([&] { status = st; }); };
    cb.on_body = [this](std::string_view d) { notes.update([&] { body.append(d); }); };
    cb.on_complete = [this](HttpHeaders&) { notes.update([&] { done = true; }); };
    cb.on_error = [this](const ClientError& e) {
      notes.update([&] {
        error = e;
        done = true;
      });
    };
    return cb;
  }
};

class TlsClientTest : public ::testing::Test {
 protected:
  void start_server(const std::string& client_ca_file = "") {
    testing::ignore_sigpipe();
    server_files_ = testing::make_self_signed(dir_, "server");
    TlsServerConfig config{
        server_files_.cert, server_files_.key, TlsMinVersion::kTls12, {"http/1.1"}, client_ca_file};
    auto ctx = TlsContext::server(config);
    ASSERT_TRUE(ctx.ok()) << ctx.error().message;
    ServerOptions options;
    options.tls = ctx.value();
    server_ = std::make_unique<HttpServer>(options, [](std::shared_ptr<ServerStream> s) {
      s->send_simple(200, {}, "secure " + std::string(s->request().path()));
    });
    ASSERT_TRUE(server_->start().ok());
  }

  std::shared_ptr<const TlsContext> client_context(TlsClientConfig config) {
    auto ctx = TlsContext::client(config);
    EXPECT_TRUE(ctx.ok()) << ctx.error().message;
    return ctx.ok() ? ctx.value() : nullptr;
  }

  // Runs one GET through `client` and waits for its outcome.
  void get(ClientThread& client, std::shared_ptr<const TlsContext> tls, Outcome& out,
           const std::string& host = "127.0.0.1", const std::string& server_name = "") {
    ClientHandle handle;
    client.run([&] {
      ClientRequest req;
      req.host = host;
      req.port = server_->port();
      req.target = "/x";
      req.tls = std::move(tls);
      req.tls_server_name = server_name;
      handle = client.client().start(std::move(req), out.callbacks());
    });
    EXPECT_TRUE(out.notes.wait_for([&] { return out.done; }));
    client.run([&] { handle = ClientHandle(); });
  }

  testing::TempDir dir_;
  testing::CertFiles server_files_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(TlsClientTest, VerifiedHttpsRequestsShareOnePooledConnection) {
  start_server();
  TlsClientConfig config;
  config.ca_file = server_files_.cert;
  auto tls = client_context(config);
  ClientThread client;
  for (int i = 0; i < 2; ++i) {
    Outcome out;
    get(client, tls, out);
    EXPECT_FALSE(out.error) << out.error->message;
    EXPECT_EQ(out.status, 200);
    EXPECT_EQ(out.body, "secure /x");
  }
  uint64_t opened = 0;
  client.run([&] { opened = client.client().connections_opened(); });
  EXPECT_EQ(opened, 1u);
}

TEST_F(TlsClientTest, UntrustedCertificateIsRefusedWithTheReason) {
  start_server();
  const auto other = testing::make_self_signed(dir_, "other");
  TlsClientConfig config;
  config.ca_file = other.cert;
  ClientThread client;
  Outcome out;
  get(client, client_context(config), out);
  ASSERT_TRUE(out.error);
  EXPECT_EQ(out.error->kind, ClientErrorKind::kConnectFailed);
  EXPECT_NE(out.error->message.find("certificate verify failed"), std::string::npos)
      << out.error->message;
  EXPECT_EQ(out.status, 0);
}

TEST_F(TlsClientTest, TheCertificateMustMatchTheServerName) {
  start_server();
  TlsClientConfig config;
  config.ca_file = server_files_.cert;
  auto tls = client_context(config);
  ClientThread client;
  Outcome wrong;  // the certificate is for localhost / 127.0.0.1
  get(client, tls, wrong, "127.0.0.1", "api.example.com");
  ASSERT_TRUE(wrong.error);
  EXPECT_NE(wrong.error->message.find("certificate verify failed"), std::string::npos)
      << wrong.error->message;
  Outcome right;
  get(client, tls, right, "127.0.0.1", "localhost");
  EXPECT_FALSE(right.error) << right.error->message;
  EXPECT_EQ(right.status, 200);
}

TEST_F(TlsClientTest, MutualTlsNeedsTheClientCertificate) {
  const auto client_files = testing::make_self_signed(dir_, "client", "cutline-gateway");
  start_server(client_files.cert);
  ClientThread client;
  TlsClientConfig anonymous;
  anonymous.ca_file = server_files_.cert;
  Outcome refused;
  get(client, client_context(anonymous), refused);
  EXPECT_TRUE(refused.error);
  EXPECT_NE(refused.status, 200);

  TlsClientConfig with_cert = anonymous;
  with_cert.cert_file = client_files.cert;
  with_cert.key_file = client_files.key;
  Outcome served;
  get(client, client_context(with_cert), served);
  EXPECT_FALSE(served.error) << served.error->message;
  EXPECT_EQ(served.body, "secure /x");
}

}  // namespace
}  // namespace cutline::proto
