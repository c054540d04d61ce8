#include "cutline/proto/tls/tls_context.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>

namespace cutline::proto {

namespace {

// TLS 1.2 suites: forward secrecy (ECDHE) and AEAD only. TLS 1.3 keeps OpenSSL's defaults
// (TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256, TLS_AES_128_GCM_SHA256).
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

int min_proto(TlsMinVersion v) {
  return v == TlsMinVersion::kTls13 ? TLS1_3_VERSION : TLS1_2_VERSION;
}

std::string alpn_wire(const std::vector<std::string>& names) {
  std::string wire;
  for (const auto& n : names) {
    if (n.empty() || n.size() > 255) continue;
    wire.push_back(static_cast<char>(n.size()));
    wire += n;
  }
  return wire;
}

bool is_ip_literal(std::string_view host) {
  std::string h(host);
  unsigned char buf[16];
  return inet_pton(AF_INET, h.c_str(), buf) == 1 || inet_pton(AF_INET6, h.c_str(), buf) == 1;
}

Error tls_error(std::string what) {
  std::string reason = openssl_error_text();
  if (!reason.empty()) what += ": " + reason;
  return make_error(ErrorKind::kIo, std::move(what));
}

// Common settings for both sides.
SSL_CTX* new_ctx(const SSL_METHOD* method, TlsMinVersion min_version) {
  SSL_CTX* ctx = SSL_CTX_new(method);
  if (ctx == nullptr) return nullptr;
  SSL_CTX_set_min_proto_version(ctx, min_proto(min_version));
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_options(
      ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_cipher_list(ctx, kTls12Ciphers);
  // Partial writes and moving buffers: what libevent's bufferevent_openssl expects.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  return ctx;
}

// Loads a certificate chain and its key into `ctx` and checks that they match.
Status load_cert_and_key(SSL_CTX* ctx, const std::string& cert_file, const std::string& key_file) {
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1) {
    return tls_error("cannot load certificate " + cert_file);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    // OpenSSL compares the key with the certificate while loading it.
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
      return tls_error("private key " + key_file + " does not match certificate " + cert_file);
    }
    return tls_error("cannot load private key " + key_file);
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return tls_error("private key " + key_file + " does not match certificate " + cert_file);
  }
  return Status();
}

}  // namespace

namespace {

// SSL ex_data slot marking a server connection whose ALPN must not select "h2".
int no_h2_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// `wire` without its "h2" entry.
std::string without_h2(std::string_view wire) {
  std::string out;
  size_t i = 0;
  while (i < wire.size()) {
    const size_t len = static_cast<unsigned char>(wire[i]);
    if (i + 1 + len > wire.size()) break;
    if (wire.substr(i + 1, len) != "h2") out.append(wire.substr(i, 1 + len));
    i += 1 + len;
  }
  return out;
}

}  // namespace

std::string openssl_error_text() {
  std::string text;
  char buf[256];
  while (unsigned long e = ERR_get_error()) {
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!text.empty()) text += "; ";
    text += buf;
  }
  return text;
}

std::string negotiated_alpn(const SSL* ssl) {
  const unsigned char* data = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(ssl, &data, &len);
  return data != nullptr ? std::string(reinterpret_cast<const char*>(data), len) : std::string();
}

TlsContext::TlsContext(SSL_CTX* ctx, bool server, std::string alpn_wire)
    : ctx_(ctx),
      server_(server),
      alpn_wire_(std::move(alpn_wire)),
      alpn_wire_no_h2_(without_h2(alpn_wire_)) {}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

Result<std::shared_ptr<const TlsContext>> TlsContext::server(const TlsServerConfig& config) {
  if (config.cert_file.empty() || config.key_file.empty()) {
    return make_error(ErrorKind::kIo, "a TLS listener needs both cert and key");
  }
  ERR_clear_error();
  SSL_CTX* ctx = new_ctx(TLS_server_method(), config.min_version);
  if (ctx == nullptr) return tls_error("cannot create a TLS server context");
  std::shared_ptr<TlsContext> tls(new TlsContext(ctx, true, alpn_wire(config.alpn)));
  if (Status s = load_cert_and_key(ctx, config.cert_file, config.key_file); !s.ok()) {
    return s.error();
  }
  if (!config.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, config.client_ca_file.c_str(), nullptr) != 1) {
      return tls_error("cannot load client CA file " + config.client_ca_file);
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  // Session tickets are on by default (stateless resumption); no session cache to share.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  if (!tls->alpn_wire_.empty()) {
    SSL_CTX_set_alpn_select_cb(ctx, &TlsContext::select_alpn, tls.get());
  }
  return std::shared_ptr<const TlsContext>(std::move(tls));
}

Result<std::shared_ptr<const TlsContext>> TlsContext::client(const TlsClientConfig& config) {
  ERR_clear_error();
  SSL_CTX* ctx = new_ctx(TLS_client_method(), config.min_version);
  if (ctx == nullptr) return tls_error("cannot create a TLS client context");
  std::shared_ptr<TlsContext> tls(new TlsContext(ctx, false, alpn_wire(config.alpn)));
  if (config.verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (!config.ca_file.empty()) {
      if (SSL_CTX_load_verify_locations(ctx, config.ca_file.c_str(), nullptr) != 1) {
        return tls_error("cannot load CA file " + config.ca_file);
      }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      return tls_error("cannot load the system CA store");
    }
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  if (!config.cert_file.empty() || !config.key_file.empty()) {
    if (config.cert_file.empty() || config.key_file.empty()) {
      return make_error(ErrorKind::kIo, "a client certificate needs both cert and key");
    }
    if (Status s = load_cert_and_key(ctx, config.cert_file, config.key_file); !s.ok()) {
      return s.error();
    }
  }
  if (!tls->alpn_wire_.empty()) {
    SSL_CTX_set_alpn_protos(ctx, reinterpret_cast<const unsigned char*>(tls->alpn_wire_.data()),
                            static_cast<unsigned int>(tls->alpn_wire_.size()));
  }
  return std::shared_ptr<const TlsContext>(std::move(tls));
}

SSL* TlsContext::new_ssl(bool allow_h2) const {
  SSL* ssl = SSL_new(ctx_);
  if (ssl != nullptr && !allow_h2) {
    static char kNoH2 = 1;  // only its address matters
    SSL_set_ex_data(ssl, no_h2_index(), &kNoH2);
  }
  return ssl;
}

SSL* TlsContext::new_client_ssl(std::string_view host) const {
  SSL* ssl = SSL_new(ctx_);
  if (ssl == nullptr) return nullptr;
  const std::string h(host);
  if (is_ip_literal(host)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), h.c_str());
  } else if (!h.empty()) {
    SSL_set_tlsext_host_name(ssl, h.c_str());
    SSL_set1_host(ssl, h.c_str());
  }
  return ssl;
}

int TlsContext::select_alpn(SSL* ssl, const unsigned char** out, unsigned char* out_len,
                            const unsigned char* in, unsigned int in_len, void* arg) {
  const auto* self = static_cast<const TlsContext*>(arg);
  // The selected name points into our list: both lists are members, alive with the context.
  const std::string& ours =
      SSL_get_ex_data(ssl, no_h2_index()) != nullptr ? self->alpn_wire_no_h2_ : self->alpn_wire_;
  if (ours.empty()) return SSL_TLSEXT_ERR_NOACK;
  unsigned char* selected = nullptr;
  // The server's preference order wins: OpenSSL walks our list and takes the first the client
  // also offered.
  if (SSL_select_next_proto(&selected, out_len, reinterpret_cast<const unsigned char*>(ours.data()),
                            static_cast<unsigned int>(ours.size()), in,
                            in_len) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace cutline::proto
