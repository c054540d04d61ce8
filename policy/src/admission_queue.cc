// AdmissionQueue: concurrency slots and a fair, prioritized waiting line (admission_queue.h).
#include "cutline/policy/admission_queue.h"

#include <algorithm>
#include <cassert>

namespace cutline::policy {

namespace {
constexpr int64_t kNsPerMs = 1000000;
}  // namespace

AdmissionQueue::AdmissionQueue(AdmissionLimits limits, const base::Clock& clock)
    : clock_(clock), limits_(limits) {}

AdmissionLimits AdmissionQueue::limits_of(const AdmissionGroup& group) {
  return AdmissionLimits{group.max_concurrent, group.queue_depth};
}

bool AdmissionQueue::has_free_slot_locked() const {
  return !limits_.max_concurrent || in_flight_ < *limits_.max_concurrent;
}

ArrivalResult AdmissionQueue::arrive(uint64_t waiter_id, std::string_view tenant, Priority priority,
                                     int64_t queue_timeout_ms) {
  const int64_t now_ns = clock_.now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  ArrivalResult result;
  if (waiters_.empty() && has_free_slot_locked()) {
    ++in_flight_;
    result.arrival = Arrival::kAdmitted;
    return result;
  }
  if (waiters_.count(waiter_id) != 0 || limits_.queue_depth <= 0) return result;
  if (static_cast<int64_t>(waiters_.size()) >= limits_.queue_depth) {
    result.displaced = displace_for_locked(std::string(tenant));
    if (!result.displaced) return result;
  }
  ClassQueue& cq = classes_[static_cast<int>(priority)];
  auto [fifo_it, new_tenant] = cq.by_tenant.try_emplace(std::string(tenant));
  std::list<uint64_t>& fifo = fifo_it->second;
  if (fifo.empty()) cq.ring.push_back(fifo_it->first);  // joins the round-robin at the back
  fifo.push_back(waiter_id);
  Waiter w;
  w.tenant = fifo_it->first;
  w.priority = priority;
  w.expires_ns = now_ns + queue_timeout_ms * kNsPerMs;
  w.seq = next_seq_++;
  w.pos = std::prev(fifo.end());
  by_expiry_.emplace(w.expires_ns, waiter_id);
  waiters_.emplace(waiter_id, std::move(w));
  ++queued_by_tenant_[fifo_it->first];
  result.arrival = Arrival::kQueued;
  return result;
}

std::optional<Dequeued> AdmissionQueue::displace_for_locked(const std::string& tenant) {
  auto mine = queued_by_tenant_.find(tenant);
  const int64_t have = mine == queued_by_tenant_.end() ? 0 : mine->second;
  const std::string* victim = nullptr;
  int64_t most = 0;
  for (const auto& [name, count] : queued_by_tenant_) {
    if (count > most || (count == most && victim != nullptr && name < *victim)) {
      victim = &name;
      most = count;
    }
  }
  // Moving one place must leave the victim with at least as many as the arrival: no ping-pong.
  if (victim == nullptr || most < have + 2) return std::nullopt;
  // Its newest waiter, in whichever class it waits.
  std::optional<uint64_t> newest;
  uint64_t newest_seq = 0;
  for (const ClassQueue& cq : classes_) {
    auto it = cq.by_tenant.find(*victim);
    if (it == cq.by_tenant.end() || it->second.empty()) continue;
    const uint64_t id = it->second.back();
    const uint64_t seq = waiters_.at(id).seq;
    if (!newest || seq > newest_seq) {
      newest = id;
      newest_seq = seq;
    }
  }
  assert(newest);
  if (!newest) return std::nullopt;
  remove_locked(*newest);
  return Dequeued{*newest};
}

void AdmissionQueue::count_out_locked(const std::string& tenant) {
  auto it = queued_by_tenant_.find(tenant);
  assert(it != queued_by_tenant_.end());
  if (it == queued_by_tenant_.end()) return;
  if (--it->second <= 0) queued_by_tenant_.erase(it);
}

void AdmissionQueue::remove_locked(uint64_t waiter_id) {
  auto it = waiters_.find(waiter_id);
  assert(it != waiters_.end());
  Waiter& w = it->second;
  ClassQueue& cq = classes_[static_cast<int>(w.priority)];
  auto fifo_it = cq.by_tenant.find(w.tenant);
  assert(fifo_it != cq.by_tenant.end());
  fifo_it->second.erase(w.pos);
  if (fifo_it->second.empty()) {
    for (auto r = cq.ring.begin(); r != cq.ring.end(); ++r) {
      if (*r == w.tenant) {
        cq.ring.erase(r);
        break;
      }
    }
    cq.by_tenant.erase(fifo_it);
  }
  by_expiry_.erase({w.expires_ns, waiter_id});
  count_out_locked(w.tenant);
  waiters_.erase(it);
}

std::optional<Dequeued> AdmissionQueue::admit_next_locked() {
  for (ClassQueue& cq : classes_) {  // interactive first
    if (cq.ring.empty()) continue;
    // The tenant at the front of the ring is served and moves to the back.
    const std::string tenant = cq.ring.front();
    cq.ring.pop_front();
    std::list<uint64_t>& fifo = cq.by_tenant.at(tenant);
    const uint64_t id = fifo.front();
    if (fifo.size() > 1) cq.ring.push_back(tenant);
    const Waiter& w = waiters_.at(id);
    Dequeued out{id};
    // remove_locked() would search the ring again; the tenant is already repositioned, so
    // unlink the waiter directly.
    fifo.pop_front();
    if (fifo.empty()) cq.by_tenant.erase(tenant);
    by_expiry_.erase({w.expires_ns, id});
    count_out_locked(tenant);
    waiters_.erase(id);
    ++in_flight_;
    return out;
  }
  return std::nullopt;
}

std::optional<Dequeued> AdmissionQueue::release() {
  std::lock_guard<std::mutex> lock(mu_);
  assert(in_flight_ > 0);
  if (in_flight_ > 0) --in_flight_;
  if (!has_free_slot_locked()) return std::nullopt;  // a lowered limit is still draining
  return admit_next_locked();
}

bool AdmissionQueue::cancel(uint64_t waiter_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (waiters_.count(waiter_id) == 0) return false;
  remove_locked(waiter_id);
  return true;
}

std::vector<Dequeued> AdmissionQueue::expire() {
  const int64_t now_ns = clock_.now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Dequeued> out;
  while (!by_expiry_.empty() && by_expiry_.begin()->first <= now_ns) {
    const uint64_t id = by_expiry_.begin()->second;
    out.push_back(Dequeued{id});
    remove_locked(id);
  }
  return out;
}

std::optional<int64_t> AdmissionQueue::next_expiry_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (by_expiry_.empty()) return std::nullopt;
  return by_expiry_.begin()->first;
}

std::vector<Dequeued> AdmissionQueue::set_limits(AdmissionLimits limits) {
  std::lock_guard<std::mutex> lock(mu_);
  limits_ = limits;
  std::vector<Dequeued> out;
  while (!waiters_.empty() && has_free_slot_locked()) {
    auto next = admit_next_locked();
    if (!next) break;
    out.push_back(*next);
  }
  return out;
}

int64_t AdmissionQueue::depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(waiters_.size());
}

AdmissionQueue::ObservedArrival AdmissionQueue::observe_arrive() {
  std::lock_guard<std::mutex> lock(mu_);
  ObservedArrival a;
  a.in_flight = in_flight_ + observed_;
  const int64_t over =
      limits_.max_concurrent ? std::max<int64_t>(0, a.in_flight - *limits_.max_concurrent) : 0;
  a.waiting = over + static_cast<int64_t>(waiters_.size());
  if (a.waiting == 0 && (!limits_.max_concurrent || a.in_flight < *limits_.max_concurrent)) {
    a.would = Arrival::kAdmitted;
  } else if (a.waiting < limits_.queue_depth) {
    a.would = Arrival::kQueued;
  } else {
    a.would = Arrival::kRejectedQueueFull;
  }
  ++observed_;
  return a;
}

void AdmissionQueue::observe_release() {
  std::lock_guard<std::mutex> lock(mu_);
  if (observed_ > 0) --observed_;
}

int64_t AdmissionQueue::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

LiveState AdmissionQueue::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return LiveState{static_cast<int64_t>(waiters_.size()), in_flight_};
}

}  // namespace cutline::policy
