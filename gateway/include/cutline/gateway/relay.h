#pragma once
// Relay: the I/O-free core of the relay phase for one stream. The stream feeds it the upstream's
// SSE body bytes as they arrive; the relay parses every event (SseParser + ChunkParser, both
// reused: a steady stream allocates nothing per token, see tests/unit/gateway_alloc), counts
// content tokens, and appends what the client must receive now to an output buffer:
//   - a streaming client gets each upstream event as it came, except the finish chunk and the
//     usage-only chunk, which are held back until the end (the finish chunk gets the stop
//     record; the usage chunk is dropped when the client did not ask for include_usage);
//   - a non-streaming client gets nothing until the end; the relay assembles the content.
// At the end (upstream done, failed, or the gateway cut) write_end() produces the last bytes:
// streaming: the finish chunk carrying finish_reason and the "cutline" record, the usage chunk
// when asked for (also carrying the record), then `data: [DONE]`; non-streaming: the whole
// chat.completion / text_completion JSON with the record. A cut that came before the upstream's
// usage still gives the client its usage, from the record's counts (prompt_tokens 0 when no
// upstream reported them).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cutline/base/result.h"
#include "cutline/gateway/stop_classifier.h"
#include "cutline/gateway/token_timing.h"
#include "cutline/proto/sse/sse_parser.h"
#include "cutline/proto/wire/completion_assembler.h"
#include "cutline/proto/wire/openai_chunk.h"
#include "cutline/proto/wire/openai_request.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::gateway {

struct RelayOptions {
  proto::Endpoint endpoint = proto::Endpoint::kChatCompletions;
  bool client_stream = true;
  bool client_include_usage = false;
  // Identity for chunks the gateway writes before the upstream sent any (e.g. a TTFT cut).
  std::string fallback_id;
  std::string fallback_model;
  // A chunk parser shared by every stream of one worker (it parses one chunk at a time and the
  // relay keeps no view into it past feed()): its simdjson buffers cost ~10 KiB, too much per open
  // stream. nullptr: the relay makes its own (tests, tools). Must outlive the relay.
  proto::ChunkParser* chunk_parser = nullptr;
};

// What one feed() saw.
struct FeedResult {
  int64_t tokens = 0;  // content chunks in this feed
  bool ended = false;  // the upstream's stream is over ([DONE], or an error event)
};

class Relay {
 public:
  explicit Relay(RelayOptions options = {});

  // Feeds upstream body bytes received at `now_ns`; each content chunk is timed in `timing`.
  // Appends client bytes (streaming clients only) to `out`. An error (a malformed event or chunk)
  // ends the upstream stream as an upstream error: the caller finishes the stream.
  Result<FeedResult> feed(std::string_view bytes, int64_t now_ns, TokenTiming& timing,
                          std::string& out);

  // Marks an HTTP error status from the upstream (body = its error body, for the message).
  void on_error_status(int status, std::string_view body);

  // How the upstream ended, for classify_upstream_stop(). `transport_closed` = the connection
  // ended without [DONE] (EOF or reset mid-body).
  UpstreamEnd upstream_end(bool transport_closed) const;
  bool upstream_done() const { return done_; }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  int64_t output_tokens() const;
  proto::CountMethod count_method() const;
  const std::optional<proto::Usage>& usage() const { return usage_; }
  // The upstream's own stop record (a Cutline backend), when it sent one; null otherwise.
  const proto::StopRecord* backend_record() const { return backend_record_.get(); }

  // Writes the end of the response for the client into `out` (appended): see the header
  // comment. `finish_reason` is what the client sees when the gateway cut the response; nullopt
  // keeps every finish_reason the upstream sent exactly as it sent it (tool_calls,
  // content_filter, a value the gateway does not know).
  void write_end(const proto::StopRecord& record, std::optional<std::string_view> finish_reason,
                 std::string& out);
  // The upstream's last finish_reason, "" when none arrived.
  const std::string& finish_reason() const { return finish_reason_; }
  // Mid-stream error form (on_cut.mode: error): an SSE error event carrying the record, then
  // [DONE]. Streaming clients only.
  void write_error_event(const Error& error, const proto::StopRecord& record, std::string& out);

  const RelayOptions& options() const { return options_; }

 private:
  Status on_event(const proto::SseEvent& event, int64_t now_ns, TokenTiming& timing,
                  std::string& out, FeedResult& result);
  void keep_backend_record(const proto::StopRecord& record);

  RelayOptions options_;
  proto::SseParser sse_;
  std::unique_ptr<proto::ChunkParser> own_chunks_;  // made at the first event when not shared
  proto::ChunkParser* chunks_;                      // options_.chunk_parser or own_chunks_
  // Identity of the response (from the first chunk), for the chunks the gateway writes itself.
  std::string id_;
  std::string model_;
  int64_t created_ = 0;
  // Non-streaming client: every choice rebuilt from the chunks (made at the first event).
  std::unique_ptr<proto::CompletionAssembler> assembler_;
  std::string finish_reason_;  // the upstream's finish_reason, "" = none seen
  bool stop_reason_present_ = false;
  std::string held_finish_;  // streaming: the finish chunk's JSON, held until the end
  std::string held_usage_;   // streaming: the usage-only chunk's JSON, held until the end
  std::optional<proto::Usage> usage_;
  // On the heap: most upstreams never send one, and a StopRecord is ~0.5 KiB of every stream.
  std::unique_ptr<proto::StopRecord> backend_record_;
  int64_t content_chunks_ = 0;
  bool done_ = false;
  bool error_event_ = false;
  int error_status_ = 0;
  std::string error_message_;
  std::string scratch_;
};

}  // namespace cutline::gateway
