#pragma once
// HTTP message shapes shared by the HTTP/1.1 codec, the (later) HTTP/2 codec, the server and the
// client: an ordered header list with case-insensitive lookup, the hop-by-hop header rules a proxy
// applies, and buffered request/response values.
//
// Header names keep the case they arrived with (HTTP/1.1 peers see what the sender wrote);
// lookups ignore ASCII case. Order and duplicates are kept as received.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cutline::proto {

// ASCII case-insensitive equality (header names, tokens).
bool iequals(std::string_view a, std::string_view b);

// One header as a view into the HttpHeaders that holds it: valid until that list is next
// changed.
struct HttpHeader {
  std::string_view name;
  std::string_view value;
};

// Every name and value of a message lives in one buffer (one allocation per message, not two per
// header): a header is [name size][value size][name][value], back to back, in arrival order.
class HttpHeaders {
 public:
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = HttpHeader;
    using difference_type = std::ptrdiff_t;
    using reference = HttpHeader;
    struct Arrow {
      HttpHeader header;
      const HttpHeader* operator->() const { return &header; }
    };
    using pointer = Arrow;

    Iterator() = default;
    explicit Iterator(const char* at) : at_(at) {}
    HttpHeader operator*() const { return read(at_); }
    Arrow operator->() const { return Arrow{read(at_)}; }
    Iterator& operator++() {
      at_ += record_size(at_);
      return *this;
    }
    Iterator operator++(int) {
      Iterator before = *this;
      ++*this;
      return before;
    }
    bool operator==(const Iterator& other) const { return at_ == other.at_; }

   private:
    const char* at_ = nullptr;
  };
  using const_iterator = Iterator;

  HttpHeaders() = default;
  HttpHeaders(std::initializer_list<std::pair<std::string_view, std::string_view>> init);

  // Appends a header (duplicates allowed, order kept). `name` and `value` may point into this
  // list.
  void add(std::string_view name, std::string_view value);
  // Removes every header named `name`, then appends one.
  void set(std::string_view name, std::string_view value);
  // Removes every header named `name`; returns how many were removed.
  size_t remove(std::string_view name);
  // Removes every header for which `pred(header)` is true, keeping the others' order; returns
  // how many.
  template <typename Pred>
  size_t remove_if(Pred pred) {
    char* base = text_.data();
    size_t from = 0;
    size_t to = 0;
    size_t removed = 0;
    while (from < text_.size()) {
      const size_t n = record_size(base + from);
      const HttpHeader header = read(base + from);
      if (pred(header)) {
        ++removed;
      } else {
        if (to != from) std::memmove(base + to, base + from, n);
        to += n;
      }
      from += n;
    }
    text_.resize(to);
    count_ -= removed;
    return removed;
  }

  // The first value of `name`, if present.
  std::optional<std::string_view> get(std::string_view name) const;
  bool has(std::string_view name) const { return get(name).has_value(); }
  // True when any `name` header's comma-separated value list contains `token` (case-insensitive),
  // e.g. has_token("Connection", "close").
  bool has_token(std::string_view name, std::string_view token) const;

  Iterator begin() const { return Iterator(text_.data()); }
  Iterator end() const { return Iterator(text_.data() + text_.size()); }
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  void clear() {
    text_.clear();
    count_ = 0;
  }

 private:
  static constexpr size_t kSizeBytes = 2 * sizeof(uint32_t);
  static constexpr size_t kFirstBytes = 256;
  // True when `s` points into this list's buffer.
  bool holds(std::string_view s) const;
  static uint32_t load_size(const char* at) {
    uint32_t n;
    std::memcpy(&n, at, sizeof n);
    return n;
  }
  static size_t record_size(const char* at) {
    return kSizeBytes + load_size(at) + load_size(at + sizeof(uint32_t));
  }
  static HttpHeader read(const char* at) {
    const uint32_t name_size = load_size(at);
    const uint32_t value_size = load_size(at + sizeof(uint32_t));
    return HttpHeader{std::string_view(at + kSizeBytes, name_size),
                      std::string_view(at + kSizeBytes + name_size, value_size)};
  }

  std::string text_;
  size_t count_ = 0;
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
