#pragma once
// Request ids: every response the gateway answers carries one id, in the `X-Request-Id` and
// `Cutline-Request-Id` response headers, the stop record's `request_id`, the access-log line, and
// the `X-Request-Id` header of the upstream request (proto/README.md "Request ids").
//
// A client's own `X-Request-Id` is honoured when it is 1-128 visible ASCII characters without
// quotes, backslashes, commas or semicolons (safe in a header, a log line and a metric-free
// record); anything else is replaced by a fresh id, never echoed. A fresh id is "cl-" and 32 hex
// digits: 128 random bits from a per-thread generator seeded by the OS, so ids from different
// processes, replicas and restarts do not collide (no counter, no clock). Thread-safe.

#include <string>
#include <string_view>

#include "cutline/proto/http1/http_message.h"

namespace cutline::gateway {

inline constexpr size_t kMaxRequestIdBytes = 128;

// A fresh id ("cl-" + 32 lowercase hex digits).
std::string new_request_id();
// True when `id` may be used as sent (see above).
bool valid_request_id(std::string_view id);
// The client's X-Request-Id when valid, else a fresh id.
std::string request_id_for(const proto::HttpHeaders& client_headers);

}  // namespace cutline::gateway
