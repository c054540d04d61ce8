#pragma once
// What the probe prints on the terminal: a progress bar on stderr while requests run (only when
// stderr is a TTY) and, at the end, a table per concurrency level or switch step on stdout
// followed by the verdict lines.

#include <cstdio>
#include <string>

#include "cutline/tools/probe/probe_report.h"

namespace cutline::tools::probe {

std::string load_table(const ProbeReport& report);
std::string switch_table(const ProbeReport& report);

class ProgressBar {
 public:
  // Draws nothing unless `enabled` (the caller passes isatty(stderr) && !--no-progress).
  ProgressBar(FILE* out, int total, bool enabled);
  // One request ended; `what` says where the sweep is ("c=4").
  void advance(const std::string& what);
  // Clears the line.
  void finish();

 private:
  FILE* out_;
  int total_;
  int done_ = 0;
  bool enabled_;
};

}  // namespace cutline::tools::probe
