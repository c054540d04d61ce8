// The per-token relay path must not allocate. This binary replaces the
// global operator new/delete with counting versions and relays steady-state token chunks through
// the relay core (SseParser -> ChunkParser -> TokenTiming -> SSE framing for the client), after a
// warm-up that lets the reused buffers reach their working size.

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "cutline/gateway/relay.h"
#include "cutline/proto/wire/openai_chunk.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept {
  return ::operator new(size, tag);
}
void* operator new(std::size_t size, std::align_val_t align) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  const std::size_t a = static_cast<std::size_t>(align);
  if (void* p = std::aligned_alloc(a, (size + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size, std::align_val_t align) {
  return ::operator new(size, align);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace cutline::gateway {
namespace {

// One token chunk as vLLM sends it; the content varies in length like real tokens.
std::string chat_token(int i) {
  static const char* kWords[] = {"a", " token", "\\n", " é", " longer-word", "\\\"q\\\""};
  return "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
         "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" +
         std::string(kWords[i % 6]) + "\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
}

std::string completion_token(int i) {
  static const char* kWords[] = {"x", " yz", " words here"};
  return "data: {\"id\":\"cmpl-7\",\"object\":\"text_completion\",\"created\":1700000000,"
         "\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"" +
         std::string(kWords[i % 3]) + "\",\"logprobs\":null,\"finish_reason\":null}]}\n\n";
}

struct Counted {
  int64_t allocations = 0;
  int64_t tokens = 0;
  size_t out_bytes = 0;
};

// Feeds `chunks` (prepared before counting) the way a stream's on_upstream_body does: relay into
// the stream's reused output buffer, hand it on, clear it. `step` > 0 splits each chunk into
// pieces of that many bytes (a socket delivering partial events). The first pass is the warm-up
// that lets the reused buffers grow to their working size; the second is counted.
Counted relay_counting(Relay& relay, const std::vector<std::string>& chunks, size_t step) {
  TokenTiming timing(0);
  std::string out;
  out.reserve(1024);
  Counted c;
  int64_t now_ns = 0;
  for (const bool count : {false, true}) {
    for (const std::string& chunk : chunks) {
      const std::string_view bytes = chunk;
      const size_t piece = step == 0 ? bytes.size() : step;
      const int64_t before = g_allocations.load();
      for (size_t at = 0; at < bytes.size(); at += piece) {
        now_ns += 1000;
        auto r = relay.feed(bytes.substr(at, piece), now_ns, timing, out);
        EXPECT_TRUE(r.ok());
        if (r.ok() && count) {
          c.tokens += r->tokens;
          c.out_bytes += out.size();
        }
        out.clear();
      }
      if (count) c.allocations += g_allocations.load() - before;
    }
  }
  return c;
}

Counted relay_chunks(proto::Endpoint endpoint, std::string (*make)(int), size_t step) {
  std::vector<std::string> chunks;
  size_t bytes = 0;
  for (int i = 0; i < 300; ++i) {
    chunks.push_back(make(i));
    bytes += chunks.back().size();
  }
  proto::ChunkParser shared;  // one per worker in the gateway
  RelayOptions options{endpoint, /*client_stream=*/true, /*client_include_usage=*/false, "id", "m"};
  options.chunk_parser = &shared;
  Relay relay(options);
  Counted c = relay_counting(relay, chunks, step);
  // The relay did relay: every chunk is a token and reached the client unchanged.
  EXPECT_EQ(c.tokens, 300);
  EXPECT_EQ(c.out_bytes, bytes);
  return c;
}

TEST(RelayAllocations, SteadyStateChatTokensAllocateNothing) {
  EXPECT_EQ(relay_chunks(proto::Endpoint::kChatCompletions, chat_token, 0).allocations, 0);
}

TEST(RelayAllocations, SteadyStateCompletionTokensAllocateNothing) {
  EXPECT_EQ(relay_chunks(proto::Endpoint::kCompletions, completion_token, 0).allocations, 0);
}

TEST(RelayAllocations, TokensSplitAcrossReadsAllocateNothing) {
  EXPECT_EQ(relay_chunks(proto::Endpoint::kChatCompletions, chat_token, 37).allocations, 0);
  EXPECT_EQ(relay_chunks(proto::Endpoint::kChatCompletions, chat_token, 1).allocations, 0);
}

// The counter itself works (a test that cannot fail proves nothing).
TEST(RelayAllocations, TheCounterSeesAnAllocation) {
  const int64_t before = g_allocations.load();
  auto* p = new std::string(100, 'x');
  EXPECT_GT(g_allocations.load(), before);
  delete p;
}

}  // namespace
}  // namespace cutline::gateway
