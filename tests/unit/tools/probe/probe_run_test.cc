#include "cutline/tools/probe/probe_run.h"

#include <gtest/gtest.h>

namespace cutline::tools::probe {
namespace {

TEST(RouteTarget, OneV1WhateverTheBaseUrlEndsWith) {
  EXPECT_EQ(route_target("/", "/v1/chat/completions"), "/v1/chat/completions");
  EXPECT_EQ(route_target("", "/v1/chat/completions"), "/v1/chat/completions");
  EXPECT_EQ(route_target("/v1", "/v1/chat/completions"), "/v1/chat/completions");
  EXPECT_EQ(route_target("/v1/", "/v1/completions"), "/v1/completions");
  EXPECT_EQ(route_target("/proxy/v1", "/v1/chat/completions"), "/proxy/v1/chat/completions");
  EXPECT_EQ(route_target("/proxy", "/v1/chat/completions"), "/proxy/v1/chat/completions");
  // A base path that only ends in "v1" is not the API prefix.
  EXPECT_EQ(route_target("/apiv1", "/v1/chat/completions"), "/apiv1/v1/chat/completions");
  EXPECT_EQ(route_target("/v1", "/custom"), "/v1/custom");
}

RequestRecord with_status(int status, std::string error = "") {
  RequestRecord r;
  r.http_status = status;
  r.error = std::move(error);
  return r;
}

TEST(AllRefused, OnlyWhenEveryRequestGotA4xx) {
  ProbeReport report;
  EXPECT_FALSE(all_refused(report).has_value());
  report.records = {with_status(403, "no policy matches this request"), with_status(403),
                    with_status(401)};
  const auto line = all_refused(report);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line, "every request was refused (401 x1, 403 x2): no policy matches this request");
  report.records.push_back(with_status(200));
  EXPECT_FALSE(all_refused(report).has_value());
  report.records = {with_status(403), with_status(0)};  // a transport error is no refusal
  EXPECT_FALSE(all_refused(report).has_value());
  report.records = {with_status(503)};
  EXPECT_FALSE(all_refused(report).has_value());
}

}  // namespace
}  // namespace cutline::tools::probe
