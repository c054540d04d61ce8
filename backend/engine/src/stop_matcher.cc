#include "cutline/engine/stop_matcher.h"

#include <algorithm>

namespace cutline::engine {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) {
  for (auto& s : stop_strings)
    if (!s.empty()) stops_.push_back(std::move(s));
}

StopMatcher::Scan StopMatcher::push(std::string_view bytes) {
  Scan scan;
  if (matched_) {
    scan.matched = true;
    return scan;
  }
  if (stops_.empty()) {
    scan.released.assign(bytes);
    return scan;
  }
  pending_.append(bytes);
  // Earliest match wins (at equal start, the longer stop string).
  size_t best_pos = std::string::npos;
  const std::string* best = nullptr;
  for (const auto& s : stops_) {
    size_t pos = pending_.find(s);
    if (pos == std::string::npos) continue;
    if (pos < best_pos || (pos == best_pos && s.size() > best->size())) {
      best_pos = pos;
      best = &s;
    }
  }
  if (best) {
    matched_ = true;
    scan.matched = true;
    scan.matched_string = *best;
    scan.released = pending_.substr(0, best_pos);
    pending_.clear();
    return scan;
  }
  // Hold back the longest suffix of pending_ that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  scan.released = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return scan;
}

std::string StopMatcher::flush() {
  std::string out;
  if (!matched_) out.swap(pending_);
  pending_.clear();
  return out;
}

}  // namespace cutline::engine
