// Metrics, end to end with real processes: the gateway spawning the real cutline-backend on the
// built-in tiny model, traffic that makes labeled cuts (a budget below the client's max_tokens,
// an upstream that refuses connections, malformed bodies, a reload), then
//  - `promtool check metrics` on a real /metrics scrape of the gateway and of the backend;
//  - a real Prometheus (Debian's binary, scratch config and data dir, 1 s scrapes, the alert
//    rules of deploy/prometheus/alerts.yml loaded) scraping both, asked over its HTTP API for
//    every expression of deploy/grafana/cutline.json (template variables substituted): each one
//    must return data.
// promtool and prometheus come from Debian's `prometheus` package (deploy/setup.sh installs it
// for the tests): skipped where it is missing, a failure under CI=true.

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <simdjson.h>

#include "cutline/proto/http/http_fetch.h"
#include "process_harness.h"
#include "support/ci.h"

namespace cutline::test {
namespace {

constexpr const char* kTenantKey = "sk-observability-test";

std::string find_tool(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (end > start && access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

std::string url_encode(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// What the dashboard asks Prometheus: every panel target's expression (rows' nested panels
// included) and every query variable's label_values(metric, label).
struct DashboardQueries {
  std::vector<std::string> exprs;
  std::vector<std::string> variables;                             // names, for substitution
  std::vector<std::pair<std::string, std::string>> label_values;  // (metric, label)
};

void collect_panels(simdjson::ondemand::array panels, DashboardQueries& q) {
  for (auto panel : panels) {
    simdjson::ondemand::array nested;
    if (panel["panels"].get_array().get(nested) == simdjson::SUCCESS) collect_panels(nested, q);
    simdjson::ondemand::array targets;
    if (panel["targets"].get_array().get(targets) != simdjson::SUCCESS) continue;
    for (auto target : targets) {
      std::string_view expr;
      if (target["expr"].get_string().get(expr) == simdjson::SUCCESS) q.exprs.emplace_back(expr);
    }
  }
}

DashboardQueries dashboard_queries(const std::string& path) {
  DashboardQueries q;
  simdjson::ondemand::parser parser;
  simdjson::padded_string json(read_file(path));
  simdjson::ondemand::document doc = parser.iterate(json);
  for (auto var : doc["templating"]["list"].get_array()) {
    std::string_view name, definition;
    if (var["name"].get_string().get(name) == simdjson::SUCCESS) q.variables.emplace_back(name);
    if (var["definition"].get_string().get(definition) != simdjson::SUCCESS) continue;
    // label_values(metric, label)
    const std::string d(definition);
    const size_t open = d.find('('), comma = d.find(','), close = d.rfind(')');
    if (d.rfind("label_values(", 0) != 0 || comma == std::string::npos) continue;
    auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(' '));
      s.erase(s.find_last_not_of(' ') + 1);
      return s;
    };
    q.label_values.emplace_back(trim(d.substr(open + 1, comma - open - 1)),
                                trim(d.substr(comma + 1, close - comma - 1)));
  }
  collect_panels(doc["panels"].get_array(), q);
  return q;
}

// Grafana's built-in interval variables for a 1 s scrape interval, then every template variable
// as its "All" value.
std::string substitute(std::string expr, const std::vector<std::string>& variables) {
  replace_all(expr, "$__rate_interval", "15s");
  replace_all(expr, "$__interval", "5s");
  replace_all(expr, "$__range", "1m");
  for (const std::string& v : variables) {
    replace_all(expr, "${" + v + "}", ".*");
    replace_all(expr, "$" + v, ".*");
  }
  return expr;
}

struct QueryResult {
  bool success = false;
  size_t series = 0;
  std::string body;
};

// GET /api/v1/<path>: status "success", and how many entries data (or data.result) holds.
QueryResult prometheus_get(uint16_t port, const std::string& path_and_query) {
  QueryResult r;
  auto resp =
      proto::http_fetch("http://127.0.0.1:" + std::to_string(port) + "/api/v1/" + path_and_query,
                        "GET", {}, {}, 5000);
  if (!resp.ok()) return r;
  r.body = resp->body;
  simdjson::ondemand::parser parser;
  simdjson::padded_string json(r.body);
  simdjson::ondemand::document doc;
  if (parser.iterate(json).get(doc) != simdjson::SUCCESS) return r;
  std::string_view status;
  r.success = doc["status"].get_string().get(status) == simdjson::SUCCESS && status == "success";
  simdjson::ondemand::value data;
  if (doc["data"].get(data) != simdjson::SUCCESS) return r;
  simdjson::ondemand::array items;
  if (data.type() == simdjson::ondemand::json_type::object) {
    if (data["result"].get_array().get(items) != simdjson::SUCCESS) return r;
  } else if (data.get_array().get(items) != simdjson::SUCCESS) {
    return r;
  }
  for (auto item : items) {
    (void)item;
    ++r.series;
  }
  return r;
}

class Observability : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(make_temp_dir("cutline-observability"));
    backend_port_ = free_port();
    const uint16_t dead_port = free_port();  // nothing listens there: connections are refused
    setenv("CUTLINE_OBSERVABILITY_TEST_KEY", kTenantKey, 1);
    const std::string config = *dir_ + "/cutline.yaml";
    std::ofstream(config) << "listen:\n  - address: 127.0.0.1:0\n"
                             "admin:\n  address: 127.0.0.1:0\n"
                             "access_log: "
                          << *dir_ << "/access.log\n"
                          << "tenants:\n"
                             "  - name: alice\n"
                             "    api_keys: [\"env:CUTLINE_OBSERVABILITY_TEST_KEY\"]\n"
                             "upstreams:\n"
                             "  - name: local\n"
                             "    url: http://127.0.0.1:"
                          << backend_port_ << "\n"
                          << "    models: [tiny]\n"
                             "    spawn:\n"
                             "      command: ["
                          << CUTLINE_BACKEND_BIN << ", --port, \"" << backend_port_
                          << "\", --cache-dir, " << *dir_
                          << "/cache, --device, cpu, --kv-memory, 64MiB, --model, tiny=builtin]\n"
                             "      ready_timeout: 60s\n"
                             "  - name: dead\n"
                             "    url: http://127.0.0.1:"
                          << dead_port << "\n"
                          << "    models: [dead]\n"
                             "policies:\n"
                             // Observe mode: a 2-token budget that only says where it would
                             // have cut (the would-cuts row of the dashboard).
                             "  - name: watched\n"
                             "    match: {tenants: [alice], headers: {x-observe: \"yes\"}}\n"
                             "    budget: {max_output_tokens: 2}\n"
                             "    on_cut: {mode: observe}\n"
                             "  - name: short\n"
                             "    budget: {max_output_tokens: 3}\n"
                             "    admission: {max_concurrent: 4, queue_depth: 16}\n"
                             "    deadline: 30s\n";
    gateway_ = new Process();
    gateway_->start({CUTLINE_GATEWAY_BIN, "--config", config, "--ready-file", *dir_ + "/ready.json",
                     "--drain-timeout", "1s"},
                    *dir_ + "/gateway.out", *dir_ + "/gateway.err");
    ASSERT_TRUE(wait_for([] { return !read_file(*dir_ + "/ready.json").empty(); }, 60000))
        << read_file(*dir_ + "/gateway.err");
    const std::string ready = read_file(*dir_ + "/ready.json");
    port_ = static_cast<uint16_t>(std::atoi(ready.c_str() + ready.find(':') + 1));
    admin_port_ = static_cast<uint16_t>(std::atoi(ready.c_str() + ready.rfind(':') + 1));
    ASSERT_TRUE(wait_for(
        [] {
          auto r =
              proto::http_fetch("http://127.0.0.1:" + std::to_string(backend_port_) + "/healthz",
                                "GET", {}, {}, 2000);
          return r.ok() && r->status == 200;
        },
        60000))
        << read_file(*dir_ + "/gateway.err");
    drive_traffic();
    // A reload (the same file): cutline_policy_reload_total{result="ok"}.
    gateway_->signal(SIGHUP);
    ASSERT_TRUE(wait_for(
        [] { return gateway_metrics().find("result=\"ok\"} 1") != std::string::npos; }, 10000));
  }
  static void TearDownTestSuite() {
    delete gateway_;  // stops it, and it stops the backend
    gateway_ = nullptr;
    std::error_code ignored;
    std::filesystem::remove_all(*dir_, ignored);
    delete dir_;
    dir_ = nullptr;
  }

  static proto::HttpResponse chat(const std::string& model, const std::string& body,
                                  bool observed = false) {
    proto::HttpHeaders headers{{"Content-Type", "application/json"},
                               {"Authorization", std::string("Bearer ") + kTenantKey}};
    if (observed) headers.add("X-Observe", "yes");
    auto r = proto::http_fetch(
        "http://127.0.0.1:" + std::to_string(port_) + "/v1/chat/completions", "POST", headers,
        body.empty() ? R"({"model":")" + model +
                           R"(","messages":[{"role":"user","content":"Hi"}],)"
                           R"("max_tokens":16,"temperature":0,"stream":true})"
                     : body,
        30000);
    return r.ok() ? std::move(r).value() : proto::HttpResponse{};
  }

  // Cuts by the budget (max_tokens 16 clamped to 3: gateway_budget; greedy, because a sampled
  // tiny model can draw its end-of-sequence token before the third token), an upstream that refuses
  // connections (upstream_error), a malformed body (invalid_request).
  static void drive_traffic() {
    for (int i = 0; i < 4; ++i) {
      const proto::HttpResponse r = chat("tiny", "");
      EXPECT_EQ(r.status, 200) << r.body;
      const bool cut = r.body.find("\"cause\":\"gateway_budget\"") != std::string::npos;
      EXPECT_TRUE(cut) << r.body;
      if (cut) budget_cuts_ += 1;
    }
    const proto::HttpResponse watched =
        chat("tiny",
             R"({"model":"tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":8,)"
             R"("ignore_eos":true,"stream":true})",
             /*observed=*/true);
    EXPECT_EQ(watched.status, 200) << watched.body;
    EXPECT_NE(watched.body.find("\"would_cut\""), std::string::npos) << watched.body;
    EXPECT_GE(chat("dead", "").status, 500);
    EXPECT_EQ(chat("tiny", "{\"model\":\"tiny\",").status, 400);
  }

  static std::string gateway_metrics() {
    auto r = proto::http_fetch("http://127.0.0.1:" + std::to_string(admin_port_) + "/metrics");
    return r.ok() ? r->body : "";
  }
  static std::string backend_metrics() {
    auto r = proto::http_fetch("http://127.0.0.1:" + std::to_string(backend_port_) + "/metrics");
    return r.ok() ? r->body : "";
  }

  // The tool's path, or "" when it is not installed: then a failure under CI=true, and the caller
  // skips.
  static std::string require_tool(const std::string& name) {
    const std::string path = find_tool(name);
    if (path.empty() && running_in_ci())
      ADD_FAILURE() << "CI=true but " << name
                    << " is not installed (Debian package prometheus; deploy/setup.sh)";
    return path;
  }

  static std::string* dir_;
  static Process* gateway_;
  static int budget_cuts_;  // answers cut at 3 tokens so far
  static uint16_t backend_port_, port_, admin_port_;
};

std::string* Observability::dir_ = nullptr;
Process* Observability::gateway_ = nullptr;
int Observability::budget_cuts_ = 0;
uint16_t Observability::backend_port_ = 0;
uint16_t Observability::port_ = 0;
uint16_t Observability::admin_port_ = 0;

TEST_F(Observability, GatewayCountsTokensPerTenantAndExportsBuildInfo) {
  const std::string m = gateway_metrics();
  ASSERT_GT(budget_cuts_, 0);
  // Every answer was cut at 3 tokens but the observed one, which ran its full 8 (ignore_eos);
  // the backend reports usage, so prompts count too.
  EXPECT_EQ(metric_value(m, R"(cutline_tokens_total{model="tiny",tenant="alice",type="output"})"),
            3.0 * budget_cuts_ + 8)
      << m;
  EXPECT_GT(metric_value(m, R"(cutline_tokens_total{model="tiny",tenant="alice",type="input"})"), 0)
      << m;
  EXPECT_NE(m.find("cutline_build_info{commit="), std::string::npos) << m;
  EXPECT_NE(backend_metrics().find("cutline_build_info{commit="), std::string::npos);
}

TEST_F(Observability, PromtoolAcceptsTheGatewayAndBackendScrapes) {
  const std::string promtool = require_tool("promtool");
  if (promtool.empty()) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  for (const auto& [who, text] : {std::pair<std::string, std::string>{"gateway", gateway_metrics()},
                                  {"backend", backend_metrics()}}) {
    ASSERT_NE(text.find("cutline_"), std::string::npos) << who << ": " << text;
    const std::string in = *dir_ + "/" + who + ".prom", out = *dir_ + "/promtool.out",
                      err = *dir_ + "/promtool.err";
    std::ofstream(in) << text;
    // promtool reads the exposition from stdin.
    const int rc = run_to_exit({"/bin/sh", "-c", "exec '" + promtool + "' check metrics < " + in},
                               out, err, 30000);
    EXPECT_EQ(rc, 0) << who << ": promtool check metrics says:\n"
                     << read_file(out) << read_file(err);
  }
}

TEST_F(Observability, PrometheusAnswersEveryDashboardQueryWithData) {
  const std::string prometheus = require_tool("prometheus");
  if (prometheus.empty()) GTEST_SKIP() << "prometheus not installed (Debian package prometheus)";
  const uint16_t prom_port = free_port();
  const std::string config = *dir_ + "/prometheus.yml";
  std::ofstream(config) << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                           "rule_files: [\""
                        << CUTLINE_ALERTS_YML << "\"]\n"
                        << "scrape_configs:\n"
                           "  - job_name: cutline-gateway\n"
                           "    static_configs: [{targets: [\"127.0.0.1:"
                        << admin_port_ << "\"]}]\n"
                        << "  - job_name: cutline-backend\n"
                           "    static_configs: [{targets: [\"127.0.0.1:"
                        << backend_port_ << "\"]}]\n";
  Process prom;
  prom.start({prometheus, "--config.file=" + config, "--storage.tsdb.path=" + *dir_ + "/tsdb",
              "--web.listen-address=127.0.0.1:" + std::to_string(prom_port), "--log.level=warn"},
             *dir_ + "/prometheus.out", *dir_ + "/prometheus.err");
  ASSERT_TRUE(wait_for(
      [&] {
        auto r = proto::http_fetch("http://127.0.0.1:" + std::to_string(prom_port) + "/-/ready",
                                   "GET", {}, {}, 1000);
        return r.ok() && r->status == 200;
      },
      20000))
      << read_file(*dir_ + "/prometheus.err");

  // Both targets up, the alert rules loaded.
  ASSERT_TRUE(wait_for(
      [&] { return prometheus_get(prom_port, "query?query=" + url_encode("up == 1")).series == 2; },
      15000))
      << prometheus_get(prom_port, "query?query=up").body;
  const QueryResult rules = prometheus_get(prom_port, "rules?type=alert");
  EXPECT_TRUE(rules.success);
  EXPECT_NE(rules.body.find("CutlineTruncationRateHigh"), std::string::npos) << rules.body;

  // Fresh cuts while Prometheus scrapes, so that the rates are not all zero.
  drive_traffic();

  const DashboardQueries q = dashboard_queries(CUTLINE_DASHBOARD_JSON);
  ASSERT_GE(q.exprs.size(), 20u);
  std::vector<std::string> missing;
  auto check_all = [&] {
    missing.clear();
    for (const std::string& raw : q.exprs) {
      const std::string expr = substitute(raw, q.variables);
      const QueryResult r = prometheus_get(prom_port, "query?query=" + url_encode(expr));
      if (!r.success || r.series == 0)
        missing.push_back(expr + (r.success ? "  -> no data" : "  -> " + r.body));
    }
    for (const auto& [metric, label] : q.label_values) {
      const QueryResult r =
          prometheus_get(prom_port, "label/" + label + "/values?match[]=" + url_encode(metric));
      if (!r.success || r.series == 0)
        missing.push_back("label_values(" + metric + ", " + label + ")  -> " + r.body);
    }
    return missing.empty();
  };
  // Series created by the traffic need two scrapes before rate() has two samples.
  EXPECT_TRUE(wait_for(check_all, 30000, 500)) << [&] {
    std::string s;
    for (const auto& m : missing) s += m + "\n";
    return s;
  }();
}

}  // namespace
}  // namespace cutline::test
