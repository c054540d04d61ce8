// The `limits` section: what any client may cost the gateway (sizes, deadlines, caps).
#include <gtest/gtest.h>

#include "policy_test_util.h"

namespace cutline::policy {
namespace {

using testing::load_errors;
using testing::load_ok;
using testing::with_policies;

TEST(LoadLimits, DefaultsBoundEveryClient) {
  auto p = load_ok(with_policies("  - name: all\n"));
  ASSERT_TRUE(p);
  const Limits& l = p->limits;
  EXPECT_EQ(l.max_body_bytes, 2 << 20);
  EXPECT_EQ(l.request_header_timeout_ms, 10000);
  EXPECT_EQ(l.request_body_timeout_ms, 30000);
  EXPECT_EQ(l.max_connections, 16384);
  EXPECT_EQ(l.max_request_memory_bytes, 256 << 20);
  EXPECT_EQ(l.http2_max_unfinished_streams, 100);
  EXPECT_EQ(l.http2_max_buffered_request_bytes, 8 << 20);
  EXPECT_EQ(l.http2_max_resets_per_s, 100);
}

TEST(LoadLimits, ReadsEveryKey) {
  auto p = load_ok(with_policies("  - name: all\n") +
                   "limits:\n"
                   "  max_body_bytes: 1000\n"
                   "  request_header_timeout: 2s\n"
                   "  request_body_timeout: 500ms\n"
                   "  max_connections: 10\n"
                   "  max_request_memory_bytes: 5000\n"
                   "  http2_max_unfinished_streams: 4\n"
                   "  http2_max_buffered_request_bytes: 3000\n"
                   "  http2_max_resets_per_s: 0\n");
  ASSERT_TRUE(p);
  const Limits& l = p->limits;
  EXPECT_EQ(l.max_body_bytes, 1000);
  EXPECT_EQ(l.request_header_timeout_ms, 2000);
  EXPECT_EQ(l.request_body_timeout_ms, 500);
  EXPECT_EQ(l.max_connections, 10);
  EXPECT_EQ(l.max_request_memory_bytes, 5000);
  EXPECT_EQ(l.http2_max_unfinished_streams, 4);
  EXPECT_EQ(l.http2_max_buffered_request_bytes, 3000);
  EXPECT_EQ(l.http2_max_resets_per_s, 0);
}

TEST(LoadLimits, AMemoryBudgetBelowOneBodyIsAnError) {
  const std::string errors = load_errors(with_policies("  - name: all\n") +
                                         "limits: {max_body_bytes: 1000, "
                                         "max_request_memory_bytes: 999}\n");
  EXPECT_NE(errors.find("limits.max_request_memory_bytes: must be at least limits.max_body_bytes"),
            std::string::npos)
      << errors;
}

TEST(LoadLimits, ZeroConnectionsAndBadDurationsAreErrors) {
  const std::string errors = load_errors(with_policies("  - name: all\n") +
                                         "limits: {max_connections: 0, "
                                         "request_header_timeout: soon}\n");
  EXPECT_NE(errors.find("limits.max_connections"), std::string::npos) << errors;
  EXPECT_NE(errors.find("limits.request_header_timeout"), std::string::npos) << errors;
}

}  // namespace
}  // namespace cutline::policy
