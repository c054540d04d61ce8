// Fuzz target for the HTTP/1.1 codec (Http1Parser on llhttp). The first input byte picks the
// parser type and a split point; the rest is fed in two parts with pauses at every message end
// (as the server does), then finish() as at EOF. Invariants checked: feed() never consumes more
// than it was given, a failed parser stays failed, and the body a sink receives never exceeds
// the body limit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cutline/proto/http1/http1_parser.h"

namespace {

using cutline::proto::Http1Head;
using cutline::proto::Http1Limits;
using cutline::proto::Http1Parser;
using cutline::proto::HttpHeaders;

struct Sink : Http1Parser::Sink {
  size_t body_bytes = 0;
  size_t max_body = 0;
  bool on_head(Http1Head& head) override {
    body_bytes = 0;
    (void)head.headers.get("content-type");
    return true;
  }
  bool on_body(std::string_view data) override {
    body_bytes += data.size();
    if (max_body != 0 && body_bytes > max_body) std::abort();
    return (body_bytes & 1) == 0;  // pause now and then, inside bodies too
  }
  bool on_message_complete(HttpHeaders& trailers) override {
    (void)trailers.size();
    return false;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  Sink sink;
  Http1Limits limits{512, 16, 1024, 256};
  sink.max_body = limits.max_body_bytes;
  const auto type = (control & 1) != 0 ? Http1Parser::Type::kResponse : Http1Parser::Type::kRequest;
  Http1Parser parser(type, limits, sink);
  parser.set_head_response((control & 2) != 0);
  const size_t split = input.empty() ? 0 : (control >> 2) % (input.size() + 1);
  std::string_view parts[2] = {input.substr(0, split), input.substr(split)};
  bool failed = false;
  for (std::string_view part : parts) {
    int guard = 0;
    while (!part.empty() && !failed) {
      auto consumed = parser.feed(part);
      if (!consumed.ok()) {
        failed = true;
        if (parser.feed("GET / HTTP/1.1\r\n\r\n").ok()) std::abort();  // stays failed
        break;
      }
      if (*consumed > part.size()) std::abort();
      part.remove_prefix(*consumed);
      parser.resume();
      if (++guard > 1 << 20) std::abort();  // no progress
    }
  }
  if (!failed) (void)parser.finish();
  return 0;
}
