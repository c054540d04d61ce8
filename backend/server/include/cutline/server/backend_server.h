#pragma once
// BackendServer: cutline-backend as a library — the OpenAI HTTP API over the residency manager
// and one engine per resident model, plus /metrics, /healthz (and /health), /v1/models and
// /v1/cutline/state. backend/main.cc parses the options, creates it, start()s it and calls
// shutdown() on SIGTERM/SIGINT.
//
// Endpoints:
//   POST /v1/chat/completions, /v1/completions   streaming (SSE) and not; every response ends with
//                                                the `cutline` stop record
//   POST /v1/responses                           the Responses API, streaming events and not, the
//                                                `cutline` record in the final response object
//   POST /tokenize, /detokenize                  a model's tokenizer (tokenize_api.h)
//   GET  /v1/models                              the configured models (resident or not)
//   GET  /v1/cutline/state                       residency, KV blocks, queue, running (JSON)
//   GET  /metrics                                cutline_backend_* (Prometheus text format)
//   GET  /healthz, /health                       200 once started; 503 while draining
//
// Threads: HTTP worker loops (--threads) run the handlers; loop 0 also routes engine events;
// each resident model has its engine thread; a request whose model is not resident waits for
// its load on a short-lived thread (never on a loop).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cutline/base/clock.h"
#include "cutline/device/device.h"
#include "cutline/proto/http/http_server.h"
#include "cutline/proto/net/worker_threads.h"
#include "cutline/proto/wire/openai_request.h"
#include "cutline/residency/residency.h"
#include "cutline/server/backend_metrics.h"
#include "cutline/server/backend_options.h"
#include "cutline/server/backend_state.h"
#include "cutline/server/completion_stream.h"
#include "cutline/server/exchange_writer.h"

namespace cutline::server {

class BackendServer {
 public:
  // Makes the device, synthesizes `builtin` models into the cache directory and registers every
  // model. Errors name the option or file at fault.
  static Result<std::unique_ptr<BackendServer>> create(BackendOptions options);
  ~BackendServer();
  BackendServer(const BackendServer&) = delete;
  BackendServer& operator=(const BackendServer&) = delete;

  // Loads the pinned models and the first (default) model, then listens. kIo when the port is
  // taken; a load error as is.
  Status start();
  uint16_t port() const;

  // Graceful stop: refuses new requests (503), lets running ones finish for up to
  // drain_timeout_ms, ends the rest with a labeled stop (backend_preempted, "aborted at
  // shutdown"), then closes everything. Idempotent.
  void shutdown(int64_t drain_timeout_ms);

  BackendState state() const;

 private:
  struct PendingRequest;
  explicit BackendServer(BackendOptions options);

  void handle(std::shared_ptr<proto::ServerStream> http);
  void handle_completion(std::shared_ptr<proto::ServerStream> http, proto::Endpoint endpoint);
  void handle_responses(std::shared_ptr<proto::ServerStream> http);
  // Takes the model's lease now, or waits for its load.
  void acquire_model(std::shared_ptr<PendingRequest> pending);
  void handle_tokenize(std::shared_ptr<proto::ServerStream> http, bool detokenize);
  void admit(std::shared_ptr<PendingRequest> pending, residency::Lease lease);
  // Starts the admitted exchange in the model's engine.
  void launch(std::shared_ptr<proto::ServerStream> http, residency::Lease lease,
              engine::AddRequest add, ExchangeParams params,
              std::unique_ptr<ExchangeWriter> writer);
  void wait_for_load(std::shared_ptr<PendingRequest> pending);
  void stream_done(CompletionStream* stream);
  void wait_for_flush(int64_t timeout_ms);
  void send_models(proto::ServerStream& http);
  std::string next_request_id(proto::Endpoint endpoint);
  std::string next_id(const char* prefix);  // "<prefix><start time><counter>", unique per process

  BackendOptions options_;
  int64_t started_unix_s_ = 0;  // wall time, for ids and /v1/models "created"
  // Every request timing (arrival, state, shutdown phases, inter-token gaps, model loads); it
  // outlives the residency and the streams that read it.
  base::MonotonicClock clock_;
  BackendMetrics metrics_;
  std::shared_ptr<device::Device> device_;
  std::unique_ptr<residency::Residency> residency_;
  std::unique_ptr<proto::WorkerThreads> workers_;
  std::unique_ptr<proto::HttpServer> http_;
  std::vector<std::unique_ptr<proto::RequestParser>> parsers_;  // one per worker loop

  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> request_counter_{0};
  mutable std::mutex active_mu_;
  std::condition_variable active_cv_;
  int64_t active_ = 0;  // admitted streams + requests waiting for a load
  int64_t waiting_for_model_ = 0;
  std::unordered_map<CompletionStream*, std::weak_ptr<CompletionStream>> streams_;
  // Threads waiting for a model load (wait_for_load); `done` once a thread has nothing left to
  // do, so the next wait_for_load joins it.
  struct LoadWaiter {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<LoadWaiter> load_waiters_;
  // Streams answered while draining: shutdown waits for their bytes to reach the kernel before
  // closing the connections.
  std::vector<std::shared_ptr<proto::ServerStream>> drained_http_;
  bool shut_down_ = false;
};

}  // namespace cutline::server
