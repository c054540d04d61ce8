#pragma once
// The self-contained HTML report of a probe run: run facts, the verdict, inline SVG charts
// (load: output tokens by concurrency, stop causes by concurrency stacked, TTFT and inter-token
// latency percentiles; switch: the TTFT phase waterfall per scenario step), per-level and
// per-request tables and the endpoint's policy. No scripts and no network resources.
//
// Chart element ids (stable, tests look for them): chart-output-tokens, chart-stop-causes,
// chart-ttft, chart-itl (load); chart-phases, chart-switch-ttft (switch).

#include <string>

#include "cutline/tools/probe/probe_report.h"

namespace cutline::tools::probe {

std::string render_html_report(const ProbeReport& report);

}  // namespace cutline::tools::probe
