// `cutline probe load|switch`: the command-line entry. Parses options, runs the sweep or the
// switch scenarios with a progress bar on a TTY, prints the table and the verdict, and writes
// the JSON/CSV/HTML records when --out is given. Exit 0 when the run completed (whatever the
// verdict), 1 when it could not run or write, 2 on usage errors, 3 when a serving defect was
// flagged (equal seeds, different outputs on a batch-invariant endpoint).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string_view>

#include "options.h"
#include "probe_run.h"
#include "terminal_output.h"

namespace cutline::tools {

int run_probe(int argc, char** argv) {
  using namespace cutline::tools::probe;
  if (argc < 2 || std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h") {
    std::fputs(kProbeUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  auto options = parse_probe_options(argc - 1, argv + 1);
  if (!options.ok()) {
    std::fprintf(stderr, "cutline probe: %s\n%s", options.error().message.c_str(), kProbeUsage);
    return 2;
  }
  const ProbeOptions& o = *options;
  proto::SystemClock clock;
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
  return report->load.serving_defect ? 3 : 0;
}

}  // namespace cutline::tools
