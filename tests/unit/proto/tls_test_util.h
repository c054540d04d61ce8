#pragma once
// Helpers for the TLS tests: a self-signed certificate made with OpenSSL's APIs in a temporary
// directory (nothing checked in, nothing expires between runs), and a blocking OpenSSL client
// whose protocol versions and ALPN the test chooses (to try what a real client would).

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <csignal>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "net_test_util.h"

namespace cutline::proto::testing {

// What cutline-gateway's main() does: a peer closing mid-write must not kill the process (OpenSSL
// writes with write(2), see tls_context.h).
inline void ignore_sigpipe() { signal(SIGPIPE, SIG_IGN); }

// A temporary directory removed with its contents at destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "cutline-tls-XXXXXX").string();
    path_ = mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct CertFiles {
  std::string cert;
  std::string key;
};

// Writes `<name>.crt` and `<name>.key` into `dir`: an EC P-256 key and a self-signed certificate
// for CN=`cn` with subjectAltName DNS:localhost and IP:127.0.0.1 (usable as its own CA file).
inline CertFiles make_self_signed(const TempDir& dir, const std::string& name,
                                  const std::string& cn = "localhost") {
  CertFiles files{dir.file(name + ".crt"), dir.file(name + ".key")};
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x509 = X509_new();
  X509_set_version(x509, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x509), static_cast<long>(getpid()) + std::rand());
  X509_gmtime_adj(X509_getm_notBefore(x509), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x509), 7 * 24 * 3600);
  X509_set_pubkey(x509, key);
  X509_NAME* subject = X509_get_subject_name(x509);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(x509, subject);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x509, x509, nullptr, nullptr, 0);
  for (const auto& [nid, value] : std::vector<std::pair<int, const char*>>{
           {NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1"},
           {NID_basic_constraints, "critical,CA:TRUE"},
           {NID_subject_key_identifier, "hash"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    X509_add_ext(x509, ext, -1);
    X509_EXTENSION_free(ext);
  }
  X509_sign(x509, key, EVP_sha256());
  if (FILE* f = std::fopen(files.cert.c_str(), "w")) {
    PEM_write_X509(f, x509);
    std::fclose(f);
  }
  if (FILE* f = std::fopen(files.key.c_str(), "w")) {
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
  }
  X509_free(x509);
  EVP_PKEY_free(key);
  return files;
}

// A blocking TLS client connection to 127.0.0.1:port.
class TlsClient {
 public:
  struct Options {
    int min_version = TLS1_VERSION;
    int max_version = TLS1_3_VERSION;
    std::string ca_file;  // verify the server against it; empty = no verification
    std::vector<std::string> alpn;
  };

  TlsClient(uint16_t port, const Options& options) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    // Security level 0 lets this client offer TLS 1.0/1.1 at all (OpenSSL 3 refuses them at
    // the default level), so that a refusal can only come from the server.
    SSL_CTX_set_security_level(ctx_, 0);
    SSL_CTX_set_min_proto_version(ctx_, options.min_version);
    SSL_CTX_set_max_proto_version(ctx_, options.max_version);
    if (!options.ca_file.empty()) {
      SSL_CTX_load_verify_locations(ctx_, options.ca_file.c_str(), nullptr);
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    }
    std::string wire;
    for (const auto& p : options.alpn) wire += static_cast<char>(p.size()) + p;
    if (!wire.empty()) {
      SSL_CTX_set_alpn_protos(ctx_, reinterpret_cast<const unsigned char*>(wire.data()),
                              static_cast<unsigned>(wire.size()));
    }
    fd_ = connect_raw(port);
    if (fd_ >= 0) {  // bounds every blocking read below
      timeval tv{5, 0};
      setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, "localhost");
    SSL_set1_host(ssl_, "localhost");
    connected_ = fd_ >= 0 && SSL_connect(ssl_) == 1;
  }
  ~TlsClient() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    if (fd_ >= 0) close(fd_);
  }

  bool connected() const { return connected_; }
  std::string alpn() const {
    const unsigned char* data = nullptr;
    unsigned len = 0;
    SSL_get0_alpn_selected(ssl_, &data, &len);
    return data != nullptr ? std::string(reinterpret_cast<const char*>(data), len) : "";
  }
  int version() const { return SSL_version(ssl_); }
  void send(std::string_view data) { SSL_write(ssl_, data.data(), static_cast<int>(data.size())); }
  // Reads until the server closes (blocking; the server side bounds it).
  std::string read_all() {
    std::string out;
    char buf[16384];
    for (;;) {
      const int n = SSL_read(ssl_, buf, sizeof(buf));
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool connected_ = false;
};

}  // namespace cutline::proto::testing
