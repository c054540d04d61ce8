#include "cutline/tools/probe/html_report.h"

#include <gtest/gtest.h>

#include "cutline/tools/probe/switch_scenarios.h"

namespace cutline::tools::probe {
namespace {

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

ProbeReport load_report() {
  ProbeReport rep;
  rep.label = "<label & co>";
  for (int level : {1, 8}) {
    for (int p = 0; p < 2; ++p) {
      RequestRecord r;
      r.concurrency = level;
      r.prompt_index = p;
      r.seed = 1;
      r.output_tokens = level == 1 ? 10 : 4;
      r.cause = level == 1 ? "eos" : "gateway_deadline";
      r.model_stop = level == 1;
      r.ttft_ms = 3.0 * level;
      r.itl_ms = {1.0, 2.0};
      r.content_hash = content_hash("x");
      rep.records.push_back(r);
    }
  }
  rep.load = make_load_verdict(rep.records, false);
  return rep;
}

TEST(ProbeHtmlReport, LoadReportHasTheFourChartsAndNoExternalResources) {
  const std::string html = render_html_report(load_report());
  for (const char* id : {"chart-output-tokens", "chart-stop-causes", "chart-ttft", "chart-itl"}) {
    EXPECT_EQ(count(html, std::string("<svg id=\"") + id + "\""), 1u) << id;
  }
  EXPECT_EQ(count(html, "<svg"), count(html, "</svg>"));
  // Stop causes are stacked: one legend entry per cause, bars for both at their level.
  EXPECT_NE(html.find("gateway_deadline @ c=8: 2"), std::string::npos);
  EXPECT_NE(html.find("eos @ c=1: 2"), std::string::npos);
  // Self-contained: no scripts, no links, no remote URLs.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  // Text is escaped.
  EXPECT_NE(html.find("&lt;label &amp; co&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<label & co>"), std::string::npos);
  // The verdict is there.
  EXPECT_NE(html.find("2 of 2 answers were shorter than at 1"), std::string::npos);
}

TEST(ProbeHtmlReport, SwitchReportDrawsThePhaseWaterfall) {
  ProbeReport rep;
  rep.mode = ProbeMode::kSwitch;
  for (const auto& step : switch_plan("a", "b")) {
    RequestRecord r;
    r.run = step.scenario;
    r.model = step.model;
    r.prompt_name = step.prompt_name;
    r.ttft_ms = 5;
    r.phases = proto::TtftPhases{0.5, step.scenario == kScenarioCold ? 120.0 : 0.0, 0, 3, 1};
    rep.records.push_back(r);
  }
  rep.switch_verdict = make_switch_verdict(rep.records);
  const std::string html = render_html_report(rep);
  EXPECT_EQ(count(html, "<svg id=\"chart-phases\""), 1u);
  EXPECT_EQ(count(html, "<svg id=\"chart-switch-ttft\""), 1u);
  EXPECT_NE(html.find("cold switch to B · b · short load: 120"), std::string::npos);
  EXPECT_NE(html.find("load grew most"), std::string::npos);
}

}  // namespace
}  // namespace cutline::tools::probe
