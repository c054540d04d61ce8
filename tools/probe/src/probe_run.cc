#include "cutline/tools/probe/probe_run.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>

#include "cutline/base/clock.h"
#include "cutline/proto/http/http_fetch.h"
#include "cutline/tools/probe/html_report.h"
#include "cutline/tools/probe/record_writers.h"
#include "prompt_set.h"
#include "runner.h"

namespace cutline::tools::probe {

namespace {

std::string now_utc() {
  const auto t = static_cast<std::time_t>(base::wall_time_s());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Result<RunnerConfig> runner_config(const ProbeOptions& o) {
  auto url = proto::parse_http_url(o.url);
  if (!url.ok()) return make_error(ErrorKind::kBadRequest, "--url: " + url.error().message);
  RunnerConfig c;
  c.host = url->host;
  c.port = url->port;
  c.target = route_target(url->target, o.route);
  c.api_key = o.api_key;
  c.headers = o.headers;
  c.max_tokens = o.max_tokens;
  c.temperature = o.temperature;
  c.top_p = o.top_p;
  c.timeout_ms = o.timeout_ms;
  return c;
}

ProbeReport new_report(const ProbeOptions& o) {
  ProbeReport r;
  r.mode = o.mode;
  r.url = o.url;
  r.label = o.label;
  r.model = o.mode == ProbeMode::kLoad ? o.model : o.models[0] + "," + o.models[1];
  r.max_tokens = o.max_tokens;
  r.temperature = o.temperature;
  r.seed = o.seed;
  r.started_utc = now_utc();
  if (!o.admin_url.empty()) {
    auto resp = proto::http_fetch(o.admin_url + "/v1/cutline/policy", "GET", {}, {}, 5000);
    if (!resp.ok()) {
      r.policy_error =
          "could not fetch " + o.admin_url + "/v1/cutline/policy: " + resp.error().message;
    } else if (resp->status != 200) {
      r.policy_error = o.admin_url + "/v1/cutline/policy answered " + std::to_string(resp->status);
    } else {
      r.policy_json = resp->body;
    }
  }
  return r;
}

Result<std::vector<Prompt>> prompts_of(const ProbeOptions& o) {
  if (o.prompts_file.empty()) return builtin_prompts();
  return load_prompts(o.prompts_file);
}

}  // namespace

std::string route_target(std::string_view base_path, std::string_view route) {
  while (!base_path.empty() && base_path.back() == '/') base_path.remove_suffix(1);
  const bool base_v1 = base_path.size() >= 3 && base_path.substr(base_path.size() - 3) == "/v1";
  if (base_v1 && route.substr(0, 4) == "/v1/") route.remove_prefix(3);
  return std::string(base_path).append(route);
}

std::optional<std::string> all_refused(const ProbeReport& report) {
  if (report.records.empty()) return std::nullopt;
  std::map<int, int> statuses;
  for (const RequestRecord& r : report.records) {
    if (r.http_status < 400 || r.http_status >= 500) return std::nullopt;
    ++statuses[r.http_status];
  }
  std::string line = "every request was refused (";
  for (auto it = statuses.begin(); it != statuses.end(); ++it) {
    if (it != statuses.begin()) line += ", ";
    line += std::to_string(it->first) + " x" + std::to_string(it->second);
  }
  line += ")";
  const RequestRecord& first = report.records.front();
  if (!first.error.empty()) line += ": " + first.error;
  return line;
}

Result<ProbeReport> run_load(const ProbeOptions& o, const base::Clock& clock,
                             const ProgressFn& progress) {
  auto config = runner_config(o);
  if (!config.ok()) return std::move(config).error();
  auto prompts = prompts_of(o);
  if (!prompts.ok()) return std::move(prompts).error();
  const int top = *std::max_element(o.concurrency.begin(), o.concurrency.end());
  const int p = static_cast<int>(prompts->size());
  const int repeat = o.repeat > 0 ? o.repeat : std::max(1, (top + p - 1) / p);
  std::vector<Job> jobs;
  for (int rep = 0; rep < repeat; ++rep) {
    for (int i = 0; i < p; ++i) {
      Job j;
      j.prompt_index = i;
      j.prompt_name = (*prompts)[i].name;
      j.prompt_text = (*prompts)[i].text;
      j.repeat = rep;
      j.seed = o.seed + rep;
      j.model = o.model;
      jobs.push_back(std::move(j));
    }
  }
  ProbeReport report = new_report(o);
  Runner runner(*config, clock, clock.now_ns());
  const int total = static_cast<int>(jobs.size() * o.concurrency.size());
  int done = 0;
  for (int level : o.concurrency) {
    const std::string where = "c=" + std::to_string(level);
    auto recs = runner.run(jobs, level, [&](const RequestRecord&) {
      if (progress) progress(++done, total, where);
    });
    for (auto& r : recs) report.records.push_back(std::move(r));
  }
  report.load = make_load_verdict(report.records, o.batch_invariant);
  return report;
}

Result<ProbeReport> run_switch(const ProbeOptions& o, const base::Clock& clock,
                               const ProgressFn& progress) {
  auto config = runner_config(o);
  if (!config.ok()) return std::move(config).error();
  std::vector<Prompt> builtin = builtin_prompts();
  auto text_of = [&](const std::string& name) {
    for (const auto& pr : builtin) {
      if (pr.name == name) return pr.text;
    }
    return builtin.front().text;
  };
  ProbeReport report = new_report(o);
  Runner runner(*config, clock, clock.now_ns());
  const auto plan = switch_plan(o.models[0], o.models[1]);
  int done = 0;
  for (const auto& step : plan) {
    Job j;
    j.run = step.scenario;
    j.prompt_name = step.prompt_name;
    j.prompt_index = step.prompt_name == "short" ? 0 : 2;
    // A distinct first line per step keeps a prefix cache from serving one step's prompt from
    // another's KV blocks: every step pays its own prefill, so steps compare like with like.
    j.prompt_text = "Probe step " + std::to_string(done + 1) + ".\n" + text_of(step.prompt_name);
    j.seed = o.seed;
    j.model = step.model;
    auto recs = runner.run({j}, 1);
    for (auto& r : recs) report.records.push_back(std::move(r));
    if (progress) progress(++done, static_cast<int>(plan.size()), step.scenario);
  }
  report.switch_verdict = make_switch_verdict(report.records);
  return report;
}

Status write_outputs(const ProbeReport& report, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(ErrorKind::kIo, "cannot create " + dir + ": " + ec.message());
  const std::pair<const char*, std::string> files[] = {
      {"report.json", report_json(report)},
      {"requests.csv", records_csv(report.records)},
      {"report.html", render_html_report(report)},
  };
  for (const auto& [name, text] : files) {
    const std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out) return make_error(ErrorKind::kIo, "cannot write " + path);
  }
  return {};
}

}  // namespace cutline::tools::probe
