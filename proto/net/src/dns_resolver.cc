#include "cutline/proto/net/dns_resolver.h"

#include <event2/dns.h>
#include <event2/util.h>

#include <cstring>

#include "cutline/proto/net/event_loop.h"

namespace cutline::proto {

void free_evdns_base(evdns_base* base, bool fail_requests) {
  if (base == nullptr) return;
  // Removes each nameserver's events, then closes its socket; pending requests wait in the base,
  // which the free below fails (or drops).
  evdns_base_clear_nameservers_and_suspend(base);
  evdns_base_free(base, fail_requests ? 1 : 0);
}

struct DnsResolver::Lookup {
  DnsResolver* resolver = nullptr;
  std::string host;
  std::vector<Done> waiting;
};

DnsResolver::DnsResolver(EventLoop& loop, std::vector<std::string> nameservers, int64_t cache_ms,
                         int64_t timeout_ms)
    : loop_(loop),
      nameservers_(std::move(nameservers)),
      cache_ms_(cache_ms),
      timeout_ms_(timeout_ms) {}

DnsResolver::~DnsResolver() {
  *alive_ = false;
  // Failing the requests runs on_result for each (now or later, from the loop): with no resolver
  // it only frees its lookup.
  for (auto& [host, lookup] : in_flight_) {
    lookup->resolver = nullptr;
    lookup->waiting.clear();
  }
  in_flight_.clear();
  free_evdns_base(base_, /*fail_requests=*/true);
}

bool DnsResolver::ensure_base(std::string* error) {
  if (base_ != nullptr) return true;
  if (nameservers_.empty()) {
    base_ = evdns_base_new(loop_.base(),
                           EVDNS_BASE_INITIALIZE_NAMESERVERS | EVDNS_BASE_DISABLE_WHEN_INACTIVE);
  } else {
    base_ = evdns_base_new(loop_.base(), EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    if (base_ != nullptr) {
      evdns_base_load_hosts(base_, nullptr);  // localhost only
      for (const std::string& ns : nameservers_) {
        if (evdns_base_nameserver_ip_add(base_, ns.c_str()) != 0) {
          *error = "bad DNS nameserver " + ns;
          free_evdns_base(base_, /*fail_requests=*/false);
          base_ = nullptr;
          return false;
        }
      }
    }
  }
  if (base_ == nullptr) {
    *error = "cannot start the DNS resolver";
    return false;
  }
  // evdns's timeout is per attempt: one attempt, so a stalled nameserver costs timeout_ms.
  const std::string seconds = std::to_string(static_cast<double>(timeout_ms_) / 1000.0);
  evdns_base_set_option(base_, "timeout", seconds.c_str());
  evdns_base_set_option(base_, "attempts", "1");
  return true;
}

const DnsResolver::Address* DnsResolver::cached(const std::string& host) const {
  auto it = cache_.find(host);
  if (it == cache_.end() || it->second.expires_ms <= clock_.now_ms()) return nullptr;
  return &it->second.address;
}

void DnsResolver::resolve(const std::string& host, Done done) {
  std::weak_ptr<bool> alive = alive_;
  // Every answer runs from the loop, never inline (evdns answers /etc/hosts names at once).
  auto later = [this, alive, done = std::move(done)](bool ok, const Address& address,
                                                     const std::string& error) {
    loop_.post([alive, done, ok, address, error] {
      if (auto a = alive.lock(); a && *a) done(ok, address, error);
    });
  };
  if (auto it = in_flight_.find(host); it != in_flight_.end()) {
    it->second->waiting.push_back(std::move(later));
    return;
  }
  std::string error;
  if (!ensure_base(&error)) {
    later(false, Address{}, error);
    return;
  }
  // Owned by on_result, which always runs once (inline, later, or when the base is freed).
  auto* raw = new Lookup();
  raw->resolver = this;
  raw->host = host;
  raw->waiting.push_back(std::move(later));
  in_flight_.emplace(host, raw);
  evutil_addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = EVUTIL_AI_ADDRCONFIG;
  evdns_getaddrinfo(base_, host.c_str(), nullptr, &hints, &DnsResolver::on_result, raw);
}

void DnsResolver::on_result(int result, addrinfo* res, void* arg) {
  std::unique_ptr<Lookup> owned(static_cast<Lookup*>(arg));
  if (owned->resolver == nullptr) {  // the resolver is gone
    if (res != nullptr) evutil_freeaddrinfo(res);
    return;
  }
  DnsResolver& self = *owned->resolver;
  self.in_flight_.erase(owned->host);
  Address address;
  std::string error;
  const bool ok = result == 0 && res != nullptr && res->ai_addrlen <= sizeof(address.addr);
  if (ok) {
    std::memcpy(&address.addr, res->ai_addr, res->ai_addrlen);
    address.len = static_cast<socklen_t>(res->ai_addrlen);
    self.cache_[owned->host] = Entry{address, self.clock_.now_ms() + self.cache_ms_};
  } else {
    error = "cannot resolve " + owned->host + ": " + evutil_gai_strerror(result);
  }
  if (res != nullptr) evutil_freeaddrinfo(res);
  for (Done& done : owned->waiting) done(ok, address, error);
}

}  // namespace cutline::proto
