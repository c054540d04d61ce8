#pragma once
// A small reader of the Prometheus text exposition format (version 0.0.4), for the load
// reports of vLLM endpoints (load_report.h). It yields samples — name, labels, value — and
// ignores comments (# HELP, # TYPE) and timestamps. Bad input is an error value naming the line;
// it never reads past the text it is given.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cutline/base/result.h"

namespace cutline::gateway {

struct PromSample {
  std::string_view name;
  std::vector<std::pair<std::string, std::string>> labels;  // unescaped values
  double value = 0;
};

// Calls `on_sample` for every sample in order. Errors (kBadRequest): "line 7: ...".
template <typename F>
Status for_each_prom_sample(std::string_view text, F&& on_sample);

// One line (without the newline): a sample, or nothing for a blank/comment line.
// Errors name what is wrong but not the line number.
Result<bool> parse_prom_line(std::string_view line, PromSample& out);

template <typename F>
Status for_each_prom_sample(std::string_view text, F&& on_sample) {
  size_t line_no = 0;
  PromSample sample;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    Result<bool> r = parse_prom_line(line, sample);
    if (!r.ok()) {
      return make_error(ErrorKind::kBadRequest,
                        "line " + std::to_string(line_no) + ": " + r.error().message);
    }
    if (*r) on_sample(sample);
  }
  return {};
}

}  // namespace cutline::gateway
