#pragma once
// AdmissionDispatch: the gateway's admission queues, one per admission group (policy::
// AdmissionQueue), shared by every worker and kept across reloads (a reload changes their
// limits), and the waiters queued in them. A slot freed on any worker is handed to its waiter on
// the waiter's own loop.
//
// Who calls what: the Gateway owns one and calls set_limits() at construction and on every
// reload; a stream (any worker thread) calls queue_for() at decide, register_waiter() when its
// arrival is queued, unregister_waiter() when it stops waiting (admitted, timed out, ended), and
// dispatch_admitted() with the waiter that a release() or set_limits() dequeued.
//
// Hand-over: for each dequeued waiter, dispatch_admitted() posts onto the loop the waiter
// registered with; there the waiter's on_admitted() takes the slot or says it no longer waits.
// A waiter that is not registered (or whose object is gone, or that declines) gives its slot
// back to the queue at once, and the next waiter the queue names is served the same way.
//
// Thread-safety: every method may be called from any thread. The queue map and the waiter map
// each have their own mutex, held only to look up or change the map (never while a queue's own
// lock is taken or a waiter runs); queues are never destroyed before the dispatch is, so the
// reference queue_for() returns stays valid.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cutline/base/clock.h"
#include "cutline/policy/admission_queue.h"
#include "cutline/policy/policy.h"

namespace cutline::proto {
class EventLoop;
}

namespace cutline::gateway {

// What waits for a slot (the gateway's Stream). Called on the loop it registered with.
class AdmissionWaiter {
 public:
  virtual ~AdmissionWaiter() = default;
  // The queue gave this waiter a slot. Returns false when it no longer waits (it ended
  // meanwhile): the slot is given back and goes to the next waiter.
  virtual bool on_admitted() = 0;
  // The queue gave this waiter's place to another tenant's arrival (AdmissionQueue "Room"): it
  // is no longer queued and ends refused. Ignored when it no longer waits.
  virtual void on_displaced() = 0;
};

class AdmissionDispatch {
 public:
  explicit AdmissionDispatch(const base::Clock& clock) : clock_(clock) {}
  AdmissionDispatch(const AdmissionDispatch&) = delete;
  AdmissionDispatch& operator=(const AdmissionDispatch&) = delete;

  // The admission groups of `policy`: a queue for each new group, new limits for each existing
  // one (a raised max_concurrent admits waiters, which are dispatched). Queues of groups the
  // policy no longer names stay (streams may still hold slots in them).
  void set_limits(const policy::Policy& policy);
  // The queue of `group` (created with its limits when first asked for).
  policy::AdmissionQueue& queue_for(const policy::AdmissionGroup& group);
  // Hands freed admission slots of `queue` to their waiters (on the waiters' loops); a waiter
  // that is gone gives its slot back and the next one is served.
  void dispatch_admitted(policy::AdmissionQueue& queue, std::vector<policy::Dequeued> admitted);
  // Tells a waiter that an arrival displaced (ArrivalResult::displaced) on its own loop. One
  // displaced before it registered (it arrived on another thread a moment before) is told as it
  // registers.
  void dispatch_displaced(policy::Dequeued displaced);
  // Registers / unregisters a queued waiter so a slot freed on any worker can find it. `id` is
  // the waiter_id it arrived with.
  void register_waiter(uint64_t id, proto::EventLoop* loop, std::weak_ptr<AdmissionWaiter> waiter);
  void unregister_waiter(uint64_t id);

 private:
  const base::Clock& clock_;

  std::mutex queues_mu_;
  std::map<std::string, std::unique_ptr<policy::AdmissionQueue>> queues_;  // by group name

  struct Waiter {
    proto::EventLoop* loop;
    std::weak_ptr<AdmissionWaiter> waiter;
  };
  std::mutex waiters_mu_;
  std::map<uint64_t, Waiter> waiters_;         // by waiter id
  std::set<uint64_t> displaced_unregistered_;  // displaced before they registered
  void tell_displaced(Waiter w);               // posts on_displaced() onto the waiter's loop
};

}  // namespace cutline::gateway
