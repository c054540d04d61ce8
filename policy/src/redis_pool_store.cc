// Token pools in Redis, one Lua script per primitive (redis_pool_store.h).
#include "cutline/policy/redis_pool_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cstdio>
#include <initializer_list>
#include <string_view>
#include <utility>

namespace cutline::policy {

namespace {

// The bucket arithmetic of MemoryPoolStore, in Redis's Lua 5.1 (numbers are doubles; replies
// are truncated to integers, so the scripts return only whole numbers). ARGV[1] is always the
// rate (tokens per minute, also the capacity). Time is Redis's own clock in microseconds
// (below 2^53, exact in a double).
constexpr std::string_view kLoadBucket =
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
    "if tokens > cap then tokens = cap end\n";

// A full bucket equals a missing one: delete it. Otherwise store it with an expiry equal to
// the time it needs to refill (plus a second), so idle buckets vanish.
constexpr std::string_view kSaveBucket =
    "if tokens >= cap then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "else\n"
    "  redis.call('HSET', KEYS[1], 't', string.format('%.17g', tokens),\n"
    "             'u', string.format('%.0f', now))\n"
    "  redis.call('PEXPIRE', KEYS[1], math.ceil((cap - tokens) * 60000 / cap) + 1000)\n"
    "end\n";

// ARGV: rate, want_tokens, min_tokens -> {granted, whole tokens before, retry_after_ms}.
constexpr std::string_view kTake =
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
    "end\n"
    "tokens = tokens - granted\n";

// ARGV: rate, tokens (negative charges) -> {whole tokens after}.
constexpr std::string_view kRefund =
    "tokens = tokens + tonumber(ARGV[2])\n"
    "if tokens > cap then tokens = cap end\n";

std::string script_source(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto p : parts) out.append(p);
  return out;
}

timeval to_timeval(int64_t ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

bool is_noscript(const redisReply* r) {
  return r != nullptr && r->type == REDIS_REPLY_ERROR &&
         std::string_view(r->str, r->len).substr(0, 8) == "NOSCRIPT";
}

// More idle connections than callers at once are closed rather than kept.
constexpr size_t kMaxIdleConnections = 32;

}  // namespace

void RedisPoolStore::ContextDeleter::operator()(redisContext* c) const { redisFree(c); }
void RedisPoolStore::ReplyDeleter::operator()(redisReply* r) const { freeReplyObject(r); }

RedisPoolStore::RedisPoolStore(RedisPoolStoreOptions options, const proto::Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      fallback_(clock),
      take_script_{
          script_source({kLoadBucket, kTake, kSaveBucket, "return {granted, whole, retry}\n"}), {}},
      refund_script_{
          script_source({kLoadBucket, kRefund, kSaveBucket, "return {math.floor(tokens)}\n"}), {}},
      // Read-only: no save.
      available_script_{script_source({kLoadBucket, "return {math.floor(tokens)}\n"}), {}} {
  if (!options_.log) {
    options_.log = [](const std::string& line) {
      std::fprintf(stderr, "cutline-gateway: %s\n", line.c_str());
    };
  }
}

RedisPoolStore::~RedisPoolStore() = default;

size_t RedisPoolStore::idle_connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_.size();
}

bool RedisPoolStore::marked_down() const {
  return clock_.now_ns() < down_until_ns_.load(std::memory_order_relaxed);
}

RedisPoolStore::Context RedisPoolStore::acquire(std::string& error, bool& reused) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    reused = !idle_.empty();
    if (reused) {
      Context c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  Context c(redisConnectWithTimeout(options_.host.c_str(), options_.port,
                                    to_timeval(options_.connect_timeout_ms)));
  if (!c || c->err) {
    error = "cannot connect to " + options_.host + ":" + std::to_string(options_.port) + ": " +
            (c ? std::string(c->errstr) : std::string("out of memory"));
    return nullptr;
  }
  if (redisSetTimeout(c.get(), to_timeval(options_.command_timeout_ms)) != REDIS_OK) {
    error = "cannot set the command timeout: " + std::string(c->errstr);
    return nullptr;
  }
  if (!options_.password.empty()) {
    Reply r(static_cast<redisReply*>(
        options_.user.empty()
            ? redisCommand(c.get(), "AUTH %b", options_.password.data(), options_.password.size())
            : redisCommand(c.get(), "AUTH %b %b", options_.user.data(), options_.user.size(),
                           options_.password.data(), options_.password.size())));
    if (!r || r->type == REDIS_REPLY_ERROR) {
      // Never the password itself; Redis's answer names only the failure (WRONGPASS ...).
      error = "AUTH" + (options_.user.empty() ? std::string() : " as " + options_.user) + ": " +
              (r ? std::string(r->str, r->len) : std::string(c->errstr));
      return nullptr;
    }
  }
  if (options_.db != 0) {
    Reply r(static_cast<redisReply*>(redisCommand(c.get(), "SELECT %d", options_.db)));
    if (!r || r->type == REDIS_REPLY_ERROR) {
      error = "SELECT " + std::to_string(options_.db) + ": " +
              (r ? std::string(r->str, r->len) : std::string(c->errstr));
      return nullptr;
    }
  }
  return c;
}

void RedisPoolStore::release(Context c) {
  if (!c || c->err) return;  // a failed or timed-out connection is never reused
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(c));
}

void RedisPoolStore::fail(const std::string& what, bool connection_failed) {
  errors_total_.fetch_add(1, std::memory_order_relaxed);
  const int64_t now = clock_.now_ns();
  if (connection_failed) {
    down_until_ns_.store(now + options_.retry_after_failure_ms * 1000000,
                         std::memory_order_relaxed);
  }
  int64_t last = last_log_ns_.load(std::memory_order_relaxed);
  if (last >= 0 && now - last < options_.log_interval_ms * 1000000) return;
  if (!last_log_ns_.compare_exchange_strong(last, now)) return;  // another thread logs it
  options_.log("budget_store redis://" + options_.host + ":" + std::to_string(options_.port) +
               ": " + what + "; token pools fall back to this process's memory (fail open)");
}

bool RedisPoolStore::eval_on(redisContext* c, Script& script, const std::string& key,
                             const std::vector<std::string>& args, std::vector<int64_t>& out,
                             std::string& error) {
  std::string sha;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sha = script.sha;
  }
  // EVALSHA sha 1 key args...; on NOSCRIPT (first use, Redis restarted or flushed) load it
  // and try once more.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (sha.empty()) {
      Reply loaded(static_cast<redisReply*>(
          redisCommand(c, "SCRIPT LOAD %b", script.source.data(), script.source.size())));
      if (!loaded || loaded->type != REDIS_REPLY_STRING) {
        error = "SCRIPT LOAD: " +
                (loaded ? std::string(loaded->str, loaded->len) : std::string(c->errstr));
        return false;
      }
      sha.assign(loaded->str, loaded->len);
      std::lock_guard<std::mutex> lock(mu_);
      script.sha = sha;
    }
    std::vector<const char*> argv = {"EVALSHA", sha.c_str(), "1", key.c_str()};
    std::vector<size_t> lens = {7, sha.size(), 1, key.size()};
    for (const auto& a : args) {
      argv.push_back(a.c_str());
      lens.push_back(a.size());
    }
    Reply r(static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (!r) {
      error = c->errstr[0] != '\0' ? std::string(c->errstr) : std::string("no reply");
      return false;
    }
    if (is_noscript(r.get())) {
      sha.clear();
      continue;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      error = std::string(r->str, r->len);
      return false;
    }
    if (r->type != REDIS_REPLY_ARRAY) {
      error = "unexpected reply type " + std::to_string(r->type);
      return false;
    }
    out.clear();
    for (size_t i = 0; i < r->elements; ++i) {
      const redisReply* e = r->element[i];
      if (e->type != REDIS_REPLY_INTEGER) {
        error = "unexpected element type " + std::to_string(e->type);
        return false;
      }
      out.push_back(e->integer);
    }
    return true;
  }
  error = "NOSCRIPT after SCRIPT LOAD";
  return false;
}

bool RedisPoolStore::eval(Script& script, const std::string& key,
                          const std::vector<std::string>& args, std::vector<int64_t>& out) {
  if (marked_down()) {
    fail("unreachable (retrying later)", /*connection_failed=*/false);
    return false;
  }
  // A pooled connection may have gone stale (Redis restarted, idle timeout): one failure on a
  // reused connection is retried on a fresh one before Redis is declared down.
  for (;;) {
    std::string error;
    bool reused = false;
    Context c = acquire(error, reused);
    if (!c) {
      fail(error, /*connection_failed=*/true);
      return false;
    }
    const bool ok = eval_on(c.get(), script, key, args, out, error);
    const bool io_failed = c->err != 0;
    release(std::move(c));
    if (ok) return true;
    if (!io_failed) {  // Redis answered with an error: the connection is fine, the call is not
      fail(error, /*connection_failed=*/false);
      return false;
    }
    if (!reused) {
      fail(error, /*connection_failed=*/true);
      return false;
    }
  }
}

PoolTake RedisPoolStore::take(const PoolSpec& spec, int64_t want_tokens, int64_t min_tokens) {
  std::vector<int64_t> r;
  if (!eval(take_script_, key_of(spec),
            {std::to_string(spec.tokens_per_minute), std::to_string(want_tokens),
             std::to_string(min_tokens)},
            r) ||
      r.size() != 3) {
    return fallback_.take(spec, want_tokens, min_tokens);
  }
  PoolTake out;
  out.granted_tokens = r[0];
  out.available_tokens = r[1];
  out.retry_after_ms = r[2];
  return out;
}

void RedisPoolStore::refund(const PoolSpec& spec, int64_t tokens) {
  std::vector<int64_t> r;
  if (!eval(refund_script_, key_of(spec),
            {std::to_string(spec.tokens_per_minute), std::to_string(tokens)}, r)) {
    fallback_.refund(spec, tokens);
  }
}

int64_t RedisPoolStore::available(const PoolSpec& spec) {
  std::vector<int64_t> r;
  if (!eval(available_script_, key_of(spec), {std::to_string(spec.tokens_per_minute)}, r) ||
      r.size() != 1) {
    return fallback_.available(spec);
  }
  return r[0];
}

bool RedisPoolStore::ping() {
  std::string error;
  bool reused = false;
  Context c = acquire(error, reused);
  if (!c) return false;
  Reply r(static_cast<redisReply*>(redisCommand(c.get(), "PING")));
  const bool ok = r && r->type == REDIS_REPLY_STATUS;
  release(std::move(c));
  return ok;
}

}  // namespace cutline::policy
