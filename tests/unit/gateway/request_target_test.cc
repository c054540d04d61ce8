#include "cutline/gateway/request_target.h"

#include <gtest/gtest.h>

namespace cutline::gateway {
namespace {

proto::HttpRequest request(std::string method, std::string target, std::string host = "gw:8080") {
  proto::HttpRequest r;
  r.method = std::move(method);
  r.target = std::move(target);
  r.headers.add("Host", host);
  return r;
}

std::string canonical(const std::string& target, const std::string& method = "POST") {
  auto r = canonical_target(request(method, target));
  return r.ok() ? *r : "refused: " + r.error().message;
}

// Every spelling of the chat route from the policy-bypass report routes (and is forwarded) as
// the one canonical path.
TEST(RequestTarget, SpellingsOfARouteBecomeTheCanonicalPath) {
  EXPECT_EQ(canonical("/v1/chat/completions"), "/v1/chat/completions");
  EXPECT_EQ(canonical("/v1/chat/%63ompletions"), "/v1/chat/completions");
  EXPECT_EQ(canonical("/v1/chat/completions/"), "/v1/chat/completions");
  EXPECT_EQ(canonical("//v1/chat/completions"), "/v1/chat/completions");
  EXPECT_EQ(canonical("/v1//chat///completions"), "/v1/chat/completions");
  EXPECT_EQ(canonical("/v1/./chat/x/../completions"), "/v1/chat/completions");
  EXPECT_EQ(canonical("/v1/chat/completions?x=1&y=%2F"), "/v1/chat/completions?x=1&y=%2F");
  EXPECT_EQ(canonical("/v1/models/a%2bb"), "/v1/models/a%2Bb");
  EXPECT_EQ(canonical("/"), "/");
}

TEST(RequestTarget, AbsoluteFormOnlyWhenItNamesThisGateway) {
  auto own = canonical_target(request("POST", "http://gw:8080/v1/chat/completions"));
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(*own, "/v1/chat/completions");
  EXPECT_FALSE(canonical_target(request("POST", "http://evil.example/v1/chat/completions")).ok());
  EXPECT_FALSE(canonical_target(request("POST", "https://evil.example/v1/chat/completions")).ok());
}

TEST(RequestTarget, AsteriskConnectAndAmbiguousEscapesAreRefused) {
  EXPECT_FALSE(canonical_target(request("OPTIONS", "*")).ok());
  EXPECT_FALSE(canonical_target(request("CONNECT", "evil.example:443")).ok());
  for (const char* bad :
       {"/v1/chat%2Fcompletions", "/v1/chat/completions%00", "/v1\\chat", "/../v1/chat/completions",
        "/v1/%zz", "/v1/%6", "v1/chat", "/v1/chat\x01"}) {
    auto r = canonical_target(request("POST", bad));
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error().kind, ErrorKind::kBadRequest);
    }
  }
}

}  // namespace
}  // namespace cutline::gateway
