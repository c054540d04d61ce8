#include "cutline/residency/residency.h"

#include <cassert>
#include <utility>

namespace cutline::residency {

std::string_view to_string(ModelState state) {
  switch (state) {
    case ModelState::kResident:
      return "resident";
    case ModelState::kCold:
      return "cold";
    case ModelState::kEvictedThenLoaded:
      return "evicted_then_loaded";
  }
  return "resident";
}

enum class EntryState : uint8_t { kUnloaded, kLoading, kResident };

struct Residency::Entry {
  ModelSpec spec;
  EntryState state = EntryState::kUnloaded;
  std::unique_ptr<ResidentModel> model;
  int64_t weight_bytes = 0;  // accounted bytes while loading or resident
  int busy = 0;
  int64_t last_used_us = -1;
  int64_t loads = 0;
  int64_t evictions = 0;
  std::optional<LoadReport> last_load;
  // What the request that triggered the latest load found, for requests that waited on it.
  ModelState last_load_found = ModelState::kCold;
};

namespace {
double us_to_ms(int64_t us) { return static_cast<double>(us) / 1000.0; }
}  // namespace

// --- Lease ---

Lease::Lease(Lease&& other) noexcept { *this = std::move(other); }

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = std::exchange(other.owner_, nullptr);
    entry_ = std::exchange(other.entry_, nullptr);
    found = other.found;
    wait_ms = other.wait_ms;
    load_ms = other.load_ms;
    warmup_ms = other.warmup_ms;
  }
  return *this;
}

Lease::~Lease() { release(); }

void Lease::release() {
  if (owner_ == nullptr) return;
  owner_->release(static_cast<Residency::Entry*>(entry_));
  owner_ = nullptr;
  entry_ = nullptr;
}

ResidentModel& Lease::model() const {
  assert(owner_ != nullptr);
  return *static_cast<Residency::Entry*>(entry_)->model;
}

const std::string& Lease::name() const {
  assert(owner_ != nullptr);
  return static_cast<Residency::Entry*>(entry_)->spec.name;
}

// --- Residency ---

Residency::Residency(ResidencyOptions options, const base::Clock& clock, Loader loader)
    : options_(options), clock_(clock), loader_(std::move(loader)) {}

Residency::~Residency() {
  std::vector<std::unique_ptr<ResidentModel>> doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& e : entries_) {
      assert(e->busy == 0 && "Residency destroyed while a Lease is alive");
      if (e->model) doomed.push_back(std::move(e->model));
    }
  }
}

Status Residency::add_model(ModelSpec spec) {
  std::lock_guard<std::mutex> lock(mu_);
  if (find(spec.name) != nullptr)
    return make_error(ErrorKind::kBadRequest, "model '" + spec.name + "' is given twice");
  if (spec.pinned && options_.weights_budget_bytes > 0) {
    int64_t pinned = spec.weight_bytes_estimate;
    for (const auto& e : entries_)
      if (e->spec.pinned) pinned += e->spec.weight_bytes_estimate;
    if (pinned > options_.weights_budget_bytes)
      return make_error(ErrorKind::kBadRequest,
                        "pinned models need " + std::to_string(pinned) +
                            " bytes of weights, more than the weights budget of " +
                            std::to_string(options_.weights_budget_bytes) + " bytes");
  }
  auto entry = std::make_unique<Entry>();
  entry->weight_bytes = spec.weight_bytes_estimate;
  entry->spec = std::move(spec);
  entries_.push_back(std::move(entry));
  return {};
}

std::vector<std::string> Residency::model_names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& e : entries_) names.push_back(e->spec.name);
  return names;
}

Residency::Entry* Residency::find(std::string_view name) const {
  for (const auto& e : entries_)
    if (e->spec.name == name) return e.get();
  return nullptr;
}

Residency::Entry* Residency::pick_victim(const Entry* keep) const {
  Entry* victim = nullptr;
  for (const auto& e : entries_) {
    if (e.get() == keep || e->state != EntryState::kResident || e->busy > 0 || e->spec.pinned)
      continue;
    if (victim == nullptr || e->last_used_us < victim->last_used_us) victim = e.get();
  }
  return victim;
}

bool Residency::any_busy_evictable(const Entry* keep) const {
  for (const auto& e : entries_)
    if (e.get() != keep && e->state == EntryState::kResident && !e->spec.pinned && e->busy > 0)
      return true;
  return false;
}

bool Residency::evict_for(const Entry* entry, int64_t need,
                          std::vector<std::unique_ptr<ResidentModel>>& doomed,
                          std::vector<std::string>& evicted) {
  const int64_t budget = options_.weights_budget_bytes;
  while (budget > 0 && used_bytes_ + need > budget) {
    Entry* victim = pick_victim(entry);
    if (victim == nullptr) break;
    doomed.push_back(std::move(victim->model));
    evicted.push_back(victim->spec.name);
    used_bytes_ -= victim->weight_bytes;
    victim->state = EntryState::kUnloaded;
    victim->evictions++;
  }
  return budget <= 0 || used_bytes_ + need <= budget;
}

Result<Lease> Residency::load_and_lease(std::unique_lock<std::mutex>& lock, Entry* entry,
                                        int64_t need,
                                        std::vector<std::unique_ptr<ResidentModel>> doomed,
                                        const std::vector<std::string>& evicted,
                                        int64_t queue_wait_us) {
  entry->state = EntryState::kLoading;
  entry->weight_bytes = need;
  used_bytes_ += need;
  load_in_progress_ = true;
  const ModelState found = entry->loads > 0 ? ModelState::kEvictedThenLoaded : ModelState::kCold;
  lock.unlock();
  doomed.clear();  // frees the evicted models' memory before loading the new one
  if (on_evict_)
    for (const auto& n : evicted) on_evict_(n);
  PhaseRecorder recorder(clock_);
  const int64_t load_start_us = clock_.now_us();
  auto loaded = loader_(entry->spec, recorder);
  const int64_t load_end_us = clock_.now_us();
  LoadReport report = recorder.take();
  report.total_ms = us_to_ms(load_end_us - load_start_us);
  lock.lock();
  load_in_progress_ = false;
  used_bytes_ -= need;
  if (!loaded.ok()) {
    entry->state = EntryState::kUnloaded;
    entry->weight_bytes = entry->spec.weight_bytes_estimate;
    cv_.notify_all();
    lock.unlock();
    return std::move(loaded).error();
  }
  entry->model = std::move(loaded).value();
  entry->weight_bytes = entry->model->weight_bytes();
  used_bytes_ += entry->weight_bytes;
  entry->state = EntryState::kResident;
  entry->loads++;
  entry->last_load = report;
  entry->last_load_found = found;
  entry->busy++;
  entry->last_used_us = load_end_us;
  cv_.notify_all();
  Lease lease(this, entry);
  lease.found = found;
  lease.wait_ms = us_to_ms(queue_wait_us);
  lease.warmup_ms = report.warmup_ms();
  lease.load_ms = report.total_ms - lease.warmup_ms;  // gaps between phases count as load
  auto on_load = on_load_;
  const std::string model_name = entry->spec.name;
  lock.unlock();
  if (on_load) on_load(model_name, report);
  return lease;
}

Result<Lease> Residency::acquire(std::string_view name) {
  std::unique_lock<std::mutex> lock(mu_);
  Entry* entry = find(name);
  if (entry == nullptr)
    return make_error(ErrorKind::kNotFound, "The model '" + std::string(name) + "' does not exist");
  const int64_t start_us = clock_.now_us();
  int64_t queue_wait_us = 0;    // waiting for busy models to go idle
  bool waited_on_load = false;  // another request's load of this model was in progress
  const int64_t budget = options_.weights_budget_bytes;

  while (true) {
    if (shut_down_) return make_error(ErrorKind::kExhausted, "the backend is shutting down");
    if (entry->state == EntryState::kResident) {
      entry->busy++;
      entry->last_used_us = clock_.now_us();
      Lease lease(this, entry);
      if (waited_on_load) {
        lease.found = entry->last_load_found;
        lease.load_ms = us_to_ms(entry->last_used_us - start_us - queue_wait_us);
      }
      lease.wait_ms = us_to_ms(queue_wait_us);
      return lease;
    }
    if (entry->state == EntryState::kLoading) {
      waited_on_load = true;
      cv_.wait(lock);
      continue;
    }
    if (load_in_progress_) {  // one load at a time keeps the budget accounting exact
      const int64_t t0 = clock_.now_us();
      cv_.wait(lock);
      queue_wait_us += clock_.now_us() - t0;
      continue;
    }
    const int64_t need = entry->spec.weight_bytes_estimate;
    if (budget > 0 && need > budget)
      return make_error(ErrorKind::kExhausted,
                        "model '" + entry->spec.name + "' needs " + std::to_string(need) +
                            " bytes of weights, more than the weights budget of " +
                            std::to_string(budget) + " bytes (--weights-memory)");
    std::vector<std::unique_ptr<ResidentModel>> doomed;
    std::vector<std::string> evicted;
    if (evict_for(entry, need, doomed, evicted))
      return load_and_lease(lock, entry, need, std::move(doomed), evicted, queue_wait_us);
    if (!any_busy_evictable(entry))
      return make_error(ErrorKind::kExhausted,
                        "model '" + entry->spec.name + "' needs " + std::to_string(need) +
                            " bytes but pinned models hold " + std::to_string(used_bytes_) +
                            " of the " + std::to_string(budget) + " byte weights budget");
    // Evicted models stay evicted (they were idle and LRU); wait for a busy one to go idle.
    const int64_t t0 = clock_.now_us();
    lock.unlock();
    doomed.clear();
    if (on_evict_)
      for (const auto& n : evicted) on_evict_(n);
    lock.lock();
    cv_.wait(lock);
    queue_wait_us += clock_.now_us() - t0;
  }
}

Result<std::optional<Lease>> Residency::try_acquire(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry* entry = find(name);
  if (entry == nullptr)
    return make_error(ErrorKind::kNotFound, "The model '" + std::string(name) + "' does not exist");
  if (shut_down_) return make_error(ErrorKind::kExhausted, "the backend is shutting down");
  if (entry->state != EntryState::kResident) return std::optional<Lease>();
  entry->busy++;
  entry->last_used_us = clock_.now_us();
  return std::optional<Lease>(Lease(this, entry));
}

void Residency::release(Entry* entry) {
  std::lock_guard<std::mutex> lock(mu_);
  assert(entry->busy > 0);
  entry->busy--;
  entry->last_used_us = clock_.now_us();
  cv_.notify_all();
}

std::vector<ModelStatus> Residency::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ModelStatus> out;
  for (const auto& e : entries_) {
    ModelStatus s;
    s.name = e->spec.name;
    s.path = e->spec.path;
    s.pinned = e->spec.pinned;
    s.resident = e->state == EntryState::kResident;
    s.loading = e->state == EntryState::kLoading;
    s.weight_bytes = e->weight_bytes;
    s.busy = e->busy;
    s.last_used_us = e->last_used_us;
    s.loads = e->loads;
    s.evictions = e->evictions;
    s.last_load = e->last_load;
    out.push_back(std::move(s));
  }
  return out;
}

bool Residency::visit_resident(std::string_view name,
                               const std::function<void(ResidentModel&)>& fn) const {
  std::lock_guard<std::mutex> lock(mu_);
  Entry* entry = find(name);
  if (entry == nullptr || entry->state != EntryState::kResident) return false;
  fn(*entry->model);
  return true;
}

int64_t Residency::resident_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t bytes = 0;
  for (const auto& e : entries_)
    if (e->state == EntryState::kResident) bytes += e->weight_bytes;
  return bytes;
}

void Residency::set_on_load(std::function<void(const std::string&, const LoadReport&)> cb) {
  std::lock_guard<std::mutex> lock(mu_);
  on_load_ = std::move(cb);
}

void Residency::set_on_evict(std::function<void(const std::string&)> cb) {
  std::lock_guard<std::mutex> lock(mu_);
  on_evict_ = std::move(cb);
}

void Residency::shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shut_down_ = true;
  cv_.notify_all();
}

void Residency::unload_all_idle() {
  std::vector<std::unique_ptr<ResidentModel>> doomed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& e : entries_) {
      if (e->state != EntryState::kResident || e->busy > 0) continue;
      doomed.push_back(std::move(e->model));
      used_bytes_ -= e->weight_bytes;
      e->state = EntryState::kUnloaded;
    }
  }
}

}  // namespace cutline::residency
