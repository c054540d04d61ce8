#include "cutline/server/completion_stream.h"

#include <algorithm>
#include <utility>

#include "cutline/proto/wire/openai_error.h"

namespace cutline::server {

namespace {

void send_error(proto::ServerStream& http, const Error& error, std::string_view param,
                std::string_view code) {
  proto::ErrorBodyFields fields;
  fields.param = param;
  fields.code = code;
  http.send_simple(error.status(), {{"Content-Type", "application/json"}},
                   proto::error_body(error, fields));
}

}  // namespace

CompletionStream::CompletionStream(std::shared_ptr<proto::ServerStream> http,
                                   residency::Lease lease, ExchangeParams params,
                                   std::unique_ptr<ExchangeWriter> writer, BackendMetrics& metrics,
                                   const base::Clock& clock,
                                   std::function<void(CompletionStream*)> on_done)
    : http_(std::move(http)),
      lease_(std::move(lease)),
      params_(std::move(params)),
      writer_(std::move(writer)),
      metrics_(metrics),
      clock_(clock),
      series_(metrics.series_for(params_.model)),
      on_done_(std::move(on_done)) {}

CompletionStream::~CompletionStream() = default;

ServedModel& CompletionStream::served() const { return static_cast<ServedModel&>(lease_.model()); }

proto::EventLoop& CompletionStream::sink_loop() const { return http_->loop(); }

Status CompletionStream::start(engine::AddRequest add) {
  added_us_ = clock_.now_us();
  auto id = served().router().add(std::move(add), shared_from_this());
  if (!id.ok()) {
    send_error(*http_, id.error(), "", "");
    return std::move(id).error();
  }
  seq_id_ = *id;
  // Client gone: abort at once. The finished event (client_cancel) completes the bookkeeping.
  std::weak_ptr<CompletionStream> weak = shared_from_this();
  http_->on_close([weak] {
    if (auto self = weak.lock(); self && !self->done_) self->served().engine().abort(self->seq_id_);
  });
  writer_->start(*http_);
  return {};
}

void CompletionStream::abort_for_shutdown() {
  http_->loop().post([self = shared_from_this()] {
    if (self->done_) return;
    self->shutdown_abort_.store(true);
    self->served().engine().abort(self->seq_id_);
  });
}

void CompletionStream::on_engine_event(engine::EngineEvent event) {
  if (done_) return;
  if (!event.tokens.empty()) {
    const int64_t now = clock_.now_us();
    if (last_token_us_ >= 0)
      metrics_.observe_inter_token_seconds(series_,
                                           static_cast<double>(now - last_token_us_) / 1e6);
    last_token_us_ = now;
  }
  if (!http_->closed()) writer_->text(*http_, utf8_.push(event.text), event.logprobs);
  if (event.finished && event.record) {
    if (!http_->closed()) writer_->text(*http_, utf8_.flush(), {});
    finish_exchange(*event.record);
  }
}

proto::StopRecord CompletionStream::make_stop_record(const engine::SequenceRecord& rec) const {
  proto::StopRecord out;
  engine::fill_stop_record(rec, out);
  out.reporter = "backend";
  out.request_id = params_.id;
  out.requested_max_tokens = params_.requested_max_tokens;
  out.effective_max_tokens = params_.requested_max_tokens;
  // The engine measures from Engine::add; the request arrived earlier (model lookup, residency
  // wait, load, warm-up, tokenization). Phases stay additive: load and warm-up come from the
  // residency, the rest of the time before add counts as queue.
  const double before_add_ms = static_cast<double>(added_us_ - params_.arrival_us) / 1000.0;
  proto::TtftPhases phases;
  phases.load_ms = lease_.load_ms;
  phases.warmup_ms = lease_.warmup_ms;
  phases.queue_ms = rec.queue_ms + std::max(0.0, before_add_ms - phases.load_ms - phases.warmup_ms);
  phases.prefill_ms = rec.prefill_ms;
  phases.first_decode_ms = rec.first_decode_ms;
  out.phases = phases;
  out.queue_ms = phases.queue_ms;
  if (rec.output_tokens > 0 && rec.ttft_ms > 0)
    out.ttft_ms = rec.ttft_ms + before_add_ms;
  else
    out.ttft_ms.reset();
  out.duration_ms = rec.duration_ms + before_add_ms;
  out.model_state = std::string(residency::to_string(lease_.found));
  if (shutdown_abort_.load() && rec.cause == proto::Cause::kClientCancel) {
    out.cause = proto::Cause::kBackendPreempted;
    out.message = "aborted by the backend at shutdown (drain timeout elapsed)";
  }
  return out;
}

void CompletionStream::finish_exchange(const engine::SequenceRecord& rec) {
  done_ = true;
  const proto::StopRecord stop = make_stop_record(rec);
  metrics_.on_request_finished(params_.model, stop);
  if (!http_->closed()) writer_->finish(*http_, stop, rec);
  lease_.release();
  auto on_done = std::move(on_done_);
  if (on_done) on_done(this);
}

}  // namespace cutline::server
