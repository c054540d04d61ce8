#include "cutline/proto/wire/stop_record.h"

#include <simdjson.h>
#include <array>
#include <charconv>
#include <cmath>

namespace cutline::proto {
namespace {

struct CauseInfo {
  std::string_view name;
  Origin origin;
};

// Indexed by Cause; the order must match the enum.
constexpr std::array<CauseInfo, kCauseCount> kCauses = {{
    {"eos", Origin::kModel},
    {"stop_sequence", Origin::kModel},
    {"client_max_tokens", Origin::kClient},
    {"gateway_budget", Origin::kGateway},
    {"gateway_deadline", Origin::kGateway},
    {"gateway_ttft_timeout", Origin::kGateway},
    {"gateway_idle_timeout", Origin::kGateway},
    {"admission_rejected", Origin::kGateway},
    {"client_cancel", Origin::kClient},
    {"backend_preempted", Origin::kBackend},
    {"backend_oom", Origin::kBackend},
    {"context_length", Origin::kBackend},
    {"upstream_error", Origin::kUpstream},
    {"upstream_disconnect", Origin::kTransport},
    {"content_filter", Origin::kModel},
    {"invalid_request", Origin::kClient},
    {"policy_denied", Origin::kPolicy},
}};

constexpr std::array<std::string_view, kOriginCount> kOrigins = {
    "model", "client", "gateway", "backend", "upstream", "transport", "policy"};

Error field_error(std::string_view field, std::string_view what) {
  std::string msg = "cutline stop record: field \"";
  msg.append(field).append("\" ").append(what);
  return make_error(ErrorKind::kBadRequest, std::move(msg));
}

// Replaces characters that would break the header form.
void append_header_token(std::string& out, std::string_view s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back((u < 0x21 || u == 0x7f || c == ';' || c == ',' || c == '=') ? '_' : c);
  }
}

void append_number(std::string& out, double d) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  out.append(buf, r.ptr);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<double> parse_double(std::string_view s) {
  double d = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), d);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return d;
}

}  // namespace

std::string_view to_string(Cause cause) { return kCauses[static_cast<size_t>(cause)].name; }
std::string_view to_string(Origin origin) { return kOrigins[static_cast<size_t>(origin)]; }

std::optional<Cause> parse_cause(std::string_view name) {
  for (size_t i = 0; i < kCauses.size(); ++i) {
    if (kCauses[i].name == name) return static_cast<Cause>(i);
  }
  return std::nullopt;
}

Cause cause_at(int index) { return static_cast<Cause>(index); }

Origin origin_of(Cause cause) { return kCauses[static_cast<size_t>(cause)].origin; }

bool is_truncated(Cause cause) { return cause != Cause::kEos && cause != Cause::kStopSequence; }

bool is_serving_cut(Cause cause) {
  return is_truncated(cause) && cause != Cause::kClientMaxTokens &&
         cause != Cause::kContentFilter && cause != Cause::kInvalidRequest &&
         cause != Cause::kPolicyDenied;
}

std::string_view default_finish_reason(Cause cause) {
  if (cause == Cause::kContentFilter) return "content_filter";
  return is_truncated(cause) ? "length" : "stop";
}

std::string_view to_string(CountMethod method) {
  switch (method) {
    case CountMethod::kUsage:
      return "usage";
    case CountMethod::kChunks:
      return "chunks";
    case CountMethod::kEngine:
      return "engine";
  }
  return "usage";
}

std::optional<CountMethod> parse_count_method(std::string_view name) {
  if (name == "usage") return CountMethod::kUsage;
  if (name == "chunks") return CountMethod::kChunks;
  if (name == "engine") return CountMethod::kEngine;
  return std::nullopt;
}

void write_stop_record(base::JsonWriter& w, const StopRecord& rec) {
  w.begin_object();
  w.field("v", StopRecord::kVersion);
  w.field("cause", to_string(rec.cause));
  w.field("origin", to_string(rec.origin()));
  w.field("truncated", rec.truncated());
  w.field("serving_cut", is_serving_cut(rec.cause));
  if (!rec.reporter.empty()) w.field("reporter", rec.reporter);
  if (!rec.message.empty()) w.field("message", rec.message);
  if (!rec.request_id.empty()) w.field("request_id", rec.request_id);
  if (!rec.policy.empty()) w.field("policy", rec.policy);
  if (!rec.rule.empty()) w.field("rule", rec.rule);
  w.optional_field("limit", rec.limit);
  w.optional_field("observed", rec.observed);
  if (!rec.unit.empty()) w.field("unit", rec.unit);
  w.optional_field("requested_max_tokens", rec.requested_max_tokens);
  w.optional_field("effective_max_tokens", rec.effective_max_tokens);
  w.optional_field("input_tokens", rec.input_tokens);
  w.field("output_tokens", rec.output_tokens);
  w.field("count_method", to_string(rec.count_method));
  w.optional_field("queue_ms", rec.queue_ms);
  w.optional_field("ttft_ms", rec.ttft_ms);
  w.optional_field("itl_mean_ms", rec.itl_mean_ms);
  w.optional_field("itl_max_ms", rec.itl_max_ms);
  w.optional_field("duration_ms", rec.duration_ms);
  w.optional_field("preemptions", rec.preemptions);
  w.optional_field("kv_bytes_peak", rec.kv_bytes_peak);
  w.optional_field("device_free_bytes", rec.device_free_bytes);
  if (rec.phases) {
    w.key("phases").begin_object();
    w.field("queue", rec.phases->queue_ms);
    w.field("load", rec.phases->load_ms);
    w.field("warmup", rec.phases->warmup_ms);
    w.field("prefill", rec.phases->prefill_ms);
    w.field("first_decode", rec.phases->first_decode_ms);
    w.end_object();
  }
  if (!rec.model_state.empty()) w.field("model_state", rec.model_state);
  if (rec.upstream_cause) w.field("upstream_cause", to_string(*rec.upstream_cause));
  w.optional_field("attempts", rec.attempts);
  if (!rec.endpoints.empty()) {
    w.key("endpoints").begin_array();
    for (const auto& e : rec.endpoints) w.value(e);
    w.end_array();
  }
  w.optional_field("routed_cold", rec.routed_cold);
  if (!rec.would_cut.empty()) {
    w.key("would_cut").begin_array();
    for (const WouldCut& c : rec.would_cut) {
      w.begin_object();
      w.field("cause", to_string(c.cause));
      if (!c.rule.empty()) w.field("rule", c.rule);
      w.field("limit", c.limit).field("observed", c.observed);
      if (!c.unit.empty()) w.field("unit", c.unit);
      w.field("at_token", c.at_token).field("tokens_after", c.tokens_after);
      w.end_object();
    }
    w.end_array();
  }
  w.end_object();
}

std::string stop_record_json(const StopRecord& rec) {
  std::string out;
  out.reserve(512);
  base::JsonWriter w(out);
  write_stop_record(w, rec);
  return out;
}

namespace {

namespace od = simdjson::ondemand;

std::optional<double> json_double(od::value v) {
  double d;
  if (v.get_double().get(d) != simdjson::SUCCESS) return std::nullopt;
  return d;
}

std::optional<int64_t> json_int(od::value v) {
  int64_t n;
  if (v.get_int64().get(n) == simdjson::SUCCESS) return n;
  // Tolerate 12.0 from other writers, but only integral values int64 can hold (a cast of 1e101
  // would be undefined behaviour).
  double d;
  if (v.get_double().get(d) != simdjson::SUCCESS) return std::nullopt;
  if (!(d >= -9.2e18 && d <= 9.2e18) || d != std::trunc(d)) return std::nullopt;
  return static_cast<int64_t>(d);
}

std::optional<std::string> json_string(od::value v) {
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) return std::nullopt;
  return std::string(s);
}

// "phases": {"queue": ms, "load": ms, "warmup": ms, "prefill": ms, "first_decode": ms}.
Result<TtftPhases> parse_phases(od::value v) {
  od::object p;
  if (v.get_object().get(p) != simdjson::SUCCESS) return field_error("phases", "must be an object");
  TtftPhases ph;
  for (auto pf : p) {
    std::string_view pk;
    double d;
    if (pf.unescaped_key().get(pk) != simdjson::SUCCESS ||
        pf.value().get_double().get(d) != simdjson::SUCCESS) {
      return field_error("phases", "must hold numbers");
    }
    if (pk == "queue")
      ph.queue_ms = d;
    else if (pk == "load")
      ph.load_ms = d;
    else if (pk == "warmup")
      ph.warmup_ms = d;
    else if (pk == "prefill")
      ph.prefill_ms = d;
    else if (pk == "first_decode")
      ph.first_decode_ms = d;
  }
  return ph;
}

Status parse_endpoints(od::value v, std::vector<std::string>& out) {
  od::array a;
  if (v.get_array().get(a) != simdjson::SUCCESS)
    return field_error("endpoints", "must be an array of strings");
  for (auto item : a) {
    std::string_view e;
    if (item.get_string().get(e) != simdjson::SUCCESS)
      return field_error("endpoints", "must be an array of strings");
    out.emplace_back(e);
  }
  return {};
}

// One "would_cut" entry: {cause, rule, unit, limit, observed, at_token, tokens_after}.
Result<WouldCut> parse_would_cut_entry(od::object o) {
  WouldCut c;
  bool have = false;
  for (auto wf : o) {
    std::string_view wk;
    od::value wv;
    if (wf.unescaped_key().get(wk) != simdjson::SUCCESS ||
        wf.value().get(wv) != simdjson::SUCCESS) {
      return field_error("would_cut", "has a bad entry");
    }
    if (wk == "cause") {
      auto x = json_string(wv);
      auto cause = x ? parse_cause(*x) : std::nullopt;
      if (!cause) return field_error("would_cut.cause", "is not a known stop cause");
      c.cause = *cause;
      have = true;
    } else if (wk == "rule" || wk == "unit") {
      auto x = json_string(wv);
      if (!x)
        return field_error(wk == "rule" ? "would_cut.rule" : "would_cut.unit", "must be a string");
      (wk == "rule" ? c.rule : c.unit) = std::move(*x);
    } else if (wk == "limit" || wk == "observed") {
      auto x = json_double(wv);
      if (!x)
        return field_error(wk == "limit" ? "would_cut.limit" : "would_cut.observed",
                           "must be a number");
      (wk == "limit" ? c.limit : c.observed) = *x;
    } else if (wk == "at_token" || wk == "tokens_after") {
      auto x = json_int(wv);
      if (!x)
        return field_error(wk == "at_token" ? "would_cut.at_token" : "would_cut.tokens_after",
                           "must be an integer");
      (wk == "at_token" ? c.at_token : c.tokens_after) = *x;
    }
  }
  if (!have) return field_error("would_cut.cause", "is missing");
  return c;
}

Status parse_would_cut(od::value v, std::vector<WouldCut>& out) {
  od::array a;
  if (v.get_array().get(a) != simdjson::SUCCESS)
    return field_error("would_cut", "must be an array of objects");
  for (auto item : a) {
    od::object o;
    if (item.get_object().get(o) != simdjson::SUCCESS)
      return field_error("would_cut", "must be an array of objects");
    auto c = parse_would_cut_entry(o);
    if (!c.ok()) return std::move(c).error();
    out.push_back(std::move(c).value());
  }
  return {};
}

// The record's plain number and string fields: true when `key` is one of them (and was read).
Result<bool> parse_plain_field(std::string_view key, od::value v, StopRecord& rec) {
#define CUTLINE_NUM(name, getter)                        \
  if (key == #name) {                                    \
    auto x = getter(v);                                  \
    if (!x) return field_error(key, "must be a number"); \
    rec.name = *x;                                       \
    return true;                                         \
  }
#define CUTLINE_STR(name)                                \
  if (key == #name) {                                    \
    auto x = json_string(v);                             \
    if (!x) return field_error(key, "must be a string"); \
    rec.name = std::move(*x);                            \
    return true;                                         \
  }
  CUTLINE_NUM(attempts, json_int)
  CUTLINE_STR(reporter)
  CUTLINE_STR(message)
  CUTLINE_STR(request_id)
  CUTLINE_STR(policy)
  CUTLINE_STR(rule)
  CUTLINE_STR(unit)
  CUTLINE_STR(model_state)
  CUTLINE_NUM(limit, json_double)
  CUTLINE_NUM(observed, json_double)
  CUTLINE_NUM(requested_max_tokens, json_int)
  CUTLINE_NUM(effective_max_tokens, json_int)
  CUTLINE_NUM(input_tokens, json_int)
  CUTLINE_NUM(output_tokens, json_int)
  CUTLINE_NUM(queue_ms, json_double)
  CUTLINE_NUM(ttft_ms, json_double)
  CUTLINE_NUM(itl_mean_ms, json_double)
  CUTLINE_NUM(itl_max_ms, json_double)
  CUTLINE_NUM(duration_ms, json_double)
  CUTLINE_NUM(preemptions, json_int)
  CUTLINE_NUM(kv_bytes_peak, json_int)
  CUTLINE_NUM(device_free_bytes, json_int)
#undef CUTLINE_NUM
#undef CUTLINE_STR
  return false;
}

}  // namespace

Result<StopRecord> parse_stop_record(simdjson::ondemand::object& obj) {
  StopRecord rec;
  bool have_version = false;
  bool have_cause = false;
  for (auto field : obj) {
    std::string_view key;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS)
      return field_error("?", "has a bad key");
    od::value v;
    if (field.value().get(v) != simdjson::SUCCESS) return field_error(key, "has a bad value");
    if (key == "v") {
      auto x = json_int(v);
      if (!x || *x != StopRecord::kVersion) return field_error(key, "must be 1");
      have_version = true;
    } else if (key == "cause" || key == "upstream_cause") {
      auto x = json_string(v);
      auto c = x ? parse_cause(*x) : std::nullopt;
      if (!c) return field_error(key, "is not a known stop cause");
      if (key == "cause") {
        rec.cause = *c;
        have_cause = true;
      } else {
        rec.upstream_cause = *c;
      }
    } else if (key == "count_method") {
      auto x = json_string(v);
      auto m = x ? parse_count_method(*x) : std::nullopt;
      if (!m) return field_error(key, "must be usage, chunks or engine");
      rec.count_method = *m;
    } else if (key == "phases") {
      auto ph = parse_phases(v);
      if (!ph.ok()) return std::move(ph).error();
      rec.phases = *ph;
    } else if (key == "endpoints") {
      if (Status s = parse_endpoints(v, rec.endpoints); !s.ok()) return std::move(s).error();
    } else if (key == "would_cut") {
      if (Status s = parse_would_cut(v, rec.would_cut); !s.ok()) return std::move(s).error();
    } else if (key == "routed_cold") {
      bool b = false;
      if (v.get_bool().get(b) != simdjson::SUCCESS) return field_error(key, "must be a boolean");
      rec.routed_cold = b;
    } else {
      // origin, truncated, serving_cut are derived from cause; unknown keys are ignored.
      auto plain = parse_plain_field(key, v, rec);
      if (!plain.ok()) return std::move(plain).error();
    }
  }
  if (!have_version) return field_error("v", "is missing");
  if (!have_cause) return field_error("cause", "is missing");
  return rec;
}

Result<StopRecord> parse_stop_record(std::string_view json) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(json);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) {
    return make_error(ErrorKind::kBadRequest, "cutline stop record: not JSON");
  }
  simdjson::ondemand::object obj;
  if (doc.get_object().get(obj) != simdjson::SUCCESS) {
    return make_error(ErrorKind::kBadRequest, "cutline stop record: not a JSON object");
  }
  return parse_stop_record(obj);
}

std::string stop_header_value(const StopRecord& rec) {
  std::string out;
  out.reserve(160);
  out.append("cause=").append(to_string(rec.cause));
  out.append("; origin=").append(to_string(rec.origin()));
  out.append("; truncated=").append(rec.truncated() ? "true" : "false");
  if (!rec.policy.empty()) {
    out.append("; policy=");
    append_header_token(out, rec.policy);
  }
  if (!rec.rule.empty()) {
    out.append("; rule=");
    append_header_token(out, rec.rule);
  }
  if (rec.limit) {
    out.append("; limit=");
    append_number(out, *rec.limit);
  }
  if (rec.observed) {
    out.append("; observed=");
    append_number(out, *rec.observed);
  }
  if (!rec.unit.empty()) {
    out.append("; unit=");
    append_header_token(out, rec.unit);
  }
  out.append("; output_tokens=");
  append_number(out, static_cast<double>(rec.output_tokens));
  return out;
}

Result<StopRecord> parse_stop_header(std::string_view value) {
  StopRecord rec;
  bool have_cause = false;
  while (!value.empty()) {
    size_t semi = value.find(';');
    std::string_view item = trim(value.substr(0, semi));
    value = semi == std::string_view::npos ? std::string_view() : value.substr(semi + 1);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) return field_error(item, "has no '=' in the header form");
    std::string_view k = trim(item.substr(0, eq));
    std::string_view v = trim(item.substr(eq + 1));
    if (k == "cause") {
      auto c = parse_cause(v);
      if (!c) return field_error(k, "is not a known stop cause");
      rec.cause = *c;
      have_cause = true;
    } else if (k == "policy") {
      rec.policy = std::string(v);
    } else if (k == "rule") {
      rec.rule = std::string(v);
    } else if (k == "unit") {
      rec.unit = std::string(v);
    } else if (k == "limit" || k == "observed" || k == "output_tokens") {
      auto d = parse_double(v);
      if (!d) return field_error(k, "must be a number");
      if (k == "limit")
        rec.limit = *d;
      else if (k == "observed")
        rec.observed = *d;
      else
        rec.output_tokens = static_cast<int64_t>(*d);
    }
  }
  if (!have_cause) return field_error("cause", "is missing");
  return rec;
}

}  // namespace cutline::proto
