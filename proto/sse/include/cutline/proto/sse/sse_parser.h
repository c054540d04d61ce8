#pragma once
// SseParser: an incremental parser for text/event-stream (the WHATWG "server-sent events"
// framing) as OpenAI-compatible upstreams send it. The gateway feeds it every byte it reads from
// an upstream, in whatever pieces the socket delivers (one byte at a time included), and gets
// back complete events; the probe and the tests read streams with it too.
//
// What it accepts (WHATWG HTML "Parsing an event stream"):
// - line endings LF, CRLF and a lone CR, mixed freely, split anywhere across feeds;
// - comment lines (starting with ':'), ignored;
// - `field:value` and `field: value` (one leading space after the colon is dropped); a line
//   without a colon is a field with an empty value; unknown fields are ignored;
// - `data:` lines of one event joined with '\n'; `event:`, `id:` (persists across events, as the
//   spec's "last event ID"), `retry:` (digits only, else ignored);
// - a blank line dispatches the event; an event without any data line is not dispatched (its
//   `event:` is discarded), as the spec says;
// - a UTF-8 byte order mark at the very start of the stream is skipped.
// `[DONE]` (OpenAI's end-of-stream sentinel) is recognised and flagged on the event.
//
// Limits: a line longer than max_line_bytes, or an event (all its lines, comments included, up to
// the blank line) longer than max_event_bytes, is an error value, never unbounded growth. After an
// error the parser stays failed until reset().
//
// Allocation: the parser keeps its buffers between events (cleared, capacity kept), so a
// steady-state stream of similar events allocates nothing. The views in an SseEvent point into
// those buffers, or (an event whose one data line came whole in a single feed: the usual token
// event, not copied at all) into the bytes given to that next()/feed(); they stay valid until
// the next call to next()/feed()/reset(), and while those bytes are.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cutline/base/result.h"

namespace cutline::proto {

struct SseOptions {
  static constexpr size_t kDefaultLimitBytes = size_t{1} << 20;  // 1 MiB
  size_t max_line_bytes = kDefaultLimitBytes;                    // one line, without its terminator
  size_t max_event_bytes = kDefaultLimitBytes;  // one event's lines, terminators included
  // Keep the exact bytes of each dispatched event in SseEvent::raw (one memcpy per byte), for a
  // proxy that passes events through unchanged.
  bool capture_raw = false;
};

// One dispatched event. Views are valid until the parser is next called (and while the bytes it
// was fed are: `data` may point into them).
struct SseEvent {
  std::string_view event;  // the `event:` field; empty when absent ("message" by the spec)
  std::string_view data;   // the `data:` lines joined with '\n' (no trailing '\n')
  std::string_view id;     // the last event ID seen so far in the stream (persists across events)
  std::optional<uint64_t> retry_ms;  // a valid `retry:` field in this event
  bool done = false;                 // data is exactly "[DONE]"
  // With SseOptions::capture_raw: the event's bytes from its first line through the blank line
  // that ended it (comments and unknown fields included). When a CRLF that ends the blank line is
  // split across two feeds, raw ends at the CR (still a valid event terminator). Empty otherwise.
  std::string_view raw;
};

enum class SseErrorCode : uint8_t {
  kNone,
  kLineTooLong,    // a line exceeded max_line_bytes
  kEventTooLarge,  // an event exceeded max_event_bytes
};
std::string_view to_string(SseErrorCode code);

class SseParser {
 public:
  enum class Step : uint8_t {
    kNeedMore,  // `in` is consumed; feed more bytes
    kEvent,     // an event is ready: event(); `in` holds the bytes not yet consumed
    kError,     // a limit was exceeded: error_code(); the parser stays failed until reset()
  };

  explicit SseParser(SseOptions options = {});

  // Pull API: consumes bytes from the front of `in` until one event completes (kEvent, `in`
  // advanced past it) or `in` is exhausted (kNeedMore, `in` empty). Typical loop:
  //   std::string_view in = bytes;
  //   for (;;) { auto s = p.next(in); if (s == Step::kEvent) use(p.event()); else break; }
  Step next(std::string_view& in);
  // The event of the last kEvent step.
  const SseEvent& event() const { return event_; }

  // Callback API: feeds all of `bytes`, calling on_event(const SseEvent&) for each event.
  // Stops at the first error and returns it (see error()).
  template <typename OnEvent>
  Status feed(std::string_view bytes, OnEvent&& on_event) {
    for (;;) {
      switch (next(bytes)) {
        case Step::kEvent:
          on_event(event_);
          continue;
        case Step::kNeedMore:
          return {};
        case Step::kError:
          return error();
      }
    }
  }

  // The error of a failed parser, as an Error (kind kUpstream, message naming the limit).
  Error error() const;
  SseErrorCode error_code() const { return error_code_; }
  bool failed() const { return error_code_ != SseErrorCode::kNone; }

  // True when bytes of an event that has not been dispatched yet are buffered (a partial line, or
  // lines without their blank line). At end of stream the spec discards them; a caller can treat
  // this as "the stream ended mid-event".
  bool has_partial_event() const;
  // Number of events dispatched since construction or reset().
  uint64_t events_dispatched() const { return events_dispatched_; }

  // Forgets everything, including the last event ID, and clears a failure. Keeps buffer capacity.
  void reset();

 private:
  // Handles one complete line (without its terminator). Returns true when it dispatched an event.
  // `in_input`: `line` points into the caller's bytes (not into line_).
  bool on_line(std::string_view line, bool in_input);
  // Copies a data line still viewed in the caller's bytes into data_ (the feed is ending).
  void keep_data();
  bool dispatch();
  bool fail(SseErrorCode code);

  SseOptions options_;
  void clear_current_event();

  // The event being assembled. Its buffers are swapped with the *_out_ ones at dispatch, so the
  // dispatched event's views stay valid while the next one is read, and both keep capacity.
  std::string line_;  // partial line carried across feeds
  std::string data_;  // data lines of the current event, each followed by '\n'
  // The current event's one data line while it is still in the caller's bytes (data_ empty).
  std::string_view data_view_;
  bool data_in_input_ = false;
  std::string event_type_;
  std::string raw_;  // raw bytes of the current event (capture_raw only)
  std::optional<uint64_t> retry_ms_;
  size_t event_bytes_ = 0;  // bytes of the current event's complete lines, terminators included
  bool have_data_ = false;  // at least one data line in the current event

  std::string data_out_;
  std::string event_type_out_;
  std::string raw_out_;
  std::string last_id_;

  bool skip_lf_ = false;      // the last byte seen was a CR ending a line; an LF next is its pair
  bool lf_in_event_ = false;  // that CR ended a non-blank line: the LF belongs to the event
  uint8_t bom_state_ = 0;     // bytes of a leading UTF-8 BOM matched so far; kBomDone when decided
  SseErrorCode error_code_ = SseErrorCode::kNone;
  uint64_t events_dispatched_ = 0;
  SseEvent event_;
};

}  // namespace cutline::proto
