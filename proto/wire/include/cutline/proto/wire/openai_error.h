#pragma once
// OpenAI-style error bodies: {"error":{"message":...,"type":...,"param":...,"code":...}} written
// from a cutline::Error for every error Cutline answers itself (400s from request validation,
// 401, 429 admission rejections, 502/504 upstream failures, 413/431 from the HTTP codec),
// optionally with the stop record inside the error object ("cutline": {...}) so that a rejected or
// failed request is labelled like every other. And the parser for such bodies (from an upstream or
// in tests).
//
// type from ErrorKind:
//   kBadRequest, kNotFound, kTooLarge, kHeadersTooLarge, kUnsupported -> "invalid_request_error"
//   kUnauthorized -> "authentication_error"     kRateLimited -> "rate_limit_error"
//   kUpstream -> "upstream_error"               kTimeout -> "timeout_error"
//   kIo, kInternal -> "server_error"            kExhausted -> "service_unavailable_error"
// code defaults to the kind's stable label (to_string(ErrorKind): "bad_request", "rate_limited"…).

#include <optional>
#include <string>
#include <string_view>

#include "cutline/base/result.h"
#include "cutline/proto/wire/openai_response.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::proto {

std::string_view openai_error_type(ErrorKind kind);

struct ErrorBodyFields {
  std::string_view param = {};  // the offending request field, e.g. "max_tokens"; null when empty
  std::string_view code = {};   // overrides the default code when non-empty
  std::string_view type = {};   // overrides openai_error_type(kind) when non-empty
                                // ("permission_error" for a 403 the policy answers)
  const StopRecord* cutline = nullptr;  // written as error.cutline when set
};
void write_error_body(std::string& out, const Error& error, const ErrorBodyFields& fields = {});
std::string error_body(const Error& error, const ErrorBodyFields& fields = {});

// A parsed error body (UpstreamError from openai_response.h plus the optional stop record).
struct ParsedErrorBody {
  UpstreamError error;
  std::optional<StopRecord> cutline;
};
// Accepts {"error":{...}} (cutline inside "error" or at top level) and vLLM's top-level
// {"object":"error","message":...}. Anything else is a kUpstream error.
Result<ParsedErrorBody> parse_error_body(std::string_view body);

// An upstream's own error body with `record` as the answer's one stop record, every other byte
// kept, into `out` (cleared first). In an OpenAI error object ({"error": {...}}) the record goes
// where the gateway's own error bodies carry it, error.cutline (over one the upstream put there,
// as a Cutline backend does); in any other JSON object it is the top-level "cutline" (over one
// sent there). A top-level "cutline" beside an error object is overwritten with the same record.
// Fails (kUpstream) when `body` is not one valid JSON object: the caller passes it on unchanged.
Status put_error_record(std::string_view body, const StopRecord& record, std::string& out);

}  // namespace cutline::proto
