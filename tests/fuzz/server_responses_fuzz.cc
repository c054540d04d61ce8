// Fuzz target for the backend's Responses API request parser (POST /v1/responses): any bytes
// either are refused with a 4xx naming a field, or parse into a request the backend can serve —
// a model, at least one message with a role its chat templates know, limits in range.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "cutline/engine/token_logprobs.h"
#include "cutline/proto/wire/openai_request.h"
#include "cutline/server/responses_request.h"

using namespace cutline;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  server::RequestErrorDetail detail;
  auto r = server::parse_responses_request(body, detail);
  if (!r.ok()) {
    const int status = r.error().status();
    if (status < 400 || status >= 500) std::abort();
    return 0;
  }
  if (r->model.empty() || r->messages.empty()) std::abort();
  for (const auto& m : r->messages)
    if (m.role != "user" && m.role != "assistant" && m.role != "system" && m.role != "tool")
      std::abort();
  if (r->max_output_tokens &&
      (*r->max_output_tokens < 1 || *r->max_output_tokens > proto::kMaxTokensLimit))
    std::abort();
  if (r->top_logprobs < -1 || r->top_logprobs > engine::kMaxTopLogprobs) std::abort();
  if (r->temperature && !(*r->temperature >= 0 && *r->temperature <= 2)) std::abort();
  if (r->top_p && !(*r->top_p > 0 && *r->top_p <= 1)) std::abort();
  return 0;
}
