#include "cutline/proto/tls/tls_context.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <fstream>

#include "tls_test_util.h"

namespace cutline::proto {
namespace {

using testing::make_self_signed;
using testing::TempDir;

TEST(TlsContextTest, ServerLoadsAMatchingCertificateAndKey) {
  TempDir dir;
  const auto files = make_self_signed(dir, "server");
  auto ctx =
      TlsContext::server({files.cert, files.key, TlsMinVersion::kTls12, {"h2", "http/1.1"}, {}});
  ASSERT_TRUE(ctx.ok()) << ctx.error().message;
  EXPECT_TRUE(ctx.value()->is_server());
  EXPECT_EQ(SSL_CTX_get_min_proto_version(ctx.value()->native()), TLS1_2_VERSION);
  SSL* ssl = ctx.value()->new_ssl();
  ASSERT_NE(ssl, nullptr);
  SSL_free(ssl);
}

TEST(TlsContextTest, MinVersion13IsTheFloor) {
  TempDir dir;
  const auto files = make_self_signed(dir, "server");
  auto ctx = TlsContext::server({files.cert, files.key, TlsMinVersion::kTls13, {}, {}});
  ASSERT_TRUE(ctx.ok()) << ctx.error().message;
  EXPECT_EQ(SSL_CTX_get_min_proto_version(ctx.value()->native()), TLS1_3_VERSION);
}

TEST(TlsContextTest, MismatchedKeyIsRefusedNamingBothFiles) {
  TempDir dir;
  const auto a = make_self_signed(dir, "a");
  const auto b = make_self_signed(dir, "b");
  auto ctx = TlsContext::server({a.cert, b.key, TlsMinVersion::kTls12, {}, {}});
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.error().kind, ErrorKind::kIo);
  EXPECT_NE(ctx.error().message.find("does not match"), std::string::npos) << ctx.error().message;
  EXPECT_NE(ctx.error().message.find(a.cert), std::string::npos);
  EXPECT_NE(ctx.error().message.find(b.key), std::string::npos);
}

TEST(TlsContextTest, UnreadableOrGarbageFilesAreRefusedNamingTheFile) {
  TempDir dir;
  const auto files = make_self_signed(dir, "server");
  const std::string missing = dir.file("missing.crt");
  auto no_cert = TlsContext::server({missing, files.key, TlsMinVersion::kTls12, {}, {}});
  ASSERT_FALSE(no_cert.ok());
  EXPECT_NE(no_cert.error().message.find("cannot load certificate " + missing), std::string::npos)
      << no_cert.error().message;

  const std::string garbage = dir.file("garbage.key");
  std::ofstream(garbage) << "-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n";
  auto bad_key = TlsContext::server({files.cert, garbage, TlsMinVersion::kTls12, {}, {}});
  ASSERT_FALSE(bad_key.ok());
  EXPECT_NE(bad_key.error().message.find("cannot load private key " + garbage), std::string::npos)
      << bad_key.error().message;

  auto empty = TlsContext::server({"", "", TlsMinVersion::kTls12, {}, {}});
  EXPECT_FALSE(empty.ok());
}

TEST(TlsContextTest, ClientContextLoadsCaFileAndRefusesAMissingOne) {
  TempDir dir;
  const auto files = make_self_signed(dir, "ca");
  TlsClientConfig config;
  config.ca_file = files.cert;
  auto ok = TlsContext::client(config);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_FALSE(ok.value()->is_server());
  EXPECT_EQ(SSL_CTX_get_verify_mode(ok.value()->native()), SSL_VERIFY_PEER);

  config.ca_file = dir.file("nope.pem");
  auto missing = TlsContext::client(config);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("cannot load CA file"), std::string::npos);

  TlsClientConfig half;
  half.cert_file = files.cert;  // a client certificate without its key
  EXPECT_FALSE(TlsContext::client(half).ok());
}

}  // namespace
}  // namespace cutline::proto
