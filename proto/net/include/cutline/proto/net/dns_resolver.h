#pragma once
// Internal to proto/: the HttpClient's asynchronous resolver for upstream host names, on the
// client's own loop (libevent's evdns), with a small cache. A name that takes seconds to resolve
// (a nameserver that stalls) delays only the requests waiting for it; the loop keeps relaying
// every other stream. Lookups of the same name in flight are shared. Results are kept for
// ClientOptions::dns_cache_ms (evdns reports no TTL); failures are not kept.
//
// Nameservers: /etc/resolv.conf and /etc/hosts by default, or the list in
// ClientOptions::dns_nameservers ("IP" or "IP:PORT"; tests point it at a stalled one).
//
// Threading: the client's loop thread only. The evdns base is made at the first name (a gateway
// configured with IP addresses never makes one). Destroying the resolver drops waiting callbacks
// without running them.

#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "cutline/base/clock.h"

struct evdns_base;
struct addrinfo;

namespace cutline::proto {

class EventLoop;

// Frees an evdns base without leaving a nameserver socket's event on the loop after the socket is
// closed. evdns_base_free (libevent 2.1) closes each nameserver socket before it removes the
// socket's event, so for that moment the descriptor number is free: another thread may open a
// file under it, and the removal then names that file's descriptor. The nameservers are taken
// out first, event before socket, and only then is the base freed. Loop thread only. The
// gateway's own resolver (gateway/dns_resolver.h) frees its base with it too.
void free_evdns_base(evdns_base* base, bool fail_requests);

class DnsResolver {
 public:
  struct Address {
    sockaddr_storage addr{};
    socklen_t len = 0;
  };
  // ok: `address` holds the first address (port 0); else `error` says why.
  using Done = std::function<void(bool ok, const Address& address, const std::string& error)>;

  DnsResolver(EventLoop& loop, std::vector<std::string> nameservers, int64_t cache_ms,
              int64_t timeout_ms);
  ~DnsResolver();
  DnsResolver(const DnsResolver&) = delete;
  DnsResolver& operator=(const DnsResolver&) = delete;

  // A cached address for `host`, if fresh.
  const Address* cached(const std::string& host) const;
  // Resolves `host`; `done` runs later on the loop (never inline).
  void resolve(const std::string& host, Done done);

 private:
  struct Lookup;
  struct Entry {
    Address address;
    int64_t expires_ms = 0;
  };
  static void on_result(int result, addrinfo* res, void* arg);
  bool ensure_base(std::string* error);

  EventLoop& loop_;
  std::vector<std::string> nameservers_;
  int64_t cache_ms_;
  int64_t timeout_ms_;
  evdns_base* base_ = nullptr;
  std::unordered_map<std::string, Entry> cache_;  // expiry on clock_
  base::MonotonicClock clock_;
  std::unordered_map<std::string, Lookup*> in_flight_;  // owned by their evdns callbacks
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace cutline::proto
