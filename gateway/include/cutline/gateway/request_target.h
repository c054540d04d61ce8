#pragma once
// Request-target canonicalization: the path the gateway routes and the policy matches is the path
// it forwards, so that no spelling of a route reaches an upstream outside the policy (an upstream
// such as uvicorn decodes and normalizes paths the same way).
//
//   origin-form "/v1/chat/completions?x=1"   accepted, canonicalized as below
//   absolute-form "http://host/v1/..."       accepted only when its authority is the request's
//                                            Host (it names this gateway); the origin-form is
//                                            kept
//   "*" (OPTIONS *), CONNECT, anything else  refused (400 invalid_request)
//
// Canonical path: percent-encoded unreserved characters (ALPHA DIGIT - . _ ~) decoded, other
// escapes upper-cased; an encoded '/', '\' or NUL, a raw '\', or a control character refused;
// "//" collapsed; "." and ".." segments resolved (refused when ".." would climb above the root);
// a trailing '/' removed (except for "/" itself). The query is kept as sent. Pure.

#include <string>
#include <string_view>

#include "cutline/base/result.h"
#include "cutline/proto/http1/http_message.h"

namespace cutline::gateway {

// The canonical origin-form target ("/path" or "/path?query") of `request`, or a kBadRequest
// error saying what was refused.
Result<std::string> canonical_target(const proto::HttpRequest& request);

}  // namespace cutline::gateway
