#pragma once
// StopMatcher: finds client stop strings in a sequence's decoded output bytes as tokens arrive,
// across token boundaries, and decides which bytes are safe to emit. Bytes that could still be
// the beginning of a stop string are held back; they are released as soon as they cannot be
// (or at the end of the sequence). On a match, the text before the match is released and the
// matched text (and anything after it) is never emitted.
//
// Works on raw bytes: released text may end inside a UTF-8 character (feed it to a
// model::Utf8Streamer before sending it to a client).

#include <string>
#include <string_view>
#include <vector>

namespace cutline::engine {

class StopMatcher {
 public:
  StopMatcher() = default;
  explicit StopMatcher(std::vector<std::string> stop_strings);

  struct Scan {
    std::string released;  // bytes now safe to emit (in order, after earlier releases)
    bool matched = false;  // a stop string matched; nothing more will be released
    std::string matched_string;
  };

  // Appends the bytes of one token.
  Scan push(std::string_view bytes);
  // End of sequence without a match: releases the held-back bytes.
  std::string flush();

  bool empty() const { return stops_.empty(); }
  const std::string& held() const { return pending_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // bytes not yet released (a possible stop-string prefix)
  bool matched_ = false;
};

}  // namespace cutline::engine
