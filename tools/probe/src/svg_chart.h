#pragma once
// Inline SVG charts for the HTML report: no scripts, no external resources, text escaped. Each
// chart is one <svg> element with the given id, a <title>, axis labels and a legend.

#include <string>
#include <vector>

namespace cutline::tools::probe {

struct ChartSeries {
  std::string name;
  std::vector<double> values;  // one per category
};

// Vertical bars per category: grouped side by side, or stacked (stop causes by concurrency).
std::string svg_bar_chart(const std::string& id, const std::string& title,
                          const std::vector<std::string>& categories,
                          const std::vector<ChartSeries>& series, const std::string& y_label,
                          bool stacked);

// Horizontal bars whose segments follow each other on one time axis (the TTFT phase
// waterfall): one row per label, one segment per series.
std::string svg_waterfall(const std::string& id, const std::string& title,
                          const std::vector<std::string>& rows,
                          const std::vector<ChartSeries>& segments, const std::string& x_label);

// &, <, >, " escaped.
std::string html_escape(const std::string& s);

}  // namespace cutline::tools::probe
