#pragma once
// AdmissionQueue: the concurrency limit and waiting line of one admission group
// (Policy::admission_groups; rules naming the same group share it). Pure data structure on an
// injected clock: it never sleeps, never wakes anyone and owns no timer. The gateway:
//   arrive()   at its `admit` phase: admitted now, queued, or rejected (queue full -> 429);
//   release()  when an admitted request finishes (any way): the freed slot goes to the next
//              waiter, returned so the gateway can resume that stream;
//   cancel()   when a queued client goes away;
//   expire()   from a timer armed at next_expiry_ns(): waiters whose queue_timeout passed
//              (the gateway answers them 429 admission_rejected).
// Every admitted or expired waiter comes back with its queue wait.
//
// Order: priority classes strictly (every interactive waiter before any batch waiter); within a
// class, round-robin across tenants, FIFO within a tenant. So a tenant flooding the queue gets
// one slot in turn like every other waiting tenant and cannot starve them.
//
// Room: the queue's places are shared fairly too. When the queue is full, a tenant arriving
// with at least two waiters fewer than the tenant holding the most displaces that tenant's
// newest waiter (returned by arrive(); the gateway answers it 429 admission_rejected) and takes
// its place; otherwise the arrival is rejected. So one tenant's burst cannot keep the others
// out of a full queue: the places converge to an equal split among the tenants that want them
// (max-min fair), and a tenant already holding its share is refused as before. Without tenants
// (one tenant "") nobody is ever displaced.
//
// A request arriving while someone waits is queued even if a slot looks free (no overtaking);
// free slots with waiters only happen briefly after set_limits() raises max_concurrent, which
// returns the waiters it admits.
//
// Thread-safety: every method locks one internal mutex; safe to call from any worker thread.

#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cutline/base/clock.h"
#include "cutline/policy/decision.h"
#include "cutline/policy/policy.h"

namespace cutline::policy {

struct AdmissionLimits {
  std::optional<int64_t> max_concurrent;  // nullopt = unlimited (arrive() always admits)
  int64_t queue_depth = 0;                // 0 = no queue
};

enum class Arrival : uint8_t {
  kAdmitted,           // a slot is taken; call release() when the request ends
  kQueued,             // waiting; comes back from release(), set_limits(), expire() or cancel()
  kRejectedQueueFull,  // nothing held; answer 429 admission_rejected
};

// A waiter that left the queue (admitted into a slot, expired, or displaced).
struct Dequeued {
  uint64_t waiter_id = 0;
};

// What arrive() did: the arrival, and when it took the place of another tenant's waiter in a
// full queue (see "Room"), that waiter — no longer queued; its request ends refused.
struct ArrivalResult {
  Arrival arrival = Arrival::kRejectedQueueFull;
  std::optional<Dequeued> displaced;
  bool operator==(Arrival a) const { return arrival == a; }
};

class AdmissionQueue {
 public:
  AdmissionQueue(AdmissionLimits limits, const base::Clock& clock);

  // Builds the limits from a policy's admission group.
  static AdmissionLimits limits_of(const AdmissionGroup& group);

  // `waiter_id` is the caller's handle (unique among current waiters), e.g. a stream id.
  ArrivalResult arrive(uint64_t waiter_id, std::string_view tenant, Priority priority,
                       int64_t queue_timeout_ms);

  // An admitted request finished. Returns the waiter now holding its slot, if any.
  std::optional<Dequeued> release();

  // Removes a queued waiter (client gone). False if it was not waiting.
  bool cancel(uint64_t waiter_id);

  // Removes and returns every waiter whose queue timeout has passed, oldest deadline first.
  std::vector<Dequeued> expire();

  // When the next waiter times out (clock ns), or nullopt when nobody waits.
  std::optional<int64_t> next_expiry_ns() const;

  // New limits (policy reload). Returns waiters admitted by a raised max_concurrent. A lowered
  // limit takes effect as running requests finish; a smaller queue keeps current waiters.
  std::vector<Dequeued> set_limits(AdmissionLimits limits);

  // Observe mode (on_cut.mode: observe): a request of a rule that enforces nothing never waits
  // and takes no slot, but is counted apart so that the arrival it WOULD have had can be told:
  // admitted while the group's requests (enforced and observed) leave a slot free, else queued
  // while the requests beyond max_concurrent fit in queue_depth, else rejected (queue full).
  // Every observe_arrive() is paired with one observe_release() when the request ends.
  struct ObservedArrival {
    Arrival would = Arrival::kAdmitted;
    int64_t in_flight = 0;  // the group's requests running before this one, observed included
    int64_t waiting = 0;    // those that would have been waiting (beyond max_concurrent)
  };
  ObservedArrival observe_arrive();
  void observe_release();
  int64_t depth() const;
  int64_t in_flight() const;
  LiveState live() const;  // {depth(), in_flight()} read under one lock

 private:
  struct Waiter {
    std::string tenant;
    Priority priority;
    int64_t expires_ns;
    uint64_t seq;                       // arrival order: the newest has the largest
    std::list<uint64_t>::iterator pos;  // in its tenant's FIFO
  };
  // One priority class: per-tenant FIFOs and the round-robin order of tenants with waiters.
  struct ClassQueue {
    std::unordered_map<std::string, std::list<uint64_t>> by_tenant;
    std::list<std::string> ring;  // tenants with waiters; front is served next
  };

  bool has_free_slot_locked() const;
  std::optional<Dequeued> admit_next_locked();
  void remove_locked(uint64_t waiter_id);
  // The queue is full and `tenant` arrives: removes and returns the newest waiter of the tenant
  // holding the most waiters when that is at least two more than `tenant` holds.
  std::optional<Dequeued> displace_for_locked(const std::string& tenant);
  void count_out_locked(const std::string& tenant);

  const base::Clock& clock_;
  mutable std::mutex mu_;
  AdmissionLimits limits_;
  int64_t in_flight_ = 0;
  int64_t observed_ = 0;  // observe-mode requests running (observe_arrive)
  std::unordered_map<uint64_t, Waiter> waiters_;
  ClassQueue classes_[2];                                      // indexed by Priority
  std::set<std::pair<int64_t, uint64_t>> by_expiry_;           // (expires_ns, waiter_id)
  std::unordered_map<std::string, int64_t> queued_by_tenant_;  // waiters per tenant, both classes
  uint64_t next_seq_ = 0;
};

}  // namespace cutline::policy
