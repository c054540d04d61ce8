#pragma once
// JSON and CSV records of a probe run. JSON: {"probe": {run facts, label, policy}, "verdict":
// [lines], "levels": [per-level summary], "requests": [every request]}. CSV: one header row and
// one row per request, the same per-request fields (itl as mean/max/count; phases as columns).

#include <string>

#include "cutline/tools/probe/probe_report.h"

namespace cutline::tools::probe {

std::string report_json(const ProbeReport& report);
std::string records_csv(const std::vector<RequestRecord>& records);

// The CSV column names, in order.
const std::vector<std::string>& csv_columns();

// RFC 4180 quoting when needed (comma, quote, CR or LF in the field).
std::string csv_field(const std::string& s);

}  // namespace cutline::tools::probe
