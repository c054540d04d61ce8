#include "cutline/gateway/server_limits.h"

#include <memory>

namespace cutline::gateway {

void apply_limits(const policy::Limits& limits, GatewayMetrics& metrics,
                  proto::ServerOptions& options) {
  options.limits.max_body_bytes = static_cast<size_t>(limits.max_body_bytes);
  options.limits.max_header_bytes = static_cast<size_t>(limits.max_header_bytes);
  options.request_header_timeout_ms = limits.request_header_timeout_ms;
  options.request_body_timeout_ms = limits.request_body_timeout_ms;
  options.http2_max_unfinished_streams = static_cast<uint32_t>(limits.http2_max_unfinished_streams);
  options.http2_max_buffered_request_bytes =
      static_cast<size_t>(limits.http2_max_buffered_request_bytes);
  options.http2_max_resets_per_s = static_cast<uint32_t>(limits.http2_max_resets_per_s);
  // One budget for every listener: the caps are the process's, not one port's.
  options.budget =
      std::make_shared<proto::ServerBudget>(static_cast<size_t>(limits.max_connections),
                                            static_cast<size_t>(limits.max_request_memory_bytes));
  options.on_refused = [&metrics](std::string_view reason) { metrics.refused(reason); };
}

}  // namespace cutline::gateway
