#pragma once
// RedisPoolStore: token pools shared by every gateway replica (`budget_store:
// redis://host:port[/db]`). Same token-bucket semantics as MemoryPoolStore (token_pool.h): a
// bucket holds at most tokens_per_minute tokens, refills at tokens_per_minute / 60 per second,
// is created full, may go into debt on a negative refund, and a refused take says when
// min_tokens will be there (retry_after_ms).
//
// Each primitive (take, refund, available) is one Lua script run atomically in Redis (EVALSHA,
// loading the script on NOSCRIPT), and the scripts read the time from Redis `TIME`: replicas
// with skewed clocks see the same refill. A bucket is a hash at `<key_prefix><PoolSpec::key>`
// (fields t = tokens, u = last update in microseconds) with an expiry equal to the time it
// needs to refill: an idle bucket vanishes once it is full again (it equals a fresh one), and
// a bucket that is full after a refund is deleted at once.
//
// Calls are synchronous (the gateway calls them on its event loops), so every connect and
// command has a short timeout (50 ms by default). Connections are pooled (one per concurrent
// caller; the gateway has one caller per worker thread).
//
// Failure policy: fail OPEN. When Redis cannot be reached or a command fails, the call is
// served by a local MemoryPoolStore (this process's own buckets, as with `budget_store:
// memory`), counted in errors_total() (the gateway exports it as
// cutline_budget_store_errors_total) and logged at most once per log_interval_ms. After a
// connection failure Redis is not tried again for retry_after_failure_ms, so an unreachable
// Redis costs one timeout per interval, not one per request. Tokens taken from Redis and
// refunded while it is down go to the local buckets (they are not replayed later); a take
// whose reply timed out after Redis ran it stays taken there (the bucket refills within a
// minute). Host names are resolved on each new connection (getaddrinfo, not bounded by the
// connect timeout).
//
// Thread-safety: every method may be called from any thread.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/policy/token_pool.h"
#include "cutline/proto/clock.h"

struct redisContext;
struct redisReply;

namespace cutline::policy {

struct RedisPoolStoreOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 6379;
  int db = 0;                       // SELECTed on every new connection
  std::string user;                 // AUTH user (ACL); "" = the default user
  std::string password;             // AUTH on every new connection; "" = none
  int64_t connect_timeout_ms = 50;  // per connection attempt
  int64_t command_timeout_ms = 50;  // per command (read and write)
  int64_t retry_after_failure_ms =
      1000;                         // no new connection attempt for this long after one failed
  int64_t log_interval_ms = 10000;  // at most one log line per interval
  std::string key_prefix = "cutline:pool:";
  // Where log lines go (default: stderr, prefixed "cutline-gateway: ").
  std::function<void(const std::string&)> log;
};

class RedisPoolStore final : public PoolStore {
 public:
  // `clock` times the back-off, the log rate limit and the local fallback buckets; it must
  // outlive the store. Does not connect: the first call (or ping()) does.
  RedisPoolStore(RedisPoolStoreOptions options, const proto::Clock& clock);
  ~RedisPoolStore() override;
  RedisPoolStore(const RedisPoolStore&) = delete;
  RedisPoolStore& operator=(const RedisPoolStore&) = delete;

  PoolTake take(const PoolSpec& spec, int64_t want_tokens, int64_t min_tokens) override;
  void refund(const PoolSpec& spec, int64_t tokens) override;
  int64_t available(const PoolSpec& spec) override;

  // Connects (if needed) and sends PING; true when Redis answered. For a start-up log line.
  bool ping();

  // Calls served by the local fallback because Redis failed or was marked down.
  uint64_t errors_total() const { return errors_total_.load(std::memory_order_relaxed); }
  // Idle connections kept for reuse (tests).
  size_t idle_connections() const;

 private:
  struct Script {
    std::string source;
    std::string sha;  // from SCRIPT LOAD; guarded by mu_
  };
  struct ContextDeleter {
    void operator()(redisContext* c) const;
  };
  struct ReplyDeleter {
    void operator()(redisReply* r) const;
  };
  using Context = std::unique_ptr<redisContext, ContextDeleter>;
  using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

  // Runs `script` on KEYS[1] = key with `args` and fills `out` with its integer array reply;
  // false (counted and logged) when Redis failed or is marked down: the caller falls back.
  bool eval(Script& script, const std::string& key, const std::vector<std::string>& args,
            std::vector<int64_t>& out);
  bool eval_on(redisContext* c, Script& script, const std::string& key,
               const std::vector<std::string>& args, std::vector<int64_t>& out, std::string& error);
  // An idle connection (`reused`) or a new one; null with `error` when connecting failed.
  Context acquire(std::string& error, bool& reused);
  // Keeps a healthy connection for the next caller.
  void release(Context c);
  bool marked_down() const;
  void fail(const std::string& what, bool connection_failed);
  std::string key_of(const PoolSpec& spec) const { return options_.key_prefix + spec.key; }

  RedisPoolStoreOptions options_;
  const proto::Clock& clock_;
  MemoryPoolStore fallback_;
  Script take_script_;
  Script refund_script_;
  Script available_script_;

  mutable std::mutex mu_;
  std::vector<Context> idle_;  // guarded by mu_

  std::atomic<int64_t> down_until_ns_{0};
  std::atomic<int64_t> last_log_ns_{-1};  // -1: nothing logged yet
  std::atomic<uint64_t> errors_total_{0};
};

}  // namespace cutline::policy
