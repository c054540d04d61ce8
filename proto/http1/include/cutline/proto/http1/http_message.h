#pragma once
// HTTP message shapes shared by the HTTP/1.1 codec, the (later) HTTP/2 codec, the server and the
// client: an ordered header list with case-insensitive lookup, the hop-by-hop header rules a proxy
// applies, and buffered request/response values.
//
// Header names keep the case they arrived with (HTTP/1.1 peers see what the sender wrote);
// lookups ignore ASCII case. Order and duplicates are kept as received.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cutline::proto {

// ASCII case-insensitive equality (header names, tokens).
bool iequals(std::string_view a, std::string_view b);

struct HttpHeader {
  std::string name;
  std::string value;
};

class HttpHeaders {
 public:
  HttpHeaders() = default;
  HttpHeaders(std::initializer_list<std::pair<std::string_view, std::string_view>> init);

  // Appends a header (duplicates allowed, order kept).
  void add(std::string_view name, std::string_view value);
  // Removes every header named `name`, then appends one.
  void set(std::string_view name, std::string_view value);
  // Removes every header named `name`; returns how many were removed.
  size_t remove(std::string_view name);
  // Removes every header for which `pred(header)` is true, in place; returns how many.
  template <typename Pred>
  size_t remove_if(Pred pred) {
    const size_t before = entries_.size();
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(), pred), entries_.end());
    return before - entries_.size();
  }

  // The first value of `name`, if present.
  std::optional<std::string_view> get(std::string_view name) const;
  bool has(std::string_view name) const { return get(name).has_value(); }
  // True when any `name` header's comma-separated value list contains `token` (case-insensitive),
  // e.g. has_token("Connection", "close").
  bool has_token(std::string_view name, std::string_view token) const;

  const std::vector<HttpHeader>& entries() const { return entries_; }
  std::vector<HttpHeader>::const_iterator begin() const { return entries_.begin(); }
  std::vector<HttpHeader>::const_iterator end() const { return entries_.end(); }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void clear() { entries_.clear(); }

 private:
  std::vector<HttpHeader> entries_;
};

// Hop-by-hop headers (RFC 9110 §7.6.1): connection, keep-alive, proxy-connection, te, trailer,
// transfer-encoding, upgrade, proxy-authenticate, proxy-authorization.
bool is_hop_by_hop(std::string_view name);
// Removes every hop-by-hop header and every header named in a Connection header's value list.
// What a proxy does before forwarding headers in either direction. Content-Length is kept (it is
// end-to-end); a proxy that re-frames the body must fix it itself.
void remove_hop_by_hop(HttpHeaders& headers);

// The standard reason phrase ("OK", "Not Found", ...) or "Unknown".
std::string_view reason_phrase(int status);

// A request as the server hands it to its handler: head, body buffered up to the body limit, and
// trailers of a chunked body (empty otherwise).
struct HttpRequest {
  std::string method;  // as sent, e.g. "POST"
  std::string target;  // request-target as sent, e.g. "/v1/chat/completions?x=1"
  int version_major = 1;
  int version_minor = 1;
  HttpHeaders headers;
  std::string body;
  HttpHeaders trailers;

  // target up to '?' (the whole target when there is none).
  std::string_view path() const;
  // target after '?' (empty when there is none).
  std::string_view query() const;
};

// A fully buffered response (http_fetch, tests).
struct HttpResponse {
  int status = 0;
  std::string reason;
  HttpHeaders headers;
  std::string body;
  HttpHeaders trailers;
};

}  // namespace cutline::proto
