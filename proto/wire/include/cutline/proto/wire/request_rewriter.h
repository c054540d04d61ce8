#pragma once
// Request rewriter: the gateway's only way to change a client's request body. It changes the
// named fields and keeps every other byte exactly as the client sent it (unknown fields, key order,
// whitespace, unicode escapes), by splicing at the byte ranges the parser recorded
// (ParsedRequest::anchors). New keys are inserted right after the top-level '{'.
//
//   max_tokens            replaced in every limit field the client used (max_tokens and/or
//                         max_completion_tokens, a null value included); inserted under
//                         `inserted_limit_key` when the client gave neither (the gateway uses
//                         "max_completion_tokens" on the chat route: reasoning models refuse
//                         max_tokens; "max_tokens" on the completions route)
//   force_stream          "stream": true (replacing the client's value or inserted)
//   force_include_usage   "stream_options": {"include_usage": true}; merged into the client's
//                         stream_options object keeping its other keys; replaces a null value

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cutline/proto/wire/openai_request.h"

namespace cutline::proto {

struct RewriteOptions {
  // The max_tokens to send upstream (the gateway's effective limit, see clamp_max_tokens).
  std::optional<int64_t> max_tokens;
  // The key a limit is inserted under when the client sent none.
  std::string_view inserted_limit_key = "max_tokens";
  bool force_stream = false;
  bool force_include_usage = false;
};

// min(client's requested limit, cap); the cap when the client gave none.
inline int64_t clamp_max_tokens(const ParsedRequest& req, int64_t cap) {
  auto requested = req.requested_max_tokens();
  return requested && *requested < cap ? *requested : cap;
}

// True when rewrite_request would change a byte of the body.
bool rewrite_changes_body(const ParsedRequest& req, const RewriteOptions& options);

// Writes the rewritten body into `out` (cleared first; its capacity is reused). `req.body` must
// be the body `req` was parsed from.
void rewrite_request(const ParsedRequest& req, const RewriteOptions& options, std::string& out);
std::string rewrite_request(const ParsedRequest& req, const RewriteOptions& options);

}  // namespace cutline::proto
