// Token pools in Redis, over RedisConnection on the worker's loop (async_redis_pool_store.h).
#include "cutline/gateway/async_redis_pool_store.h"

#include <hiredis/hiredis.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string_view>

#include "cutline/gateway/dns_resolver.h"
#include "cutline/gateway/redis_connection.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/net/timer.h"
#include "cutline/proto/tls/tls_context.h"

namespace cutline::gateway {

namespace {

// Loads the bucket (KEYS[1], refilled to now) and refunds the reservations of KEYS[2] that
// expired. ARGV[1] is the rate (tokens per minute, also the capacity). Redis's Lua numbers are
// doubles; times are Redis microseconds (exact below 2^53).
constexpr std::string_view kPrelude =
    "local cap = tonumber(ARGV[1])\n"
    "local now_t = redis.call('TIME')\n"
    "local now = tonumber(now_t[1]) * 1000000 + tonumber(now_t[2])\n"
    "local h = redis.call('HMGET', KEYS[1], 't', 'u')\n"
    "local tokens = cap\n"
    "if h[1] and h[2] then\n"
    "  local elapsed = now - tonumber(h[2])\n"
    "  if elapsed < 0 then elapsed = 0 end\n"
    "  tokens = tonumber(h[1]) + elapsed * cap / 60000000\n"
    "end\n"
    "local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)\n"
    "for i = 1, #expired do\n"
    "  local n = tonumber(string.match(expired[i], ':(%-?%d+)$'))\n"
    "  if n then tokens = tokens + n end\n"
    "end\n"
    "if #expired > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) end\n"
    "if tokens > cap then tokens = cap end\n";

// A full bucket equals a missing one; otherwise it expires once it would have refilled.
constexpr std::string_view kSave =
    "if tokens >= cap then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "else\n"
    "  redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens),\n"
    "             'u', string.format('%.0f', now))\n"
    "  redis.call('PEXPIRE', KEYS[1], math.ceil((cap - tokens) * 60000 / cap) + 1000)\n"
    "end\n";

// ARGV: rate, want, min, reservation id, ttl ms -> {granted, whole tokens before, retry ms}.
// The caller sends 1 <= min <= want (checked in C++: Lua's numbers are doubles, and a count that
// wrapped must never reach here). A refusal's retry is at most two minutes (from the deepest
// debt, one minute's rate, to full), as in MemoryPoolStore.
constexpr std::string_view kReserve =
    "local want = tonumber(ARGV[2])\n"
    "local min = tonumber(ARGV[3])\n"
    "local whole = math.floor(tokens)\n"
    "local granted = 0\n"
    "local retry = 0\n"
    "if whole >= want then\n"
    "  granted = want\n"
    "elseif whole >= min then\n"
    "  granted = whole\n"
    "else\n"
    "  retry = math.ceil((min - tokens) * 60000 / cap)\n"
    "  if retry < 1 then retry = 1 end\n"
    "  if retry > 120000 then retry = 120000 end\n"
    "end\n"
    "tokens = tokens - granted\n"
    "if granted > 0 then\n"
    "  local ttl = tonumber(ARGV[5])\n"
    "  redis.call('ZADD', KEYS[2], now + ttl * 1000, ARGV[4] .. ':' .. granted)\n"
    "  redis.call('PEXPIRE', KEYS[2], ttl + 60000)\n"
    "end\n";

// ARGV: rate, member ("id:tokens"), reserved, used -> {whole tokens after, 1 if it was held}.
// Debt stops at one minute's rate, as in MemoryPoolStore.
constexpr std::string_view kSettle =
    "local removed = redis.call('ZREM', KEYS[2], ARGV[2])\n"
    "local delta = -tonumber(ARGV[4])\n"
    "if removed == 1 then delta = tonumber(ARGV[3]) - tonumber(ARGV[4]) end\n"
    "tokens = tokens + delta\n"
    "if tokens > cap then tokens = cap end\n"
    "if tokens < -cap then tokens = -cap end\n";

struct Script {
  std::string source;
  std::string sha;
};

std::string sha1_hex(const std::string& s) {
  unsigned char d[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : d) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

Script make_script(std::initializer_list<std::string_view> parts) {
  Script s;
  for (auto p : parts) s.source.append(p);
  s.sha = sha1_hex(s.source);
  return s;
}

const Script& script(int which) {
  static const Script kScripts[2] = {
      make_script({kPrelude, kReserve, kSave, "return {granted, whole, retry}\n"}),
      make_script({kPrelude, kSettle, kSave, "return {math.floor(tokens), removed}\n"}),
  };
  return kScripts[which];
}
constexpr int kReserveScript = 0;
constexpr int kSettleScript = 1;

bool is_noscript(const redisReply* r) {
  return r != nullptr && r->type == REDIS_REPLY_ERROR &&
         std::string_view(r->str, r->len).substr(0, 8) == "NOSCRIPT";
}

// The TLS session of one rediss:// connection: SNI and the name verified are tls_server_name, or
// the URL's host.
SSL* new_redis_ssl(const AsyncRedisOptions& o) {
  return o.tls->new_client_ssl(o.tls_server_name.empty() ? o.host : o.tls_server_name);
}

std::string random_instance_id() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%08x%08x-%d", rd(), rd(), static_cast<int>(getpid()));
  return buf;
}

}  // namespace

// One EVALSHA/EVAL in flight or waiting for the connection. Owned by the store while waiting,
// by the connection's reply callback once sent: on_reply gets it back, also when the reply never
// comes (the connection calls every waiting callback with a null reply when it ends).
struct AsyncRedisPoolStore::Command {
  AsyncRedisPoolStore* store = nullptr;
  std::shared_ptr<bool> alive;
  int script = 0;
  std::string key;
  std::vector<std::string> args;
  EvalDone done;          // runs once: reply, error or timeout
  EvalDone late;          // a reply that arrived after done ran with a timeout
  bool use_eval = false;  // EVALSHA answered NOSCRIPT: send the source
  bool finished = false;
  std::unique_ptr<proto::Timer> timer;

  void finish(bool ok, std::vector<int64_t> values, std::string error) {
    if (finished) return;
    finished = true;
    if (timer) timer->cancel();
    if (done) done(ok, std::move(values), std::move(error));
  }
};

AsyncRedisPoolStore::AsyncRedisPoolStore(proto::EventLoop& loop, AsyncRedisOptions options,
                                         const base::Clock& clock, policy::PoolStore& fallback)
    : loop_(loop),
      options_(std::move(options)),
      clock_(clock),
      fallback_(fallback),
      resolver_(std::make_unique<DnsResolver>(loop)),
      alive_(std::make_shared<bool>(true)) {
  if (options_.instance_id.empty()) options_.instance_id = random_instance_id();
  if (!options_.log) {
    options_.log = [](const std::string& line) {
      std::fprintf(stderr, "cutline-gateway: %s\n", line.c_str());
    };
  }
}

AsyncRedisPoolStore::~AsyncRedisPoolStore() {
  *alive_ = false;
  waiting_.clear();
  conn_.reset();  // drops the commands still waiting for a reply, without running them
}

std::string AsyncRedisPoolStore::where() const {
  return (options_.tls ? "rediss://" : "redis://") + options_.host + ":" +
         std::to_string(options_.port);
}

bool AsyncRedisPoolStore::marked_down() const { return clock_.now_ns() < down_until_ns_; }

void AsyncRedisPoolStore::fail(const std::string& what, bool connection_failed) {
  ++errors_total_;
  const int64_t now = clock_.now_ns();
  if (connection_failed) down_until_ns_ = now + options_.retry_after_failure_ms * 1000000;
  if (last_log_ns_ >= 0 && now - last_log_ns_ < options_.log_interval_ms * 1000000) return;
  last_log_ns_ = now;
  options_.log("budget_store " + where() + ": " + what +
               (options_.fail_closed ? "; requests that need a token pool are refused (fail closed)"
                                     : "; token pools fall back to this process's memory (fail "
                                       "open)"));
}

void AsyncRedisPoolStore::connect() {
  if (connecting_ || conn_) return;
  connecting_ = true;
  std::weak_ptr<bool> alive = alive_;
  resolver_->resolve(options_.host, [this, alive](Result<std::vector<std::string>> r) {
    if (alive.expired() || !*alive.lock()) return;
    if (!r.ok()) {
      on_connected(false, r.error().message);
      return;
    }
    start_connection(r->front());
  });
}

void AsyncRedisPoolStore::start_connection(const std::string& address) {
  RedisConnection::Events events;
  events.connected = [this]() { on_connected(true, ""); };
  events.closed = [this](const std::string& why) {
    // Runs from inside the connection: it is destroyed on the next loop turn, not here.
    auto gone = std::shared_ptr<RedisConnection>(std::move(conn_));
    loop_.post([gone]() {});
    const bool was_ready = ready_;
    ready_ = false;
    if (connecting_ && !was_ready) {
      on_connected(false, why);
    } else {
      on_disconnected(why);
    }
  };
  conn_ = std::make_unique<RedisConnection>(loop_, std::move(events));
  SSL* ssl = nullptr;
  if (options_.tls) {
    ssl = new_redis_ssl(options_);
    if (ssl == nullptr) {
      conn_.reset();
      on_connected(false, "cannot start TLS: out of memory");
      return;
    }
  }
  std::string error;
  if (!conn_->connect(address, options_.port, options_.timeout_ms, ssl, error)) {
    conn_.reset();
    on_connected(false, error);
    return;
  }
  // Connected and, over TLS, the handshake done within the timeout, or this attempt is over.
  if (!connect_timer_) {
    connect_timer_ = std::make_unique<proto::Timer>(loop_, [this]() {
      if (!conn_ || ready_) return;
      conn_.reset();
      on_connected(false, "connect timed out after " + std::to_string(options_.timeout_ms) + " ms");
    });
  }
  connect_timer_->arm(options_.timeout_ms);
}

void AsyncRedisPoolStore::setup_failed(const std::string& error) {
  // The commands pipelined behind a refused AUTH may still run (as the default user): their
  // replies are treated as failures, and the connection is closed once they are in.
  setup_failed_ = true;
  fail("AUTH/SELECT: " + error, /*connection_failed=*/true);
  if (conn_) conn_->close_when_answered();
}

void AsyncRedisPoolStore::on_connected(bool ok, const std::string& error) {
  connecting_ = false;
  if (!ok) {
    fail(error, /*connection_failed=*/true);
    flush_waiting(error);
    return;
  }
  if (connect_timer_) connect_timer_->cancel();
  ready_ = true;
  setup_failed_ = false;
  // Pipelined ahead of every command: AUTH, then SELECT. An error there makes every later
  // command fail too (NOAUTH), and each of those is counted; the AUTH or SELECT error itself is
  // what the log line shows.
  std::weak_ptr<bool> alive = alive_;
  auto on_setup_reply = [this, alive](const redisReply* r) {
    if (alive.expired() || !*alive.lock()) return;
    if (r != nullptr && r->type == REDIS_REPLY_ERROR) setup_failed(std::string(r->str, r->len));
  };
  if (!options_.password.empty()) {
    if (options_.user.empty()) {
      conn_->command({"AUTH", options_.password}, on_setup_reply);
    } else {
      conn_->command({"AUTH", options_.user, options_.password}, on_setup_reply);
    }
  }
  if (options_.db != 0) conn_->command({"SELECT", std::to_string(options_.db)}, on_setup_reply);
  std::vector<std::unique_ptr<Command>> queued;
  queued.swap(waiting_);
  for (auto& cmd : queued) {
    if (!cmd->finished) send(std::move(cmd));
  }
}

void AsyncRedisPoolStore::on_disconnected(const std::string& error) {
  if (!error.empty()) fail("connection lost: " + error, /*connection_failed=*/true);
}

void AsyncRedisPoolStore::flush_waiting(const std::string& error) {
  std::vector<std::unique_ptr<Command>> queued;
  queued.swap(waiting_);
  for (auto& cmd : queued) cmd->finish(false, {}, error);
}

void AsyncRedisPoolStore::send(std::unique_ptr<Command> cmd) {
  if (!conn_ || !ready_ || setup_failed_) {
    waiting_.push_back(std::move(cmd));
    connect();
    return;
  }
  const Script& s = script(cmd->script);
  const std::string rkey = cmd->key + ":r";
  std::vector<std::string_view> args = {cmd->use_eval ? "EVAL" : "EVALSHA",
                                        cmd->use_eval ? s.source : s.sha, "2", cmd->key, rkey};
  for (const auto& a : cmd->args) args.push_back(a);
  // The callback owns the command until its reply (or the connection's end) comes back.
  auto owned = std::make_shared<std::unique_ptr<Command>>(std::move(cmd));
  conn_->command(args, [this, owned](const redisReply* r) {
    std::unique_ptr<Command> mine = std::move(*owned);
    if (!mine || !*mine->alive) return;
    on_reply(std::move(mine), r);
  });
  ++in_flight_;
}

void AsyncRedisPoolStore::on_reply(std::unique_ptr<Command> cmd, const redisReply* r) {
  --in_flight_;
  if (is_noscript(r) && !cmd->use_eval) {  // Redis restarted or flushed its scripts
    cmd->use_eval = true;
    send(std::move(cmd));
    return;
  }
  std::string error;
  std::vector<int64_t> values;
  if (!r) {
    error = "no reply (connection closed)";
  } else if (setup_failed_) {
    error = "not authenticated";
  } else if (r->type == REDIS_REPLY_ERROR) {
    error = std::string(r->str, r->len);
  } else if (r->type != REDIS_REPLY_ARRAY) {
    error = "unexpected reply type " + std::to_string(r->type);
  } else {
    for (size_t i = 0; i < r->elements; ++i) {
      if (r->element[i]->type != REDIS_REPLY_INTEGER) {
        error = "unexpected element type";
        break;
      }
      values.push_back(r->element[i]->integer);
    }
  }
  if (cmd->finished) {  // timed out before: a late success must not leak what it took
    if (error.empty() && cmd->late) cmd->late(true, std::move(values), "");
    return;
  }
  if (!error.empty()) fail(error, /*connection_failed=*/r == nullptr);
  cmd->finish(error.empty(), std::move(values), error);
}

void AsyncRedisPoolStore::eval(int which, const std::string& key, std::vector<std::string> args,
                               EvalDone done, EvalDone late) {
  auto cmd = std::make_unique<Command>();
  cmd->store = this;
  cmd->alive = alive_;
  cmd->script = which;
  cmd->key = key;
  cmd->args = std::move(args);
  cmd->done = std::move(done);
  cmd->late = std::move(late);
  if (marked_down()) {
    ++errors_total_;
    std::weak_ptr<bool> alive = alive_;
    loop_.post([alive, done = std::move(cmd->done)]() {
      if (alive.expired() || !*alive.lock()) return;
      done(false, {}, "unreachable (retrying later)");
    });
    return;
  }
  Command* raw = cmd.get();
  cmd->timer = std::make_unique<proto::Timer>(loop_, [this, raw]() {
    const std::string why = "no answer within " + std::to_string(options_.timeout_ms) + " ms";
    fail(why, /*connection_failed=*/false);
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
      if (it->get() == raw) {  // never sent: drop it (this destroys the running timer: allowed)
        std::unique_ptr<Command> mine = std::move(*it);
        waiting_.erase(it);
        mine->finish(false, {}, why);
        loop_.post([keep = std::shared_ptr<Command>(std::move(mine))]() {});
        return;
      }
    }
    raw->finish(false, {}, why);
  });
  cmd->timer->arm(options_.timeout_ms);
  send(std::move(cmd));
}

void AsyncRedisPoolStore::reserve(const policy::PoolSpec& spec, int64_t want_tokens,
                                  int64_t min_tokens, ReserveDone done) {
  if (want_tokens < 1) {  // nothing sane to ask Redis for (MemoryPoolStore::take's contract)
    policy::PoolTake refused;
    refused.retry_after_ms = 60000;
    loop_.post([alive = std::weak_ptr<bool>(alive_), this, spec, refused, done = std::move(done)] {
      if (alive.expired() || !*alive.lock()) return;
      done(AsyncReservation(this, spec, refused, "", ReservationSource::kShared));
    });
    return;
  }
  min_tokens = std::clamp<int64_t>(min_tokens, 1, want_tokens);
  const std::string id = options_.instance_id + "-" + std::to_string(++next_id_);
  const std::string key = options_.key_prefix + spec.key;
  auto on_done = [this, spec, want_tokens, min_tokens, id, done = std::move(done)](
                     bool ok, std::vector<int64_t> v, std::string) {
    if (ok && v.size() == 3) {
      policy::PoolTake take{v[0], v[1], v[2]};
      done(AsyncReservation(this, spec, take, id, ReservationSource::kShared));
      return;
    }
    if (options_.fail_closed) {
      policy::PoolTake refused;
      refused.retry_after_ms = options_.retry_after_failure_ms;
      done(AsyncReservation(this, spec, refused, "", ReservationSource::kRefused));
      return;
    }
    done(AsyncReservation(this, spec, fallback_.take(spec, want_tokens, min_tokens), "",
                          ReservationSource::kLocal));
  };
  // A reply that comes after the timeout (the request went on without it) gives the tokens
  // straight back.
  auto on_late = [this, spec, key, id](bool ok, std::vector<int64_t> v, std::string) {
    if (!ok || v.size() != 3 || v[0] <= 0) return;
    eval(kSettleScript, key,
         {std::to_string(spec.tokens_per_minute), id + ":" + std::to_string(v[0]),
          std::to_string(v[0]), "0"},
         [](bool, std::vector<int64_t>, std::string) {}, {});
  };
  eval(kReserveScript, key,
       {std::to_string(spec.tokens_per_minute), std::to_string(want_tokens),
        std::to_string(min_tokens), id, std::to_string(options_.reservation_ttl_ms)},
       std::move(on_done), std::move(on_late));
}

void AsyncRedisPoolStore::settle(const AsyncReservation& r, int64_t used_tokens) {
  used_tokens = std::max<int64_t>(0, used_tokens);
  if (r.source() == ReservationSource::kLocal) {
    fallback_.refund(r.spec(), r.tokens() - used_tokens);
    return;
  }
  if (r.source() != ReservationSource::kShared) return;
  eval(kSettleScript, options_.key_prefix + r.spec().key,
       {std::to_string(r.spec().tokens_per_minute), r.id() + ":" + std::to_string(r.tokens()),
        std::to_string(r.tokens()), std::to_string(used_tokens)},
       [](bool, std::vector<int64_t>, std::string) {}, {});
}

Result<std::shared_ptr<const proto::TlsContext>> redis_tls_context(
    const policy::BudgetStore& store) {
  if (store.kind != policy::BudgetStoreKind::kRedis || !store.use_tls) {
    return std::shared_ptr<const proto::TlsContext>();
  }
  proto::TlsClientConfig config;
  config.ca_file = store.tls.ca_file;
  config.cert_file = store.tls.cert_file;
  config.key_file = store.tls.key_file;
  config.verify = store.tls.verify;
  config.alpn.clear();  // Redis speaks RESP only
  auto context = proto::TlsContext::client(config);
  if (!context.ok()) {
    return make_error(context.error().kind, "budget_store " + store.url + " (policy line " +
                                                std::to_string(store.ref.line) +
                                                "): " + context.error().message);
  }
  return std::move(context).value();
}

AsyncRedisOptions redis_options(const policy::BudgetStore& store,
                                std::shared_ptr<const proto::TlsContext> tls) {
  AsyncRedisOptions o;
  o.host = store.host;
  o.port = store.port;
  o.db = store.db;
  o.user = store.user;
  o.password = store.password;
  o.fail_closed = store.fail_closed;
  o.timeout_ms = store.timeout_ms;
  o.reservation_ttl_ms = store.reservation_ttl_ms;
  o.tls = std::move(tls);
  o.tls_server_name = store.tls.server_name;
  return o;
}

bool redis_answers(const AsyncRedisOptions& o) {
  proto::EventLoop loop;
  DnsResolver resolver(loop);
  std::unique_ptr<RedisConnection> conn;
  bool answered = false;
  bool refused = false;  // AUTH refused: PING may still answer, as the default user
  auto finish = [&](bool ok) {
    answered = ok && !refused;
    loop.stop();
  };
  proto::Timer deadline(loop, [&]() { finish(false); });
  loop.post([&]() {
    resolver.resolve(o.host, [&](Result<std::vector<std::string>> r) {
      if (!r.ok()) return finish(false);
      RedisConnection::Events events;
      events.closed = [&](const std::string&) { finish(false); };
      conn = std::make_unique<RedisConnection>(loop, std::move(events));
      SSL* ssl = nullptr;
      if (o.tls && (ssl = new_redis_ssl(o)) == nullptr) return finish(false);
      std::string error;
      if (!conn->connect(r->front(), o.port, o.timeout_ms, ssl, error)) return finish(false);
      // Sent now, they leave once connected (and, over TLS, once the handshake is done).
      auto on_auth = [&](const redisReply* reply) {
        refused = reply == nullptr || reply->type == REDIS_REPLY_ERROR;
      };
      if (!o.password.empty()) {
        if (o.user.empty()) {
          conn->command({"AUTH", o.password}, on_auth);
        } else {
          conn->command({"AUTH", o.user, o.password}, on_auth);
        }
      }
      conn->command({"PING"}, [&](const redisReply* reply) {
        finish(reply != nullptr && reply->type != REDIS_REPLY_ERROR);
      });
    });
  });
  deadline.arm(2 * o.timeout_ms);  // the connect, then the commands
  loop.run();
  return answered;
}

}  // namespace cutline::gateway
