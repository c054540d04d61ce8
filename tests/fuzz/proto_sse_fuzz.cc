// Fuzz target for SseParser: the same bytes fed in one piece, split at several points and one
// byte at a time must give the same events (and the same failure); with raw capture, every
// event's raw bytes must parse back to the same event on their own.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/proto/sse/sse_parser.h"

namespace {

using cutline::proto::SseEvent;
using cutline::proto::SseOptions;
using cutline::proto::SseParser;

struct Seen {
  std::string event;
  std::string data;
  std::string id;
  bool done;
  bool operator==(const Seen&) const = default;
};

struct Outcome {
  std::vector<Seen> events;
  std::vector<std::string> raws;
  bool failed = false;
  bool operator==(const Outcome& o) const { return events == o.events && failed == o.failed; }
};

Outcome run(std::string_view input, const std::vector<size_t>& cuts, const SseOptions& opt) {
  SseParser p(opt);
  Outcome out;
  size_t pos = 0;
  auto feed = [&](std::string_view piece) {
    auto s = p.feed(piece, [&](const SseEvent& e) {
      out.events.push_back({std::string(e.event), std::string(e.data), std::string(e.id), e.done});
      out.raws.emplace_back(e.raw);
    });
    if (!s.ok()) out.failed = true;
  };
  for (size_t cut : cuts) {
    if (cut < pos || cut > input.size()) continue;
    feed(input.substr(pos, cut - pos));
    pos = cut;
  }
  feed(input.substr(pos));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  SseOptions opt;
  opt.max_line_bytes = 512;
  opt.max_event_bytes = 2048;
  opt.capture_raw = true;

  const Outcome whole = run(input, {}, opt);
  const Outcome thirds = run(input, {size / 3, 2 * size / 3}, opt);
  std::vector<size_t> every;
  if (size <= 4096) {
    for (size_t i = 1; i < size; ++i) every.push_back(i);
  }
  const Outcome bytes = run(input, every, opt);
  if (!(whole == thirds) || !(whole == bytes)) std::abort();

  // Each event's raw bytes are a complete event by themselves.
  for (size_t i = 0; i < whole.raws.size(); ++i) {
    SseParser alone(opt);
    std::vector<Seen> got;
    // A blank line first: it dispatches nothing, and a byte order mark at the start of the raw
    // bytes is then line content, as it was mid-stream (only a stream's first bytes may be a BOM).
    auto s = alone.feed("\n", [&](const SseEvent&) { std::abort(); });
    if (!s.ok()) std::abort();
    s = alone.feed(whole.raws[i], [&](const SseEvent& e) {
      got.push_back({std::string(e.event), std::string(e.data), "", e.done});
    });
    if (!s.ok() || got.size() != 1 || got[0].data != whole.events[i].data ||
        got[0].event != whole.events[i].event) {
      std::abort();
    }
  }
  return 0;
}
