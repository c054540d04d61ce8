#pragma once
// JSON as a chat template prints it: Jinja's `tojson` filter as Hugging Face's apply_chat_template
// defines it (Python's json.dumps with ensure_ascii=False and no key sorting): object keys in
// the order given, ", " between items and ": " after keys, non-ASCII characters kept, only '"',
// '\\' and control characters escaped, floats in Python's shortest repr ("1.0", "1e-05",
// "1e+16"), integers as written. The tool definitions and the arguments of earlier tool calls
// go into a prompt this way, so the prompt is the one the model's reference template renders.
//
// Who calls it: the backend's tool request parsing (tool_request.h).

#include <string>
#include <string_view>

#include "cutline/base/result.h"

namespace cutline::server {

// `json` re-printed; kBadRequest when it is not one valid JSON value.
Result<std::string> template_tojson(std::string_view json);

// Python's repr() of a finite double ("0.1", "100000.0", "1e+16", "1.5e-05").
std::string python_float_repr(double value);

}  // namespace cutline::server
