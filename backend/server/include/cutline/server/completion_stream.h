#pragma once
// CompletionStream: one /v1/chat/completions or /v1/completions exchange after admission — from
// Engine::add to the last byte. It lives on the HTTP stream's loop, receives the sequence's
// token events (EventSink), writes SSE chunks (through a Utf8Streamer, so no half characters)
// or collects the text for one JSON body, and ends every response with the `cutline` stop record:
// the engine's cause and phases plus the residency's load/warm-up and the model state the request
// found. It holds the model's Lease until the engine has finished the sequence, so a model is
// never evicted under a running sequence.
//
// Client disconnect (ServerStream::on_close) aborts the sequence in the engine at once; the
// engine's finished event (cause client_cancel) then releases the lease and counts the request.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cutline/engine/engine.h"
#include "cutline/model/tokenizer.h"
#include "cutline/proto/openai_request.h"
#include "cutline/proto/server_stream.h"
#include "cutline/proto/stop_record.h"
#include "cutline/residency/residency.h"
#include "cutline/server/backend_metrics.h"
#include "cutline/server/event_router.h"
#include "cutline/server/served_model.h"

namespace cutline::server {

struct CompletionParams {
  proto::Endpoint endpoint = proto::Endpoint::kChatCompletions;
  bool stream = false;
  bool include_usage = false;
  std::string model;
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;  // unix seconds
  std::optional<int64_t> requested_max_tokens;
  int64_t arrival_us = 0;  // steady clock, when the request was complete
};

class CompletionStream final : public EventSink,
                               public std::enable_shared_from_this<CompletionStream> {
 public:
  // `on_done` runs on the loop once the exchange is over (response sent or client gone and the
  // engine finished the sequence).
  CompletionStream(std::shared_ptr<proto::ServerStream> http, residency::Lease lease,
                   CompletionParams params, BackendMetrics& metrics,
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
  void send_stream_head();
  void send_text(std::string_view text);
  void finish_exchange(const engine::SequenceRecord& record);
  proto::StopRecord make_stop_record(const engine::SequenceRecord& record) const;

  std::shared_ptr<proto::ServerStream> http_;
  residency::Lease lease_;
  CompletionParams params_;
  BackendMetrics& metrics_;
  std::function<void(CompletionStream*)> on_done_;

  engine::SeqId seq_id_ = 0;
  int64_t added_us_ = 0;
  int64_t last_token_us_ = -1;
  model::Utf8Streamer utf8_;
  std::string text_;     // non-streaming: the whole answer
  std::string scratch_;  // reused for chunk JSON and SSE frames
  std::atomic<bool> shutdown_abort_{false};
  bool done_ = false;
};

}  // namespace cutline::server
