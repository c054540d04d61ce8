// `cutline probe` against the real binaries: the gateway with a short-deadline policy in front of
// the scripted fake upstream (answers shorter at concurrency 8, the verdict names
// gateway_deadline), the same without limits (identical lengths and outputs at fixed seeds), the
// real backend with two models (load phase on the cold switch, none on the warm return), the CLI
// end to end, and the HTML report rendered in headless Chromium.

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>

#include <gtest/gtest.h>

#include "cutline/model/synth.h"
#include "cutline/tools/probe/html_report.h"
#include "cutline/tools/probe/probe_run.h"
#include "gateway_harness.h"
#include "support/ci.h"

namespace cutline::test {
namespace {

using tools::probe::ProbeMode;
using tools::probe::ProbeOptions;
using tools::probe::ProbeReport;

// Each fake answer: 10 tokens 20 ms apart (~200 ms). Policy "deadline": one request at a time
// (the rest queue) and a 600 ms deadline from arrival — a lone request finishes well inside it,
// the third of eight simultaneous ones cannot. Policy "open": no limits.
std::string policy_yaml(uint16_t fake_port, const std::string& log_path) {
  return "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\naccess_log: " +
         log_path +
         "\nupstreams:\n  - name: fake\n    url: http://127.0.0.1:" + std::to_string(fake_port) +
         "\n    models: [\"fake\", \"fake-*\"]\n"
         "policies:\n"
         "  - name: interactive\n    match: {headers: {x-policy: deadline}}\n"
         "    deadline: 600ms\n"
         "    admission: {max_concurrent: 1, queue_depth: 64, queue_timeout: 30s}\n"
         "  - name: open\n    match: {}\n";
}

constexpr const char* kScript = "tokens=10,interval_ms=20";

class ProbeGatewayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    env = new GatewayEnv;
    ASSERT_TRUE(env->start(policy_yaml)) << env->error;
  }
  static void TearDownTestSuite() {
    env->stop();
    delete env;
    env = nullptr;
  }
  static ProbeOptions options(const std::string& policy, std::vector<int> levels) {
    ProbeOptions o;
    o.url = "http://127.0.0.1:" + std::to_string(env->port);
    o.admin_url = "http://127.0.0.1:" + std::to_string(env->admin_port);
    o.model = "fake";
    o.headers = {{"X-Fake-Script", kScript}, {"X-Policy", policy}};
    o.concurrency = std::move(levels);
    o.repeat = 3;  // 9 requests per level
    o.max_tokens = 32;
    o.timeout_ms = 10000;
    o.label = "policy " + policy;
    return o;
  }
  static GatewayEnv* env;
};
GatewayEnv* ProbeGatewayTest::env = nullptr;

TEST_F(ProbeGatewayTest, ShortDeadlineMakesAnswersShorterAtEightAndTheVerdictNamesIt) {
  base::MonotonicClock clock;
  auto report = tools::probe::run_load(options("deadline", {1, 8}), clock);
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_EQ(report->records.size(), 18u);
  ASSERT_EQ(report->load.levels.size(), 2u);
  const auto& one = report->load.levels[0];
  const auto& eight = report->load.levels[1];
  EXPECT_EQ(one.causes.size(), 1u);
  EXPECT_EQ(one.causes.count("eos"), 1u) << report->load.lines[0];
  EXPECT_EQ(one.min_output_tokens, 10);
  EXPECT_GE(eight.shorter, 3) << report->load.lines[1];
  EXPECT_LT(eight.mean_output_tokens, one.mean_output_tokens);
  EXPECT_GE(eight.shorter_causes.count("gateway_deadline"), 1u);
  const std::string& line = report->load.lines[1];
  EXPECT_EQ(line.rfind("at concurrency 8, ", 0), 0u) << line;
  EXPECT_NE(line.find("answers were shorter than at 1"), std::string::npos) << line;
  EXPECT_NE(line.find("ended by gateway_deadline (policy interactive, rule policies[0].deadline, "
                      "600 ms)"),
            std::string::npos)
      << line;
  // The cut answers carry the gateway's record; the configuration is recorded.
  for (const auto& r : report->records) {
    if (r.cause == "gateway_deadline") {
      EXPECT_EQ(r.cause_source, tools::probe::CauseSource::kCutline);
      EXPECT_EQ(r.max_tokens_requested.value_or(0), 32);
      EXPECT_TRUE(r.truncated);
    }
  }
  EXPECT_NE(report->policy_json.find("interactive"), std::string::npos) << report->policy_error;
  EXPECT_EQ(report->label, "policy deadline");
}

TEST_F(ProbeGatewayTest, WithoutLimitsLengthsAndOutputsAreIdenticalAcrossLevels) {
  base::MonotonicClock clock;
  auto report = tools::probe::run_load(options("none", {1, 2, 4, 8}), clock);
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_EQ(report->load.levels.size(), 4u);
  const std::string hash = report->records.front().content_hash;
  for (const auto& r : report->records) {
    EXPECT_EQ(r.output_tokens, 10);
    EXPECT_EQ(r.cause, "eos");
    EXPECT_EQ(r.content_hash, hash);
  }
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(report->load.levels[i].shorter, 0);
    EXPECT_EQ(report->load.levels[i].compared, 9);
    EXPECT_NE(report->load.lines[i].find("lengths did not change and stops stayed eos: only "
                                         "latency grew"),
              std::string::npos)
        << report->load.lines[i];
  }
  EXPECT_FALSE(report->load.serving_defect);
}

TEST_F(ProbeGatewayTest, CommandLineWritesTableAndRecords) {
  const std::string out = env->dir + "/probe-cli";
  Process cli;
  cli.start(
      {CUTLINE_BIN, "probe", "load", "--url", "http://127.0.0.1:" + std::to_string(env->port),
       "--model", "fake", "--header", std::string("X-Fake-Script: ") + kScript, "--concurrency",
       "1,2", "--repeat", "1", "--max-tokens", "8", "--label", "cli", "--out", out},
      env->dir + "/cli.out", env->dir + "/cli.err");
  ASSERT_TRUE(wait_for([&] { return !read_file(out + "/report.html").empty(); }, 20000))
      << read_file(env->dir + "/cli.err");
  ASSERT_TRUE(wait_for(
      [&] { return read_file(env->dir + "/cli.out").find("wrote") != std::string::npos; }));
  const std::string stdout_text = read_file(env->dir + "/cli.out");
  EXPECT_NE(stdout_text.find("verdict:"), std::string::npos) << stdout_text;
  EXPECT_NE(stdout_text.find("client_max_tokens"), std::string::npos) << stdout_text;
  const std::string csv = read_file(out + "/requests.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 3 * 2) << csv;  // header + 6 requests
  EXPECT_NE(read_file(out + "/report.json").find("\"label\":\"cli\""), std::string::npos);
}

// The base URL as OPENAI_BASE_URL usually has it (ending in /v1) reaches the chat route, not
// /v1/v1/...; a run in which every request was refused with a 4xx fails (exit 4) and says why.
TEST_F(ProbeGatewayTest, BaseUrlWithV1WorksAndARunOfRefusalsFails) {
  const std::string base = "http://127.0.0.1:" + std::to_string(env->port) + "/v1";
  const std::vector<std::string> common = {
      CUTLINE_BIN,     "probe", "load",     "--url", base,           "--model", "fake",
      "--concurrency", "1",     "--repeat", "1",     "--max-tokens", "8",       "--no-progress"};
  std::vector<std::string> ok = common;
  ok.insert(ok.end(), {"--header", std::string("X-Fake-Script: ") + kScript});
  EXPECT_EQ(run_to_exit(ok, env->dir + "/v1.out", env->dir + "/v1.err", 60000), 0)
      << read_file(env->dir + "/v1.err");
  EXPECT_NE(read_file(env->dir + "/v1.out").find("client_max_tokens"), std::string::npos)
      << read_file(env->dir + "/v1.out");

  std::vector<std::string> refused = common;
  refused.insert(refused.end(), {"--header", "X-Fake-Script: status=403,type=permission_error"});
  EXPECT_EQ(run_to_exit(refused, env->dir + "/403.out", env->dir + "/403.err", 60000), 4)
      << read_file(env->dir + "/403.err");
  EXPECT_NE(read_file(env->dir + "/403.err").find("every request was refused (403 x"),
            std::string::npos)
      << read_file(env->dir + "/403.err");
}

// The report rendered by a real browser: the SVG charts are in the DOM.
TEST_F(ProbeGatewayTest, HtmlReportRendersInHeadlessChromium) {
  const char* chromium = "/usr/bin/chromium";
  struct stat st {};
  if (stat(chromium, &st) != 0) {
    if (cutline::test::running_in_ci()) FAIL() << "CI=true but chromium is not installed";
    GTEST_SKIP() << "chromium is not installed (apt-get install -y chromium, or deploy/setup.sh "
                    "with CUTLINE_SETUP_BROWSER=1): HTML report not rendered";
  }
  base::MonotonicClock clock;
  auto report = tools::probe::run_load(options("deadline", {1, 4}), clock);
  ASSERT_TRUE(report.ok()) << report.error().message;
  const std::string dir = env->dir + "/html";
  ASSERT_TRUE(tools::probe::write_outputs(*report, dir).ok());
  const std::string profile = make_temp_dir();
  const std::string cmd = std::string(chromium) +
                          " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                          "--disable-background-networking --disable-component-update "
                          "--disable-sync --user-data-dir=" +
                          profile + " --dump-dom file://" + dir + "/report.html 2>/dev/null";
  std::string dom;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) dom.append(buf, n);
    pclose(p);
  }
  ASSERT_FALSE(dom.empty()) << "chromium produced no DOM";
  for (const char* id : {"chart-output-tokens", "chart-stop-causes", "chart-ttft", "chart-itl"}) {
    EXPECT_NE(dom.find(std::string("<svg id=\"") + id + "\""), std::string::npos) << id;
  }
  EXPECT_NE(dom.find("<rect class=\"bar\""), std::string::npos);
  EXPECT_NE(dom.find("gateway_deadline"), std::string::npos);
}

// The real backend with two models: the cold switch shows the load phase, the return does not.
TEST(ProbeBackendTest, ColdSwitchShowsLoadWarmReturnDoesNot) {
  const std::string dir = make_temp_dir();
  model::SynthOptions so;
  so.seed = 2;
  so.layers = 3;
  ASSERT_TRUE(model::synthesize_tiny_model(so, dir + "/other.gguf").ok());
  Process backend;
  backend.start({CUTLINE_BACKEND_BIN, "--port", "0", "--cache-dir", dir + "/cache", "--device",
                 "cpu", "--model", "tiny=builtin", "--model", "other=" + dir + "/other.gguf"},
                dir + "/backend.out", dir + "/backend.err");
  uint16_t port = 0;
  ASSERT_TRUE(wait_for(
      [&] {
        const std::string text = read_file(dir + "/backend.out");
        const auto at = text.rfind(':');
        if (text.find("listening on") == std::string::npos || at == std::string::npos) {
          return false;
        }
        port = static_cast<uint16_t>(std::atoi(text.c_str() + at + 1));
        return port != 0;
      },
      60000))
      << read_file(dir + "/backend.err");
  ProbeOptions o;
  o.mode = ProbeMode::kSwitch;
  o.url = "http://127.0.0.1:" + std::to_string(port);
  o.models = {"tiny", "other"};
  o.max_tokens = 4;
  o.timeout_ms = 60000;
  base::MonotonicClock clock;
  auto report = tools::probe::run_switch(o, clock);
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_EQ(report->records.size(), 10u);
  EXPECT_TRUE(report->switch_verdict.phases_available);
  const tools::probe::RequestRecord* cold = nullptr;
  const tools::probe::RequestRecord* back = nullptr;
  for (const auto& r : report->records) {
    EXPECT_EQ(r.http_status, 200) << r.error;
    if (r.run == tools::probe::kScenarioCold) cold = &r;
    if (r.run == tools::probe::kScenarioReturn && r.prompt_name == "short") back = &r;
  }
  ASSERT_TRUE(cold && back);
  ASSERT_TRUE(cold->phases && back->phases);
  EXPECT_GT(cold->phases->load_ms, 0);
  EXPECT_EQ(cold->model_state, "cold");
  EXPECT_EQ(back->phases->load_ms, 0);
  EXPECT_EQ(back->model_state, "resident");
  std::string cold_line, back_line;
  for (const auto& l : report->switch_verdict.lines) {
    if (l.rfind("cold switch to B", 0) == 0) cold_line = l;
    if (l.rfind("immediate return to A (tiny, short", 0) == 0) back_line = l;
  }
  // The load is named among the phases that grew (most of the time first; on a busy machine the
  // queue can grow more), and never on the warm return.
  EXPECT_TRUE(cold_line.find("load grew most") != std::string::npos ||
              cold_line.find(", load +") != std::string::npos)
      << cold_line;
  EXPECT_EQ(back_line.find("load grew"), std::string::npos) << back_line;
  EXPECT_EQ(back_line.find(", load +"), std::string::npos) << back_line;
  const std::string html = tools::probe::render_html_report(*report);
  EXPECT_NE(html.find("<svg id=\"chart-phases\""), std::string::npos);
}

}  // namespace
}  // namespace cutline::test
