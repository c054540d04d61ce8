#pragma once
// http_fetch: a blocking HTTP/1.1 request for tools and tests. It runs its own EventLoop and
// HttpClient on the calling thread until the response is complete, failed, or the timeout
// passed. Not for use on an event-loop thread (it would block that loop).

#include <cstdint>
#include <string>
#include <string_view>

#include "cutline/base/result.h"
#include "cutline/proto/http/http_client.h"
#include "cutline/proto/http1/http_message.h"

namespace cutline::proto {

// "http://host[:port]/path?query" split for a ClientRequest. Port defaults to 80; IPv6 hosts in
// brackets. Errors: kBadRequest for anything else (https is not supported here).
struct HttpUrl {
  std::string host;
  uint16_t port = 80;
  std::string target = "/";
};
Result<HttpUrl> parse_http_url(std::string_view url);

// Sends `request` and returns the buffered response (any status; a 500 is a value, not an
// error). Errors: ClientError::to_error() of a transport failure, or kTimeout after timeout_ms.
Result<HttpResponse> http_fetch(const ClientRequest& request, int64_t timeout_ms = 30000);
// The same for a URL.
Result<HttpResponse> http_fetch(std::string_view url, std::string_view method = "GET",
                                const HttpHeaders& headers = {}, std::string body = {},
                                int64_t timeout_ms = 30000);

}  // namespace cutline::proto
