#include "cutline/server/logprobs_request.h"

#include <string>

#include <simdjson.h>

#include "cutline/engine/token_logprobs.h"

namespace cutline::server {

namespace {

using simdjson::SUCCESS;

Error refuse(RequestErrorDetail& detail, std::string param, std::string message) {
  detail.param = std::move(param);
  detail.code.clear();
  return make_error(ErrorKind::kBadRequest, std::move(message));
}

const std::string kRange = "[0, " + std::to_string(engine::kMaxTopLogprobs) + "]";

}  // namespace

Result<int32_t> requested_logprobs(const proto::ParsedRequest& r, RequestErrorDetail& detail) {
  // Most requests ask for none: no second parse then.
  if (r.body.find("logprobs\"") == std::string_view::npos) return -1;
  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  if (parser.parse(r.body.data(), r.body.size()).get_object().get(obj) != SUCCESS) return -1;
  simdjson::dom::element logprobs, top;
  const bool has_logprobs = obj.at_key("logprobs").get(logprobs) == SUCCESS && !logprobs.is_null();
  const bool has_top = obj.at_key("top_logprobs").get(top) == SUCCESS && !top.is_null();
  if (r.endpoint == proto::Endpoint::kCompletions) {
    if (!has_logprobs) return -1;
    int64_t n = 0;
    if (logprobs.get_int64().get(n) != SUCCESS || n < 0 || n > engine::kMaxTopLogprobs)
      return refuse(detail, "logprobs", "logprobs must be an integer in " + kRange);
    return static_cast<int32_t>(n);
  }
  bool on = false;
  if (has_logprobs && logprobs.get_bool().get(on) != SUCCESS)
    return refuse(detail, "logprobs", "logprobs must be a boolean");
  if (!has_top) return on ? 0 : -1;
  int64_t n = 0;
  if (top.get_int64().get(n) != SUCCESS || n < 0 || n > engine::kMaxTopLogprobs)
    return refuse(detail, "top_logprobs", "top_logprobs must be an integer in " + kRange);
  if (!on) return refuse(detail, "top_logprobs", "top_logprobs requires logprobs to be true");
  return static_cast<int32_t>(n);
}

}  // namespace cutline::server
