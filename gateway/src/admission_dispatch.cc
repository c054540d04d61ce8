// AdmissionDispatch (admission_dispatch.h): the admission queues and the hand-over of a freed
// slot to its waiter on the waiter's own loop.
#include "cutline/gateway/admission_dispatch.h"

#include "cutline/proto/net/event_loop.h"

namespace cutline::gateway {

void AdmissionDispatch::set_limits(const policy::Policy& p) {
  std::vector<std::pair<policy::AdmissionQueue*, std::vector<policy::Dequeued>>> admitted;
  {
    std::lock_guard lock(queues_mu_);
    for (const auto& g : p.admission_groups) {
      auto it = queues_.find(g.name);
      if (it == queues_.end()) {
        queues_.emplace(g.name, std::make_unique<policy::AdmissionQueue>(
                                    policy::AdmissionQueue::limits_of(g), clock_));
      } else {
        admitted.emplace_back(it->second.get(),
                              it->second->set_limits(policy::AdmissionQueue::limits_of(g)));
      }
    }
  }
  for (auto& [q, list] : admitted) dispatch_admitted(*q, std::move(list));
}

policy::AdmissionQueue& AdmissionDispatch::queue_for(const policy::AdmissionGroup& group) {
  std::lock_guard lock(queues_mu_);
  auto it = queues_.find(group.name);
  if (it == queues_.end()) {
    it = queues_
             .emplace(group.name, std::make_unique<policy::AdmissionQueue>(
                                      policy::AdmissionQueue::limits_of(group), clock_))
             .first;
  }
  return *it->second;
}

void AdmissionDispatch::register_waiter(uint64_t id, proto::EventLoop* loop,
                                        std::weak_ptr<AdmissionWaiter> waiter) {
  {
    std::lock_guard lock(waiters_mu_);
    if (displaced_unregistered_.erase(id) == 0) {
      waiters_[id] = Waiter{loop, std::move(waiter)};
      return;
    }
  }
  tell_displaced(Waiter{loop, std::move(waiter)});
}

void AdmissionDispatch::unregister_waiter(uint64_t id) {
  std::lock_guard lock(waiters_mu_);
  waiters_.erase(id);
}

void AdmissionDispatch::dispatch_displaced(policy::Dequeued displaced) {
  Waiter w{};
  {
    std::lock_guard lock(waiters_mu_);
    auto it = waiters_.find(displaced.waiter_id);
    if (it == waiters_.end()) {
      displaced_unregistered_.insert(displaced.waiter_id);
      return;
    }
    w = it->second;
    waiters_.erase(it);
  }
  tell_displaced(std::move(w));
}

void AdmissionDispatch::tell_displaced(Waiter w) {
  if (!w.loop) return;
  w.loop->post([waiter = std::move(w.waiter)] {
    if (auto s = waiter.lock()) s->on_displaced();
  });
}

void AdmissionDispatch::dispatch_admitted(policy::AdmissionQueue& queue,
                                          std::vector<policy::Dequeued> admitted) {
  for (const policy::Dequeued& d : admitted) {
    Waiter w{};
    {
      std::lock_guard lock(waiters_mu_);
      auto it = waiters_.find(d.waiter_id);
      if (it != waiters_.end()) w = it->second;
    }
    policy::AdmissionQueue* q = &queue;
    auto give_back = [this, q] {
      std::vector<policy::Dequeued> next;
      if (auto n = q->release()) next.push_back(*n);
      dispatch_admitted(*q, std::move(next));
    };
    if (!w.loop) {
      give_back();
      continue;
    }
    w.loop->post([waiter = w.waiter, give_back] {
      auto s = waiter.lock();
      if (!s || !s->on_admitted()) give_back();
    });
  }
}

}  // namespace cutline::gateway
