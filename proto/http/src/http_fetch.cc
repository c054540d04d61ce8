#include "cutline/proto/http/http_fetch.h"

#include <charconv>
#include <optional>

#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/net/timer.h"

namespace cutline::proto {

Result<HttpUrl> parse_http_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return Error{ErrorKind::kBadRequest, "not an http:// URL: " + std::string(url)};
  }
  std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  HttpUrl out;
  if (slash != std::string_view::npos) {
    out.target = std::string(rest.substr(slash));
    if (out.target.front() == '?') out.target.insert(0, "/");
  }
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return Error{ErrorKind::kBadRequest, "bad IPv6 host in URL: " + std::string(url)};
    }
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':')
        return Error{ErrorKind::kBadRequest, "bad URL: " + std::string(url)};
      port_text = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) return Error{ErrorKind::kBadRequest, "no host in URL: " + std::string(url)};
  if (!port_text.empty()) {
    unsigned port = 0;
    const auto res = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (res.ec != std::errc() || res.ptr != port_text.data() + port_text.size() || port == 0 ||
        port > 65535) {
      return Error{ErrorKind::kBadRequest, "bad port in URL: " + std::string(url)};
    }
    out.port = static_cast<uint16_t>(port);
  }
  return out;
}

Result<HttpResponse> http_fetch(const ClientRequest& request, int64_t timeout_ms) {
  EventLoop loop;
  std::optional<Result<HttpResponse>> outcome;
  HttpResponse response;
  {
    HttpClient client(loop);
    Timer timeout(loop, [&] {
      outcome.emplace(Error{ErrorKind::kTimeout, "no complete response from " + request.host + ":" +
                                                     std::to_string(request.port) + " within " +
                                                     std::to_string(timeout_ms) + " ms"});
      loop.stop();
    });
    timeout.arm(timeout_ms);
    ClientCallbacks callbacks;
    callbacks.on_head = [&](int status, HttpHeaders& headers) {
      response.status = status;
      response.reason = std::string(reason_phrase(status));
      response.headers = std::move(headers);
    };
    callbacks.on_body = [&](std::string_view data) { response.body.append(data); };
    callbacks.on_complete = [&](HttpHeaders& trailers) {
      response.trailers = std::move(trailers);
      outcome.emplace(std::move(response));
      loop.stop();
    };
    callbacks.on_error = [&](const ClientError& error) {
      outcome.emplace(error.to_error());
      loop.stop();
    };
    ClientHandle handle = client.start(request, std::move(callbacks));
    loop.run();
    handle.cancel();
  }
  return std::move(*outcome);
}

Result<HttpResponse> http_fetch(std::string_view url, std::string_view method,
                                const HttpHeaders& headers, std::string body, int64_t timeout_ms) {
  Result<HttpUrl> parsed = parse_http_url(url);
  if (!parsed.ok()) return parsed.error();
  ClientRequest request;
  request.method = std::string(method);
  request.host = parsed->host;
  request.port = parsed->port;
  request.target = parsed->target;
  request.headers = headers;
  request.body = std::move(body);
  return http_fetch(request, timeout_ms);
}

}  // namespace cutline::proto
