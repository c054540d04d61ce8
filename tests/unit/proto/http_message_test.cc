#include "cutline/proto/http1/http_message.h"

#include <gtest/gtest.h>

namespace cutline::proto {
namespace {

TEST(HttpHeadersTest, LookupIgnoresCaseAndKeepsOrderAndDuplicates) {
  HttpHeaders h{{"Content-Type", "application/json"}, {"X-A", "1"}, {"x-a", "2"}};
  EXPECT_EQ(h.get("content-type"), "application/json");
  EXPECT_EQ(h.get("X-A"), "1");  // the first one
  EXPECT_FALSE(h.get("missing").has_value());
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(std::next(h.begin(), 2)->name, "x-a");  // case kept as sent
  h.set("X-A", "3");
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h.get("x-a"), "3");
  EXPECT_EQ(h.remove("CONTENT-TYPE"), 1u);
  EXPECT_EQ(h.size(), 1u);
}

TEST(HttpHeadersTest, ViewsIntoTheListCanBeAddedSetAndRemoved) {
  // A view from get() points into the list's own buffer, which adding grows and removing moves.
  HttpHeaders h{{"X-Request-Id", "req-1"}, {"Host", "a.example"}};
  for (int i = 0; i < 40; ++i) h.add("X-Copy", *h.get("x-request-id"));  // grows many times
  EXPECT_EQ(h.size(), 42u);
  EXPECT_EQ(h.get("x-copy"), "req-1");
  h.set("X-Host", *h.get("host"));
  EXPECT_EQ(h.get("x-host"), "a.example");
  const HttpHeader first = *h.begin();
  EXPECT_EQ(h.remove(first.name), 1u);  // the name's bytes move while it is compared
  EXPECT_FALSE(h.has("x-request-id"));
  EXPECT_EQ(h.remove(std::next(h.begin(), 1)->name), 40u);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h.begin()->name, "Host");
  EXPECT_EQ(std::next(h.begin())->value, "a.example");
  h.clear();
  EXPECT_TRUE(h.empty());
  EXPECT_EQ(h.begin(), h.end());
  h.add("", "");  // an empty name and value are still a header
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(h.get(""), "");
}

TEST(HttpHeadersTest, MovingTheListKeepsViewsIntoIt) {
  HttpHeaders h{{"TE", "x"}};  // small enough for a string's inline bytes
  const std::string_view value = *h.get("te");
  const HttpHeaders moved = std::move(h);
  EXPECT_EQ(moved.get("te")->data(), value.data());
  HttpHeaders added;
  added.add("A", "b");
  const std::string_view b = *added.get("a");
  const HttpHeaders moved_too = std::move(added);
  EXPECT_EQ(moved_too.get("a")->data(), b.data());
}

TEST(HttpHeadersTest, HasTokenReadsCommaSeparatedLists) {
  HttpHeaders h{{"Connection", "keep-alive, Upgrade"}, {"connection", " Close "}};
  EXPECT_TRUE(h.has_token("connection", "upgrade"));
  EXPECT_TRUE(h.has_token("Connection", "close"));
  EXPECT_FALSE(h.has_token("Connection", "keep"));
  EXPECT_FALSE(h.has_token("Upgrade", "h2c"));
}

TEST(HttpHeadersTest, RemoveHopByHopDropsStandardAndConnectionListedHeaders) {
  HttpHeaders h{{"Host", "x"},
                {"Connection", "keep-alive, X-Private"},
                {"Keep-Alive", "timeout=5"},
                {"X-Private", "secret"},
                {"Transfer-Encoding", "chunked"},
                {"TE", "trailers"},
                {"Content-Length", "5"},
                {"Authorization", "Bearer k"}};
  remove_hop_by_hop(h);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h.get("host"), "x");
  EXPECT_EQ(h.get("content-length"), "5");
  EXPECT_EQ(h.get("authorization"), "Bearer k");
  EXPECT_TRUE(is_hop_by_hop("Proxy-Authorization"));
  EXPECT_FALSE(is_hop_by_hop("content-type"));
}

TEST(HttpRequestTest, PathAndQuery) {
  HttpRequest r;
  r.target = "/v1/models?limit=2&x";
  EXPECT_EQ(r.path(), "/v1/models");
  EXPECT_EQ(r.query(), "limit=2&x");
  r.target = "/healthz";
  EXPECT_EQ(r.path(), "/healthz");
  EXPECT_EQ(r.query(), "");
}

TEST(ReasonPhraseTest, KnownAndUnknown) {
  EXPECT_EQ(reason_phrase(431), "Request Header Fields Too Large");
  EXPECT_EQ(reason_phrase(299), "Unknown");
}

}  // namespace
}  // namespace cutline::proto
