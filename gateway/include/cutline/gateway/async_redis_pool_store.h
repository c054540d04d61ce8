#pragma once
// AsyncRedisPoolStore: token pools shared by gateway replicas in Redis, spoken to
// asynchronously on the worker's own event loop (RedisConnection, plain or TLS). Nothing here
// blocks the loop: connecting (the host name resolved by DnsResolver), AUTH, SELECT, and every
// command are callbacks; a command not answered within timeout_ms completes from the fallback
// (see below) while the loop keeps serving every other stream.
//
// Semantics are those of MemoryPoolStore (token_pool.h) — a bucket of tokens_per_minute that
// refills continuously, created full, debt allowed — plus reservations that survive a crash:
//   - reserve is one Lua script (EVALSHA, EVAL when Redis does not know the script): it refunds
//     expired reservations of the bucket, takes the tokens and records the reservation
//     (sorted set `<key>:r`, member "<id>:<tokens>", score = its expiry in Redis time);
//   - settle is one Lua script: if the reservation is still recorded it refunds
//     reserved - used; if it expired (and was refunded already) it charges `used`;
//   - a gateway that dies holding reservations has them refunded once reservation_ttl_ms has
//     passed, on the bucket's next reserve or settle.
// Time in the scripts is Redis `TIME`, so replicas with skewed clocks agree.
//
// Failures (connection refused or lost, AUTH rejected, an error reply, no answer in time):
// counted in errors_total() (cutline_budget_store_errors_total), logged at most once per
// log_interval_ms, Redis not tried again for retry_after_failure_ms after a connection failure,
// and then per policy:
//   fail open (default): the call is served by this process's MemoryPoolStore;
//   fail closed: reserve grants nothing (ReservationSource::kRefused).
// A reserve whose answer arrives after it timed out is given back at once (settled with 0
// used), so a slow Redis never leaks tokens.
//
// Transport: RedisConnection (Cutline's own connection with hiredis' RESP reader and formatter),
// plain TCP for redis://, TLS for rediss:// (the certificate verified against budget_store.tls'
// CA, or the system's; an optional client certificate for Redis' tls-auth-clients).
//
// Threading: one store per EventLoop; every call on that loop's thread.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cutline/base/clock.h"
#include "cutline/gateway/async_pool_store.h"
#include "cutline/policy/policy.h"
#include "cutline/policy/token_pool.h"
#include "cutline/base/clock.h"
#include "cutline/base/result.h"

struct redisReply;

namespace cutline::proto {
class EventLoop;
class TlsContext;
class Timer;
}  // namespace cutline::proto

namespace cutline::gateway {

class DnsResolver;
class RedisConnection;

struct AsyncRedisOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 6379;
  int db = 0;
  std::string user;      // ACL user; "" = AUTH with the password only
  std::string password;  // "" = no AUTH
  bool fail_closed = false;
  int64_t timeout_ms = 200;  // connect, and each command
  int64_t reservation_ttl_ms = 900000;
  int64_t retry_after_failure_ms = 1000;
  int64_t log_interval_ms = 10000;
  // rediss://: the client context (CA, client certificate) and the name to verify (and send as
  // SNI); null = plain TCP.
  std::shared_ptr<const proto::TlsContext> tls;
  std::string tls_server_name;
  std::string key_prefix = "cutline:pool:";
  // A prefix for reservation ids, unique per gateway process (default: random).
  std::string instance_id;
  std::function<void(const std::string&)> log;  // default: stderr
};

// The client TLS context a rediss:// budget_store needs (its files read now: a bad one is an
// error that names it); null for redis:// and memory.
Result<std::shared_ptr<const proto::TlsContext>> redis_tls_context(
    const policy::BudgetStore& store);
// The store's options from the policy's budget_store and its TLS context.
AsyncRedisOptions redis_options(const policy::BudgetStore& store,
                                std::shared_ptr<const proto::TlsContext> tls);
// Whether Redis answers AUTH (when configured) and PING within the timeout, asked over the
// store's own transport on a private event loop: for the line the gateway logs at start.
bool redis_answers(const AsyncRedisOptions& options);

class AsyncRedisPoolStore final : public AsyncPoolStore {
 public:
  // `fallback` serves fail-open calls (the process's MemoryPoolStore, shared by workers).
  AsyncRedisPoolStore(proto::EventLoop& loop, AsyncRedisOptions options, const base::Clock& clock,
                      policy::PoolStore& fallback);
  ~AsyncRedisPoolStore() override;
  AsyncRedisPoolStore(const AsyncRedisPoolStore&) = delete;
  AsyncRedisPoolStore& operator=(const AsyncRedisPoolStore&) = delete;

  void reserve(const policy::PoolSpec& spec, int64_t want_tokens, int64_t min_tokens,
               ReserveDone done) override;
  void settle(const AsyncReservation& r, int64_t used_tokens) override;

  uint64_t errors_total() const override { return errors_total_.load(std::memory_order_relaxed); }
  bool connected() const { return ready_; }
  // Commands sent and not answered yet (tests).
  size_t in_flight() const { return in_flight_; }

  struct Command;  // implementation detail

 private:
  void connect();
  void start_connection(const std::string& address);
  void on_connected(bool ok, const std::string& error);
  void on_disconnected(const std::string& error);
  void setup_failed(const std::string& error);  // AUTH or SELECT refused
  // Sends `script` (EVALSHA, falling back to EVAL on NOSCRIPT) with two keys and `args`;
  // `done` gets the integer array reply, or an error message.
  using EvalDone = std::function<void(bool ok, std::vector<int64_t> values, std::string error)>;
  // `late` gets a successful reply that arrived after `done` ran with a timeout.
  void eval(int script, const std::string& key, std::vector<std::string> args, EvalDone done,
            EvalDone late);
  void send(std::unique_ptr<Command> cmd);
  void flush_waiting(const std::string& error);
  void fail(const std::string& what, bool connection_failed);
  bool marked_down() const;
  void on_reply(std::unique_ptr<Command> cmd, const redisReply* r);
  std::string where() const;  // "rediss://host:port", for log lines

  proto::EventLoop& loop_;
  AsyncRedisOptions options_;
  const base::Clock& clock_;
  policy::PoolStore& fallback_;
  std::unique_ptr<DnsResolver> resolver_;

  std::unique_ptr<RedisConnection> conn_;
  std::unique_ptr<proto::Timer> connect_timer_;    // connect and TLS handshake of conn_
  bool ready_ = false;                             // connected, AUTH and SELECT sent
  bool connecting_ = false;                        // resolving or connecting
  bool setup_failed_ = false;                      // AUTH or SELECT refused on this connection
  std::vector<std::unique_ptr<Command>> waiting_;  // queued until connected
  size_t in_flight_ = 0;
  uint64_t next_id_ = 0;
  std::atomic<uint64_t> errors_total_{0};  // written on the loop, read by /metrics
  int64_t down_until_ns_ = 0;
  int64_t last_log_ns_ = -1;
  std::shared_ptr<bool> alive_;  // false once destroyed: late callbacks do nothing
};

}  // namespace cutline::gateway
