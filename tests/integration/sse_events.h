#pragma once
// The SSE events of a streamed answer, for the integration suites (gateway and backend alike).

#include <string>
#include <string_view>
#include <vector>

#include "cutline/proto/sse/sse_parser.h"

namespace cutline::test {

// Every SSE data payload (except [DONE]) in order; `done` tells whether [DONE] was seen.
inline std::vector<std::string> sse_payloads(const std::string& sse_body, bool* done = nullptr) {
  proto::SseParser p;
  std::string_view in = sse_body;
  std::vector<std::string> out;
  if (done) *done = false;
  for (;;) {
    auto s = p.next(in);
    if (s != proto::SseParser::Step::kEvent) break;
    if (p.event().done) {
      if (done) *done = true;
    } else {
      out.emplace_back(p.event().data);
    }
  }
  return out;
}

}  // namespace cutline::test
