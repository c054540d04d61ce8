// Prometheus text exposition, one line at a time (prometheus_text.h).
#include "cutline/gateway/prometheus_text.h"

#include <cmath>
#include <cstdlib>

namespace cutline::gateway {

namespace {

bool name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}
bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }

Error bad(std::string why) { return make_error(ErrorKind::kBadRequest, std::move(why)); }

// Parses `{a="x",b="y"}` starting at line[i] == '{'; leaves i after '}'.
Status parse_labels(std::string_view line, size_t& i, PromSample& out) {
  ++i;  // '{'
  for (;;) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i < line.size() && line[i] == '}') {
      ++i;
      return {};
    }
    const size_t start = i;
    while (i < line.size() && name_char(line[i])) ++i;
    if (i == start) return bad("expected a label name");
    std::string name(line.substr(start, i - start));
    if (i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
      return bad("expected =\" after label " + name);
    }
    i += 2;
    std::string value;
    for (;;) {
      if (i >= line.size()) return bad("unterminated label value");
      const char c = line[i++];
      if (c == '"') break;
      if (c == '\\') {
        if (i >= line.size()) return bad("unterminated label value");
        const char e = line[i++];
        value.push_back(e == 'n' ? '\n' : e);
      } else {
        value.push_back(c);
      }
    }
    out.labels.emplace_back(std::move(name), std::move(value));
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i < line.size() && line[i] == ',') ++i;
  }
}

}  // namespace

Result<bool> parse_prom_line(std::string_view line, PromSample& out) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  if (i == line.size() || line[i] == '#') return false;
  out.labels.clear();
  const size_t start = i;
  if (!name_start(line[i])) return bad("expected a metric name");
  while (i < line.size() && name_char(line[i])) ++i;
  out.name = line.substr(start, i - start);
  if (i < line.size() && line[i] == '{') {
    Status s = parse_labels(line, i, out);
    if (!s.ok()) return s.error();
  }
  if (i >= line.size() || (line[i] != ' ' && line[i] != '\t')) {
    return bad("expected a value after " + std::string(out.name));
  }
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  const size_t vstart = i;
  while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
  const std::string value(line.substr(vstart, i - vstart));
  if (value == "NaN") {
    out.value = std::nan("");
  } else if (value == "+Inf" || value == "Inf") {
    out.value = HUGE_VAL;
  } else if (value == "-Inf") {
    out.value = -HUGE_VAL;
  } else {
    char* end = nullptr;
    out.value = std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size()) {
      return bad("invalid value \"" + value.substr(0, 32) + "\" for " + std::string(out.name));
    }
  }
  return true;  // an optional timestamp follows; ignored
}

}  // namespace cutline::gateway
