#pragma once
// RequestLifecycle: what every request the gateway answers through its phases shares, whatever
// its route — Stream (chat, completions, responses, embeddings), Passthrough (any other route)
// and ModelsList (GET /v1/models). Each of them holds one (composition: nothing in it is virtual,
// and nothing in it is touched per token or chunk) and runs its own phases around it:
//
//   Stream       accept -> authenticate -> classify -> decide -> admit -> route -> relay -> finish
//   Passthrough  accept -> authenticate -> decide (a rule or 403) -> route -> relay -> finish
//   ModelsList   accept -> authenticate -> route (one request per upstream) -> relay (merge)
//                -> finish
//
// What it implements once for all of them (Envoy's ActiveStream / FilterManagerCallbacks split:
// the route-specific part calls into it):
//   - accept: the arrival time on the host's clock and in unix time (read when the request is
//     made: the gateway's handler makes it and starts it at once), the request id (a valid
//     client X-Request-Id, else a fresh one: request_id.h), the policy snapshot held for the
//     request's life;
//   - authenticate: with tenants configured, the tenant of the Bearer key, or the 401 Ending;
//   - decide, where it is shared: the request's facts for policy matching and the first rule
//     that matches them;
//   - the Phase the request is in;
//   - finish's guard: begin_finish() is true once, on the first end event (a client that goes,
//     an upstream that fails, a timer, the answer's end); any later end event is a no-op. The
//     owner then builds its record (record_for() fills what every record has), and record()
//     writes it — one access-log line and the metrics, through record_response_end — exactly
//     once (asserted), before the last bytes go to the client.
//
// Threading: the owner's worker loop only.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/base/clock.h"
#include "cutline/base/result.h"
#include "cutline/gateway/response_end.h"
#include "cutline/policy/decision.h"
#include "cutline/policy/policy.h"
#include "cutline/proto/http1/http_message.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::proto {
class Timer;
}  // namespace cutline::proto

namespace cutline::gateway {

class StreamHost;

// Where a request is in its phases. Passthrough and ModelsList skip those they do not have
// (classify, admit; ModelsList also decide).
enum class Phase : uint8_t {
  kAccept,
  kAuthenticate,
  kClassify,
  kDecide,
  kAdmit,  // waiting in the admission queue (or taking a slot)
  kRoute,  // upstream request sent, no response head yet (ModelsList: awaiting every upstream)
  kRelay,  // relaying the upstream's body (ModelsList: merging the lists)
  kFinish,
  kDone,
};
std::string_view to_string(Phase phase);

// Why and how a request ends: the stop cause with the rule behind it, and, for answers that are
// errors (bad input, rejection, upstream failure, on_cut.mode error), the error to send.
struct Ending {
  proto::Cause cause = proto::Cause::kEos;
  std::string rule;  // YAML path (or "request.<field>", "tenants", "passthrough") of what fired
  std::optional<double> limit;
  std::optional<double> observed;
  std::string unit;
  std::string message;
  // The message for the access log when it says more than the client may read (an upstream
  // error's addresses, the rules a model's refusal came from); empty: `message` everywhere.
  std::string operator_message;
  // The cause and rule for the access log and the metrics when the client is told another
  // (a model no rule lets the tenant use is answered as an unknown model); unset: the same.
  std::optional<proto::Cause> operator_cause;
  std::string operator_rule;
  std::optional<Error> error;  // send an OpenAI-style error instead of an answer
  int status = 0;              // overrides error->status() when set (403, 415, upstream 4xx)
  std::string param;           // the request field an error is about
  std::string code;            // the error's "code" when not the kind's ("model_not_found")
  std::string type;            // the error's "type" when not the kind's ("permission_error")
  int64_t retry_after_s = 0;   // Retry-After on 429
  // The upstream answered an error status before anything was sent: pass its status (`status`)
  // and body on, the record in the Cutline-Stop header and (a JSON object body) in the body
  // (proto::put_error_record), the upstream's other members unchanged.
  bool upstream_error_body = false;
};

// A timer of `limit_ms` that fired when the injected Clock says only `observed_ms` passed
// (libevent's timer clock and the Clock may disagree by a fraction of a millisecond) is armed
// again for the rest, and true is returned: so a record never shows observed < limit.
bool rearm_if_early(proto::Timer& timer, int64_t limit_ms, double observed_ms);

// The client's copy of a stop record, for as long as it lives: the endpoints an upstream pool
// tried are operators' information and are taken out unless the gateway shows upstream errors
// whole (--upstream-error-detail); they are put back when it goes, for the log and the metrics.
class ClientRecordView {
 public:
  ClientRecordView(bool upstream_error_detail, proto::StopRecord& record);
  ~ClientRecordView();
  ClientRecordView(const ClientRecordView&) = delete;
  ClientRecordView& operator=(const ClientRecordView&) = delete;

 private:
  proto::StopRecord& record_;
  std::vector<std::string> endpoints_;
};

class RequestLifecycle {
 public:
  // The request arrives now (host clock and unix time).
  RequestLifecycle(StreamHost& host, uint64_t id);
  RequestLifecycle(const RequestLifecycle&) = delete;
  RequestLifecycle& operator=(const RequestLifecycle&) = delete;

  // ---- accept --------------------------------------------------------------------------------
  // The request id from the client's headers and the policy snapshot.
  void accept(const proto::HttpHeaders& headers);

  // ---- authenticate --------------------------------------------------------------------------
  // Without tenants: passes as tenant "". With them: the tenant of the Bearer key, else the
  // 401 Ending (admission_rejected, rule "tenants") to finish with.
  std::optional<Ending> authenticate(const proto::HttpHeaders& headers);

  // ---- decide (its shared part) --------------------------------------------------------------
  // The facts of this request (its tenant, `route`, `model`, the headers) for policy matching.
  // `headers` must outlive the facts' use.
  policy::RequestFacts facts(std::string_view route, std::string_view model,
                             const proto::HttpHeaders& headers) const;
  // The first rule of the snapshot that matches them; null when none does.
  const policy::Rule* match(std::string_view route, std::string_view model,
                            const proto::HttpHeaders& headers) const;

  // ---- phase ---------------------------------------------------------------------------------
  Phase phase() const { return phase_; }
  void enter(Phase phase) { phase_ = phase; }
  // finish has begun (or is over): end events are no-ops from here on.
  bool finishing() const { return phase_ == Phase::kFinish || phase_ == Phase::kDone; }

  // ---- finish --------------------------------------------------------------------------------
  // True for the first end event only (the phase becomes kFinish); false for every later one.
  bool begin_finish();
  // A record with what every record of this request has: the Ending's cause, rule, limit,
  // observed, unit and message, reporter "gateway", the request id and the time since arrival.
  proto::StopRecord record_for(const Ending& ending) const;
  // Writes `end` (its arrival, request id and tenant filled in here): one access-log line and the
  // metrics. Exactly once per request, between begin_finish() and done().
  void record(ResponseEnd& end);
  // Finish is over (the last bytes went out or the client is gone).
  void done() { phase_ = Phase::kDone; }

  uint64_t id() const { return id_; }
  const std::string& request_id() const { return request_id_; }
  const std::string& tenant() const { return tenant_; }
  // The snapshot taken at accept (null before it).
  const std::shared_ptr<const policy::Policy>& policy_ptr() const { return policy_; }
  const policy::Policy& policy() const { return *policy_; }
  int64_t arrival_ns() const { return arrival_ns_; }
  double arrival_unix_s() const { return arrival_unix_s_; }
  double elapsed_ms() const;
  bool recorded() const { return recorded_; }

 private:
  StreamHost& host_;
  const base::Clock& clock_;
  const uint64_t id_;
  const int64_t arrival_ns_;
  const double arrival_unix_s_;
  Phase phase_ = Phase::kAccept;
  bool recorded_ = false;
  std::string request_id_;
  std::string tenant_;
  std::shared_ptr<const policy::Policy> policy_;
};

}  // namespace cutline::gateway
