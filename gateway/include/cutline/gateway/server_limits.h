#pragma once
// How the policy's `limits` section (policy.h: Limits) becomes the client listeners' server
// options: body and header sizes, request deadlines, the per-HTTP/2-connection caps, and one
// process-wide ServerBudget (connection cap, request memory) shared by every listener. What the
// servers refuse on their own (connection cap, rapid reset, accept back-off) is counted in
// cutline_refused_total{reason}. Called once at start; a reload does not change these.

#include "cutline/gateway/metrics.h"
#include "cutline/policy/policy.h"
#include "cutline/proto/http/http_server.h"

namespace cutline::gateway {

void apply_limits(const policy::Limits& limits, GatewayMetrics& metrics,
                  proto::ServerOptions& options);

}  // namespace cutline::gateway
