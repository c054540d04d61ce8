#include "cutline/tools/probe/record_writers.h"

#include <simdjson.h>

#include <gtest/gtest.h>

namespace cutline::tools::probe {
namespace {

ProbeReport sample_report() {
  ProbeReport rep;
  rep.url = "http://127.0.0.1:8080";
  rep.label = "no-gateway-limits";
  rep.model = "tiny";
  rep.max_tokens = 32;
  rep.policy_json = R"({"generation":3,"rules":[]})";
  RequestRecord a;
  a.concurrency = 1;
  a.prompt_name = "short";
  a.seed = 7;
  a.model = "tiny";
  a.max_tokens_requested = 32;
  a.http_status = 200;
  a.finish_reason = "stop";
  a.output_tokens = 12;
  a.count_method = "usage";
  a.cause = "eos";
  a.model_stop = true;
  a.ttft_ms = 5.5;
  a.itl_ms = {1, 3};
  a.content_hash = content_hash("x");
  RequestRecord b = a;
  b.concurrency = 8;
  b.finish_reason = "length";
  b.output_tokens = 3;
  b.cause = "gateway_deadline";
  b.cause_source = CauseSource::kCutline;
  b.rule = "policies[0].deadline";
  b.limit = 300;
  b.unit = "ms";
  b.error = "deadline 300 ms, \"exceeded\"\nafter 301 ms";
  b.phases = proto::TtftPhases{1, 0, 0, 2, 0.5};
  b.kv_bytes_peak = 4096;
  rep.records = {a, b};
  rep.load = make_load_verdict(rep.records, false);
  return rep;
}

TEST(ProbeWriters, JsonCarriesRunFactsPolicyVerdictAndEveryRequest) {
  const std::string json = report_json(sample_report());
  simdjson::dom::parser parser;
  auto doc = parser.parse(json);
  ASSERT_FALSE(doc.error()) << json;
  EXPECT_EQ(std::string_view(doc["probe"]["label"].get_string().value()), "no-gateway-limits");
  EXPECT_EQ(doc["probe"]["policy"]["generation"].get_int64().value(), 3);
  EXPECT_EQ(doc["requests"].get_array().size(), 2u);
  auto second = doc["requests"].at(1);
  EXPECT_EQ(std::string_view(second["cause"].get_string().value()), "gateway_deadline");
  EXPECT_EQ(std::string_view(second["cause_source"].get_string().value()), "cutline");
  EXPECT_EQ(second["max_tokens_requested"].get_int64().value(), 32);
  EXPECT_EQ(second["phases"]["prefill"].get_double().value(), 2.0);
  EXPECT_EQ(second["kv_bytes_peak"].get_int64().value(), 4096);
  EXPECT_EQ(doc["requests"].at(0)["itl_ms"].get_array().size(), 2u);
  EXPECT_EQ(doc["levels"].at(1)["shorter"].get_int64().value(), 1);
  EXPECT_EQ(doc["verdict"].get_array().size(), 2u);
}

TEST(ProbeWriters, JsonWithoutPolicyIsNull) {
  ProbeReport rep = sample_report();
  rep.policy_json.clear();
  simdjson::dom::parser parser;
  auto doc = parser.parse(report_json(rep));
  ASSERT_FALSE(doc.error());
  EXPECT_TRUE(doc["probe"]["policy"].is_null());
}

// Splits one CSV record honouring quotes (enough for the test's rows).
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().push_back(field);
      field.clear();
    } else if (c == '\n') {
      rows.back().push_back(field);
      field.clear();
      rows.emplace_back();
    } else {
      field += c;
    }
  }
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

TEST(ProbeWriters, CsvHasOneRowPerRequestWithEveryColumnAndQuotedFields) {
  const ProbeReport rep = sample_report();
  const auto rows = parse_csv(records_csv(rep.records));
  ASSERT_EQ(rows.size(), 3u);
  const auto& cols = csv_columns();
  EXPECT_EQ(rows[0], cols);
  for (const auto& row : rows) EXPECT_EQ(row.size(), cols.size());
  auto col = [&](const std::string& name) {
    return static_cast<size_t>(std::find(cols.begin(), cols.end(), name) - cols.begin());
  };
  EXPECT_EQ(rows[2][col("cause")], "gateway_deadline");
  EXPECT_EQ(rows[2][col("error")], "deadline 300 ms, \"exceeded\"\nafter 301 ms");
  EXPECT_EQ(rows[2][col("phase_prefill_ms")], "2.000");
  EXPECT_EQ(rows[1][col("phase_prefill_ms")], "");
  EXPECT_EQ(rows[1][col("itl_count")], "2");
  EXPECT_EQ(rows[1][col("itl_mean_ms")], "2.000");
}

TEST(ProbeWriters, CsvFieldQuotesOnlyWhenNeeded) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
}

}  // namespace
}  // namespace cutline::tools::probe
