#include "cutline/gateway/request_id.h"

#include <gtest/gtest.h>

#include <set>

namespace cutline::gateway {
namespace {

TEST(RequestId, FreshIdsAre128RandomBits) {
  std::set<std::string> seen;
  for (int i = 0; i < 10000; ++i) {
    const std::string id = new_request_id();
    ASSERT_EQ(id.size(), 35u) << id;
    ASSERT_EQ(id.substr(0, 3), "cl-");
    ASSERT_EQ(id.find_first_not_of("0123456789abcdef", 3), std::string::npos) << id;
    EXPECT_TRUE(seen.insert(id).second) << "duplicate " << id;
  }
}

TEST(RequestId, AClientIdIsHonouredOnlyWhenSafe) {
  EXPECT_EQ(request_id_for(proto::HttpHeaders{{"X-Request-Id", "trace-42:abc/DEF"}}),
            "trace-42:abc/DEF");
  EXPECT_EQ(request_id_for(proto::HttpHeaders{{"x-request-id", std::string(128, 'a')}}),
            std::string(128, 'a'));
  for (const std::string& bad :
       {std::string(129, 'a'), std::string("has space"), std::string("quote\""),
        std::string("semi;colon"), std::string("bad\xff"), std::string()}) {
    const std::string id = request_id_for(proto::HttpHeaders{{"X-Request-Id", bad}});
    EXPECT_NE(id, bad);
    EXPECT_EQ(id.substr(0, 3), "cl-") << bad;
  }
  EXPECT_EQ(request_id_for({}).size(), 35u);
}

}  // namespace
}  // namespace cutline::gateway
