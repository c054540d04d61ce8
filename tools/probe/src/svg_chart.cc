#include "svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cutline::tools::probe {

namespace {

constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr int kPaletteSize = 10;

std::string n(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string tick(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A "nice" axis maximum at or above v.
double nice_max(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

std::string legend(const std::vector<ChartSeries>& series, double x, double y) {
  std::string out;
  for (size_t i = 0; i < series.size(); ++i) {
    const double ly = y + 16.0 * static_cast<double>(i);
    out += "<rect class=\"legend\" x=\"" + n(x) + "\" y=\"" + n(ly) +
           "\" width=\"10\" height=\"10\" fill=\"" + kPalette[i % kPaletteSize] + "\"/>";
    out += "<text x=\"" + n(x + 14) + "\" y=\"" + n(ly + 9) + "\" font-size=\"11\">" +
           html_escape(series[i].name) + "</text>";
  }
  return out;
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string svg_bar_chart(const std::string& id, const std::string& title,
                          const std::vector<std::string>& categories,
                          const std::vector<ChartSeries>& series, const std::string& y_label,
                          bool stacked) {
  const double w = 640, h = 300, left = 60, right = 170, top = 30, bottom = 40;
  const double plot_w = w - left - right, plot_h = h - top - bottom;
  double max_v = 0;
  for (size_t c = 0; c < categories.size(); ++c) {
    double sum = 0;
    for (const auto& s : series) {
      const double v = c < s.values.size() ? s.values[c] : 0;
      sum += v;
      max_v = std::max(max_v, v);
    }
    if (stacked) max_v = std::max(max_v, sum);
  }
  const double axis = nice_max(max_v);
  std::string out = "<svg id=\"" + id +
                    "\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" "
                    "width=\"" +
                    n(w) + "\" height=\"" + n(h) + "\" viewBox=\"0 0 " + n(w) + " " + n(h) +
                    "\" role=\"img\"><title>" + html_escape(title) + "</title>";
  out += "<text x=\"" + n(left) + "\" y=\"18\" font-size=\"13\" font-weight=\"bold\">" +
         html_escape(title) + "</text>";
  // Y axis with 5 ticks.
  for (int i = 0; i <= 5; ++i) {
    const double v = axis * i / 5.0, y = top + plot_h - plot_h * i / 5.0;
    out += "<line x1=\"" + n(left) + "\" y1=\"" + n(y) + "\" x2=\"" + n(left + plot_w) +
           "\" y2=\"" + n(y) + "\" stroke=\"#ddd\"/>";
    out += "<text x=\"" + n(left - 6) + "\" y=\"" + n(y + 4) +
           "\" font-size=\"10\" text-anchor=\"end\">" + tick(v) + "</text>";
  }
  out += "<text x=\"14\" y=\"" + n(top + plot_h / 2) +
         "\" font-size=\"11\" transform=\"rotate(-90 14 " + n(top + plot_h / 2) +
         ")\" text-anchor=\"middle\">" + html_escape(y_label) + "</text>";
  const double slot = categories.empty() ? plot_w : plot_w / static_cast<double>(categories.size());
  const double group_w = slot * 0.7;
  const double bar_w = stacked || series.empty() ? group_w : group_w / series.size();
  for (size_t c = 0; c < categories.size(); ++c) {
    const double x0 = left + slot * c + (slot - group_w) / 2;
    double base = 0;
    for (size_t s = 0; s < series.size(); ++s) {
      const double v = c < series[s].values.size() ? series[s].values[c] : 0;
      const double bh = plot_h * v / axis;
      const double x = stacked ? x0 : x0 + bar_w * s;
      const double y = top + plot_h - (stacked ? plot_h * base / axis : 0) - bh;
      if (v > 0) {
        out += "<rect class=\"bar\" x=\"" + n(x) + "\" y=\"" + n(y) + "\" width=\"" + n(bar_w) +
               "\" height=\"" + n(bh) + "\" fill=\"" + kPalette[s % kPaletteSize] + "\"><title>" +
               html_escape(series[s].name + " @ " + categories[c] + ": " + tick(v)) +
               "</title></rect>";
      }
      if (stacked) base += v;
    }
    out += "<text x=\"" + n(left + slot * c + slot / 2) + "\" y=\"" + n(top + plot_h + 16) +
           "\" font-size=\"11\" text-anchor=\"middle\">" + html_escape(categories[c]) + "</text>";
  }
  out += "<line x1=\"" + n(left) + "\" y1=\"" + n(top + plot_h) + "\" x2=\"" + n(left + plot_w) +
         "\" y2=\"" + n(top + plot_h) + "\" stroke=\"#333\"/>";
  out += legend(series, w - right + 15, top);
  out += "</svg>";
  return out;
}

std::string svg_waterfall(const std::string& id, const std::string& title,
                          const std::vector<std::string>& rows,
                          const std::vector<ChartSeries>& segments, const std::string& x_label) {
  const double row_h = 22, left = 260, right = 130, top = 30, bottom = 40, w = 900;
  const double h = top + bottom + row_h * static_cast<double>(std::max<size_t>(rows.size(), 1));
  const double plot_w = w - left - right;
  double max_v = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    double sum = 0;
    for (const auto& s : segments) sum += r < s.values.size() ? s.values[r] : 0;
    max_v = std::max(max_v, sum);
  }
  const double axis = nice_max(max_v);
  std::string out = "<svg id=\"" + id +
                    "\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" "
                    "width=\"" +
                    n(w) + "\" height=\"" + n(h) + "\" viewBox=\"0 0 " + n(w) + " " + n(h) +
                    "\" role=\"img\"><title>" + html_escape(title) + "</title>";
  out += "<text x=\"10\" y=\"18\" font-size=\"13\" font-weight=\"bold\">" + html_escape(title) +
         "</text>";
  for (int i = 0; i <= 5; ++i) {
    const double x = left + plot_w * i / 5.0;
    out += "<line x1=\"" + n(x) + "\" y1=\"" + n(top) + "\" x2=\"" + n(x) + "\" y2=\"" +
           n(h - bottom) + "\" stroke=\"#ddd\"/>";
    out += "<text x=\"" + n(x) + "\" y=\"" + n(h - bottom + 14) +
           "\" font-size=\"10\" text-anchor=\"middle\">" + tick(axis * i / 5.0) + "</text>";
  }
  out += "<text x=\"" + n(left + plot_w / 2) + "\" y=\"" + n(h - 8) +
         "\" font-size=\"11\" text-anchor=\"middle\">" + html_escape(x_label) + "</text>";
  for (size_t r = 0; r < rows.size(); ++r) {
    const double y = top + row_h * r + 3;
    out += "<text x=\"" + n(left - 6) + "\" y=\"" + n(y + 12) +
           "\" font-size=\"11\" text-anchor=\"end\">" + html_escape(rows[r]) + "</text>";
    double start = 0;
    for (size_t s = 0; s < segments.size(); ++s) {
      const double v = r < segments[s].values.size() ? segments[s].values[r] : 0;
      if (v > 0) {
        out += "<rect class=\"bar\" x=\"" + n(left + plot_w * start / axis) + "\" y=\"" + n(y) +
               "\" width=\"" + n(std::max(plot_w * v / axis, 0.5)) + "\" height=\"" + n(row_h - 6) +
               "\" fill=\"" + kPalette[s % kPaletteSize] + "\"><title>" +
               html_escape(rows[r] + " " + segments[s].name + ": " + tick(v)) + "</title></rect>";
      }
      start += v;
    }
  }
  out += legend(segments, w - right + 15, top);
  out += "</svg>";
  return out;
}

}  // namespace cutline::tools::probe
