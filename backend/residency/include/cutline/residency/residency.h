#pragma once
// Residency: the backend's models by name, which of them are loaded, and the weights memory budget
// they share. A request acquires a Lease on its model; acquiring a model that is not resident loads
// it through the injected Loader, first evicting least-recently-used idle models that do not fit.
// A model with running sequences (a live Lease) is never evicted, and a pinned model
// (--keep-resident) never at all; a request that can only be served by evicting a busy model waits
// until one goes idle, and that wait is reported to it as queue time.
//
// Pure logic: the clock and the loader are injected, so that tests drive time and loading by hand.
// Thread-safe; acquire() blocks (call it off the event loop). One load runs at a time.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/base/result.h"
#include "cutline/residency/load_report.h"

namespace cutline::residency {

// What a request found its model in (the stop record's model_state).
enum class ModelState : uint8_t {
  kResident,           // already loaded: no load, no warm-up
  kCold,               // never loaded before in this process
  kEvictedThenLoaded,  // loaded once, evicted to make room, loaded again for this request
};
std::string_view to_string(ModelState state);

// A loaded model as the server sees it (runner, tokenizer, engine ...). Destroying it frees its
// memory. Residency only needs its size.
class ResidentModel {
 public:
  virtual ~ResidentModel() = default;
  virtual int64_t weight_bytes() const = 0;
};

struct ModelSpec {
  std::string name;  // the --model NAME
  std::string path;  // the GGUF path (after `builtin` was synthesized)
  bool pinned = false;
  // Bytes the weights will take once loaded (the file size is a good estimate); used to decide
  // evictions before the load. The loaded model's weight_bytes() replaces it afterwards.
  int64_t weight_bytes_estimate = 0;
};

// Loads a model, recording its phases. Runs on the acquiring thread without the residency lock.
using Loader =
    std::function<Result<std::unique_ptr<ResidentModel>>(const ModelSpec&, PhaseRecorder&)>;

struct ResidencyOptions {
  int64_t weights_budget_bytes = 0;  // 0 = unlimited
};

class Residency;

// Keeps one model resident and marks it busy while alive. Move-only.
class Lease {
 public:
  Lease() = default;
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease();

  explicit operator bool() const { return owner_ != nullptr; }
  ResidentModel& model() const;
  const std::string& name() const;

  ModelState found = ModelState::kResident;
  double wait_ms = 0;    // waited for busy models to go idle (queue time)
  double load_ms = 0;    // read/convert/upload (or waiting for another request's load)
  double warmup_ms = 0;  // warm-up and KV allocation after the load

  void release();

 private:
  friend class Residency;
  Lease(Residency* owner, void* entry) : owner_(owner), entry_(entry) {}

  Residency* owner_ = nullptr;
  void* entry_ = nullptr;  // Residency::Entry, opaque here
};

// One model's line in /v1/cutline/state.
struct ModelStatus {
  std::string name;
  std::string path;
  bool pinned = false;
  bool resident = false;
  bool loading = false;
  int64_t weight_bytes = 0;   // actual when resident, else the estimate
  int busy = 0;               // live leases (requests using it)
  int64_t last_used_us = -1;  // on the residency clock; -1 = never
  int64_t loads = 0;
  int64_t evictions = 0;
  std::optional<LoadReport> last_load;
};

class Residency {
 public:
  // `clock` (monotonic; load phases, queue waits and LRU order are taken on it) is not owned and
  // must outlive the residency.
  Residency(ResidencyOptions options, const base::Clock& clock, Loader loader);
  ~Residency();
  Residency(const Residency&) = delete;
  Residency& operator=(const Residency&) = delete;

  // Registers a model. kBadRequest for a duplicate name or a pinned model over the budget.
  Status add_model(ModelSpec spec);
  std::vector<std::string> model_names() const;  // in registration order

  // Returns a lease on the named model, loading it (and evicting idle ones) if needed.
  // kNotFound for an unknown name; kExhausted when the model can never fit (bigger than the
  // budget, or pinned models hold the rest) or after shutdown(); the loader's error as is.
  Result<Lease> acquire(std::string_view name);
  // Never blocks: a lease when the model is resident now (found kResident), else nullopt (then
  // call acquire() off the event loop). kNotFound for an unknown name, kExhausted after shutdown.
  Result<std::optional<Lease>> try_acquire(std::string_view name);

  std::vector<ModelStatus> snapshot() const;
  // Calls fn with the model when it is resident, under the residency lock (keep fn short); does
  // not count as a use (LRU order is untouched). Returns whether fn ran.
  bool visit_resident(std::string_view name, const std::function<void(ResidentModel&)>& fn) const;
  int64_t resident_bytes() const;
  int64_t budget_bytes() const { return options_.weights_budget_bytes; }

  // Called (outside the lock) after every successful load / eviction, e.g. for metrics and logs.
  void set_on_load(std::function<void(const std::string&, const LoadReport&)> cb);
  void set_on_evict(std::function<void(const std::string&)> cb);

  // Wakes every waiter with an error and refuses new acquires. Leases stay valid.
  void shutdown();
  // Drops every resident model that has no lease (at exit, before the loader's resources go).
  void unload_all_idle();

 private:
  friend class Lease;
  struct Entry;

  void release(Entry* entry);
  Entry* find(std::string_view name) const;
  Entry* pick_victim(const Entry* keep) const;
  bool any_busy_evictable(const Entry* keep) const;
  // With mu_ held: evicts idle, unpinned models, least recently used first, until `need` more
  // bytes fit the weights budget; their models go to `doomed` (freed by the caller without the
  // lock) and their names to `evicted`. Whether they fit now.
  bool evict_for(const Entry* entry, int64_t need,
                 std::vector<std::unique_ptr<ResidentModel>>& doomed,
                 std::vector<std::string>& evicted);
  // With `lock` held on entry and released on return: loads `entry` without the lock (kLoading
  // meanwhile, its bytes counted), then leases it, or fails with the loader's error.
  Result<Lease> load_and_lease(std::unique_lock<std::mutex>& lock, Entry* entry, int64_t need,
                               std::vector<std::unique_ptr<ResidentModel>> doomed,
                               const std::vector<std::string>& evicted, int64_t queue_wait_us);

  ResidencyOptions options_;
  const base::Clock& clock_;
  Loader loader_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Entry>> entries_;  // registration order; addresses stable
  int64_t used_bytes_ = 0;  // resident weights + the estimate of the load in progress
  bool load_in_progress_ = false;
  bool shut_down_ = false;
  std::function<void(const std::string&, const LoadReport&)> on_load_;
  std::function<void(const std::string&)> on_evict_;
};

}  // namespace cutline::residency
