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
// A fragment ("#..."), which a client should not send, is dropped first (as uvicorn, Starlette
// and most routers drop it): "/v1/chat/completions#x" is the chat route and goes upstream
// without it.
//
// Canonical path: percent-encoded unreserved characters (ALPHA DIGIT - . _ ~) decoded, other
// escapes upper-cased; an encoded '/', '\' or NUL, a raw '\', or a control character refused;
// "//" collapsed; "." and ".." segments resolved (refused when ".." would climb above the root);
// a trailing '/' removed (except for "/" itself). The query is kept as sent. Routes compare this
// path byte for byte (case-sensitively).
//
// Core-route variants: the core routes (kCoreRoutePaths) run under their rules, every other path
// is passthrough, forwarded as it is. A lenient upstream router may still serve a passthrough
// path as a core route, so a canonical path that is not exactly a core route but that such a
// router could map onto one is refused (400 invalid_request), whatever the method. The router
// modelled: it decodes %-escapes (up to three times over), stops at a decoded '?' or '#' (or
// does not, having stripped ";parameters" first: both are checked), reads '\' as '/', matches
// case-insensitively (ASCII, and the non-ASCII letters U+0130, U+0131, U+017F and U+212A that
// Python's and .NET's case folding match to i, s and k), drops each segment's ";parameters",
// trims blanks and control characters around a segment and dots after it, ignores empty
// segments (a trailing '/'), and resolves dot segments last. So "/V1/chat/completions",
// "/v1/chat/completions;x=1", "/v1/chat/completions%20", "/v1/chat/completions%0A",
// "/v1/chat/x/..;/completions" and "/v1/models%3Fx" are refused, while "/v1/models/a;b" or
// "/v1/chat" stay passthrough. Pure.

#include <array>
#include <string>
#include <string_view>

#include "cutline/base/result.h"
#include "cutline/proto/http1/http_message.h"

namespace cutline::gateway {

// The paths the gateway runs itself (Gateway::handle): POST /v1/chat/completions,
// /v1/completions, /v1/responses and /v1/embeddings, GET /v1/models.
inline constexpr std::array<std::string_view, 5> kCoreRoutePaths = {
    "/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings", "/v1/models"};

// The canonical origin-form target ("/path" or "/path?query") of `request`, or a kBadRequest
// error saying what was refused.
Result<std::string> canonical_target(const proto::HttpRequest& request);

}  // namespace cutline::gateway
