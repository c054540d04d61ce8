#pragma once
// ExchangeWriter: how one admitted request's answer is put on the wire. CompletionStream owns
// the exchange's life (Engine::add, abort on disconnect, whole UTF-8 characters, the stop record,
// metrics, the model's lease) and calls its writer at three points; one writer per API shape
// formats them: chat/completions (completion_writer.h) and the Responses API
// (responses_writer.h). Called on the HTTP stream's loop only, never after the client is gone.

#include <span>
#include <string_view>

#include "cutline/engine/sequence_record.h"
#include "cutline/engine/token_logprobs.h"
#include "cutline/proto/http/server_stream.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::server {

class ExchangeWriter {
 public:
  virtual ~ExchangeWriter() = default;
  // The engine accepted the sequence: a streaming writer sends the head and its opening events.
  virtual void start(proto::ServerStream& http) = 0;
  // Output text (whole UTF-8 characters, possibly empty) and the logprobs of the tokens sampled
  // with it (empty unless the request asked for them).
  virtual void text(proto::ServerStream& http, std::string_view text,
                    std::span<const engine::TokenLogprobs> logprobs) = 0;
  // The sequence ended: the last events (streaming, then finish() with the cutline-stop trailer)
  // or the whole body (with the Cutline-Stop header). A runner failure (record.runner_error) is
  // answered as the API's error.
  virtual void finish(proto::ServerStream& http, const proto::StopRecord& stop,
                      const engine::SequenceRecord& record) = 0;
};

}  // namespace cutline::server
