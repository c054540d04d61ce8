#include "cutline/tools/probe/options.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "cutline/cli/cli.h"

namespace cutline::tools::probe {

namespace {

Error bad(std::string what) { return make_error(ErrorKind::kBadRequest, std::move(what)); }

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(sep, pos);
    if (end == std::string_view::npos) end = s.size();
    if (end > pos) out.emplace_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

// The options both subcommands share, bound to `o` (lists and headers are read raw into `raw`).
struct RawLists {
  std::string concurrency;
  std::string models;
  std::vector<std::string> headers;
  std::string batch_invariant;
};

void add_common(CLI::App& cmd, ProbeOptions& o, RawLists& raw) {
  cmd.add_option("--url", o.url,
                 "Base URL of the OpenAI endpoint, with or without /v1, e.g. "
                 "http://127.0.0.1:8080/v1 (the route is appended, one /v1 kept; default "
                 "$OPENAI_BASE_URL)")
      ->required(o.url.empty());
  cmd.add_option("--api-key", o.api_key, "Bearer key (default $OPENAI_API_KEY)");
  cmd.add_option("--prompts", o.prompts_file,
                 "Prompt set file (default: the built-in short/medium/long set)")
      ->check(cli::kReadableFile);
  cmd.add_option("--concurrency", raw.concurrency, "Concurrency levels (default 1,2,4,8)")
      ->type_name("N,N,...");
  cmd.add_option("--repeat", o.repeat,
                 "Requests per prompt and level (default: enough to reach "
                 "the top level)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--max-tokens", o.max_tokens, "max_tokens of each request (default 64)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--temperature", o.temperature, "Sampling temperature (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option_function<double>(
         "--top-p", [&o](const double& p) { o.top_p = p; }, "Nucleus sampling top_p")
      ->check(CLI::Range(0.0, 1.0))
      ->check([](const std::string& v) {
        return std::strtod(v.c_str(), nullptr) > 0 ? "" : "must be in (0, 1]";
      });
  cmd.add_option("--seed", o.seed, "Seed of every request (default 1234)");
  cli::add_duration(cmd, "--timeout", o.timeout_ms,
                    "Per-request time limit, then disconnect (default 60s; a bare number is "
                    "seconds)",
                    1000);
  cmd.add_option("--label", o.label, "A label recorded in the report");
  cmd.add_option("--admin-url", o.admin_url,
                 "The gateway's admin URL (policy and stream state for the report)");
  cmd.add_option("--out", o.out_dir, "Write report.json, requests.csv and report.html here");
  cmd.add_option("--route", o.route, "Route (default /v1/chat/completions)");
  cmd.add_option("--header", raw.headers, "Extra request header NAME:VALUE (repeatable)")
      ->type_name("NAME:VALUE")
      ->allow_extra_args(false);
  cmd.add_option("--batch-invariant", raw.batch_invariant,
                 "Whether equal seeds must give equal outputs at any concurrency (default: as "
                 "the endpoint says)")
      ->check(CLI::IsMember(std::vector<std::string>{"yes", "no"}));
  cmd.add_flag("!--no-progress", o.progress, "No progress bar");
}

// Turns the raw lists into values; errors name the option.
Status finish_options(ProbeOptions& o, const RawLists& raw) {
  while (!o.url.empty() && o.url.back() == '/') o.url.pop_back();
  while (!o.admin_url.empty() && o.admin_url.back() == '/') o.admin_url.pop_back();
  if (o.url.empty()) return bad("--url is required (or set OPENAI_BASE_URL)");
  if (!raw.concurrency.empty()) {
    o.concurrency.clear();
    for (const auto& p : split(raw.concurrency, ',')) {
      int64_t n = 0;
      auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), n);
      if (ec != std::errc() || end != p.data() + p.size() || n < 1 || n > 4096)
        return bad("--concurrency: '" + p + "' is not 1..4096");
      o.concurrency.push_back(static_cast<int>(n));
    }
    if (o.concurrency.empty()) return bad("--concurrency: empty list");
  }
  for (const std::string& h : raw.headers) {
    auto colon = h.find(':');
    if (colon == std::string::npos || colon == 0) return bad("--header: want NAME:VALUE");
    std::string value = h.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    o.headers.emplace_back(h.substr(0, colon), value);
  }
  if (!raw.batch_invariant.empty()) o.batch_invariant = raw.batch_invariant == "yes";
  if (!raw.models.empty()) o.models = split(raw.models, ',');
  if (o.mode == ProbeMode::kSwitch && o.models.size() != 2)
    return bad("switch needs --models A,B (two model names)");
  return {};
}

}  // namespace

ProbeCommandLine parse_probe_command_line(int argc, const char* const* argv) {
  ProbeCommandLine out;
  ProbeOptions load, sw;
  load.url = sw.url = env_or("OPENAI_BASE_URL", "");
  load.api_key = sw.api_key = env_or("OPENAI_API_KEY", "");
  sw.mode = ProbeMode::kSwitch;
  RawLists load_raw, switch_raw;

  auto app = cli::make_app("cutline probe",
                           "Replay fixed prompts and seeds against any OpenAI endpoint and say why "
                           "answers got shorter or the first token slower.",
                           kProbeExitCodes);
  app->require_subcommand(1);
  CLI::App* load_cmd =
      cli::add_command(*app, "load",
                       "Concurrency sweep: per request max_tokens, output tokens, stop cause, "
                       "queue, TTFT, inter-token latency");
  add_common(*load_cmd, load, load_raw);
  load_cmd->add_option("--model", load.model, "Model name (default tiny)");
  CLI::App* switch_cmd = cli::add_command(
      *app, "switch", "Model-switch scenarios (cold switch, return, both resident, short vs long)");
  add_common(*switch_cmd, sw, switch_raw);
  switch_cmd->add_option("--models", switch_raw.models, "The two models to switch between")
      ->type_name("A,B")
      ->required();

  out.parsed = cli::try_parse(*app, argc, argv);
  if (out.parsed.kind == cli::Parsed::Kind::kRun) {
    const bool is_load = load_cmd->parsed();
    ProbeOptions& o = is_load ? load : sw;
    if (auto st = finish_options(o, is_load ? load_raw : switch_raw); !st.ok()) {
      out.parsed.kind = cli::Parsed::Kind::kError;
      out.parsed.text = st.error().message;
    } else {
      out.options = std::move(o);
    }
  }
  if (out.parsed.kind == cli::Parsed::Kind::kError) {
    out.help_command = std::string("cutline probe") + (load_cmd->parsed()     ? " load"
                                                       : switch_cmd->parsed() ? " switch"
                                                                              : "");
  }
  return out;
}

const char* const kProbeExitCodes =
    "Exit status: 0 the run completed (whatever the verdict), 1 it could not run or write, 2 "
    "usage error, 3 a serving defect was flagged (equal seeds gave different outputs on a "
    "batch-invariant endpoint), 4 every request was refused with a 4xx (a wrong URL, key or "
    "route: nothing was measured).";

}  // namespace cutline::tools::probe
