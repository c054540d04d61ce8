#include "cutline/gateway/request_target.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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

// The fragment is dropped before anything else: the route is the path without it, and dot
// segments after it do not climb into the path.
TEST(RequestTarget, AFragmentIsDroppedBeforeRouting) {
  EXPECT_EQ(canonical("/v1/chat/completions#x"), "/v1/chat/completions");
  EXPECT_EQ(canonical("/v1/models#x", "GET"), "/v1/models");
  EXPECT_EQ(canonical("/v1/chat/completions#"), "/v1/chat/completions");
  EXPECT_EQ(canonical("/v1/chat/completions?a=1#b?c"), "/v1/chat/completions?a=1");
  EXPECT_EQ(canonical("/v1/chat/completions#/../x"), "/v1/chat/completions");
  EXPECT_EQ(canonical("/v1/x#?y"), "/v1/x");
  EXPECT_EQ(canonical("http://gw:8080/v1/chat/completions#x"), "/v1/chat/completions");
  // Dot segments resolve as a router resolves them: what is left is not a core route.
  EXPECT_EQ(canonical("/v1/chat/completions/.."), "/v1/chat");
}

// Each spelling that a lenient upstream router (case-insensitive, ";params" and blanks stripped,
// a decoded '?' or '#' ending the path, dot segments resolved last) would still serve as a core
// route is refused, for every core route.
TEST(RequestTarget, VariantsALenientRouterServesAsACoreRouteAreRefused) {
  const auto upper_first = [](std::string p) {
    p[1] = static_cast<char>(p[1] - 'a' + 'A');
    return p;
  };
  const auto upper_last = [](std::string p) {
    const size_t at = p.rfind('/') + 1;
    p[at] = static_cast<char>(p[at] - 'a' + 'A');
    return p;
  };
  const auto with_parameter_inside = [](std::string p) { return p.insert(3, ";p=1"); };
  const auto climbed = [](std::string p) { return p.insert(p.rfind('/'), "/x/..;"); };
  for (std::string_view core_view : kCoreRoutePaths) {
    const std::string core(core_view);
    const std::vector<std::string> variants = {
        upper_first(core),
        upper_last(core),
        core + ";x=1",
        core + ";",
        core + "%3Bx",
        core + "%20",
        core + "%09",
        core + "%0A",
        core + "%0d%0a",
        core + "%2520",
        core + "%3Fx",
        core + "%23x",
        core + ".",
        core + "/...",
        core + "/%20",
        "/%20" + core,
        with_parameter_inside(core),
        climbed(core),
        core + ";x/",
        core + "%3B/",
    };
    for (const std::string& v : variants) {
      for (const char* method : {"POST", "GET", "OPTIONS"}) {
        auto r = canonical_target(request(method, v));
        EXPECT_FALSE(r.ok()) << method << " " << v << " -> " << *r;
        if (!r.ok()) {
          EXPECT_EQ(r.error().kind, ErrorKind::kBadRequest);
          EXPECT_NE(r.error().message.find("not " + core), std::string::npos) << r.error().message;
        }
      }
    }
  }
  // Non-ASCII letters that case-insensitive matching folds onto ASCII ones (Python's re.I,
  // .NET's OrdinalIgnoreCase): 'ſ' (U+017F) for s, 'ı' (U+0131) and 'İ' (U+0130) for i.
  EXPECT_FALSE(canonical_target(request("POST", "/v1/chat/completion%C5%BF")).ok());
  EXPECT_FALSE(canonical_target(request("POST", "/v1/embedd%C4%B1ngs")).ok());
  EXPECT_FALSE(canonical_target(request("POST", "/v1/embedd%C4%B0ngs")).ok());
  // An encoded '?' inside ";params": a router that strips parameters before decoding sees the
  // route, one that decodes first sees "/v1"; either is enough to refuse.
  EXPECT_FALSE(canonical_target(request("POST", "/v1;%3F/chat/completions")).ok());
  EXPECT_FALSE(canonical_target(request("POST", "/v1/chat;%23/completions")).ok());
}

// Paths near a core route that no router maps onto one stay passthrough, forwarded as they are;
// the core routes themselves, with any query, are accepted as always.
TEST(RequestTarget, NearbyPathsStayPassthroughAndCoreRoutesAreUnchanged) {
  for (std::string_view core : kCoreRoutePaths) {
    EXPECT_EQ(canonical(std::string(core)), core);
    EXPECT_EQ(canonical(std::string(core) + "?q=%20;x"), std::string(core) + "?q=%20;x");
  }
  for (const char* kept :
       {"/v1/models/a;b", "/v1/models/Fake", "/v1/chat", "/v1/files;x=1", "/v1/chat/completionsx",
        "/v1/chat/completions/x", "/v2/chat/completions", "/v1/chat/comp%20letions"}) {
    EXPECT_EQ(canonical(kept), kept);
  }
}

}  // namespace
}  // namespace cutline::gateway
