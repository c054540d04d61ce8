// The real cutline-gateway serving HTTP/2 to its clients: curl --http2-prior-knowledge
// (h2c) and curl --http2 over TLS (ALPN h2) streaming a chat completion from the scripted
// cutline-fake-upstream, with the stop record in the body and the `cutline-stop` trailer; many
// interleaved streams on one HTTP/2 connection with one of them cut by its deadline; a client
// RST_STREAM cancelling the upstream request (client_cancel); GOAWAY and a drain on SIGTERM; old
// TLS and a certificate the client cannot verify refused; the official `openai` npm client
// (tests/integration/openai_npm, skipped until `npm install` put it there) streaming through TLS
// and cleartext.

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <map>
#include <vector>

#include "../unit/proto/http2_test_client.h"
#include "../unit/proto/tls_test_util.h"
#include "gateway_harness.h"
#include "support/ci.h"

namespace cutline::test {
namespace {

using proto::Cause;
using proto::testing::Http2TestClient;

const char* const kCurl = "/usr/bin/curl";

std::string policy_yaml(uint16_t fake_port, const std::string& log_path,
                        const std::string& listen_tls) {
  return "listen:\n  - address: 127.0.0.1:0\n" + listen_tls +
         "admin:\n  address: 127.0.0.1:0\n"
         "access_log: " +
         log_path +
         "\nupstreams:\n  - name: fake\n    url: http://127.0.0.1:" + std::to_string(fake_port) +
         "\n    models: [\"fake\", \"fake-*\"]\n"
         "policies:\n"
         "  - name: deadline\n    match: {headers: {x-policy: deadline}}\n    deadline: 300ms\n"
         "  - name: default\n    match: {}\n";
}

std::string chat(bool stream) {
  return std::string(R"({"model":"fake","messages":[{"role":"user","content":"hi"}],"stream":)") +
         (stream ? "true" : "false") + "}";
}

// The stop record of a streamed body (its last chunk).
proto::StopRecord record_of(const std::string& sse) {
  proto::ChunkParser p;
  const std::string last = last_chunk(sse);
  EXPECT_TRUE(p.parse(last).ok()) << last;
  EXPECT_TRUE(p.chunk().cutline.has_value()) << last;
  return p.chunk().cutline.value_or(proto::StopRecord{});
}

Cause trailer_cause(const proto::HttpHeaders& trailers) {
  auto t = trailers.get("cutline-stop");
  EXPECT_TRUE(t.has_value()) << "no cutline-stop trailer";
  if (!t) return Cause::kEos;
  auto parsed = proto::parse_stop_header(*t);
  EXPECT_TRUE(parsed.ok()) << *t;
  return parsed.ok() ? parsed->cause : Cause::kEos;
}

class GatewayHttp2Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    proto::testing::ignore_sigpipe();
    certs_dir = new proto::testing::TempDir;
    certs = new proto::testing::CertFiles(proto::testing::make_self_signed(*certs_dir, "gw"));
    plain = new GatewayEnv;
    ASSERT_TRUE(plain->start([](uint16_t fake_port, const std::string& log) {
      return policy_yaml(fake_port, log, "");
    })) << plain->error;
    tls = new GatewayEnv;
    ASSERT_TRUE(tls->start([](uint16_t fake_port, const std::string& log) {
      return policy_yaml(fake_port, log,
                         "    tls: {cert: " + certs->cert + ", key: " + certs->key + "}\n");
    })) << tls->error;
  }
  static void TearDownTestSuite() {
    for (GatewayEnv* env : {plain, tls}) {
      if (env != nullptr) env->stop();
      delete env;
    }
    plain = tls = nullptr;
    delete certs;
    delete certs_dir;
  }

  // curl streaming a chat completion; returns {exit code, body, dumped headers and trailers,
  // HTTP version}.
  struct CurlResult {
    int exit_code = -1;
    std::string body;
    std::string headers;
    std::string http_version;
    std::string err;
  };
  static CurlResult curl(GatewayEnv& env, const std::vector<std::string>& flags,
                         const std::string& url, const std::string& script) {
    const std::string out = env.dir + "/curl.out", err = env.dir + "/curl.err",
                      dump = env.dir + "/curl.headers";
    std::vector<std::string> argv = {
        kCurl, "-sS", "-N", "--max-time", "10", "-D", dump, "-w", "\nHTTP_VERSION=%{http_version}"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"-H", "Content-Type: application/json", "-H",
                             "X-Fake-Script: " + script, "--data-binary", chat(true), url});
    CurlResult r;
    r.exit_code = run_to_exit(argv, out, err);
    r.body = read_file(out);
    if (auto at = r.body.rfind("\nHTTP_VERSION="); at != std::string::npos) {
      r.http_version = r.body.substr(at + 14);
      r.body.resize(at);
    }
    r.headers = read_file(dump);
    r.err = read_file(err);
    return r;
  }

  static void expect_eos_with_trailer(const CurlResult& r) {
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.http_version, "2");
    EXPECT_EQ(r.headers.rfind("HTTP/2 200", 0), 0u) << r.headers;
    bool done = false;
    EXPECT_EQ(sse_payloads(r.body, &done).size(), 4u) << r.body;
    EXPECT_TRUE(done) << r.body;
    EXPECT_EQ(record_of(r.body).cause, Cause::kEos) << r.body;
    // curl dumps trailers after the headers.
    EXPECT_NE(r.headers.find("cutline-stop: "), std::string::npos) << r.headers;
    EXPECT_NE(r.headers.find("cause=eos"), std::string::npos) << r.headers;
  }

  static std::string metrics(GatewayEnv& env) {
    auto r = proto::http_fetch(env.admin_url("/metrics"));
    return r.ok() ? r->body : "";
  }

  static proto::testing::TempDir* certs_dir;
  static proto::testing::CertFiles* certs;
  static GatewayEnv* plain;
  static GatewayEnv* tls;
};

proto::testing::TempDir* GatewayHttp2Test::certs_dir = nullptr;
proto::testing::CertFiles* GatewayHttp2Test::certs = nullptr;
GatewayEnv* GatewayHttp2Test::plain = nullptr;
GatewayEnv* GatewayHttp2Test::tls = nullptr;

TEST_F(GatewayHttp2Test, CurlH2cPriorKnowledgeStreamsWithTheStopRecordInBodyAndTrailer) {
  expect_eos_with_trailer(
      curl(*plain, {"--http2-prior-knowledge"}, plain->url("/v1/chat/completions"), "tokens=3"));
}

TEST_F(GatewayHttp2Test, CurlHttp2OverTlsNegotiatesH2ByAlpn) {
  const std::string url = "https://localhost:" + std::to_string(tls->port) + "/v1/chat/completions";
  expect_eos_with_trailer(curl(*tls, {"--http2", "--cacert", certs->cert}, url, "tokens=3"));
}

TEST_F(GatewayHttp2Test, Http11StillServedOnTheSameCleartextPort) {
  const CurlResult r = curl(*plain, {"--http1.1"}, plain->url("/v1/chat/completions"), "tokens=3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.http_version, "1.1");
  EXPECT_EQ(record_of(r.body).cause, Cause::kEos);
}

TEST_F(GatewayHttp2Test, InterleavedStreamsOnOneConnectionOneCutByItsDeadline) {
  for (GatewayEnv* env : {plain, tls}) {
    Http2TestClient::Options o;
    o.tls = env == tls;
    Http2TestClient client(env->port, o);
    ASSERT_TRUE(client.connected());
    if (o.tls) {
      EXPECT_EQ(client.alpn(), "h2");
    }
    std::vector<int32_t> ids;
    for (int i = 0; i < 8; ++i) {
      ids.push_back(client.submit(
          "POST", "/v1/chat/completions", chat(true),
          {{"content-type", "application/json"}, {"x-fake-script", "tokens=20,interval_ms=5"}}));
    }
    const int32_t cut = client.submit("POST", "/v1/chat/completions", chat(true),
                                      {{"content-type", "application/json"},
                                       {"x-policy", "deadline"},
                                       {"x-fake-script", "tokens=500,interval_ms=10"}});
    ids.push_back(cut);
    ASSERT_TRUE(client.run_until(
        [&] {
          for (int32_t id : ids) {
            if (!client.response(id).closed) return false;
          }
          return true;
        },
        10000));
    for (int32_t id : ids) {
      const auto& r = client.response(id);
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_TRUE(r.ended);
      EXPECT_EQ(r.error_code, 0u);
      const proto::StopRecord rec = record_of(r.body);
      if (id == cut) {
        EXPECT_EQ(rec.cause, Cause::kGatewayDeadline) << r.body;
        EXPECT_GT(rec.output_tokens, 0);
        EXPECT_LT(rec.output_tokens, 500);
        EXPECT_EQ(trailer_cause(r.trailers), Cause::kGatewayDeadline);
      } else {
        EXPECT_EQ(rec.cause, Cause::kEos) << r.body;
        EXPECT_EQ(rec.output_tokens, 20);
        EXPECT_EQ(trailer_cause(r.trailers), Cause::kEos);
      }
    }
  }
}

TEST_F(GatewayHttp2Test, RstStreamCancelsTheUpstreamAsClientCancel) {
  ASSERT_TRUE(proto::http_fetch(plain->fake_url("/fake/reset"), "POST").ok());
  Http2TestClient client(plain->port, {});
  const int32_t cancelled = client.submit(
      "POST", "/v1/chat/completions", chat(true),
      {{"content-type", "application/json"}, {"x-fake-script", "tokens=500,interval_ms=10"}});
  const int32_t other = client.submit(
      "POST", "/v1/chat/completions", chat(true),
      {{"content-type", "application/json"}, {"x-fake-script", "tokens=30,interval_ms=10"}});
  ASSERT_TRUE(client.run_until(
      [&] { return client.response(cancelled).body.find("t1 ") != std::string::npos; }));
  client.rst(cancelled);
  // The other stream on the connection is unaffected.
  ASSERT_TRUE(client.run_until([&] { return client.response(other).closed; }, 10000));
  EXPECT_EQ(record_of(client.response(other).body).cause, Cause::kEos);
  EXPECT_TRUE(wait_for(
      [] {
        auto r = proto::http_fetch(plain->fake_url("/fake/requests"));
        return r.ok() && r->body.find("\"cancelled\":true") != std::string::npos;
      },
      3000))
      << "the upstream request was not cancelled";
  EXPECT_TRUE(wait_for([] {
    return read_file(plain->log_path).find("\"cause\":\"client_cancel\"") != std::string::npos;
  }));
  EXPECT_NE(metrics(*plain).find("cutline_stops_total{cause=\"client_cancel\""), std::string::npos);
}

TEST_F(GatewayHttp2Test, Tls10HandshakeIsRefused) {
  proto::testing::TlsClient::Options old;
  old.min_version = TLS1_VERSION;
  old.max_version = TLS1_VERSION;
  proto::testing::TlsClient client(tls->port, old);
  EXPECT_FALSE(client.connected());
  // And the listener keeps serving.
  Http2TestClient::Options o;
  o.tls = true;
  Http2TestClient ok(tls->port, o);
  EXPECT_TRUE(ok.connected());
}

TEST_F(GatewayHttp2Test, ACertificateTheClientCannotVerifyIsRefused) {
  // Another CA than the one that signed the gateway's certificate.
  const proto::testing::CertFiles other = proto::testing::make_self_signed(*certs_dir, "other");
  const std::string url = "https://localhost:" + std::to_string(tls->port) + "/v1/chat/completions";
  const CurlResult r = curl(*tls, {"--http2", "--cacert", other.cert}, url, "tokens=3");
  EXPECT_EQ(r.exit_code, 60) << r.err;  // CURLE_PEER_FAILED_VERIFICATION
  EXPECT_TRUE(r.body.empty()) << r.body;
}

// SIGTERM drains: the gateway sends GOAWAY on the HTTP/2 connection (no new stream there) and the
// stream in flight still completes with its stop record.
TEST_F(GatewayHttp2Test, ShutdownSendsGoawayAndTheStreamInFlightFinishes) {
  GatewayEnv env;
  ASSERT_TRUE(env.start([](uint16_t fake_port, const std::string& log) {
    return policy_yaml(fake_port, log, "");
  })) << env.error;
  Http2TestClient client(env.port, {});
  const int32_t id = client.submit(
      "POST", "/v1/chat/completions", chat(true),
      {{"content-type", "application/json"}, {"x-fake-script", "tokens=40,interval_ms=10"}});
  ASSERT_TRUE(
      client.run_until([&] { return client.response(id).body.find("t1 ") != std::string::npos; }));
  env.gateway.signal(SIGTERM);
  ASSERT_TRUE(client.run_until([&] { return client.goaway(); }));
  EXPECT_EQ(client.goaway_last_stream_id(), id);
  EXPECT_FALSE(client.response(id).closed);
  ASSERT_TRUE(client.run_until([&] { return client.response(id).closed; }, 10000));
  const auto& r = client.response(id);
  EXPECT_EQ(r.error_code, 0u);
  const proto::StopRecord rec = record_of(r.body);
  EXPECT_EQ(rec.cause, Cause::kEos) << r.body;
  EXPECT_EQ(rec.output_tokens, 40);
  EXPECT_EQ(trailer_cause(r.trailers), Cause::kEos);
  env.stop();
}

// The official openai npm client (v4; Node's fetch speaks HTTP/1.1) streaming a chat completion
// through the cleartext and the TLS listener; its raw chunks must carry the stop record.
TEST_F(GatewayHttp2Test, OfficialOpenaiNpmClientStreamsThroughTlsAndCleartext) {
  const std::string dir = CUTLINE_OPENAI_NPM_DIR;
  if (read_file(dir + "/node_modules/openai/package.json").empty()) {
    if (cutline::test::running_in_ci())
      FAIL() << "CI=true but the openai npm client is not installed in " << dir;
    GTEST_SKIP() << "run `npm install --prefix " << dir << "` (deploy/setup.sh does) first";
  }
  struct Case {
    GatewayEnv* env;
    std::string base_url;
  };
  const std::vector<Case> cases = {
      {plain, "http://127.0.0.1:" + std::to_string(plain->port) + "/v1"},
      {tls, "https://localhost:" + std::to_string(tls->port) + "/v1"}};
  for (const Case& c : cases) {
    const std::string out = c.env->dir + "/node.out", err = c.env->dir + "/node.err";
    const int code =
        run_to_exit({"/usr/bin/env", "node", dir + "/openai_stream.mjs", c.base_url, "tokens=3"},
                    out, err, 120000, {"NODE_EXTRA_CA_CERTS=" + certs->cert});
    if (code == 127 && cutline::test::running_in_ci())
      FAIL() << "CI=true but node is not installed";
    if (code == 127) GTEST_SKIP() << "node is not installed";
    const std::string result = read_file(out);
    EXPECT_EQ(code, 0) << c.base_url << ": " << result << read_file(err);
    EXPECT_NE(result.find("\"ok\":true"), std::string::npos) << result;
    EXPECT_NE(result.find("\"cause\":\"eos\""), std::string::npos) << result;
    EXPECT_NE(result.find("\"content\":\"t0 t1 t2 \""), std::string::npos) << result;
  }
}

}  // namespace
}  // namespace cutline::test
