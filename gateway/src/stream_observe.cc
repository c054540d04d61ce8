// Stream, observe mode (on_cut.mode: observe): a rule that enforces nothing but records every cut
// it would have made — which cause, at which output token, and by how much — in the stop
// record's would_cut (and through it the access log and cutline_would_cut_total).
//
// What "would have" means, per limit:
//   admission   the group's requests (enforced and observed) at arrival: beyond max_concurrent
//               plus queue_depth -> admission_rejected at token 0 (a wait that would have timed
//               out is not simulated: an observed request never waits);
//   pools       reserved and settled as if enforced (the rule's pools drain with its traffic):
//               a reservation that fails -> admission_rejected at token 0;
//   budget      the max output tokens the Decision would have sent, when the answer was longer:
//               gateway_budget at that token;
//   deadline, ttft_timeout, idle_timeout
//               their timers run as when enforcing; when one fires it notes the tokens the
//               client had then, and finish adds what the whole answer measured.

#include <algorithm>

#include "cutline/gateway/stream.h"

namespace cutline::gateway {

using proto::Cause;

std::optional<int64_t> Stream::upstream_max_tokens() const {
  if (observe()) return requested_max_tokens_;
  return decision_.max_output_tokens.tokens;
}

void Stream::admit_observed() {
  const auto& a = decision_.admission;
  const policy::AdmissionQueue::ObservedArrival arrival = queue_->observe_arrive();
  observe_counted_ = true;
  if (arrival.would == policy::Arrival::kRejectedQueueFull) {
    if (a.max_concurrent && a.queue_depth == 0) {
      note_would_cut(Cause::kAdmissionRejected, a.max_concurrent_source.path,
                     static_cast<double>(*a.max_concurrent), static_cast<double>(arrival.in_flight),
                     "requests");
    } else {
      note_would_cut(Cause::kAdmissionRejected, a.queue_depth_source.path,
                     static_cast<double>(a.queue_depth), static_cast<double>(arrival.waiting),
                     "requests");
    }
  }
  on_admitted();
}

void Stream::note_would_cut(Cause cause, std::string_view rule, double limit, double observed,
                            const char* unit) {
  for (const NotedCut& n : noted_cuts_) {
    if (n.cause == cause) return;  // the first time is when it would have cut
  }
  noted_cuts_.push_back(NotedCut{cause, rule, limit, observed, unit, hot_.timing.tokens()});
}

void Stream::add_would_cuts(proto::StopRecord& r) const {
  const int64_t out = r.output_tokens;
  for (const NotedCut& n : noted_cuts_) {
    proto::WouldCut c;
    c.cause = n.cause;
    c.rule = std::string(n.rule);
    c.limit = n.limit;
    c.observed = n.observed;
    c.unit = n.unit;
    c.at_token = std::min(n.at_token, out);
    // By how much the whole answer exceeded the limit, not only when the timer fired.
    if (n.cause == Cause::kGatewayDeadline && r.duration_ms) {
      c.observed = std::max(c.observed, *r.duration_ms);
    } else if (n.cause == Cause::kGatewayTtftTimeout) {
      c.observed = std::max(c.observed, r.ttft_ms.value_or(r.duration_ms.value_or(0)));
    } else if (n.cause == Cause::kGatewayIdleTimeout && r.itl_max_ms) {
      c.observed = std::max(c.observed, *r.itl_max_ms);
    }
    c.tokens_after = out - c.at_token;
    r.would_cut.push_back(std::move(c));
  }
  // Budget: the answer ran past the max output tokens the rule would have sent upstream.
  const policy::TokenLimit& max = decision_.max_output_tokens;
  const policy::SourceKind src = max.source.kind;
  if (max.tokens && src != policy::SourceKind::kClient && src != policy::SourceKind::kNone &&
      out > *max.tokens) {
    proto::WouldCut c;
    c.cause = Cause::kGatewayBudget;
    c.rule = std::string(max.source.path);
    c.limit = static_cast<double>(*max.tokens);
    c.observed = static_cast<double>(out);
    c.unit = "tokens";
    c.at_token = *max.tokens;
    c.tokens_after = out - *max.tokens;
    r.would_cut.push_back(std::move(c));
  }
  // In the order they would have fired: by the token they fall on (the timers were noted in
  // time order, which a stable sort keeps among equal tokens).
  std::stable_sort(
      r.would_cut.begin(), r.would_cut.end(),
      [](const proto::WouldCut& a, const proto::WouldCut& b) { return a.at_token < b.at_token; });
}

}  // namespace cutline::gateway
