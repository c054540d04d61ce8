#pragma once
// TokenTiming: the time facts of one stream on the gateway's monotonic clock: arrival, admission,
// first content token, and the gaps between content tokens (mean, max, and the bucketed
// histogram handed to the metrics at finish). on_token() is the per-token path: no allocation,
// no lock.

#include <cstdint>
#include <optional>

#include "cutline/gateway/metrics.h"

namespace cutline::gateway {

class TokenTiming {
 public:
  explicit TokenTiming(int64_t arrival_ns = 0) : arrival_ns_(arrival_ns) {}

  void on_admitted(int64_t now_ns) { admitted_ns_ = now_ns; }
  void on_token(int64_t now_ns);

  int64_t arrival_ns() const { return arrival_ns_; }
  bool has_first_token() const { return first_token_ns_ >= 0; }
  int64_t last_token_ns() const { return last_token_ns_; }
  int64_t tokens() const { return tokens_; }

  std::optional<double> queue_ms() const;
  std::optional<double> ttft_ms() const;
  std::optional<double> itl_mean_ms() const;
  std::optional<double> itl_max_ms() const;
  double elapsed_ms(int64_t now_ns) const { return (now_ns - arrival_ns_) / 1e6; }
  const ItlBuckets& itl() const { return itl_; }

 private:
  int64_t arrival_ns_;
  int64_t admitted_ns_ = -1;
  int64_t first_token_ns_ = -1;
  int64_t last_token_ns_ = -1;
  int64_t tokens_ = 0;
  int64_t gap_sum_ns_ = 0;
  int64_t gap_max_ns_ = 0;
  ItlBuckets itl_;
};

}  // namespace cutline::gateway
