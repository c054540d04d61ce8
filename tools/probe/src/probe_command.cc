// `cutline probe load|switch`: the command-line entry. Parses options, runs the sweep or the
// switch scenarios with a progress bar on a TTY, prints the table and the verdict, and writes
// the JSON/CSV/HTML records when --out is given. Exit 0 when the run completed (whatever the
// verdict), 1 when it could not run or write, 2 on usage errors, 3 when a serving defect was
// flagged (equal seeds, different outputs on a batch-invariant endpoint), 4 when every request
// was refused with a 4xx (the run measured nothing).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string_view>

#include "cutline/tools/probe/options.h"
#include "cutline/tools/probe/probe_run.h"
#include "terminal_output.h"

namespace cutline::tools {
namespace {

constexpr int kExitAllRefused = 4;

}  // namespace

int run_probe(int argc, char** argv) {
  using namespace cutline::tools::probe;
  ProbeCommandLine command_line = parse_probe_command_line(argc, argv);
  if (command_line.parsed.kind == cli::Parsed::Kind::kError) {
    std::fprintf(stderr, "cutline probe: %s (see %s --help)\n", command_line.parsed.text.c_str(),
                 command_line.help_command.c_str());
    return cli::kExitUsage;
  }
  if (command_line.parsed.kind != cli::Parsed::Kind::kRun) {
    std::fputs(command_line.parsed.text.c_str(), stdout);
    if (command_line.parsed.kind == cli::Parsed::Kind::kVersion) std::fputs("\n", stdout);
    return cli::kExitOk;
  }
  const ProbeOptions& o = command_line.options;
  base::MonotonicClock clock;
  ProgressBar* bar = nullptr;
  std::unique_ptr<ProgressBar> holder;
  const bool tty = o.progress && isatty(STDERR_FILENO);
  auto progress = [&](int done, int total, const std::string& where) {
    if (!holder) holder = std::make_unique<ProgressBar>(stderr, total, tty);
    bar = holder.get();
    (void)done;
    bar->advance(where);
  };
  auto report =
      o.mode == ProbeMode::kLoad ? run_load(o, clock, progress) : run_switch(o, clock, progress);
  if (bar) bar->finish();
  if (!report.ok()) {
    std::fprintf(stderr, "cutline probe: %s\n", report.error().message.c_str());
    return 1;
  }
  if (!report->label.empty()) std::printf("label: %s\n", report->label.c_str());
  if (!report->policy_error.empty()) std::printf("policy: %s\n", report->policy_error.c_str());
  std::fputs((o.mode == ProbeMode::kLoad ? load_table(*report) : switch_table(*report)).c_str(),
             stdout);
  if (!o.out_dir.empty()) {
    auto st = write_outputs(*report, o.out_dir);
    if (!st.ok()) {
      std::fprintf(stderr, "cutline probe: %s\n", st.error().message.c_str());
      return 1;
    }
    std::printf("\nwrote %s/report.json, %s/requests.csv, %s/report.html\n", o.out_dir.c_str(),
                o.out_dir.c_str(), o.out_dir.c_str());
  }
  if (auto refused = all_refused(*report)) {
    // Nothing was measured: a wrong URL, key or route, not a verdict about the endpoint.
    std::fprintf(stderr, "cutline probe: %s\n", refused->c_str());
    return kExitAllRefused;
  }
  return report->load.serving_defect ? cli::kExitDefect : cli::kExitOk;
}

}  // namespace cutline::tools
