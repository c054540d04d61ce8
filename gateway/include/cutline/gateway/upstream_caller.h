#pragma once
// UpstreamCaller: how a request in flight sends its upstream request: one call, start(), with
// the callbacks that carry the upstream's head, body pieces and end (proto::ClientCallbacks'
// contract: on_head at most once, on_body zero or more times, then on_complete or on_error,
// nothing after the handle is cancelled). HttpUpstreamCaller sends it with the worker's
// HttpClient; the phase tests script the callbacks without a socket.
//
// Threading: start() on the worker's loop thread; the callbacks run on that thread.

#include "cutline/proto/http/http_client.h"

namespace cutline::gateway {

class UpstreamCaller {
 public:
  virtual ~UpstreamCaller() = default;
  // Starts `request`; the handle pauses, resumes or cancels it. Never calls a callback inline.
  virtual proto::ClientHandle start(proto::ClientRequest request,
                                    proto::ClientCallbacks callbacks) = 0;
};

// The production caller: the worker loop's HttpClient (keep-alive pools to the upstreams).
class HttpUpstreamCaller final : public UpstreamCaller {
 public:
  explicit HttpUpstreamCaller(proto::HttpClient& client) : client_(client) {}
  proto::ClientHandle start(proto::ClientRequest request,
                            proto::ClientCallbacks callbacks) override {
    return client_.start(std::move(request), std::move(callbacks));
  }

 private:
  proto::HttpClient& client_;
};

}  // namespace cutline::gateway
