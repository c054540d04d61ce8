#include "cutline/proto/http1/http_message.h"

#include <algorithm>
#include <array>
#include <functional>

namespace cutline::proto {

namespace {

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + ('a' - 'A')) : c; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Calls fn(token) for each comma-separated, trimmed, non-empty element of `value`.
template <typename Fn>
bool any_token(std::string_view value, Fn&& fn) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    const std::string_view token = trim(value.substr(0, comma));
    if (!token.empty() && fn(token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

HttpHeaders::HttpHeaders(
    std::initializer_list<std::pair<std::string_view, std::string_view>> init) {
  size_t bytes = 0;
  for (const auto& [name, value] : init) bytes += kSizeBytes + name.size() + value.size();
  text_.reserve(std::max(bytes, kFirstBytes));
  for (const auto& [name, value] : init) add(name, value);
}

bool HttpHeaders::holds(std::string_view s) const {
  const std::less<const char*> before;
  return !s.empty() && !before(s.data(), text_.data()) &&
         before(s.data(), text_.data() + text_.size());
}

void HttpHeaders::add(std::string_view name, std::string_view value) {
  if (holds(name) || holds(value)) {
    // Growing the buffer would move what they point at.
    const std::string own_name(name);
    const std::string own_value(value);
    add(own_name, own_value);
    return;
  }
  const size_t need = text_.size() + kSizeBytes + name.size() + value.size();
  if (need > text_.capacity() || text_.capacity() < kFirstBytes) {
    // A short message's headers at once, instead of growing a few bytes at a time. Not more: a
    // request's headers live until its upstream request is built, and an open stream is ~8 KiB
    // in all. Never in the string's inline bytes either: moving the list keeps its headers where
    // they are, as views taken before the move expect.
    text_.reserve(std::max({need, kFirstBytes, 2 * text_.capacity()}));
  }
  const std::array<uint32_t, 2> sizes = {static_cast<uint32_t>(name.size()),
                                         static_cast<uint32_t>(value.size())};
  text_.append(reinterpret_cast<const char*>(sizes.data()), kSizeBytes);
  text_.append(name);
  text_.append(value);
  ++count_;
}

void HttpHeaders::set(std::string_view name, std::string_view value) {
  if (holds(name) || holds(value)) {
    const std::string own_name(name);
    const std::string own_value(value);
    set(own_name, own_value);
    return;
  }
  remove(name);
  add(name, value);
}

size_t HttpHeaders::remove(std::string_view name) {
  if (holds(name)) {
    const std::string own_name(name);  // removing moves the bytes it points at
    return remove(own_name);
  }
  return remove_if([&](const HttpHeader& h) { return iequals(h.name, name); });
}

std::optional<std::string_view> HttpHeaders::get(std::string_view name) const {
  for (const HttpHeader h : *this) {
    if (iequals(h.name, name)) return h.value;
  }
  return std::nullopt;
}

bool HttpHeaders::has_token(std::string_view name, std::string_view token) const {
  for (const HttpHeader h : *this) {
    if (!iequals(h.name, name)) continue;
    if (any_token(h.value, [&](std::string_view t) { return iequals(t, token); })) return true;
  }
  return false;
}

bool is_hop_by_hop(std::string_view name) {
  static constexpr std::array<std::string_view, 9> kHopByHop = {"connection",
                                                                "keep-alive",
                                                                "proxy-connection",
                                                                "te",
                                                                "trailer",
                                                                "transfer-encoding",
                                                                "upgrade",
                                                                "proxy-authenticate",
                                                                "proxy-authorization"};
  for (std::string_view h : kHopByHop) {
    if (iequals(h, name)) return true;
  }
  return false;
}

void remove_hop_by_hop(HttpHeaders& headers) {
  // Names listed in Connection are hop-by-hop for this message too.
  std::vector<std::string> listed;
  for (const auto& h : headers) {
    if (!iequals(h.name, "connection")) continue;
    any_token(h.value, [&](std::string_view t) {
      listed.emplace_back(t);
      return false;
    });
  }
  for (const auto& name : listed) headers.remove(name);
  headers.remove_if([](const HttpHeader& h) { return is_hop_by_hop(h.name); });
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 101:
      return "Switching Protocols";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Content";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 499:
      return "Client Closed Request";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

std::string_view HttpRequest::path() const {
  const std::string_view t(target);
  return t.substr(0, t.find('?'));
}

std::string_view HttpRequest::query() const {
  const std::string_view t(target);
  const size_t q = t.find('?');
  return q == std::string_view::npos ? std::string_view() : t.substr(q + 1);
}

}  // namespace cutline::proto
