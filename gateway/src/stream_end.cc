// Stream, second half: the timers that cut a stream, and `finish` (the stop record, the client's
// last bytes, slot and pool release, access log, metrics). The phases up to relay are in
// stream_intake.cc and stream.cc.

#include <algorithm>
#include <cmath>

#include "cutline/gateway/response_end.h"
#include "cutline/gateway/stream.h"
#include "cutline/gateway/stream_host.h"
#include "cutline/gateway/worker.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/wire/openai_error.h"

namespace cutline::gateway {
namespace {

using proto::Cause;

}  // namespace

// ---- timers --------------------------------------------------------------------------------

Ending Stream::timer_cut(Cause cause, const policy::TimeLimit& limit, double observed_ms) {
  Ending e;
  e.cause = cause;
  e.rule = std::string(limit.source.path);
  e.limit = static_cast<double>(limit.ms.value_or(0));
  e.observed = observed_ms;
  e.unit = "ms";
  e.message = std::string(proto::to_string(cause)) + ": limit " +
              std::to_string(limit.ms.value_or(0)) + " ms";
  if (decision_.on_cut.mode == policy::CutMode::kError) {
    e.error = make_error(ErrorKind::kTimeout, e.message);
  }
  return e;
}

void Stream::on_deadline() {
  const double e = elapsed_ms();
  if (rearm_if_early(deadline_timer_, *decision_.deadline.ms, e)) return;
  // The client's own deadline (Cutline-Deadline-Ms) is kept even in observe mode.
  if (observe() && decision_.deadline.source.kind != policy::SourceKind::kClientHeader) {
    return note_would_cut(Cause::kGatewayDeadline, decision_.deadline.source.path,
                          static_cast<double>(*decision_.deadline.ms), e, "ms");
  }
  finish(timer_cut(Cause::kGatewayDeadline, decision_.deadline, e));
}

void Stream::on_ttft_timeout() {
  if (hot_.timing.has_first_token()) return;
  const double e = elapsed_ms();
  if (rearm_if_early(ttft_timer_, *decision_.ttft_timeout.ms, e)) return;
  if (observe()) {
    return note_would_cut(Cause::kGatewayTtftTimeout, decision_.ttft_timeout.source.path,
                          static_cast<double>(*decision_.ttft_timeout.ms), e, "ms");
  }
  finish(timer_cut(Cause::kGatewayTtftTimeout, decision_.ttft_timeout, e));
}

void Stream::on_idle_timeout() {
  const int64_t idle_ms = *decision_.idle_timeout.ms;
  if (hot_.upstream_paused) {
    // Held back for a slow client: any bytes it took since the last look are progress.
    const size_t held = client_->buffered_bytes();
    if (held < hot_.client_held_bytes) hot_.client_drained_ns = now_ns();
    hot_.client_held_bytes = held;
  }
  // The gap runs from the last token or from the last time a slow client took bytes the gateway
  // held for it, whichever is later: while the client reads slower than the upstream writes, the
  // upstream is held back (send_client_bytes) and its tokens wait in the socket; that gap is the
  // client's pace, not an idle upstream. A client that reads nothing for the whole idle timeout
  // is still cut.
  const int64_t last = std::max(
      hot_.timing.has_first_token() ? hot_.timing.last_token_ns() : hot_.timing.arrival_ns(),
      hot_.client_drained_ns);
  const double gap_ms = (now_ns() - last) / 1e6;
  if (gap_ms < static_cast<double>(idle_ms)) {
    // A token arrived since the timer was armed (or it fired early): wait for the rest.
    idle_timer_.arm(std::max<int64_t>(1, idle_ms - static_cast<int64_t>(gap_ms)));
    return;
  }
  if (observe()) {
    return note_would_cut(Cause::kGatewayIdleTimeout, decision_.idle_timeout.source.path,
                          static_cast<double>(idle_ms), gap_ms, "ms");
  }
  finish(timer_cut(Cause::kGatewayIdleTimeout, decision_.idle_timeout, gap_ms));
}

void Stream::on_queue_timeout() {
  if (!queued_ || !queue_->cancel(life_.id())) return;  // a slot is on its way (posted)
  queued_ = false;
  host_.admission().unregister_waiter(life_.id());
  const auto& a = decision_.admission;
  Ending e;
  e.cause = Cause::kAdmissionRejected;
  e.rule = std::string(a.queue_timeout_source.path);
  e.limit = static_cast<double>(a.queue_timeout_ms);
  e.observed = elapsed_ms();
  e.unit = "ms";
  e.message = "queue wait exceeded";
  e.error = make_error(ErrorKind::kRateLimited,
                       "no admission slot within " + std::to_string(a.queue_timeout_ms) + " ms");
  e.retry_after_s = std::max<int64_t>(1, (a.queue_timeout_ms + 999) / 1000);
  finish(std::move(e));
}

// Another tenant's arrival took this waiter's place in the full queue (AdmissionQueue "Room"):
// refused as a full queue is, with a record that says why.
void Stream::on_displaced() {
  if (!queued_ || life_.phase() != Phase::kAdmit) return;
  queued_ = false;  // the queue has let it go already
  host_.admission().unregister_waiter(life_.id());
  const auto& a = decision_.admission;
  Ending e;
  e.cause = Cause::kAdmissionRejected;
  e.rule = std::string(a.queue_depth_source.path);
  e.limit = static_cast<double>(a.queue_depth);
  e.observed = static_cast<double>(queue_->depth());
  e.message = "admission queue full: place given to another tenant (fair share)";
  e.error = make_error(ErrorKind::kRateLimited,
                       "admission queue of \"" + std::string(a.group) +
                           "\" is full: this tenant holds more than its share of it");
  e.retry_after_s = 1;
  finish(std::move(e));
}

void Stream::on_client_close() {
  if (life_.finishing()) return;
  Ending e;
  e.cause = Cause::kClientCancel;
  e.message = "client disconnected";
  e.observed = elapsed_ms();
  e.unit = "ms";
  finish(std::move(e));
}

void Stream::cut_for_shutdown(int64_t drain_timeout_ms, double drained_ms) {
  if (life_.finishing()) return;
  Ending e;
  e.cause = Cause::kGatewayDeadline;
  e.rule = "shutdown.drain_timeout";
  e.limit = static_cast<double>(drain_timeout_ms);
  e.observed = drained_ms;
  e.unit = "ms";
  e.message =
      "gateway shutting down: drain timeout of " + std::to_string(drain_timeout_ms) + " ms passed";
  if (decision_.on_cut.mode == policy::CutMode::kError) {
    e.error = make_error(ErrorKind::kTimeout, e.message);
  }
  finish(std::move(e));
}

// ---- finish --------------------------------------------------------------------------------

// What the token pools are charged at finish: the output tokens, or for embeddings the input
// tokens — as the upstream counted them (usage.prompt_tokens), else the estimate reserved when
// the upstream answered without counting, else nothing (it never answered 200).
int64_t Stream::pool_used_tokens(const proto::StopRecord& record) const {
  if (route_ != Route::kEmbeddings) return record.output_tokens;
  if (embed_input_tokens_) return std::max<int64_t>(0, *embed_input_tokens_);
  if (hot_.upstream_status == 200 && route_req_) return route_req_->input_tokens_estimate;
  return 0;
}

proto::StopRecord Stream::build_record(const Ending& e) const {
  proto::StopRecord r = life_.record_for(e);
  r.policy = std::string(decision_.policy_name);
  if (parsed_ok_) r.requested_max_tokens = requested_max_tokens_;
  if (decision_.matched) r.effective_max_tokens = upstream_max_tokens();
  if (hot_.relay.usage()) r.input_tokens = hot_.relay.usage()->prompt_tokens;
  if (responses_ && responses_->input_tokens()) r.input_tokens = responses_->input_tokens();
  if (embed_input_tokens_) r.input_tokens = embed_input_tokens_;
  r.output_tokens = output_tokens();
  r.count_method = count_method();
  r.queue_ms = hot_.timing.queue_ms();
  r.ttft_ms = hot_.timing.ttft_ms();
  r.itl_mean_ms = hot_.timing.itl_mean_ms();
  r.itl_max_ms = hot_.timing.itl_max_ms();
  fill_pool_record(r);
  const proto::StopRecord* backend = responses_ ? responses_->backend_record() : nullptr;
  if (!backend) backend = hot_.relay.backend_record();
  if (const proto::StopRecord* b = backend) {
    r.preemptions = b->preemptions;
    r.kv_bytes_peak = b->kv_bytes_peak;
    r.device_free_bytes = b->device_free_bytes;
    r.phases = b->phases;
    r.model_state = b->model_state;
    if (b->cause != r.cause) r.upstream_cause = b->cause;
    if (r.message.empty()) r.message = b->message;
  }
  if (observe()) add_would_cuts(r);
  return r;
}

// The gateway rewrites finish_reason only for a cut it made itself (origin gateway, per on_cut).
// Whatever else ended the answer, the upstream's own finish_reason reaches the client as sent
// (nullopt); a gateway-written end (the upstream sent none) gets the cause's default.
std::optional<std::string> Stream::client_finish_reason(const Ending& e) const {
  if (proto::origin_of(e.cause) != proto::Origin::kGateway && !hot_.relay.finish_reason().empty()) {
    return std::nullopt;
  }
  if (e.cause == Cause::kEos || e.cause == Cause::kStopSequence) return "stop";
  if (decision_.on_cut.finish_reason == policy::FinishReasonStyle::kCause &&
      proto::is_serving_cut(e.cause)) {
    return std::string(proto::to_string(e.cause));
  }
  return std::string(proto::default_finish_reason(e.cause));
}

void Stream::release_admission() {
  if (queued_) {
    queued_ = false;
    queue_->cancel(life_.id());
    host_.admission().unregister_waiter(life_.id());
  }
  if (admitted_) {
    admitted_ = false;
    std::vector<policy::Dequeued> next;
    if (auto d = queue_->release()) next.push_back(*d);
    host_.admission().dispatch_admitted(*queue_, std::move(next));
  }
  if (observe_counted_) {
    observe_counted_ = false;
    queue_->observe_release();
  }
  if (queue_) {
    host_.metrics().set_queue_depth(decision_.policy_name, static_cast<double>(queue_->depth()));
  }
}

// What the client is sent last: nothing (it is gone), an error answer (the gateway's, or the
// upstream's passed on), the end of an event stream, or a whole JSON body.
struct Stream::LastBytes {
  enum class Kind { kNone, kError, kUpstreamError, kStreamEnd, kBody };
  Kind kind = Kind::kNone;
  int status = 200;
  std::string error_body;  // the gateway's error body, or the upstream's with the record in it
  std::string out;         // the last bytes of a completion
};

void Stream::finish(Ending e) {
  if (!life_.begin_finish()) return;  // ended already: a later end event changes nothing
  deadline_timer_.cancel();
  ttft_timer_.cancel();
  idle_timer_.cancel();
  queue_timer_.cancel();
  head_timer_.cancel();
  upstream_call_.cancel();
  release_admission();

  if (route_ == Route::kEmbeddings && !e.error && !e.upstream_error_body && !json_complete_) {
    // No partial embeddings: a cut before the whole answer arrived is an error answer.
    e.error =
        make_error(proto::origin_of(e.cause) == proto::Origin::kGateway ? ErrorKind::kTimeout
                                                                        : ErrorKind::kUpstream,
                   e.message.empty() ? std::string(proto::to_string(e.cause)) : e.message);
  }
  proto::StopRecord record = build_record(e);
  grant_.settle(pool_used_tokens(record));
  // The client's last bytes are prepared first (their size is logged), then the stream is
  // recorded (access-log line and metrics), and only then are they sent: a client that scrapes
  // /metrics or reads the log right after its answer must find its request counted. The
  // client's copy of the record leaves out internal addresses (the endpoints an upstream pool
  // tried, the detail of the gateway's own upstream errors) unless --upstream-error-detail; the
  // access log and the metrics get them.
  std::string stop_header;
  LastBytes last;
  {
    ClientRecordView client_view(host_.upstream_error_detail(), record);
    stop_header = proto::stop_header_value(record);
    last = prepare_last_bytes(e, record);
  }
  if (!e.operator_message.empty()) record.message = e.operator_message;
  if (e.operator_cause) record.cause = *e.operator_cause;
  if (!e.operator_rule.empty()) record.rule = e.operator_rule;
  record_outcome(record, last.status);
  send_last_bytes(e, last, stop_header);

  life_.done();
  // Drop the worker's reference later, never inside a callback of this stream.
  Worker* w = &worker_;
  const uint64_t id = life_.id();
  worker_.loop.post([w, id] { w->streams.erase(id); });
}

// Builds the client's last bytes for `e` (counted in bytes_out); status 499 when the client is
// gone.
Stream::LastBytes Stream::prepare_last_bytes(const Ending& e, const proto::StopRecord& record) {
  using Kind = LastBytes::Kind;
  LastBytes last;
  if (e.cause == Cause::kClientCancel || client_->closed()) {
    last.status = 499;  // nginx's "client closed request"
    return last;
  }
  std::string& out = last.out;
  // A short answer's last bytes at once (the whole body of a non-streamed one) instead of growing
  // them from 15 bytes a doubling at a time.
  out.reserve(1024);
  if (e.upstream_error_body && !client_->head_sent()) {
    last.kind = Kind::kUpstreamError;
    last.status = e.status;
    // A JSON error body carries the record as every error answer does (the upstream's members
    // byte for byte); any other body goes on unchanged, the record in Cutline-Stop only.
    if (!proto::put_error_record(hot_.upstream_error_body, record, last.error_body).ok()) {
      last.error_body = hot_.upstream_error_body;
    }
    hot_.bytes_out += static_cast<int64_t>(last.error_body.size());
  } else if (e.error && !client_->head_sent()) {
    last.kind = Kind::kError;
    last.status = e.status != 0 ? e.status : e.error->status();
    proto::ErrorBodyFields fields;
    fields.param = e.param;
    fields.code = e.code;
    fields.type = e.type;
    fields.cutline = &record;
    last.error_body = proto::error_body(*e.error, fields);
    hot_.bytes_out += static_cast<int64_t>(last.error_body.size());
  } else if (route_ == Route::kResponses || route_ == Route::kEmbeddings) {
    last.kind = client_stream_ ? Kind::kStreamEnd : Kind::kBody;
    write_route_end(e, record, out);
    hot_.bytes_out += static_cast<int64_t>(out.size());
  } else if (client_stream_ && parsed_ok_) {
    last.kind = Kind::kStreamEnd;
    if (e.error) {
      hot_.relay.write_error_event(*e.error, record, out);
    } else {
      const auto reason = client_finish_reason(e);
      hot_.relay.write_end(record, reason ? std::optional<std::string_view>(*reason) : std::nullopt,
                           out);
    }
    hot_.bytes_out += static_cast<int64_t>(out.size());
  } else {
    last.kind = Kind::kBody;
    const auto reason = client_finish_reason(e);
    hot_.relay.write_end(record, reason ? std::optional<std::string_view>(*reason) : std::nullopt,
                         out);
    hot_.bytes_out += static_cast<int64_t>(out.size());
  }
  return last;
}

// Sends what prepare_last_bytes() built, the stop record in the Cutline-Stop header or trailer.
void Stream::send_last_bytes(const Ending& e, LastBytes& last, const std::string& stop_header) {
  switch (last.kind) {
    case LastBytes::Kind::kNone:
      break;
    case LastBytes::Kind::kError: {
      proto::HttpHeaders h = record_headers("application/json", stop_header, life_.request_id());
      if (e.retry_after_s > 0) h.add("Retry-After", std::to_string(e.retry_after_s));
      client_->send_simple(last.status, h, last.error_body);
      break;
    }
    case LastBytes::Kind::kUpstreamError: {
      proto::HttpHeaders h =
          record_headers(upstream_error_type_.empty() ? std::string_view("application/json")
                                                      : std::string_view(upstream_error_type_),
                         stop_header, life_.request_id());
      if (!upstream_retry_after_.empty()) h.add("Retry-After", upstream_retry_after_);
      client_->send_simple(last.status, h, last.error_body);
      break;
    }
    case LastBytes::Kind::kStreamEnd:
      start_client_head();
      if (!last.out.empty()) client_->send_body(last.out);
      client_->finish(proto::HttpHeaders{{"cutline-stop", stop_header}});
      break;
    case LastBytes::Kind::kBody: {
      client_->send_simple(200, record_headers("application/json", stop_header, life_.request_id()),
                           last.out);
      break;
    }
  }
}

// The access-log line and the metrics of a finished stream (once, from finish, before the
// client's last bytes go out).
void Stream::record_outcome(const proto::StopRecord& record, int status) {
  ResponseEnd end;
  end.log.stop = &record;
  end.log.status = status;
  end.log.method = client_->request().method;
  end.log.path = client_->request().path();
  end.route = route_path(route_);
  end.log.model = model_;
  end.log.upstream = upstream_ ? std::string_view(upstream_->name) : std::string_view();
  end.policy = decision_.policy_name;
  end.log.bytes_in = hot_.bytes_in;
  end.log.bytes_out = hot_.bytes_out;
  end.log.stream = client_stream_;
  end.itl = &hot_.timing.itl();
  end.clamp_rule = clamp_rule_;
  life_.record(end);
  host_.metrics().stream_closed();
}

void Stream::describe(base::JsonWriter& w, int64_t now) const {
  auto left = [&](const proto::Timer& t, const std::optional<int64_t>& limit_ms,
                  int64_t from_ns) -> std::optional<double> {
    if (!t.armed() || !limit_ms) return std::nullopt;
    return static_cast<double>(*limit_ms) - (now - from_ns) / 1e6;
  };
  w.begin_object();
  w.field("request_id", life_.request_id()).field("tenant", life_.tenant()).field("model", model_);
  w.field("policy", decision_.policy_name).field("phase", to_string(phase()));
  w.field("stream", client_stream_).field("tokens", hot_.timing.tokens());
  w.field("upstream_paused", hot_.upstream_paused).field("bytes_out", hot_.bytes_out);
  w.field("elapsed_ms", (now - hot_.timing.arrival_ns()) / 1e6);
  w.optional_field("deadline_left_ms",
                   left(deadline_timer_, decision_.deadline.ms, hot_.timing.arrival_ns()));
  w.optional_field("ttft_left_ms",
                   left(ttft_timer_, decision_.ttft_timeout.ms, hot_.timing.arrival_ns()));
  const int64_t idle_from = std::max(
      hot_.timing.has_first_token() ? hot_.timing.last_token_ns() : hot_.timing.arrival_ns(),
      hot_.client_drained_ns);
  w.optional_field("idle_left_ms", left(idle_timer_, decision_.idle_timeout.ms, idle_from));
  if (queued_) {
    w.field("queue_left_ms", static_cast<double>(decision_.admission.queue_timeout_ms) -
                                 (now - hot_.timing.arrival_ns()) / 1e6);
  }
  w.end_object();
}

}  // namespace cutline::gateway
