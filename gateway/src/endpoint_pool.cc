// Picking an endpoint of an upstream pool (endpoint_pool.h).
#include "cutline/gateway/endpoint_pool.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace cutline::gateway {

namespace {

// Endpoint ids are unique in the process so that a retry's `tried` list stays meaningful
// across a DNS update.
std::atomic<uint64_t> next_endpoint_id{1};

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bool contains(std::span<const uint64_t> ids, uint64_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// Per-thread scratch for candidate lists: pick() allocates nothing after a thread's first call.
struct Scratch {
  std::vector<uint32_t> candidates;
  std::vector<uint32_t> resident;
  std::vector<char> member;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

std::string endpoint_label(std::string_view host, uint16_t port) {
  std::string out;
  if (host.find(':') != std::string_view::npos) {
    out = "[" + std::string(host) + "]";
  } else {
    out = std::string(host);
  }
  return out + ":" + std::to_string(port);
}

// ---- EndpointLease ----------------------------------------------------------------------------

EndpointLease::EndpointLease(std::shared_ptr<const EndpointPool> pool,
                             std::shared_ptr<PoolEndpoint> endpoint, bool routed_cold,
                             bool affinity_hit)
    : pool_(std::move(pool)),
      endpoint_(std::move(endpoint)),
      routed_cold_(routed_cold),
      affinity_hit_(affinity_hit) {}

EndpointLease::EndpointLease(EndpointLease&& other) noexcept
    : pool_(std::move(other.pool_)),
      endpoint_(std::move(other.endpoint_)),
      error_(std::move(other.error_)),
      routed_cold_(other.routed_cold_),
      affinity_hit_(other.affinity_hit_) {}

EndpointLease& EndpointLease::operator=(EndpointLease&& other) noexcept {
  if (this != &other) {
    report(EndpointOutcome::kCancelled);
    pool_ = std::move(other.pool_);
    endpoint_ = std::move(other.endpoint_);
    error_ = std::move(other.error_);
    routed_cold_ = other.routed_cold_;
    affinity_hit_ = other.affinity_hit_;
  }
  return *this;
}

EndpointLease::~EndpointLease() { report(EndpointOutcome::kCancelled); }

bool EndpointLease::report(EndpointOutcome outcome) {
  if (!pool_ || !endpoint_) return false;
  const bool ejected = pool_->end_attempt(*endpoint_, outcome);
  pool_.reset();  // the endpoint stays readable (endpoint(), endpoint_id()) after the report
  return ejected;
}

// ---- EndpointPool -----------------------------------------------------------------------------

EndpointPool::EndpointPool(const policy::Upstream& upstream, const base::Clock& clock,
                           uint64_t seed)
    : upstream_(upstream), clock_(clock), rng_(seed) {}

std::shared_ptr<EndpointPool> EndpointPool::create(const policy::Upstream& upstream,
                                                   const base::Clock& clock, uint64_t seed) {
  return create(upstream, clock, seed, nullptr);
}

std::shared_ptr<EndpointPool> EndpointPool::create(const policy::Upstream& upstream,
                                                   const base::Clock& clock, uint64_t seed,
                                                   std::shared_ptr<const void> owner) {
  auto pool = std::make_shared<EndpointPool>(upstream, clock, seed);
  pool->owner_ = std::move(owner);
  std::vector<EndpointAddress> addresses;
  for (const auto& e : upstream.endpoints) {
    addresses.push_back({e.host, e.port, e.base_path, endpoint_label(e.host, e.port)});
  }
  pool->set_addresses(std::move(addresses));
  return pool;
}

std::shared_ptr<const EndpointPool::Set> EndpointPool::make_set(
    std::vector<std::shared_ptr<PoolEndpoint>> endpoints) const {
  auto set = std::make_shared<Set>();
  set->endpoints = std::move(endpoints);
  if (upstream_.prefix_affinity) {
    std::vector<std::string_view> names;
    for (const auto& e : set->endpoints) names.push_back(e->address().label);
    set->ring = std::make_unique<PrefixRing>(names);
  }
  return set;
}

void EndpointPool::set_addresses(std::vector<EndpointAddress> addresses) {
  std::shared_ptr<const Set> old = snapshot();
  std::unordered_map<std::string, std::shared_ptr<PoolEndpoint>> by_label;
  if (old) {
    for (const auto& e : old->endpoints) by_label.emplace(e->address().label, e);
  }
  // A stable order (by label) so that every replica builds the same ring.
  std::sort(addresses.begin(), addresses.end(),
            [](const EndpointAddress& a, const EndpointAddress& b) { return a.label < b.label; });
  std::vector<std::shared_ptr<PoolEndpoint>> endpoints;
  for (auto& a : addresses) {
    if (!endpoints.empty() && endpoints.back()->address().label == a.label) continue;
    auto it = by_label.find(a.label);
    if (it != by_label.end()) {
      endpoints.push_back(it->second);
    } else {
      endpoints.push_back(std::make_shared<PoolEndpoint>(
          next_endpoint_id.fetch_add(1, std::memory_order_relaxed), std::move(a)));
    }
  }
  auto set = make_set(std::move(endpoints));
  std::lock_guard<std::mutex> lock(mu_);
  set_ = std::move(set);
}

void EndpointPool::adopt(const EndpointPool& old) {
  std::vector<std::shared_ptr<PoolEndpoint>> before = old.endpoints();
  std::vector<std::shared_ptr<PoolEndpoint>> now = endpoints();
  if (upstream_.dns && now.empty()) {
    now = std::move(before);
  } else {
    for (auto& e : now) {
      for (const auto& b : before) {
        if (b->address().label == e->address().label &&
            b->address().base_path == e->address().base_path) {
          e = b;
        }
      }
    }
  }
  auto set = make_set(std::move(now));
  panic_.fetch_add(old.panic_total(), std::memory_order_relaxed);  // the counter goes on
  std::lock_guard<std::mutex> lock(mu_);
  set_ = std::move(set);
}

bool EndpointPool::in_panic() const {
  if (!upstream_.health) return false;
  const int64_t now = clock_.now_ns();
  std::shared_ptr<const Set> set = snapshot();
  if (!set) return false;
  size_t available = 0;
  for (const auto& e : set->endpoints) {
    if (e->available(now)) ++available;
  }
  return below_panic_threshold(available, set->endpoints.size(), upstream_.health->panic_threshold);
}

bool EndpointPool::health_settled() const {
  if (!upstream_.health) return true;
  std::shared_ptr<const Set> set = snapshot();
  if (!set) return true;
  bool all_checked = true;
  for (const auto& e : set->endpoints) {
    if (e->checked() && e->healthy()) return true;
    if (!e->checked()) all_checked = false;
  }
  return all_checked;
}

std::shared_ptr<const EndpointPool::Set> EndpointPool::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return set_;
}

std::vector<std::shared_ptr<PoolEndpoint>> EndpointPool::endpoints() const {
  auto set = snapshot();
  return set ? set->endpoints : std::vector<std::shared_ptr<PoolEndpoint>>{};
}

size_t EndpointPool::size() const {
  auto set = snapshot();
  return set ? set->endpoints.size() : 0;
}

void EndpointPool::set_resolve_error(std::string error) {
  std::lock_guard<std::mutex> lock(mu_);
  resolve_error_ = std::move(error);
}

std::string EndpointPool::resolve_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resolve_error_;
}

uint64_t EndpointPool::next_random() const {
  return splitmix(rng_.fetch_add(1, std::memory_order_relaxed));
}

std::string EndpointPool::no_candidate_error(const Set& set, int64_t now_ns, size_t tried) const {
  const std::string head = "upstream " + upstream_.name + ": ";
  if (set.endpoints.empty()) {
    std::string why = resolve_error();
    if (upstream_.dns) {
      return head + "DNS name " + upstream_.dns->name + " has not resolved to any address" +
             (why.empty() ? "" : " (" + why + ")");
    }
    return head + "no endpoints";
  }
  size_t ejected = 0, unhealthy = 0;
  for (const auto& e : set.endpoints) {
    if (e->ejected(now_ns)) ++ejected;
    if (!e->healthy()) ++unhealthy;
  }
  return head + "no endpoint available (" + std::to_string(set.endpoints.size()) +
         " endpoints: " + std::to_string(ejected) + " ejected, " + std::to_string(unhealthy) +
         " failing health checks, " + std::to_string(tried) + " already tried)";
}

int EndpointPool::balance(const Set& set, const std::vector<uint32_t>& candidates,
                          int64_t now_ns) const {
  const size_t n = candidates.size();
  if (n == 1) return static_cast<int>(candidates[0]);
  switch (upstream_.balance) {
    case policy::Balance::kRoundRobin:
      return static_cast<int>(candidates[round_robin_.fetch_add(1, std::memory_order_relaxed) % n]);
    case policy::Balance::kLeastRequest: {
      const uint64_t r = next_random();
      const size_t a = r % n;
      size_t b = (r >> 32) % (n - 1);
      if (b >= a) ++b;
      const auto& ea = *set.endpoints[candidates[a]];
      const auto& eb = *set.endpoints[candidates[b]];
      return static_cast<int>(eb.outstanding() < ea.outstanding() ? candidates[b] : candidates[a]);
    }
    case policy::Balance::kLoadAware: {
      const int64_t stale = stale_after_ns();
      const size_t start = next_random() % n;  // ties go to a random one
      int best = -1;
      double best_score = 0;
      for (size_t k = 0; k < n; ++k) {
        const uint32_t c = candidates[(start + k) % n];
        const PoolEndpoint& e = *set.endpoints[c];
        const double reported = e.load_score(now_ns, stale);
        const double score = (reported >= 0 ? reported : 0) + static_cast<double>(e.outstanding());
        if (best < 0 || score < best_score) {
          best = static_cast<int>(c);
          best_score = score;
        }
      }
      return best;
    }
  }
  return static_cast<int>(candidates[0]);
}

bool EndpointPool::end_attempt(PoolEndpoint& endpoint, EndpointOutcome outcome) const {
  const int64_t now = clock_.now_ns();
  const policy::OutlierDetection* o = outlier();
  const bool failure = outcome == EndpointOutcome::kConnectFailure ||
                       outcome == EndpointOutcome::kServerError ||
                       outcome == EndpointOutcome::kDisconnect;
  if (!o || !failure) return endpoint.end(outcome, now, o, false);
  std::lock_guard<std::mutex> lock(eject_mu_);
  return endpoint.end(outcome, now, o, ejection_room(now));
}

bool EndpointPool::ejection_room(int64_t now_ns) const {
  std::shared_ptr<const Set> set = snapshot();
  if (!set || !upstream_.outlier) return false;
  size_t ejected = 0;
  for (const auto& e : set->endpoints) {
    if (e->ejected(now_ns)) ++ejected;
  }
  const size_t allowed =
      set->endpoints.size() * static_cast<size_t>(upstream_.outlier->max_ejection_percent) / 100;
  return ejected < allowed;
}

EndpointLease EndpointPool::pick(const PickRequest& request) const {
  const int64_t now = clock_.now_ns();
  std::shared_ptr<const Set> set = snapshot();
  Scratch& s = scratch();
  s.candidates.clear();
  size_t tried = 0;
  size_t available = 0;  // tried or not: the pool's health, not this request's
  if (set) {
    for (uint32_t i = 0; i < set->endpoints.size(); ++i) {
      const PoolEndpoint& e = *set->endpoints[i];
      const bool up = e.available(now);
      if (up) ++available;
      if (contains(request.tried, e.id())) {
        ++tried;
        continue;
      }
      if (up) s.candidates.push_back(i);
    }
    if (upstream_.health && below_panic_threshold(available, set->endpoints.size(),
                                                  upstream_.health->panic_threshold)) {
      // Panic: health ignored, ejection kept.
      s.candidates.clear();
      for (uint32_t i = 0; i < set->endpoints.size(); ++i) {
        const PoolEndpoint& e = *set->endpoints[i];
        if (!e.ejected(now) && !contains(request.tried, e.id())) s.candidates.push_back(i);
      }
      if (!s.candidates.empty()) panic_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (s.candidates.empty()) {
    no_endpoint_.fetch_add(1, std::memory_order_relaxed);
    return EndpointLease(set ? no_candidate_error(*set, now, tried)
                             : "upstream " + upstream_.name + ": no endpoints");
  }

  // Residency: keep the endpoints where the model is loaded, if any reports say so.
  bool cold = false;
  if (!request.model.empty() && upstream_.load_report.kind != policy::LoadReportKind::kNone) {
    s.resident.clear();
    bool any_report = false;
    for (uint32_t c : s.candidates) {
      const int r = set->endpoints[c]->residency(request.model, now, stale_after_ns());
      if (r >= 0) any_report = true;
      if (r == 1) s.resident.push_back(c);
    }
    if (!s.resident.empty()) {
      s.candidates.swap(s.resident);
    } else if (any_report) {
      cold = true;
    }
  }

  int chosen = -1;
  bool hit = false;
  if (set->ring && !request.prompt.empty()) {
    const auto& a = *upstream_.prefix_affinity;
    const std::string_view key = affinity_prefix(request.prompt, a.unit, a.length);
    if (!key.empty()) {
      s.member.assign(set->endpoints.size(), 0);
      int64_t total = 0;
      for (uint32_t c : s.candidates) {
        s.member[c] = 1;
        total += set->endpoints[c]->outstanding();
      }
      const auto cap =
          static_cast<int64_t>(std::ceil(a.max_load_factor * static_cast<double>(total + 1) /
                                         static_cast<double>(s.candidates.size())));
      int home = -1;
      chosen = set->ring->walk(affinity_hash(key), [&](int e) {
        if (!s.member[e]) return false;
        if (home < 0) home = e;
        return set->endpoints[e]->outstanding() + 1 <= cap;
      });
      hit = chosen >= 0 && chosen == home;
    }
  }
  if (chosen < 0) chosen = balance(*set, s.candidates, now);

  std::shared_ptr<PoolEndpoint> endpoint = set->endpoints[chosen];
  endpoint->begin(cold, hit);
  return EndpointLease(shared_from_this(), std::move(endpoint), cold, hit);
}

}  // namespace cutline::gateway
