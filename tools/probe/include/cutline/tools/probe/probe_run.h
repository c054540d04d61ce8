#pragma once
// The two probe runs, as library calls (the `cutline probe` command and the integration tests
// call these): the load sweep and the switch scenarios, each returning a ProbeReport with every
// record and the verdict; and write_outputs, which writes report.json, requests.csv and
// report.html into a directory.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "cutline/base/clock.h"
#include "cutline/base/result.h"
#include "cutline/tools/probe/options.h"
#include "cutline/tools/probe/probe_report.h"

namespace cutline::tools::probe {

// Called after each request with (done, total, where the run is: "c=4" or a scenario).
using ProgressFn = std::function<void(int done, int total, const std::string& where)>;

// Jobs per level: every prompt × repeat, the same list (prompts and seeds) at every level. With
// --repeat unset, repeat = ceil(max concurrency / prompts) so that the top level is reached.
Result<ProbeReport> run_load(const ProbeOptions& options, const base::Clock& clock,
                             const ProgressFn& progress = {});
Result<ProbeReport> run_switch(const ProbeOptions& options, const base::Clock& clock,
                               const ProgressFn& progress = {});

// Writes report.json, requests.csv, report.html under `dir` (created when missing).
Status write_outputs(const ProbeReport& report, const std::string& dir);

// The request-target of `route` under the base URL's path `base_path`: a base that already ends
// in /v1 (as OPENAI_BASE_URL does, "http://host:8080/v1") and a /v1 route give one /v1, not two.
std::string route_target(std::string_view base_path, std::string_view route);

// When every request was refused with a 4xx (the run measured nothing): a line naming the
// statuses and the first error, for the command to print before it fails. nullopt otherwise.
std::optional<std::string> all_refused(const ProbeReport& report);

}  // namespace cutline::tools::probe
