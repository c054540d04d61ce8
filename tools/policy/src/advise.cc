// `cutline policy advise` (advise.h): the access log read into per-policy, per-model samples,
// and limits proposed at the (1 - target) quantile of each.
#include "cutline/tools/policy/advise.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <queue>

#include <simdjson.h>

#include "cutline/policy/duration.h"

namespace cutline::tools {

namespace {

Error log_error(int64_t line, const std::string& what) {
  return make_error(ErrorKind::kBadRequest, "line " + std::to_string(line) + ": " + what);
}

// The largest number a line may carry in a measured field: the longest duration a policy can
// state (2^31 - 1 ms, about 24.8 days), also far beyond any token count.
constexpr double kMaxSaneValue = 2147483647.0;
// Unix time in seconds before the year 5138: larger `ts` values are not timestamps.
constexpr double kMaxSaneTs = 1e11;

// A limit is at least 10 ms and at most kMaxSaneValue rounded down to 10 ms.
int64_t round_up_ms(double ms) {
  const double clamped = std::clamp(std::isfinite(ms) ? ms : 1.0, 1.0, kMaxSaneValue - 10);
  return static_cast<int64_t>(std::ceil(clamped / 10.0 - 1e-9)) * 10;
}

// A byte of a UTF-8 sequence starting at `s[i]`: its length, 0 when not well formed.
size_t utf8_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3f);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  if (cp >= 0x80 && cp <= 0x9f) return 0;  // C1 controls (U+0080..U+009F) are escaped too
  return n;
}

// In flight at each arrival (the request itself included), for spans sorted by start.
std::vector<double> concurrency_at_arrivals(std::vector<std::pair<double, double>> spans) {
  std::sort(spans.begin(), spans.end());
  std::priority_queue<double, std::vector<double>, std::greater<>> ends;
  std::vector<double> out;
  out.reserve(spans.size());
  for (const auto& [start, end] : spans) {
    while (!ends.empty() && ends.top() <= start) ends.pop();
    ends.push(end);
    out.push_back(static_cast<double>(ends.size()));
  }
  return out;
}

bool generation_path(std::string_view path) {
  return path == "/v1/chat/completions" || path == "/v1/completions" || path == "/v1/responses";
}

std::string num(double v) {
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f", v);
  }
  return buf;
}

// "p50 12  p90 40  p99 77  max 80  (n 1000)"
std::string spread(std::vector<double>& v, const char* unit) {
  if (v.empty()) return "no samples";
  std::string out;
  for (double q : {0.5, 0.9, 0.99}) {
    char label[8];
    std::snprintf(label, sizeof label, "p%.0f ", q * 100);
    out += label + num(*quantile(v, q)) + unit + "  ";
  }
  out += "max " + num(v.back()) + unit + "  (n " + std::to_string(v.size()) + ")";
  return out;
}

void line(std::string& out, const char* name, const std::string& value, const std::string& why) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "  %-26s %-10s ", name, value.c_str());
  out += buf + why + "\n";
}

}  // namespace

std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      if (c == '"' || c == '\\') out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (size_t n = c >= 0x80 ? utf8_length(text, i) : 0; n > 0) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      ++i;
    }
  }
  return out;
}

std::optional<double> quantile(std::vector<double>& values, double q) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  int64_t rank = static_cast<int64_t>(std::ceil(q * n - 1e-9));
  rank = std::clamp<int64_t>(rank, 1, static_cast<int64_t>(values.size()));
  return values[static_cast<size_t>(rank - 1)];
}

Result<AdviceInput> read_access_log(std::string_view text) {
  AdviceInput in;
  simdjson::dom::parser parser;
  int64_t number = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    const bool last_without_newline = end == std::string_view::npos;
    if (last_without_newline) end = text.size();
    const std::string_view raw = text.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    if (raw.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    simdjson::dom::element doc;
    const simdjson::error_code parsed = parser.parse(raw.data(), raw.size()).get(doc);
    const bool number_error =
        parsed == simdjson::NUMBER_ERROR || parsed == simdjson::NUMBER_OUT_OF_RANGE;
    if (number_error && raw.find_last_not_of(" \t\r") == raw.rfind('}')) {
      ++in.lines;  // a number beyond a double's range (1e400): skipped as absurd
      ++in.absurd;
      continue;
    }
    if (parsed != simdjson::SUCCESS || !doc.is_object()) {
      if (last_without_newline && !raw.empty() && raw.front() == '{') {
        return log_error(number,
                         "truncated: the last line ends before its JSON object does (copy the "
                         "log after the gateway has written it, or drop the partial line)");
      }
      return log_error(number,
                       "not a JSON object: this is not a Cutline gateway access log (one JSON "
                       "object per line)");
    }
    std::string_view cause;
    if (doc["cause"].get_string().get(cause) != simdjson::SUCCESS) {
      return log_error(number,
                       "no stop record (\"cause\"): this is not a Cutline gateway access log");
    }
    ++in.lines;
    if (cause == "invalid_request" || cause == "admission_rejected" || cause == "policy_denied") {
      ++in.skipped;
      continue;
    }
    // Only generation is measured: GET /v1/models, embeddings and passthrough have no output
    // tokens, TTFT or gaps, and would set deadlines from answers of another kind.
    std::string_view method;
    std::string_view path;
    const bool has_method = doc["method"].get_string().get(method) == simdjson::SUCCESS;
    const bool has_path = doc["path"].get_string().get(path) == simdjson::SUCCESS;
    if ((has_method && method != "POST") || (has_path && !generation_path(path))) {
      ++in.not_generation;
      continue;
    }
    std::string_view policy;
    std::string_view model;
    if (doc["policy"].get_string().get(policy) != simdjson::SUCCESS) policy = {};
    if (doc["model"].get_string().get(model) != simdjson::SUCCESS) model = {};
    auto number_of = [&](const char* key) -> std::optional<double> {
      double v = 0;
      if (doc[key].get_double().get(v) == simdjson::SUCCESS) return v;
      int64_t i = 0;
      if (doc[key].get_int64().get(i) == simdjson::SUCCESS) return static_cast<double>(i);
      uint64_t u = 0;
      if (doc[key].get_uint64().get(u) == simdjson::SUCCESS) return static_cast<double>(u);
      return std::nullopt;
    };
    // A line with a measured number no gateway writes (negative, not finite, beyond any
    // duration a policy can state) is left out whole: one such value would set a limit.
    bool absurd = false;
    for (const char* key : {"output_tokens", "duration_ms", "ttft_ms", "itl_max_ms", "queue_ms"}) {
      if (auto v = number_of(key); v && !(*v >= 0 && *v <= kMaxSaneValue)) absurd = true;
    }
    if (auto ts = number_of("ts"); ts && !(*ts >= 0 && *ts <= kMaxSaneTs)) absurd = true;
    if (absurd) {
      ++in.absurd;
      continue;
    }
    Observed& o = in.groups[{std::string(policy), std::string(model)}];
    if (auto v = number_of("output_tokens")) o.output_tokens.push_back(*v);
    if (auto v = number_of("duration_ms")) {
      o.duration_ms.push_back(*v);
      if (auto ts = number_of("ts")) o.spans_ms.emplace_back(*ts * 1000.0, *ts * 1000.0 + *v);
    }
    if (auto v = number_of("ttft_ms")) o.ttft_ms.push_back(*v);
    if (auto v = number_of("itl_max_ms")) o.itl_max_ms.push_back(*v);
    if (auto v = number_of("queue_ms")) o.queue_ms.push_back(*v);
  }
  if (in.lines == 0) {
    return make_error(ErrorKind::kBadRequest,
                      "empty: no access-log lines (is access_log set in the policy, and has "
                      "traffic passed?)");
  }
  if (in.groups.empty() && in.absurd > 0) {
    return make_error(ErrorKind::kBadRequest,
                      std::to_string(in.absurd) +
                          " lines carry numbers no gateway writes (negative, not finite, or "
                          "beyond 24.8 days) and the rest were refused before an upstream: "
                          "nothing to measure");
  }
  if (in.groups.empty() && in.not_generation > 0) {
    return make_error(ErrorKind::kBadRequest,
                      "no generation requests (POST /v1/chat/completions, /v1/completions, "
                      "/v1/responses): nothing to propose limits from");
  }
  if (in.groups.empty()) {
    return make_error(ErrorKind::kBadRequest,
                      "every request was refused before an upstream (invalid_request, "
                      "admission_rejected or policy_denied): nothing to measure");
  }
  return in;
}

Proposal propose(Observed& o, double target) {
  const double q = 1.0 - target;
  // Counts x kCountHeadroom, rounded up, at least 1 and at most kMaxSaneValue.
  auto count = [](double v) {
    const double up = std::ceil(v * kCountHeadroom - 1e-9);
    return static_cast<int64_t>(std::clamp(up, 1.0, kMaxSaneValue));
  };
  Proposal l;
  if (auto v = quantile(o.output_tokens, q)) l.max_output_tokens = count(*v);
  if (auto v = quantile(o.duration_ms, q)) l.deadline_ms = round_up_ms(*v * kTimeHeadroom);
  if (auto v = quantile(o.ttft_ms, q)) l.ttft_timeout_ms = round_up_ms(*v * kTimeHeadroom);
  if (auto v = quantile(o.itl_max_ms, q)) l.idle_timeout_ms = round_up_ms(*v * kTimeHeadroom);
  std::vector<double> c = concurrency_at_arrivals(o.spans_ms);
  if (auto v = quantile(c, q)) l.max_concurrent = count(*v);
  return l;
}

std::string render_advice(AdviceInput& in, double target) {
  std::string out;
  char head[160];
  std::snprintf(head, sizeof head,
                "%lld requests read, %lld refused before an upstream (not measured); target: "
                "cut at most %s%% of each policy and model\n",
                static_cast<long long>(in.lines), static_cast<long long>(in.skipped),
                num(target * 100).c_str());
  out += head;
  if (in.absurd > 0) {
    out += "warning: " + std::to_string(in.absurd) +
           " lines skipped: a measured number no gateway writes (negative, not finite, or "
           "beyond 24.8 days)\n";
  }
  if (in.not_generation > 0) {
    out += std::to_string(in.not_generation) +
           " requests not generation (GET /v1/models, embeddings, passthrough): not measured\n";
  }
  char headroom[160];
  std::snprintf(headroom, sizeof headroom,
                "headroom: each limit is its quantile x %g for times, x %g for output tokens and "
                "concurrency, rounded up\n",
                kTimeHeadroom, kCountHeadroom);
  out += headroom;
  for (auto& [key, o] : in.groups) {
    const Proposal l = propose(o, target);
    // The log's names are the clients' (model) or may be forged: escaped for the terminal.
    out += "\npolicy \"" +
           (key.first.empty() ? std::string("(none matched)") : printable(key.first)) +
           "\"  model \"" + printable(key.second) + "\"  (" + std::to_string(o.duration_ms.size()) +
           " requests)\n";
    const auto n = static_cast<int64_t>(o.duration_ms.size());
    if (n < kMinSample) {
      out += "  warning: " + std::to_string(n) + " requests, fewer than " +
             std::to_string(kMinSample) +
             ": too few to measure a tail, these proposals are noise (gather more traffic)\n";
    }
    auto show = [&](const char* name, const std::optional<int64_t>& v, bool ms,
                    std::vector<double>& samples, const char* unit, const char* what) {
      line(out, name,
           v ? (ms ? policy::format_duration_ms(*v) : std::to_string(*v)) : std::string("-"),
           std::string(what) + ": " + spread(samples, unit));
    };
    show("budget.max_output_tokens", l.max_output_tokens, false, o.output_tokens, "",
         "output tokens");
    show("deadline", l.deadline_ms, true, o.duration_ms, "ms", "duration");
    show("ttft_timeout", l.ttft_timeout_ms, true, o.ttft_ms, "ms", "TTFT");
    show("idle_timeout", l.idle_timeout_ms, true, o.itl_max_ms, "ms", "largest inter-token gap");
    std::vector<double> c = concurrency_at_arrivals(o.spans_ms);
    show("admission.max_concurrent", l.max_concurrent, false, c, "", "in flight at arrival");
    std::string queue = spread(o.queue_ms, "ms");
    line(out, "(queue wait)", "", "queue_ms: " + queue);
  }
  return out;
}

}  // namespace cutline::tools
