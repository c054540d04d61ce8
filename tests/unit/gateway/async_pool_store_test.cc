// The in-process store behind the asynchronous pool interface: grants complete on the loop,
// never inline, and what the running requests hold is counted (cutline_pool_reserved_tokens)
// until each reservation is settled, dropped or abandoned.
#include "cutline/gateway/async_pool_store.h"

#include <gtest/gtest.h>

#include <optional>
#include <utility>

#include "cutline/base/clock.h"
#include "cutline/proto/net/event_loop.h"

namespace cutline::gateway {
namespace {

class AsyncMemoryStoreTest : public ::testing::Test {
 protected:
  // Reserves on the loop and runs it until the grant arrives.
  AsyncReservation reserve(int64_t want, int64_t min) {
    std::optional<AsyncReservation> got;
    bool inline_call = true;
    store_.reserve(spec_, want, min, [&](AsyncReservation r) {
      EXPECT_FALSE(inline_call) << "done ran inside reserve()";
      got = std::move(r);
      loop_.stop();
    });
    inline_call = false;
    loop_.run();
    EXPECT_TRUE(got.has_value());
    return got ? std::move(*got) : AsyncReservation();
  }

  base::ManualClock clock_;
  policy::MemoryPoolStore pools_{clock_};
  proto::EventLoop loop_;
  AsyncMemoryStore store_{loop_, pools_};
  const policy::PoolSpec spec_{"global/test", 600};  // 600 tokens, 10 a second
};

TEST_F(AsyncMemoryStoreTest, HeldTokensCountUntilSettledAndTheUnusedPartIsRefunded) {
  EXPECT_EQ(store_.held_tokens(), 0);
  AsyncReservation a = reserve(100, 100);
  AsyncReservation b = reserve(50, 50);
  EXPECT_EQ(a.source(), ReservationSource::kLocal);
  EXPECT_EQ(a.tokens(), 100);
  EXPECT_EQ(store_.held_tokens(), 150);
  EXPECT_EQ(pools_.available(spec_), 450);
  a.settle(30);  // 70 unused come back
  EXPECT_EQ(store_.held_tokens(), 50);
  EXPECT_EQ(pools_.available(spec_), 520);
  a.settle(0);  // idempotent
  EXPECT_EQ(store_.held_tokens(), 50);
  AsyncReservation moved = std::move(b);  // a move holds once, not twice
  EXPECT_EQ(store_.held_tokens(), 50);
  { AsyncReservation dropped = std::move(moved); }  // destroyed unsettled: refunds everything
  EXPECT_EQ(store_.held_tokens(), 0);
  EXPECT_EQ(pools_.available(spec_), 570);
}

TEST_F(AsyncMemoryStoreTest, AnAbandonedReservationIsNoLongerHeldAndRefundsNothing) {
  AsyncReservation a = reserve(200, 200);
  EXPECT_EQ(store_.held_tokens(), 200);
  a.abandon();
  EXPECT_EQ(store_.held_tokens(), 0);
  EXPECT_EQ(pools_.available(spec_), 400);  // the shared store would refund it on expiry
}

TEST_F(AsyncMemoryStoreTest, ARefusedReserveHoldsNothing) {
  AsyncReservation all = reserve(600, 600);
  AsyncReservation none = reserve(10, 10);
  EXPECT_EQ(none.tokens(), 0);
  EXPECT_GT(none.take().retry_after_ms, 0);
  EXPECT_EQ(store_.held_tokens(), 600);
  all.settle(600);
  EXPECT_EQ(store_.held_tokens(), 0);
}

}  // namespace
}  // namespace cutline::gateway
