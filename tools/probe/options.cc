#include "options.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

namespace cutline::tools::probe {

const char* const kProbeUsage =
    "usage: cutline probe load --url URL [--api-key K] [--model M] [--prompts FILE]\n"
    "                          [--concurrency 1,2,4,8] [--repeat N] [--max-tokens N]\n"
    "                          [--temperature T] [--top-p P] [--seed S] [--timeout SECONDS]\n"
    "                          [--label TEXT] [--admin-url URL] [--out DIR] [--route PATH]\n"
    "                          [--header NAME:VALUE]... [--batch-invariant yes|no]\n"
    "                          [--no-progress]\n"
    "       cutline probe switch --url URL --models A,B [the same options]\n";

namespace {

Error bad(std::string what) { return make_error(ErrorKind::kBadRequest, std::move(what)); }

std::optional<int64_t> to_int(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> to_double(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

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

}  // namespace

Result<ProbeOptions> parse_probe_options(int argc, char** argv) {
  ProbeOptions o;
  if (argc < 1) return bad("missing subcommand (load | switch)");
  std::string_view sub = argv[0];
  if (sub == "load") {
    o.mode = ProbeMode::kLoad;
  } else if (sub == "switch") {
    o.mode = ProbeMode::kSwitch;
  } else {
    return bad("unknown subcommand '" + std::string(sub) + "' (load | switch)");
  }
  bool model_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--no-progress") {
      o.progress = false;
      continue;
    }
    if (i + 1 >= argc) return bad(std::string(a) + " needs a value (or is unknown)");
    std::string v = argv[++i];
    if (a == "--url") {
      while (!v.empty() && v.back() == '/') v.pop_back();
      o.url = v;
    } else if (a == "--api-key") {
      o.api_key = v;
    } else if (a == "--model") {
      o.model = v;
      model_given = true;
    } else if (a == "--models") {
      o.models = split(v, ',');
    } else if (a == "--prompts") {
      o.prompts_file = v;
    } else if (a == "--concurrency") {
      o.concurrency.clear();
      for (const auto& p : split(v, ',')) {
        auto n = to_int(p);
        if (!n || *n < 1 || *n > 4096) return bad("--concurrency: '" + p + "' is not 1..4096");
        o.concurrency.push_back(static_cast<int>(*n));
      }
      if (o.concurrency.empty()) return bad("--concurrency: empty list");
    } else if (a == "--repeat") {
      auto n = to_int(v);
      if (!n || *n < 1) return bad("--repeat: '" + v + "' is not a positive integer");
      o.repeat = static_cast<int>(*n);
    } else if (a == "--max-tokens") {
      auto n = to_int(v);
      if (!n || *n < 1) return bad("--max-tokens: '" + v + "' is not a positive integer");
      o.max_tokens = *n;
    } else if (a == "--temperature") {
      auto d = to_double(v);
      if (!d || *d < 0) return bad("--temperature: '" + v + "' is not a number >= 0");
      o.temperature = *d;
    } else if (a == "--top-p") {
      auto d = to_double(v);
      if (!d || *d <= 0 || *d > 1) return bad("--top-p: '" + v + "' is not in (0, 1]");
      o.top_p = *d;
    } else if (a == "--seed") {
      auto n = to_int(v);
      if (!n) return bad("--seed: '" + v + "' is not an integer");
      o.seed = *n;
    } else if (a == "--timeout") {
      auto d = to_double(v);
      if (!d || *d <= 0) return bad("--timeout: '" + v + "' is not a positive number of seconds");
      o.timeout_ms = static_cast<int64_t>(*d * 1000);
    } else if (a == "--label") {
      o.label = v;
    } else if (a == "--admin-url") {
      while (!v.empty() && v.back() == '/') v.pop_back();
      o.admin_url = v;
    } else if (a == "--out") {
      o.out_dir = v;
    } else if (a == "--route") {
      o.route = v;
    } else if (a == "--header") {
      auto colon = v.find(':');
      if (colon == std::string::npos || colon == 0) return bad("--header: want NAME:VALUE");
      std::string value = v.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      o.headers.emplace_back(v.substr(0, colon), value);
    } else if (a == "--batch-invariant") {
      if (v != "yes" && v != "no") return bad("--batch-invariant: yes or no");
      o.batch_invariant = v == "yes";
    } else {
      return bad("unknown option " + std::string(a));
    }
  }
  if (o.url.empty()) return bad("--url is required");
  if (o.mode == ProbeMode::kSwitch) {
    if (o.models.size() != 2) return bad("switch needs --models A,B (two model names)");
  } else if (!o.models.empty()) {
    return bad("--models is for `probe switch`; load takes --model");
  }
  (void)model_given;
  return o;
}

}  // namespace cutline::tools::probe
