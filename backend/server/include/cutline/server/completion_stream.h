#pragma once
// CompletionStream: one exchange after admission (/v1/chat/completions, /v1/completions or
// /v1/responses) — from Engine::add to the last byte. It lives on the HTTP stream's loop,
// receives the sequence's token events (EventSink), passes their text (through a Utf8Streamer,
// so no half characters) and logprobs to its ExchangeWriter, which formats them for the API, and
// ends every response with the `cutline` stop record: the engine's cause and phases plus the
// residency's load/warm-up and the model state the request found. It holds the model's Lease until
// the engine has finished the sequence, so a model is never evicted under a running sequence.
//
// Client disconnect (ServerStream::on_close) aborts the sequence in the engine at once; the
// engine's finished event (cause client_cancel) then releases the lease and counts the request.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cutline/base/clock.h"
#include "cutline/engine/engine.h"
#include "cutline/model/tokenizer.h"
#include "cutline/proto/http/server_stream.h"
#include "cutline/proto/wire/openai_request.h"
#include "cutline/proto/wire/stop_record.h"
#include "cutline/residency/residency.h"
#include "cutline/server/backend_metrics.h"
#include "cutline/server/event_router.h"
#include "cutline/server/exchange_writer.h"
#include "cutline/server/served_model.h"

namespace cutline::server {

// What the stop record and the metrics need to know about the exchange.
struct ExchangeParams {
  std::string model;
  std::string id;  // the response's id, also the record's request_id
  std::optional<int64_t> requested_max_tokens;
  int64_t arrival_us = 0;  // steady clock, when the request was complete
};

class CompletionStream final : public EventSink,
                               public std::enable_shared_from_this<CompletionStream> {
 public:
  // `on_done` runs on the loop once the exchange is over (response sent or client gone and the
  // engine finished the sequence). Inter-token gaps are taken on `clock` (not owned).
  CompletionStream(std::shared_ptr<proto::ServerStream> http, residency::Lease lease,
                   ExchangeParams params, std::unique_ptr<ExchangeWriter> writer,
                   BackendMetrics& metrics, const base::Clock& clock,
                   std::function<void(CompletionStream*)> on_done);
  ~CompletionStream() override;

  // Loop thread. Adds the sequence to the model's engine; on failure answers the OpenAI error
  // and returns it.
  Status start(engine::AddRequest add);

  proto::EventLoop& sink_loop() const override;
  void on_engine_event(engine::EngineEvent event) override;

  const std::shared_ptr<proto::ServerStream>& http() const { return http_; }

  // Any thread (posts to the loop): ends the sequence now; its record says the backend shut down.
  void abort_for_shutdown();

 private:
  ServedModel& served() const;
  void finish_exchange(const engine::SequenceRecord& record);
  proto::StopRecord make_stop_record(const engine::SequenceRecord& record) const;

  std::shared_ptr<proto::ServerStream> http_;
  residency::Lease lease_;
  ExchangeParams params_;
  std::unique_ptr<ExchangeWriter> writer_;
  BackendMetrics& metrics_;
  const base::Clock& clock_;
  ModelSeries series_;  // the model's per-token series
  std::function<void(CompletionStream*)> on_done_;

  engine::SeqId seq_id_ = 0;
  int64_t added_us_ = 0;
  int64_t last_token_us_ = -1;
  model::Utf8Streamer utf8_;
  std::atomic<bool> shutdown_abort_{false};
  bool done_ = false;
};

}  // namespace cutline::server
