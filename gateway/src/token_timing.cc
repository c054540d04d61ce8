#include "cutline/gateway/token_timing.h"

#include <algorithm>

namespace cutline::gateway {

void TokenTiming::on_token(int64_t now_ns) {
  if (first_token_ns_ < 0) {
    first_token_ns_ = now_ns;
  } else {
    const int64_t gap = now_ns - last_token_ns_;
    gap_sum_ns_ += gap;
    gap_max_ns_ = std::max(gap_max_ns_, gap);
    itl_.add(gap / 1e9);
  }
  last_token_ns_ = now_ns;
  ++tokens_;
}

std::optional<double> TokenTiming::queue_ms() const {
  if (admitted_ns_ < 0) return std::nullopt;
  return (admitted_ns_ - arrival_ns_) / 1e6;
}

std::optional<double> TokenTiming::ttft_ms() const {
  if (first_token_ns_ < 0) return std::nullopt;
  return (first_token_ns_ - arrival_ns_) / 1e6;
}

std::optional<double> TokenTiming::itl_mean_ms() const {
  if (tokens_ < 2) return std::nullopt;
  return gap_sum_ns_ / 1e6 / static_cast<double>(tokens_ - 1);
}

std::optional<double> TokenTiming::itl_max_ms() const {
  if (tokens_ < 2) return std::nullopt;
  return gap_max_ns_ / 1e6;
}

}  // namespace cutline::gateway
