#include "cutline/tools/probe/verdict.h"

#include <gtest/gtest.h>

namespace cutline::tools::probe {
namespace {

RequestRecord answer(int level, int prompt, int64_t tokens, const std::string& cause,
                     const std::string& text) {
  RequestRecord r;
  r.concurrency = level;
  r.prompt_index = prompt;
  r.seed = 7;
  r.output_tokens = tokens;
  r.cause = cause;
  r.model_stop = cause == "eos" || cause == "stop_sequence";
  r.truncated = !r.model_stop;
  r.content = text;
  r.content_hash = content_hash(text);
  r.ttft_ms = 10.0 * level;
  r.itl_ms = {1.0 * level, 2.0 * level};
  return r;
}

std::vector<RequestRecord> deadline_scenario() {
  std::vector<RequestRecord> recs;
  for (int p = 0; p < 5; ++p) recs.push_back(answer(1, p, 20, "eos", "abcdefghijklmnopqrst"));
  for (int p = 0; p < 5; ++p) {
    if (p < 3) {
      RequestRecord r = answer(8, p, 6, "gateway_deadline", "abcdef");
      r.policy = "interactive";
      r.rule = "policies[0].deadline";
      r.limit = 30000;
      r.unit = "ms";
      recs.push_back(r);
    } else if (p == 3) {
      recs.push_back(answer(8, p, 4, "client_cancel", "abcd"));
    } else {
      recs.push_back(answer(8, p, 20, "eos", "abcdefghijklmnopqrst"));
    }
  }
  return recs;
}

TEST(ProbeVerdict, NamesTheCausesOfShorterAnswersWithTheirRule) {
  const LoadVerdict v = make_load_verdict(deadline_scenario(), false);
  ASSERT_EQ(v.levels.size(), 2u);
  EXPECT_EQ(v.levels[1].shorter, 4);
  EXPECT_EQ(v.levels[1].shorter_causes.at("gateway_deadline"), 3);
  ASSERT_GE(v.lines.size(), 2u);
  EXPECT_EQ(v.lines[1],
            "at concurrency 8, 4 of 5 answers were shorter than at 1 (mean 8.4 vs 20.0 output "
            "tokens); 3 ended by gateway_deadline (policy interactive, rule "
            "policies[0].deadline, 30 s), 1 by client_cancel");
  EXPECT_DOUBLE_EQ(v.levels[1].completion_rate, 0.2);
  EXPECT_FALSE(v.serving_defect);
}

TEST(ProbeVerdict, SameLengthsAndEosMeansOnlyLatencyGrew) {
  std::vector<RequestRecord> recs;
  for (int level : {1, 2, 4}) {
    for (int p = 0; p < 3; ++p) recs.push_back(answer(level, p, 12, "eos", "same text"));
  }
  const LoadVerdict v = make_load_verdict(recs, std::nullopt);
  ASSERT_EQ(v.lines.size(), 3u);
  EXPECT_NE(v.lines[2].find("at concurrency 4, lengths did not change and stops stayed eos: "
                            "only latency grew (TTFT p50 10.0 -> 40.0 ms"),
            std::string::npos)
      << v.lines[2];
  EXPECT_EQ(v.levels[2].shorter, 0);
  EXPECT_EQ(v.levels[2].compared, 3);
}

TEST(ProbeVerdict, EqualSeedsDifferentOutputsIsADefectOnlyWhenInvarianceIsClaimed) {
  std::vector<RequestRecord> recs = {answer(1, 0, 5, "eos", "hello"),
                                     answer(4, 0, 5, "eos", "world")};
  const LoadVerdict claimed = make_load_verdict(recs, true);
  EXPECT_TRUE(claimed.serving_defect);
  EXPECT_EQ(claimed.lines.back(),
            "SERVING DEFECT: 1 of 1 answers at concurrency 4 differ from concurrency 1 at equal "
            "seeds, although the endpoint claims batch-invariant sampling");
  const LoadVerdict plain = make_load_verdict(recs, false);
  EXPECT_FALSE(plain.serving_defect);
  EXPECT_EQ(plain.lines.back().rfind("note: 1 of 1 answers", 0), 0u) << plain.lines.back();
}

TEST(ProbeVerdict, ClaimIsReadFromTheRecordsWhenNotGiven) {
  std::vector<RequestRecord> recs = {answer(1, 0, 5, "eos", "hello"),
                                     answer(2, 0, 5, "eos", "world")};
  for (auto& r : recs) {
    r.reporter = "backend";
    r.phases = proto::TtftPhases{};
  }
  EXPECT_TRUE(make_load_verdict(recs, std::nullopt).serving_defect);
  recs[1].phases.reset();
  EXPECT_FALSE(make_load_verdict(recs, std::nullopt).serving_defect);
}

TEST(ProbeVerdict, ShorterAnswerThatIsNotAPrefixCountsAsDifferent) {
  std::vector<RequestRecord> recs = {answer(1, 0, 5, "eos", "hello"),
                                     answer(2, 0, 2, "gateway_deadline", "xy")};
  const LoadVerdict v = make_load_verdict(recs, true);
  EXPECT_EQ(v.levels[1].not_prefix, 1);
  EXPECT_TRUE(v.serving_defect);
  recs[1].content = "he";
  EXPECT_FALSE(make_load_verdict(recs, true).serving_defect);
}

TEST(ProbeVerdict, CutsWithoutShorteningAreNamed) {
  std::vector<RequestRecord> recs = {answer(1, 0, 8, "client_max_tokens", "aaaaaaaa"),
                                     answer(2, 0, 8, "client_max_tokens", "aaaaaaaa")};
  const LoadVerdict v = make_load_verdict(recs, false);
  EXPECT_EQ(
      v.lines[1].rfind("at concurrency 2, lengths did not change; stops: client_max_tokens 1", 0),
      0u)
      << v.lines[1];
}

TEST(ProbeVerdict, PercentileIsNearestRank) {
  EXPECT_FALSE(percentile({}, 50).has_value());
  EXPECT_EQ(*percentile({5, 1, 3, 2, 4}, 50), 3);
  EXPECT_EQ(*percentile({5, 1, 3, 2, 4}, 99), 5);
  EXPECT_EQ(*percentile({5, 1, 3, 2, 4}, 0), 1);
}

TEST(ProbeVerdict, DescribeCauseFormatsLimits) {
  RequestRecord r;
  r.cause = "gateway_budget";
  r.rule = "policies[1].budget.max_output_tokens";
  r.limit = 64;
  r.unit = "tokens";
  EXPECT_EQ(describe_cause("gateway_budget", {r}),
            "gateway_budget (rule policies[1].budget.max_output_tokens, 64 tokens)");
  r.cause = "gateway_idle_timeout";
  r.rule = "policies[0].idle_timeout";
  r.limit = 250;
  r.unit = "ms";
  EXPECT_EQ(describe_cause("gateway_idle_timeout", {r}),
            "gateway_idle_timeout (rule policies[0].idle_timeout, 250 ms)");
  EXPECT_EQ(describe_cause("client_cancel", {r}), "client_cancel");
}

}  // namespace
}  // namespace cutline::tools::probe
