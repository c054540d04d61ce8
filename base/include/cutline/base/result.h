#pragma once
// cutline::Result<T>: the error-as-value type used across the event loop, the engine thread and
// the CUDA boundary (STYLE.md "Errors are values"). No exception crosses those boundaries; a
// function that can fail returns Result<T>, which holds either a T or an Error.
//
// An Error names its kind; the kind names the side that caused it (downstream = the client,
// upstream = the server we forward to, internal = us), which maps to an HTTP status and to a
// stable metric label.

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace cutline {

enum class ErrorKind {
  // Downstream (the client sent something wrong) -> 4xx.
  kBadRequest,       // 400: malformed or invalid input
  kUnauthorized,     // 401: missing or wrong API key
  kNotFound,         // 404: unknown model, route or file
  kTooLarge,         // 413: body over the limit
  kHeadersTooLarge,  // 431: header bytes or count over the limit
  kRateLimited,      // 429: budget pool empty or admission queue full
  kUnsupported,      // 400/415: a valid request for something we do not do
  kRequestTimeout,   // 408: the client did not send its request head or body in time
  // Upstream (the server behind us failed) -> 502/504.
  kUpstream,  // 502: upstream error status, refused connection, bad response
  kTimeout,   // 504: a deadline or timeout elapsed
  // Internal (our own fault or our environment) -> 500/503.
  kIo,         // 500: file or socket error on our side
  kExhausted,  // 503: out of memory, KV blocks, descriptors
  kInternal,   // 500: a bug or an unexpected state
};

enum class ErrorSide { kDownstream, kUpstream, kInternal };

constexpr ErrorSide side_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kUpstream:
    case ErrorKind::kTimeout:
      return ErrorSide::kUpstream;
    case ErrorKind::kIo:
    case ErrorKind::kExhausted:
    case ErrorKind::kInternal:
      return ErrorSide::kInternal;
    default:
      return ErrorSide::kDownstream;
  }
}

// The HTTP status a client sees for an error of this kind.
constexpr int http_status(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kBadRequest:
      return 400;
    case ErrorKind::kUnauthorized:
      return 401;
    case ErrorKind::kNotFound:
      return 404;
    case ErrorKind::kTooLarge:
      return 413;
    case ErrorKind::kHeadersTooLarge:
      return 431;
    case ErrorKind::kRateLimited:
      return 429;
    case ErrorKind::kUnsupported:
      return 400;
    case ErrorKind::kRequestTimeout:
      return 408;
    case ErrorKind::kUpstream:
      return 502;
    case ErrorKind::kTimeout:
      return 504;
    case ErrorKind::kIo:
      return 500;
    case ErrorKind::kExhausted:
      return 503;
    case ErrorKind::kInternal:
      return 500;
  }
  return 500;
}

// Stable snake_case label for metrics and logs.
constexpr std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kBadRequest:
      return "bad_request";
    case ErrorKind::kUnauthorized:
      return "unauthorized";
    case ErrorKind::kNotFound:
      return "not_found";
    case ErrorKind::kTooLarge:
      return "too_large";
    case ErrorKind::kHeadersTooLarge:
      return "headers_too_large";
    case ErrorKind::kRateLimited:
      return "rate_limited";
    case ErrorKind::kUnsupported:
      return "unsupported";
    case ErrorKind::kRequestTimeout:
      return "request_timeout";
    case ErrorKind::kUpstream:
      return "upstream";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kIo:
      return "io";
    case ErrorKind::kExhausted:
      return "exhausted";
    case ErrorKind::kInternal:
      return "internal";
  }
  return "internal";
}

constexpr std::string_view to_string(ErrorSide side) {
  switch (side) {
    case ErrorSide::kDownstream:
      return "downstream";
    case ErrorSide::kUpstream:
      return "upstream";
    case ErrorSide::kInternal:
      return "internal";
  }
  return "internal";
}

struct Error {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;

  ErrorSide side() const { return side_of(kind); }
  int status() const { return http_status(kind); }
};

inline Error make_error(ErrorKind kind, std::string message) {
  return Error{kind, std::move(message)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& {
    assert(!ok());
    return std::get<1>(v_);
  }
  Error&& error() && {
    assert(!ok());
    return std::get<1>(std::move(v_));
  }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const& {
    assert(!ok_);
    return error_;
  }
  Error&& error() && {
    assert(!ok_);
    return std::move(error_);
  }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace cutline
