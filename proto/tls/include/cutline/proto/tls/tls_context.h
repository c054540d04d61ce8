#pragma once
// TlsContext: one OpenSSL 3 SSL_CTX configured the way Cutline speaks TLS, for a listener (server
// side: certificate chain + key, TLS 1.2 or 1.3 as the floor, ALPN) or for outgoing connections
// (client side: verification against the system CA store or a CA file, an optional client
// certificate for mTLS, SNI per connection).
//
// Protocol versions: never below TLS 1.2 (1.0 and 1.1 handshakes are refused). Cipher suites:
// TLS 1.3's defaults (AES-GCM, ChaCha20-Poly1305) and, for 1.2, ECDHE with AEAD ciphers only
// (no CBC, no RSA key exchange, no SHA-1 MACs).
//
// Who calls what: the gateway builds one server context per TLS listener from the policy
// (listen[].tls) when the policy loads; a load error is returned as a value naming the file and
// OpenSSL's reason, so a reload with a bad certificate keeps the old context. HttpServer (via
// ServerOptions::tls) makes one SSL per accepted connection with new_ssl().
//
// Signals: OpenSSL writes to the socket with write(2), so a peer that has gone raises SIGPIPE;
// a process using TLS connections ignores SIGPIPE (cutline-gateway and cutline-backend do).
//
// Lifetime: a server context must outlive the connections made with it (its ALPN callback refers
// to it); HttpServer keeps it in its options.
//
// Threading: immutable after creation; new_ssl() and new_client_ssl() may be called from any
// thread (OpenSSL's SSL_CTX is reference counted and thread safe for SSL_new).

#include <openssl/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/base/result.h"

namespace cutline::proto {

enum class TlsMinVersion { kTls12, kTls13 };

struct TlsServerConfig {
  std::string cert_file;  // PEM: the certificate, then any intermediates (a chain file)
  std::string key_file;   // PEM private key matching the certificate
  TlsMinVersion min_version = TlsMinVersion::kTls12;
  // ALPN protocols accepted, in the server's order of preference ("h2", "http/1.1"). A client
  // that offers none of them (or no ALPN) proceeds without ALPN, i.e. HTTP/1.1. HttpServer
  // speaks HTTP/2 on connections that selected "h2" (unless ServerOptions::http2 is false, when
  // "h2" is never selected: see new_ssl()).
  std::vector<std::string> alpn = {"h2", "http/1.1"};
  // mTLS: when set, clients must present a certificate issued by a CA in this PEM file.
  std::string client_ca_file;
};

struct TlsClientConfig {
  std::string ca_file;    // PEM CA bundle to verify the peer; empty = the system CA store
  std::string cert_file;  // client certificate (mTLS); empty = none
  std::string key_file;   // its key; required with cert_file
  bool verify = true;     // false: accept any certificate (tests only; dangerous)
  TlsMinVersion min_version = TlsMinVersion::kTls12;
  std::vector<std::string> alpn = {"http/1.1"};
};

class TlsContext {
 public:
  // Errors (kIo): a file that cannot be read or parsed, a key that does not match the
  // certificate; the message names the file and carries OpenSSL's reason.
  static Result<std::shared_ptr<const TlsContext>> server(const TlsServerConfig& config);
  static Result<std::shared_ptr<const TlsContext>> client(const TlsClientConfig& config);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // A new SSL for one accepted connection (server contexts). nullptr when out of memory.
  // `allow_h2` false: this connection's ALPN never selects "h2" (a server without HTTP/2).
  SSL* new_ssl(bool allow_h2 = true) const;
  // A new SSL for one outgoing connection to `host` (client contexts): SNI is set to `host`
  // unless it is an IP literal, and the peer certificate must match `host` (name or IP) when
  // verifying. nullptr when out of memory.
  SSL* new_client_ssl(std::string_view host) const;

  SSL_CTX* native() const { return ctx_; }
  bool is_server() const { return server_; }

 private:
  TlsContext(SSL_CTX* ctx, bool server, std::string alpn_wire);
  static int select_alpn(SSL* ssl, const unsigned char** out, unsigned char* out_len,
                         const unsigned char* in, unsigned int in_len, void* arg);

  SSL_CTX* ctx_;
  bool server_;
  std::string alpn_wire_;        // ALPN protocol list in wire format (length-prefixed names)
  std::string alpn_wire_no_h2_;  // the same without "h2" (new_ssl(allow_h2 = false))
};

// The protocol ALPN selected on an established TLS connection ("" when none).
std::string negotiated_alpn(const SSL* ssl);

// OpenSSL's error queue as one line ("" when empty); clears the queue.
std::string openssl_error_text();

}  // namespace cutline::proto
