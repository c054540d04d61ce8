// Fuzz target for the OpenAI request parser and the rewriter: any body the parser accepts must
// rewrite (clamp max_tokens, force stream and include_usage) into a body the parser accepts with
// exactly the forced values, and a second rewrite must change nothing. When simdjson's validating
// DOM parser accepts the original, it must accept the rewrite too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "cutline/proto/wire/openai_request.h"
#include "cutline/proto/wire/request_rewriter.h"

using namespace cutline::proto;

namespace {

void check(std::string_view body, Endpoint endpoint, int64_t cap) {
  RequestParser parser;
  auto req = parser.parse(body, endpoint);
  if (!req.ok()) return;
  // Accessors must be safe on anything the parser accepted.
  for (size_t i = 0; i < req->messages.size(); ++i) {
    (void)req->message_role(i);
    (void)req->message_text(i);
  }
  for (size_t i = 0; i < req->prompts.size(); ++i) (void)req->prompt_text(i);

  RewriteOptions opt;
  opt.max_tokens = clamp_max_tokens(*req, cap);
  opt.force_stream = true;
  opt.force_include_usage = true;
  const std::string out = rewrite_request(*req, opt);

  RequestParser again_parser;
  auto again = again_parser.parse(out, endpoint);
  if (!again.ok()) std::abort();
  if (again->requested_max_tokens() != opt.max_tokens || !again->stream || !again->include_usage ||
      again->model != req->model || again->messages.size() != req->messages.size()) {
    std::abort();
  }
  if (rewrite_changes_body(*again, opt)) std::abort();

  simdjson::dom::parser dom;
  simdjson::dom::element element;
  if (dom.parse(simdjson::padded_string(body)).get(element) == simdjson::SUCCESS &&
      dom.parse(simdjson::padded_string(out)).get(element) != simdjson::SUCCESS) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  const int64_t cap = size > 0 ? 1 + data[0] % 200 : 16;
  check(body, Endpoint::kChatCompletions, cap);
  check(body, Endpoint::kCompletions, cap);
  return 0;
}
