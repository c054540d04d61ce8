#pragma once
// EventRouter: carries one engine's token events to the HTTP streams that wait for them. The
// engine thread calls wake() after a step; the router drains the engine's events on a dispatch
// loop (one hop, coalesced: one pending drain at a time) and posts each event to the loop of the
// stream that owns the sequence. Streams live on different worker loops; each sees its events in
// order, on its own loop thread.
//
// Who calls what: ServedModel creates it with its engine and sets the engine's wake callback to
// wake(). The backend server adds a sequence with add() (which registers the sink in the same
// critical section as Engine::add, so no event can arrive before its sink is known). close()
// (before the engine is destroyed) makes every later drain a no-op.

#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/engine/engine.h"
#include "cutline/proto/net/event_loop.h"

namespace cutline::server {

// Receives the events of one sequence on its loop.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual proto::EventLoop& sink_loop() const = 0;
  // Runs on sink_loop(). The last call has event.finished set.
  virtual void on_engine_event(engine::EngineEvent event) = 0;
};

class EventRouter {
 public:
  // `dispatch` drains the engine; it must outlive the router's pending posts (the server's
  // workers do). `on_drained` (may be empty) runs on the dispatch loop after each drain, e.g. to
  // sample engine stats for metrics.
  EventRouter(engine::Engine& engine, proto::EventLoop& dispatch,
              std::function<void()> on_drained = {});
  ~EventRouter();
  EventRouter(const EventRouter&) = delete;
  EventRouter& operator=(const EventRouter&) = delete;

  // Any thread: Engine::add and sink registration as one step.
  Result<engine::SeqId> add(engine::AddRequest request, std::shared_ptr<EventSink> sink);
  // Engine thread (the wake callback): schedules one drain on the dispatch loop.
  void wake();
  // Stops routing; pending drains become no-ops. Call after the engine thread stopped.
  void close();

 private:
  struct Shared {
    std::mutex mu;
    engine::Engine* engine = nullptr;  // null after close()
    std::unordered_map<engine::SeqId, std::shared_ptr<EventSink>> sinks;
    std::vector<engine::EngineEvent> scratch;
    bool drain_pending = false;
    std::function<void()> on_drained;
  };
  static void drain(const std::shared_ptr<Shared>& shared);

  std::shared_ptr<Shared> shared_;
  proto::EventLoop& dispatch_;
};

}  // namespace cutline::server
