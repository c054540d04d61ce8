#pragma once
// DnsResolver: asynchronous name resolution on an EventLoop (libevent's evdns, configured from
// /etc/resolv.conf and /etc/hosts), for the names the gateway must re-resolve while it serves:
// an upstream pool's `endpoints: {dns: ...}` (a Kubernetes headless Service answers with every
// ready pod) and the Redis host of the shared token pools. Resolution never blocks the loop;
// an IP literal or a hosts-file name is answered without a query, possibly before resolve()
// returns (the callback must not destroy the resolver then).
//
// Threading: construct, resolve() and destroy on the loop thread; callbacks run there. Destroying
// the resolver cancels pending queries (their callbacks do not run).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cutline/base/result.h"

struct evdns_base;

namespace cutline::proto {
class EventLoop;
}

namespace cutline::gateway {

class DnsResolver {
 public:
  explicit DnsResolver(proto::EventLoop& loop);
  ~DnsResolver();
  DnsResolver(const DnsResolver&) = delete;
  DnsResolver& operator=(const DnsResolver&) = delete;

  // Every IPv4 and IPv6 address of `name` as text ("10.0.0.7", "fd00::1"), deduplicated, in the
  // resolver's order. Errors (kUpstream): "cannot resolve NAME: <reason>" — including a name
  // with no address.
  using Callback = std::function<void(Result<std::vector<std::string>>)>;
  void resolve(const std::string& name, Callback done);

  size_t pending() const;

  struct Query;  // implementation detail

 private:
  proto::EventLoop& loop_;
  evdns_base* dns_ = nullptr;
  std::vector<std::unique_ptr<Query>> queries_;
  friend struct Query;
};

}  // namespace cutline::gateway
