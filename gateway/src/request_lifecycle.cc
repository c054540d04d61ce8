// What every request's phases share (request_lifecycle.h): accept, authenticate, rule matching,
// and the guard that makes finish write one record.
#include "cutline/gateway/request_lifecycle.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "cutline/gateway/bearer_auth.h"
#include "cutline/gateway/request_id.h"
#include "cutline/gateway/stream_host.h"
#include "cutline/proto/net/timer.h"

namespace cutline::gateway {

std::string_view to_string(Phase phase) {
  switch (phase) {
    case Phase::kAccept:
      return "accept";
    case Phase::kAuthenticate:
      return "authenticate";
    case Phase::kClassify:
      return "classify";
    case Phase::kDecide:
      return "decide";
    case Phase::kAdmit:
      return "admit";
    case Phase::kRoute:
      return "route";
    case Phase::kRelay:
      return "relay";
    case Phase::kFinish:
      return "finish";
    case Phase::kDone:
      return "done";
  }
  return "done";
}

ClientRecordView::ClientRecordView(bool upstream_error_detail, proto::StopRecord& record)
    : record_(record) {
  if (!upstream_error_detail) endpoints_.swap(record_.endpoints);
}

ClientRecordView::~ClientRecordView() {
  if (!endpoints_.empty()) record_.endpoints = std::move(endpoints_);
}

bool rearm_if_early(proto::Timer& timer, int64_t limit_ms, double observed_ms) {
  if (observed_ms >= static_cast<double>(limit_ms)) return false;
  timer.arm(std::max<int64_t>(1, static_cast<int64_t>(std::ceil(limit_ms - observed_ms))));
  return true;
}

RequestLifecycle::RequestLifecycle(StreamHost& host, uint64_t id)
    : host_(host),
      clock_(host.clock()),
      id_(id),
      arrival_ns_(clock_.now_ns()),
      arrival_unix_s_(base::wall_time_s()) {}

double RequestLifecycle::elapsed_ms() const { return (clock_.now_ns() - arrival_ns_) / 1e6; }

void RequestLifecycle::accept(const proto::HttpHeaders& headers) {
  phase_ = Phase::kAccept;
  request_id_ = request_id_for(headers);
  policy_ = host_.policy();
}

// With tenants configured, a Bearer key must hash to one of them (constant-time digest
// comparison in policy::authenticate).
std::optional<Ending> RequestLifecycle::authenticate(const proto::HttpHeaders& headers) {
  phase_ = Phase::kAuthenticate;
  if (!policy_->requires_auth()) return std::nullopt;
  const BearerAuth auth = authenticate_bearer(*policy_, headers);
  if (auth.tenant) {
    tenant_ = auth.tenant->name;
    return std::nullopt;
  }
  Ending e;
  e.cause = proto::Cause::kAdmissionRejected;
  e.rule = "tenants";
  e.message = auth.key_sent ? "invalid API key" : "missing API key";
  e.error = make_error(
      ErrorKind::kUnauthorized,
      auth.key_sent ? "invalid API key" : "missing bearer API key (Authorization: Bearer <key>)");
  return e;
}

policy::RequestFacts RequestLifecycle::facts(std::string_view route, std::string_view model,
                                             const proto::HttpHeaders& headers) const {
  policy::RequestFacts f;
  f.tenant = tenant_;
  f.model = model;
  f.route = route;
  f.header = [&headers](std::string_view name) { return headers.get(name); };
  return f;
}

const policy::Rule* RequestLifecycle::match(std::string_view route, std::string_view model,
                                            const proto::HttpHeaders& headers) const {
  const auto index = policy::match_rule(*policy_, facts(route, model, headers));
  return index ? &policy_->rules[*index] : nullptr;
}

bool RequestLifecycle::begin_finish() {
  if (finishing()) return false;
  phase_ = Phase::kFinish;
  return true;
}

proto::StopRecord RequestLifecycle::record_for(const Ending& e) const {
  proto::StopRecord r;
  r.cause = e.cause;
  r.reporter = "gateway";
  r.message = e.message;
  r.request_id = request_id_;
  r.rule = e.rule;
  r.limit = e.limit;
  r.observed = e.observed;
  r.unit = e.unit;
  r.duration_ms = elapsed_ms();
  return r;
}

void RequestLifecycle::record(ResponseEnd& end) {
  assert(phase_ == Phase::kFinish && !recorded_ && "one record per response, written in finish");
  if (recorded_) return;
  recorded_ = true;
  end.log.ts_unix_s = arrival_unix_s_;
  end.log.request_id = request_id_;
  end.log.tenant = tenant_;
  record_response_end(host_, end);
}

}  // namespace cutline::gateway
