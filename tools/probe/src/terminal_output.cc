#include "terminal_output.h"

#include <cstdio>

namespace cutline::tools::probe {

namespace {

std::string f1(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", *v);
  return buf;
}

}  // namespace

std::string load_table(const ProbeReport& r) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-5s %7s %8s %5s %5s %5s %8s %7s %9s %9s %9s  %s\n", "conc",
                "answers", "mean_tok", "min", "med", "max", "complete", "shorter", "ttft_p50",
                "ttft_p99", "itl_p50", "stop causes");
  out += line;
  for (const auto& s : r.load.levels) {
    std::string causes;
    for (const auto& [c, n] : s.causes)
      causes += (causes.empty() ? "" : ", ") + c + " " + std::to_string(n);
    std::snprintf(
        line, sizeof line, "%-5d %7d %8.1f %5lld %5lld %5lld %7.0f%% %7d %9s %9s %9s  %s\n",
        s.concurrency, s.answers, s.mean_output_tokens, static_cast<long long>(s.min_output_tokens),
        static_cast<long long>(s.median_output_tokens), static_cast<long long>(s.max_output_tokens),
        100 * s.completion_rate, s.shorter, f1(s.ttft_p50_ms).c_str(), f1(s.ttft_p99_ms).c_str(),
        f1(s.itl_p50_ms).c_str(), causes.c_str());
    out += line;
  }
  out += "\nverdict:\n";
  for (const auto& l : r.load.lines) out += "  " + l + "\n";
  return out;
}

std::string switch_table(const ProbeReport& r) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-3s %-24s %-8s %-6s %9s %9s %7s %7s %7s %8s %7s  %s\n", "#",
                "scenario", "model", "prompt", "ttft_cli", "ttft_srv", "queue", "load", "warmup",
                "prefill", "decode1", "state");
  out += line;
  int i = 0;
  for (const auto& rec : r.records) {
    std::optional<double> q, l, w, p, f;
    if (rec.phases) {
      q = rec.phases->queue_ms;
      l = rec.phases->load_ms;
      w = rec.phases->warmup_ms;
      p = rec.phases->prefill_ms;
      f = rec.phases->first_decode_ms;
    }
    std::snprintf(line, sizeof line, "%-3d %-24s %-8s %-6s %9s %9s %7s %7s %7s %8s %7s  %s\n", ++i,
                  rec.run.c_str(), rec.model.c_str(), rec.prompt_name.c_str(),
                  f1(rec.ttft_ms).c_str(), f1(rec.server_ttft_ms).c_str(), f1(q).c_str(),
                  f1(l).c_str(), f1(w).c_str(), f1(p).c_str(), f1(f).c_str(),
                  (rec.model_state.empty() ? rec.error : rec.model_state).c_str());
    out += line;
  }
  out += "\nverdict:\n";
  for (const auto& l2 : r.switch_verdict.lines) out += "  " + l2 + "\n";
  return out;
}

ProgressBar::ProgressBar(FILE* out, int total, bool enabled)
    : out_(out), total_(total), enabled_(enabled && total > 0) {}

void ProgressBar::advance(const std::string& what) {
  ++done_;
  if (!enabled_) return;
  constexpr int kWidth = 30;
  const int filled = done_ * kWidth / total_;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(kWidth - filled), '.');
  std::fprintf(out_, "\r[%s] %d/%d %s   ", bar.c_str(), done_, total_, what.c_str());
  std::fflush(out_);
}

void ProgressBar::finish() {
  if (!enabled_) return;
  std::fprintf(out_, "\r%80s\r", "");
  std::fflush(out_);
}

}  // namespace cutline::tools::probe
