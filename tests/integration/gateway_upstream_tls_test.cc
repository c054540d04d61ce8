// The real cutline-gateway calling an https:// upstream (cutline-fake-upstream --tls-cert): the
// certificate verified against upstreams[i].tls.ca_file, a wrong CA answered as a labeled
// upstream error (not a hang), a client certificate for mTLS, an unreadable CA file refused at
// start naming the file and the line, and certificates reloaded with the policy (a bad key
// refuses the reload and the old certificate keeps being served).

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>

#include "../unit/proto/tls_test_util.h"
#include "cutline/proto/http/http_server.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/tls/tls_context.h"
#include "gateway_harness.h"

namespace cutline::test {
namespace {

using proto::testing::CertFiles;
using proto::testing::make_self_signed;
using proto::testing::TempDir;

const std::string kChat =
    R"({"model":"fake","stream":true,"messages":[{"role":"user","content":"hi"}]})";

// A fake upstream (optionally over TLS) and a gateway whose policy the test writes.
struct TlsEnv {
  TempDir dir;
  Process fake;
  Process gateway;
  uint16_t fake_port = 0;
  uint16_t port = 0;
  std::string config_path = dir.file("cutline.yaml");
  std::string error;

  bool start_fake(const std::vector<std::string>& tls_args) {
    std::vector<std::string> argv = {CUTLINE_FAKE_UPSTREAM_BIN, "--port", "0"};
    argv.insert(argv.end(), tls_args.begin(), tls_args.end());
    fake.start(argv, dir.file("fake.out"), dir.file("fake.err"));
    if (!wait_for([&] {
          const std::string out = read_file(dir.file("fake.out"));
          return out.rfind("PORT ", 0) == 0 && out.find('\n') != std::string::npos;
        })) {
      error = "fake upstream did not start: " + read_file(dir.file("fake.err"));
      return false;
    }
    fake_port = static_cast<uint16_t>(std::atoi(read_file(dir.file("fake.out")).c_str() + 5));
    return true;
  }
  void write_policy(const std::string& yaml) { std::ofstream(config_path) << yaml; }
  // Starts the gateway; false (with its stderr in `error`) when it exits or never gets ready.
  bool start_gateway() {
    gateway.start(
        {CUTLINE_GATEWAY_BIN, "--config", config_path, "--ready-file", dir.file("ready.json")},
        dir.file("gateway.out"), dir.file("gateway.err"));
    if (!wait_for([&] { return !read_file(dir.file("ready.json")).empty(); }, 3000)) {
      error = read_file(dir.file("gateway.err"));
      return false;
    }
    const std::string ready = read_file(dir.file("ready.json"));
    port = static_cast<uint16_t>(std::atoi(ready.c_str() + ready.find(':') + 1));
    return true;
  }
  std::string upstream_url() const { return "https://127.0.0.1:" + std::to_string(fake_port); }
  proto::HttpResponse chat() const {
    auto r = proto::http_fetch("http://127.0.0.1:" + std::to_string(port) + "/v1/chat/completions",
                               "POST", {{"Content-Type", "application/json"}}, kChat, 10000);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r).value() : proto::HttpResponse{};
  }
};

// The chat request as raw HTTP/1.1 (for the TLS client), closing the connection after it.
std::string proto_chat_request() {
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
         "Content-Type: application/json\r\nContent-Length: " +
         std::to_string(kChat.size()) + "\r\n\r\n" + kChat;
}

std::string policy(const std::string& url, const std::string& tls_block,
                   const std::string& listen_tls = "") {
  return "listen:\n  - address: 127.0.0.1:0\n" + listen_tls +
         "upstreams:\n  - name: secure\n    url: " + url +
         "\n    models: [\"fake\"]\n    connect_timeout: 2s\n" + tls_block +
         "policies:\n  - name: default\n    match: {}\n";
}

std::string tls_block(const std::string& ca, const std::string& cert = "",
                      const std::string& key = "") {
  std::string b = "    tls:\n      ca_file: " + ca + "\n";
  if (!cert.empty()) b += "      cert: " + cert + "\n      key: " + key + "\n";
  return b;
}

TEST(GatewayUpstreamTls, HttpsUpstreamVerifiedWithCaFile) {
  TlsEnv env;
  const CertFiles server = make_self_signed(env.dir, "server");
  ASSERT_TRUE(env.start_fake({"--tls-cert", server.cert, "--tls-key", server.key})) << env.error;
  env.write_policy(policy(env.upstream_url(), tls_block(server.cert)));
  ASSERT_TRUE(env.start_gateway()) << env.error;
  const proto::HttpResponse r = env.chat();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("\"cause\":\"eos\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos) << r.body;
}

TEST(GatewayUpstreamTls, WrongCaIsALabeledUpstreamErrorNotAHang) {
  TlsEnv env;
  const CertFiles server = make_self_signed(env.dir, "server");
  const CertFiles other = make_self_signed(env.dir, "other");
  ASSERT_TRUE(env.start_fake({"--tls-cert", server.cert, "--tls-key", server.key})) << env.error;
  env.write_policy(policy(env.upstream_url(), tls_block(other.cert)));
  ASSERT_TRUE(env.start_gateway()) << env.error;
  const auto t0 = std::chrono::steady_clock::now();
  const proto::HttpResponse r = env.chat();
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(elapsed, std::chrono::seconds(3));
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_NE(r.body.find("\"cause\":\"upstream_error\""), std::string::npos) << r.body;
  // The client reads the kind of failure; the operator's access log (stdout here) says why.
  EXPECT_NE(r.body.find("cannot connect"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("certificate verify failed"), std::string::npos) << r.body;
  const std::string log = env.dir.file("gateway.out");
  EXPECT_TRUE(wait_for([&] {
    return read_file(log).find("certificate verify failed") != std::string::npos;
  })) << read_file(log);
}

TEST(GatewayUpstreamTls, MutualTlsSendsTheClientCertificate) {
  TlsEnv env;
  const CertFiles server = make_self_signed(env.dir, "server");
  const CertFiles client = make_self_signed(env.dir, "client", "gateway");
  ASSERT_TRUE(env.start_fake(
      {"--tls-cert", server.cert, "--tls-key", server.key, "--tls-client-ca", client.cert}))
      << env.error;
  env.write_policy(policy(env.upstream_url(), tls_block(server.cert, client.cert, client.key)));
  ASSERT_TRUE(env.start_gateway()) << env.error;
  EXPECT_EQ(env.chat().status, 200);

  // Without the client certificate the upstream refuses the handshake: a labeled error.
  TlsEnv anonymous;
  ASSERT_TRUE(anonymous.start_fake(
      {"--tls-cert", server.cert, "--tls-key", server.key, "--tls-client-ca", client.cert}))
      << anonymous.error;
  anonymous.write_policy(policy(anonymous.upstream_url(), tls_block(server.cert)));
  ASSERT_TRUE(anonymous.start_gateway()) << anonymous.error;
  const proto::HttpResponse r = anonymous.chat();
  EXPECT_EQ(r.status, 502) << r.body;
  EXPECT_NE(r.body.find("\"cause\":\"upstream_"), std::string::npos) << r.body;
}

TEST(GatewayUpstreamTls, UnreadableCaFileStopsTheStartNamingFileAndLine) {
  TlsEnv env;
  const std::string missing = env.dir.file("no-such-ca.pem");
  env.write_policy(policy("https://127.0.0.1:1", tls_block(missing)));
  env.gateway.start({CUTLINE_GATEWAY_BIN, "--config", env.config_path, "--ready-file",
                     env.dir.file("ready.json")},
                    env.dir.file("gateway.out"), env.dir.file("gateway.err"));
  EXPECT_TRUE(wait_for([&] {
    return read_file(env.dir.file("gateway.err")).find("no-such-ca.pem") != std::string::npos;
  }));
  EXPECT_TRUE(read_file(env.dir.file("ready.json")).empty());
  const std::string err = read_file(env.dir.file("gateway.err"));
  EXPECT_NE(err.find("no-such-ca.pem"), std::string::npos) << err;
  // The upstream item is on line 4 of the policy written above.
  EXPECT_NE(err.find("cutline.yaml:4: upstreams[0].tls"), std::string::npos) << err;
}

// Does a TLS handshake with the gateway's listener verify against `ca` (the certificate served)?
bool listener_serves(uint16_t port, const std::string& ca) {
  proto::testing::TlsClient::Options options;
  options.ca_file = ca;
  options.min_version = TLS1_2_VERSION;
  proto::testing::TlsClient client(port, options);
  return client.connected();
}

TEST(GatewayUpstreamTls, CertificatesReloadWithThePolicyAndABadKeyKeepsTheOld) {
  proto::testing::ignore_sigpipe();
  TlsEnv env;
  const CertFiles first = make_self_signed(env.dir, "first");
  const CertFiles second = make_self_signed(env.dir, "second");
  const CertFiles upstream = make_self_signed(env.dir, "upstream");
  ASSERT_TRUE(env.start_fake({"--tls-cert", upstream.cert, "--tls-key", upstream.key}))
      << env.error;
  auto listen_tls = [](const CertFiles& files, const std::string& key) {
    return "    tls: {cert: " + files.cert + ", key: " + key + "}\n";
  };
  auto write = [&](const std::string& listener, const std::string& upstream_ca) {
    env.write_policy("admin:\n  address: 127.0.0.1:0\n" +
                     policy(env.upstream_url(), tls_block(upstream_ca), listener));
  };
  write(listen_tls(first, first.key), upstream.cert);
  ASSERT_TRUE(env.start_gateway()) << env.error;
  EXPECT_TRUE(listener_serves(env.port, first.cert));
  EXPECT_FALSE(listener_serves(env.port, second.cert));

  // A new certificate: new handshakes see it.
  write(listen_tls(second, second.key), upstream.cert);
  env.gateway.signal(SIGHUP);
  EXPECT_TRUE(wait_for([&] { return listener_serves(env.port, second.cert); }));
  EXPECT_FALSE(listener_serves(env.port, first.cert));

  // A key that does not match its certificate: refused, naming the files; the old one stays.
  write(listen_tls(first, second.key), upstream.cert);
  env.gateway.signal(SIGHUP);
  EXPECT_TRUE(wait_for([&] {
    return read_file(env.dir.file("gateway.err")).find("does not match") != std::string::npos;
  }));
  const std::string err = read_file(env.dir.file("gateway.err"));
  EXPECT_NE(err.find("reload of"), std::string::npos) << err;
  EXPECT_NE(err.find(second.key), std::string::npos) << err;
  EXPECT_TRUE(listener_serves(env.port, second.cert));

  // An unreadable upstream CA file is refused the same way; requests keep flowing with the old.
  write(listen_tls(second, second.key), env.dir.file("missing-ca.pem"));
  env.gateway.signal(SIGHUP);
  EXPECT_TRUE(wait_for([&] {
    return read_file(env.dir.file("gateway.err")).find("missing-ca.pem") != std::string::npos;
  }));
  proto::testing::TlsClient::Options options;
  options.ca_file = second.cert;
  proto::testing::TlsClient client(env.port, options);
  ASSERT_TRUE(client.connected());
  client.send(proto_chat_request());
  const std::string answer = client.read_all();
  EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  EXPECT_NE(answer.find("data: [DONE]"), std::string::npos) << answer;
}

// ---- h2c upstreams ------------------------------------------------------------------------------

// An in-process HTTP/2 upstream (proto's HttpServer, h2c by prior knowledge): holds requests
// until `hold` of them are open at once, then streams each a short completion; a request whose
// body mentions "reset-me" gets its head and one chunk, then RST_STREAM.
class H2Upstream {
 public:
  explicit H2Upstream(size_t hold, std::shared_ptr<const proto::TlsContext> tls = nullptr)
      : hold_(hold) {
    proto::ServerOptions options;
    options.workers = 1;
    options.tls = std::move(tls);  // ALPN h2 and http/1.1
    server_ = std::make_unique<proto::HttpServer>(
        options, [this](std::shared_ptr<proto::ServerStream> s) { handle(std::move(s)); });
  }
  ~H2Upstream() { server_->stop(); }
  bool start() { return server_->start().ok(); }
  uint16_t port() const { return server_->port(); }
  size_t max_connections() {
    std::lock_guard lock(mu_);
    return max_connections_;
  }
  std::vector<std::string> protocols() {
    std::lock_guard lock(mu_);
    return protocols_;
  }

 private:
  static std::string chunk(const std::string& delta, const char* finish) {
    return std::string("data: {\"id\":\"h2\",\"object\":\"chat.completion.chunk\",\"created\":1,") +
           "\"model\":\"fake\",\"choices\":[{\"index\":0,\"delta\":" + delta +
           ",\"finish_reason\":" + finish + "}]}\n\n";
  }
  static void answer(const std::shared_ptr<proto::ServerStream>& s) {
    s->send_head(200, {{"Content-Type", "text/event-stream"}}, proto::BodyFraming::chunked());
    s->send_body(chunk("{\"content\":\"hello\"}", "null"));
    s->send_body(chunk("{}", "\"stop\"") + "data: [DONE]\n\n");
    s->finish();
  }
  void handle(std::shared_ptr<proto::ServerStream> s) {
    {
      std::lock_guard lock(mu_);
      protocols_.emplace_back(s->protocol());
      max_connections_ = std::max(max_connections_, server_->open_connections());
    }
    if (s->request().body.find("reset-me") != std::string::npos) {
      s->send_head(200, {{"Content-Type", "text/event-stream"}}, proto::BodyFraming::chunked());
      s->send_body(chunk("{\"content\":\"cut\"}", "null"));
      s->reset();
      return;
    }
    held_.push_back(std::move(s));  // this loop's thread only
    if (held_.size() < hold_) return;
    for (const auto& h : held_) answer(h);
    held_.clear();
  }

  size_t hold_;
  std::unique_ptr<proto::HttpServer> server_;
  std::vector<std::shared_ptr<proto::ServerStream>> held_;
  std::mutex mu_;
  size_t max_connections_ = 0;
  std::vector<std::string> protocols_;
};

TEST(GatewayUpstreamH2c, ConcurrentStreamsShareFewConnections) {
  constexpr size_t kStreams = 20;
  H2Upstream upstream(kStreams);
  ASSERT_TRUE(upstream.start());
  TlsEnv env;
  env.write_policy(policy("h2c://127.0.0.1:" + std::to_string(upstream.port()), ""));
  ASSERT_TRUE(env.start_gateway()) << env.error;
  // All 20 are open at once (the upstream answers none before the 20th arrives).
  std::vector<proto::HttpResponse> responses(kStreams);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] { responses[i] = env.chat(); });
  }
  for (auto& t : clients) t.join();
  for (const auto& r : responses) {
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("hello"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("\"cause\":\"eos\""), std::string::npos) << r.body;
  }
  // One upstream connection per gateway worker at most (the gateway runs 2), all HTTP/2.
  EXPECT_LE(upstream.max_connections(), 2u);
  for (const auto& p : upstream.protocols()) EXPECT_EQ(p, "h2");
}

TEST(GatewayUpstreamH2c, UpstreamStreamResetIsUpstreamDisconnect) {
  H2Upstream upstream(1);
  ASSERT_TRUE(upstream.start());
  TlsEnv env;
  env.write_policy(policy("h2c://127.0.0.1:" + std::to_string(upstream.port()), ""));
  ASSERT_TRUE(env.start_gateway()) << env.error;
  auto r = proto::http_fetch(
      "http://127.0.0.1:" + std::to_string(env.port) + "/v1/chat/completions", "POST",
      {{"Content-Type", "application/json"}},
      R"({"model":"fake","stream":true,"messages":[{"role":"user","content":"reset-me"}]})", 10000);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NE(r->body.find("cut"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("\"cause\":\"upstream_disconnect\""), std::string::npos) << r->body;
  // The next request on the same gateway still works.
  EXPECT_EQ(env.chat().status, 200);
}

TEST(GatewayUpstreamH2c, HttpsUpstreamNegotiatesH2ByAlpnUnlessForcedToHttp1) {
  TempDir dir;
  const CertFiles server = make_self_signed(dir, "server");
  proto::TlsServerConfig config;
  config.cert_file = server.cert;
  config.key_file = server.key;
  config.alpn = {"h2", "http/1.1"};
  auto tls = proto::TlsContext::server(config);
  ASSERT_TRUE(tls.ok()) << tls.error().message;
  for (const std::string protocol : {"auto", "http1"}) {
    H2Upstream upstream(1, tls.value());
    ASSERT_TRUE(upstream.start());
    TlsEnv env;
    env.write_policy(policy("https://127.0.0.1:" + std::to_string(upstream.port()),
                            "    protocol: " + protocol + "\n" + tls_block(server.cert)));
    ASSERT_TRUE(env.start_gateway()) << env.error;
    const proto::HttpResponse r = env.chat();
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("\"cause\":\"eos\""), std::string::npos) << r.body;
    ASSERT_EQ(upstream.protocols().size(), 1u);
    EXPECT_EQ(upstream.protocols()[0], protocol == "auto" ? "h2" : "HTTP/1.1") << protocol;
  }
}

}  // namespace
}  // namespace cutline::test
