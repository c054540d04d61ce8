// Asynchronous resolution with evdns (dns_resolver.h).
#include "cutline/gateway/dns_resolver.h"

#include <arpa/inet.h>
#include <event2/dns.h>
#include <event2/util.h>
#include <netdb.h>

#include <algorithm>

#include "cutline/proto/net/dns_resolver.h"
#include "cutline/proto/net/event_loop.h"

namespace cutline::gateway {

struct DnsResolver::Query {
  DnsResolver* owner = nullptr;
  std::string name;
  Callback done;
  evdns_getaddrinfo_request* request = nullptr;  // null once answered

  static void on_answer(int result, evutil_addrinfo* res, void* arg);
};

namespace {

std::string address_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

}  // namespace

void DnsResolver::Query::on_answer(int result, evutil_addrinfo* res, void* arg) {
  auto* q = static_cast<Query*>(arg);
  q->request = nullptr;
  if (result == EVUTIL_EAI_CANCEL) {  // the resolver is going away; it frees the query
    if (res) evutil_freeaddrinfo(res);
    return;
  }
  Result<std::vector<std::string>> out = std::vector<std::string>{};
  if (result != 0) {
    out = make_error(ErrorKind::kUpstream,
                     "cannot resolve " + q->name + ": " + evutil_gai_strerror(result));
  } else {
    std::vector<std::string> addrs;
    for (evutil_addrinfo* ai = res; ai; ai = ai->ai_next) {
      std::string a = address_text(ai->ai_addr);
      if (!a.empty() && std::find(addrs.begin(), addrs.end(), a) == addrs.end()) {
        addrs.push_back(std::move(a));
      }
    }
    if (addrs.empty()) {
      out = make_error(ErrorKind::kUpstream, "cannot resolve " + q->name + ": no address");
    } else {
      out = std::move(addrs);
    }
  }
  if (res) evutil_freeaddrinfo(res);
  // Take the query out of the owner before the callback (which may destroy the resolver).
  DnsResolver* owner = q->owner;
  std::unique_ptr<Query> self;
  auto it = std::find_if(owner->queries_.begin(), owner->queries_.end(),
                         [q](const std::unique_ptr<Query>& p) { return p.get() == q; });
  if (it != owner->queries_.end()) {
    self = std::move(*it);
    owner->queries_.erase(it);
  }
  if (self && self->done) self->done(std::move(out));
}

DnsResolver::DnsResolver(proto::EventLoop& loop) : loop_(loop) {
  dns_ = evdns_base_new(loop_.base(),
                        EVDNS_BASE_INITIALIZE_NAMESERVERS | EVDNS_BASE_DISABLE_WHEN_INACTIVE);
  if (!dns_) {  // no usable resolv.conf: still answer /etc/hosts and literals
    dns_ = evdns_base_new(loop_.base(), 0);
    if (dns_) evdns_base_load_hosts(dns_, nullptr);
  }
  if (dns_) {  // a dead nameserver costs seconds, not the default 5 s x 3 tries
    evdns_base_set_option(dns_, "timeout:", "2");
    evdns_base_set_option(dns_, "attempts:", "2");
  }
}

DnsResolver::~DnsResolver() {
  for (auto& q : queries_) {
    q->done = nullptr;
    if (q->request) evdns_getaddrinfo_cancel(q->request);
  }
  queries_.clear();
  proto::free_evdns_base(dns_, /*fail_requests=*/false);
}

size_t DnsResolver::pending() const { return queries_.size(); }

void DnsResolver::resolve(const std::string& name, Callback done) {
  auto q = std::make_unique<Query>();
  q->owner = this;
  q->name = name;
  q->done = std::move(done);
  Query* raw = q.get();
  queries_.push_back(std::move(q));
  evutil_addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  // May answer inline (literals, hosts file): on_answer handles that as any answer.
  evdns_getaddrinfo_request* req =
      evdns_getaddrinfo(dns_, name.c_str(), nullptr, &hints, &Query::on_answer, raw);
  // When it answered inline the query is gone already; otherwise remember the request.
  for (auto& p : queries_) {
    if (p.get() == raw) p->request = req;
  }
}

}  // namespace cutline::gateway
