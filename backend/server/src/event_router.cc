#include "cutline/server/event_router.h"

#include <utility>

namespace cutline::server {

EventRouter::EventRouter(engine::Engine& engine, proto::EventLoop& dispatch,
                         std::function<void()> on_drained)
    : shared_(std::make_shared<Shared>()), dispatch_(dispatch) {
  shared_->engine = &engine;
  shared_->on_drained = std::move(on_drained);
}

EventRouter::~EventRouter() { close(); }

Result<engine::SeqId> EventRouter::add(engine::AddRequest request,
                                       std::shared_ptr<EventSink> sink) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (shared_->engine == nullptr)
    return make_error(ErrorKind::kExhausted, "the model is being unloaded");
  auto id = shared_->engine->add(std::move(request));
  if (id.ok()) shared_->sinks[*id] = std::move(sink);
  return id;
}

void EventRouter::wake() {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (shared_->drain_pending || shared_->engine == nullptr) return;
    shared_->drain_pending = true;
  }
  std::weak_ptr<Shared> weak = shared_;
  dispatch_.post([weak] {
    if (auto shared = weak.lock()) drain(shared);
  });
}

void EventRouter::drain(const std::shared_ptr<Shared>& shared) {
  {
    std::lock_guard<std::mutex> lock(shared->mu);
    shared->drain_pending = false;
    if (shared->engine == nullptr) return;
    shared->scratch.clear();
    shared->engine->drain_events(shared->scratch);
    for (auto& event : shared->scratch) {
      auto it = shared->sinks.find(event.seq_id);
      if (it == shared->sinks.end()) continue;  // cannot happen: add() registers first
      std::shared_ptr<EventSink> sink = it->second;
      if (event.finished) shared->sinks.erase(it);
      proto::EventLoop& loop = sink->sink_loop();
      loop.post([sink = std::move(sink), ev = std::move(event)]() mutable {
        sink->on_engine_event(std::move(ev));
      });
    }
    shared->scratch.clear();
    // Under the lock, so that close() (and the engine's destruction after it) cannot overlap.
    if (shared->on_drained) shared->on_drained();
  }
}

void EventRouter::close() {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->engine = nullptr;
  shared_->sinks.clear();
}

}  // namespace cutline::server
