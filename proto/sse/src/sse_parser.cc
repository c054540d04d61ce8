#include "cutline/proto/sse/sse_parser.h"

#include <cstring>

namespace cutline::proto {
namespace {

constexpr char kBom[] = "\xEF\xBB\xBF";
constexpr uint8_t kBomDone = 0xFF;

// Index of the first CR or LF in `s`, or npos. Two memchr calls (both vectorised by libc) beat
// a byte loop on the ~100-byte lines of a token stream.
size_t find_line_end(std::string_view s) {
  const void* lf = std::memchr(s.data(), '\n', s.size());
  size_t limit = lf ? static_cast<size_t>(static_cast<const char*>(lf) - s.data()) : s.size();
  const void* cr = std::memchr(s.data(), '\r', limit);
  if (cr) return static_cast<size_t>(static_cast<const char*>(cr) - s.data());
  return lf ? limit : std::string_view::npos;
}

std::optional<uint64_t> parse_retry(std::string_view v) {
  if (v.empty() || v.size() > 19) return std::nullopt;  // 19 digits always fit in uint64
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

}  // namespace

std::string_view to_string(SseErrorCode code) {
  switch (code) {
    case SseErrorCode::kNone:
      return "none";
    case SseErrorCode::kLineTooLong:
      return "line_too_long";
    case SseErrorCode::kEventTooLarge:
      return "event_too_large";
  }
  return "none";
}

SseParser::SseParser(SseOptions options) : options_(options) {}

void SseParser::reset() {
  clear_current_event();
  line_.clear();
  data_out_.clear();
  event_type_out_.clear();
  raw_out_.clear();
  last_id_.clear();
  skip_lf_ = false;
  lf_in_event_ = false;
  bom_state_ = 0;
  error_code_ = SseErrorCode::kNone;
  events_dispatched_ = 0;
  event_ = SseEvent{};
}

void SseParser::clear_current_event() {
  data_.clear();
  data_view_ = {};
  data_in_input_ = false;
  event_type_.clear();
  raw_.clear();
  retry_ms_.reset();
  event_bytes_ = 0;
  have_data_ = false;
}

bool SseParser::has_partial_event() const { return !line_.empty() || event_bytes_ > 0; }

Error SseParser::error() const {
  switch (error_code_) {
    case SseErrorCode::kLineTooLong:
      return make_error(
          ErrorKind::kUpstream,
          "SSE line longer than " + std::to_string(options_.max_line_bytes) + " bytes");
    case SseErrorCode::kEventTooLarge:
      return make_error(
          ErrorKind::kUpstream,
          "SSE event larger than " + std::to_string(options_.max_event_bytes) + " bytes");
    case SseErrorCode::kNone:
      break;
  }
  return make_error(ErrorKind::kInternal, "SSE parser has no error");
}

bool SseParser::fail(SseErrorCode code) {
  error_code_ = code;
  line_.clear();
  clear_current_event();
  return false;
}

SseParser::Step SseParser::next(std::string_view& in) {
  if (failed()) return Step::kError;

  // A leading byte order mark is dropped; bytes that only looked like its start are line bytes.
  while (bom_state_ != kBomDone && !in.empty()) {
    if (in.front() == kBom[bom_state_]) {
      in.remove_prefix(1);
      if (++bom_state_ == 3) bom_state_ = kBomDone;
      continue;
    }
    line_.append(kBom, bom_state_);
    if (options_.capture_raw) raw_.append(kBom, bom_state_);
    bom_state_ = kBomDone;
  }

  if (skip_lf_ && !in.empty()) {
    skip_lf_ = false;
    if (in.front() == '\n') {
      // The LF of a CRLF split across feeds. It belongs to the event being read, unless the CR
      // ended the blank line that dispatched the previous one (that event's raw ends at the CR).
      if (lf_in_event_) {
        ++event_bytes_;
        if (options_.capture_raw) raw_.push_back('\n');
      }
      in.remove_prefix(1);
    }
  }

  while (!in.empty()) {
    const size_t pos = find_line_end(in);
    if (pos == std::string_view::npos) {
      if (line_.size() + in.size() > options_.max_line_bytes) {
        fail(SseErrorCode::kLineTooLong);
        in = {};
        return Step::kError;
      }
      line_.append(in);
      if (options_.capture_raw) raw_.append(in);
      in = {};
      keep_data();
      return Step::kNeedMore;
    }

    size_t terminator = 1;
    if (in[pos] == '\r') {
      if (pos + 1 < in.size()) {
        if (in[pos + 1] == '\n') terminator = 2;
      } else {
        skip_lf_ = true;  // the LF of a CRLF may arrive with the next feed
      }
    }
    const size_t line_bytes = line_.size() + pos;
    if (line_bytes > options_.max_line_bytes) {
      fail(SseErrorCode::kLineTooLong);
      in = {};
      return Step::kError;
    }
    event_bytes_ += line_bytes + terminator;
    if (event_bytes_ > options_.max_event_bytes) {
      fail(SseErrorCode::kEventTooLarge);
      in = {};
      return Step::kError;
    }
    if (options_.capture_raw) raw_.append(in.data(), pos + terminator);

    std::string_view line;
    const bool in_input = line_.empty();
    if (in_input) {
      line = in.substr(0, pos);  // the common case: the whole line is in this feed, no copy
    } else {
      line_.append(in.data(), pos);
      line = line_;
    }
    const bool dispatched = on_line(line, in_input);
    lf_in_event_ = !line.empty();  // a blank line ended (or dropped) the event
    line_.clear();
    in.remove_prefix(pos + terminator);
    if (dispatched) return Step::kEvent;
  }
  keep_data();
  return Step::kNeedMore;
}

void SseParser::keep_data() {
  if (!data_in_input_) return;
  data_.assign(data_view_);
  data_.push_back('\n');
  data_view_ = {};
  data_in_input_ = false;
}

bool SseParser::on_line(std::string_view line, bool in_input) {
  if (line.empty()) return dispatch();
  if (line.front() == ':') return false;  // comment

  std::string_view field = line;
  std::string_view value;
  const size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }

  if (field == "data") {
    if (!have_data_ && in_input) {
      // The usual event, one data line that came whole in this feed: the event views it in the
      // caller's bytes (no copy), unless the feed ends before the blank line (keep_data()).
      data_view_ = value;
      data_in_input_ = true;
    } else {
      keep_data();
      data_.append(value);
      data_.push_back('\n');
    }
    have_data_ = true;
  } else if (field == "event") {
    event_type_.assign(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) last_id_.assign(value);
  } else if (field == "retry") {
    if (auto ms = parse_retry(value)) retry_ms_ = ms;
  }
  return false;
}

bool SseParser::dispatch() {
  if (!have_data_) {
    clear_current_event();
    return false;
  }
  if (data_in_input_) {
    event_.data = data_view_;
  } else {
    data_out_.swap(data_);
    event_.data = std::string_view(data_out_.data(), data_out_.size() - 1);  // drop the last '\n'
  }
  event_type_out_.swap(event_type_);
  raw_out_.swap(raw_);

  event_.event = event_type_out_;
  event_.id = last_id_;
  event_.retry_ms = retry_ms_;
  event_.done = event_.data == "[DONE]";
  event_.raw = options_.capture_raw ? std::string_view(raw_out_) : std::string_view();
  ++events_dispatched_;
  clear_current_event();
  return true;
}

}  // namespace cutline::proto
