// `cutline policy check FILE`, `cutline policy explain FILE --request REQ.json ...`,
// `cutline policy diff OLD NEW` and `cutline policy advise ACCESS_LOG` (advise.h).
//   check:   prints every error (exit 1) or a summary of the policy (exit 0), after its
//            warnings (parts of the file no request can reach; still exit 0).
//   explain: prints the Decision for an OpenAI request body, each number with the rule and YAML
//            line that produced it (exit 0; exit 4 when no rule matches: the gateway would
//            refuse it), or the policy's errors (exit 1). The route is inferred from the body
//            (infer_route) unless --route names it.
//   schema:  prints the policy file's JSON Schema (json_schema.h) for editors.
//   diff:    what changes from OLD to NEW for which tenants and routes, in explain's words
//            (exit 0), or the errors of either file (exit 1).
// check and explain take --format json for pipelines: one JSON object on stdout, errors
// included ({"ok": false, "errors": [...]}), and warnings ({"warnings": [...]}, empty when
// there are errors).
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "cutline/base/json_writer.h"
#include "cutline/cli/cli.h"
#include "cutline/policy/api_key.h"
#include "cutline/policy/decision.h"
#include "cutline/policy/diff.h"
#include "cutline/policy/explain.h"
#include "cutline/policy/json_schema.h"
#include "cutline/policy/loader.h"
#include "cutline/policy/policy_json.h"
#include "cutline/tools/policy/advise.h"

namespace cutline::tools {

namespace {

using namespace cutline::policy;

enum class Format { kText, kJson };

// `explain`: no rule matches the request, so the gateway would refuse it.
constexpr int kExitNoRule = 4;

// One JSON document on stdout, with its newline.
void print_json(const std::string& json) {
  std::fputs(json.c_str(), stdout);
  std::fputc('\n', stdout);
}

// --format text|json (either case) into `format`; the help reads "--format text|json".
void add_format_option(CLI::App& cmd, Format& format, const std::string& description) {
  auto lower = [](std::string v) {
    for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return v;
  };
  cmd.add_option_function<std::string>(
         "--format",
         [&format, lower](const std::string& v) {
           format = lower(v) == "json" ? Format::kJson : Format::kText;
         },
         description)
      ->type_name("text|json")
      ->check([lower](const std::string& v) {
        const std::string l = lower(v);
        return l == "text" || l == "json" ? std::string() : "want text or json, got '" + v + "'";
      });
}

// {"ok": false, "file": F, "errors": [...], "warnings": []}.
void print_errors_json(const std::string& file, const LoadResult& r) {
  std::string out;
  base::JsonWriter w(out);
  w.begin_object().field("ok", false).field("file", file).key("errors");
  write_diagnostics_json(w, r.errors);
  w.key("warnings");
  write_diagnostics_json(w, r.warnings);
  w.end_object();
  print_json(out);
}

bool print_errors(const LoadResult& r) {
  if (r.ok()) return false;
  std::fputs(r.error_text().c_str(), stderr);
  std::fprintf(stderr, "%zu error%s\n", r.errors.size(), r.errors.size() == 1 ? "" : "s");
  return true;
}

// Warnings on stderr, as errors are, with their count; the check still passes.
void print_warnings(const LoadResult& r) {
  if (r.warnings.empty()) return;
  std::fputs(r.warning_text().c_str(), stderr);
  std::fprintf(stderr, "%zu warning%s\n", r.warnings.size(), r.warnings.size() == 1 ? "" : "s");
}

struct RequestBody {
  std::string model;
  std::optional<int64_t> max_tokens;
  bool has_messages = false;
  bool has_prompt = false;
  bool has_input = false;
  // "input" is a list holding objects (Responses API items) / numbers or lists (token ids).
  bool input_has_items = false;
  bool input_has_tokens = false;
  bool embeddings_fields = false;  // encoding_format, dimensions: only embeddings take these
  bool responses_fields = false;   // instructions, tools, previous_response_id, reasoning, ...
};

// The route a body was meant for, as the OpenAI SDKs send it, and why; --route overrides.
//   messages -> /v1/chat/completions; prompt -> /v1/completions; input -> /v1/embeddings when
//   the body says so (encoding_format or dimensions, token-id input, or a model named *embed*
//   with none of the Responses API's own fields), else /v1/responses.
std::pair<std::string, std::string> infer_route(const RequestBody& b) {
  if (b.has_messages) return {"/v1/chat/completions", "the body has \"messages\""};
  if (b.has_prompt) return {"/v1/completions", "the body has \"prompt\""};
  if (!b.has_input) return {"/v1/completions", "the body has no messages, prompt or input"};
  if (b.embeddings_fields) return {"/v1/embeddings", "\"input\" with encoding_format/dimensions"};
  if (b.input_has_items || b.responses_fields) {
    return {"/v1/responses", "\"input\" with Responses API items or fields"};
  }
  if (b.input_has_tokens) return {"/v1/embeddings", "\"input\" of token ids"};
  std::string model = b.model;
  for (char& c : model) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (model.find("embed") != std::string::npos) {
    return {"/v1/embeddings", "\"input\" and an embedding model"};
  }
  return {"/v1/responses", "the body has \"input\""};
}

// What the "input" value holds: Responses API items (objects) or token ids (numbers, lists).
void read_input_kind(simdjson::ondemand::value value, RequestBody& body) {
  simdjson::ondemand::array items;
  if (value.get_array().get(items)) return;
  for (auto item : items) {
    simdjson::ondemand::json_type type;
    if (item.type().get(type)) return;
    if (type == simdjson::ondemand::json_type::object) body.input_has_items = true;
    if (type == simdjson::ondemand::json_type::number ||
        type == simdjson::ondemand::json_type::array) {
      body.input_has_tokens = true;
    }
  }
}

// Reads model and max_tokens / max_completion_tokens from an OpenAI request body.
std::optional<RequestBody> read_request(const char* path, std::string& error) {
  simdjson::padded_string json;
  if (simdjson::padded_string::load(path).get(json)) {
    error = std::string("cannot read ") + path;
    return std::nullopt;
  }
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object obj;
  if (parser.iterate(json).get(doc) || doc.get_object().get(obj)) {
    error = std::string(path) + ": not a JSON object";
    return std::nullopt;
  }
  RequestBody body;
  bool have_model = false;
  for (auto field : obj) {
    std::string_view key;
    if (field.unescaped_key().get(key)) {
      error = std::string(path) + ": malformed JSON";
      return std::nullopt;
    }
    if (key == "model") {
      std::string_view model;
      if (field.value().get_string().get(model)) {
        error = std::string(path) + ": \"model\" must be a string";
        return std::nullopt;
      }
      body.model = std::string(model);
      have_model = true;
    } else if (key == "max_tokens" || key == "max_completion_tokens" ||
               key == "max_output_tokens") {
      int64_t v = 0;
      if (field.value().get_int64().get(v) || v <= 0) {
        error = std::string(path) + ": \"" + std::string(key) + "\" must be a positive integer";
        return std::nullopt;
      }
      if (!body.max_tokens || v < *body.max_tokens) body.max_tokens = v;
      if (key == "max_output_tokens") body.responses_fields = true;
    } else if (key == "messages") {
      body.has_messages = true;  // the value is skipped by the iteration
    } else if (key == "prompt") {
      body.has_prompt = true;
    } else if (key == "input") {
      body.has_input = true;
      read_input_kind(field.value(), body);
    } else if (key == "encoding_format" || key == "dimensions") {
      body.embeddings_fields = true;
    } else if (key == "instructions" || key == "tools" || key == "previous_response_id" ||
               key == "reasoning" || key == "text" || key == "store" || key == "stream" ||
               key == "include" || key == "conversation") {
      body.responses_fields = true;
    }
  }
  if (!have_model) {
    error = std::string(path) + ": missing \"model\"";
    return std::nullopt;
  }
  return body;
}

int run_check(const std::string& file, Format format) {
  LoadResult r = load_policy_file(file);
  if (format == Format::kJson) {
    if (!r.ok()) {
      print_errors_json(file, r);
      return 1;
    }
    std::string out;
    base::JsonWriter w(out);
    w.begin_object().field("ok", true).field("file", file).key("policy");
    write_policy_json(w, *r.policy);
    w.key("warnings");
    write_diagnostics_json(w, r.warnings);
    w.end_object();
    print_json(out);
    return 0;
  }
  if (print_errors(r)) return 1;
  print_warnings(r);
  std::fputs(summarize(*r.policy).c_str(), stdout);
  return 0;
}

int run_diff(const std::string& before_file, const std::string& after_file) {
  LoadResult before = load_policy_file(before_file);
  LoadResult after = load_policy_file(after_file);
  const bool bad_before = print_errors(before);
  const bool bad_after = print_errors(after);
  if (bad_before || bad_after) return 1;
  std::printf("--- %s\n+++ %s\n", before_file.c_str(), after_file.c_str());
  std::fputs(diff(*before.policy, *after.policy).c_str(), stdout);
  return 0;
}

// "1%", "0.5%" or a fraction "0.01": the share of traffic a proposal may cut, in (0, 0.5].
std::optional<double> parse_rate(std::string_view text) {
  bool percent = false;
  if (!text.empty() && text.back() == '%') {
    percent = true;
    text.remove_suffix(1);
  }
  if (text.empty()) return std::nullopt;
  std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !(v > 0)) return std::nullopt;
  const double rate = percent ? v / 100.0 : v;
  if (!(rate > 0 && rate <= 0.5)) return std::nullopt;
  return rate;
}

int run_advise(const std::string& log_file, double target, const std::string& policy_file) {
  std::FILE* f = std::fopen(log_file.c_str(), "rb");
  if (!f) {
    std::fprintf(stderr, "cutline policy advise: cannot read %s\n", log_file.c_str());
    return 2;
  }
  std::string text;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  auto in = read_access_log(text);
  if (!in.ok()) {
    std::fprintf(stderr, "cutline policy advise: %s: %s\n", log_file.c_str(),
                 in.error().message.c_str());
    return 2;
  }
  std::fputs(render_advice(*in, target).c_str(), stdout);
  if (policy_file.empty()) return 0;
  LoadResult r = load_policy_file(policy_file);
  if (print_errors(r)) return 1;
  // Each rule gets the largest proposal over its models (none of them cut beyond the target).
  Policy proposed = *r.policy;
  for (auto& [key, observed] : in->groups) {
    Rule* rule = nullptr;
    for (Rule& candidate : proposed.rules) {
      if (candidate.name == key.first) rule = &candidate;
    }
    if (!rule) continue;
    const Proposal l = propose(observed, target);
    auto raise = [&](std::optional<Limit>& slot, const std::optional<int64_t>& v,
                     std::string_view key_path) {
      if (!v) return;
      if (slot && slot->ref.line < 0 && slot->value >= *v) return;
      slot = Limit{*v, YamlRef{rule->ref.path + "." + std::string(key_path), -1, 0}};
    };
    raise(rule->budget.max_output_tokens, l.max_output_tokens, "budget.max_output_tokens");
    raise(rule->deadline_ms, l.deadline_ms, "deadline");
    raise(rule->ttft_timeout_ms, l.ttft_timeout_ms, "ttft_timeout");
    raise(rule->idle_timeout_ms, l.idle_timeout_ms, "idle_timeout");
    raise(rule->admission.max_concurrent, l.max_concurrent, "admission.max_concurrent");
  }
  int64_t few = 0;
  for (const auto& [key, observed] : in->groups) {
    few += static_cast<int64_t>(observed.duration_ms.size()) < kMinSample;
  }
  if (few > 0) {
    std::printf(
        "\nwarning: %lld policy and model group(s) measured fewer than %lld requests: "
        "their proposals are noise\n",
        static_cast<long long>(few), static_cast<long long>(kMinSample));
  }
  std::printf("\n--- %s\n+++ proposed\n", policy_file.c_str());
  std::fputs(diff(*r.policy, proposed).c_str(), stdout);
  return 0;
}

// What `explain` is asked about: the request, who sends it, and the live state to assume.
struct ExplainArgs {
  std::string file;
  std::string request_path;
  std::string tenant;
  std::optional<std::string> api_key;
  std::string route;
  LiveState live;
  std::optional<int64_t> deadline_ms;
  std::vector<std::pair<std::string, std::string>> headers;
  Format format = Format::kText;
};

// The tenant the request is explained for: the one --api-key authenticates, or --tenant checked
// against the policy. False (the reason on stderr) when there is none the gateway would accept.
bool resolve_tenant(const Policy& policy, const std::optional<std::string>& api_key,
                    std::string& tenant) {
  if (api_key) {
    const Tenant* t = authenticate(policy, *api_key);
    if (!t) {
      std::fprintf(stderr, "cutline policy explain: the API key belongs to no tenant (401)\n");
      return false;
    }
    tenant = t->name;
  } else if (!tenant.empty() && !policy.find_tenant(tenant)) {
    std::fprintf(stderr, "cutline policy explain: unknown tenant \"%s\" (401)\n", tenant.c_str());
    return false;
  } else if (tenant.empty() && policy.requires_auth()) {
    std::fprintf(stderr,
                 "cutline policy explain: this policy authenticates clients; pass --tenant T or "
                 "--api-key KEY\n");
    return false;
  }
  return true;
}

// explain --format json: {ok, file, request, decision, upstream}.
void print_explain_json(const std::string& file, const Policy& policy, const std::string& tenant,
                        const std::string& model, const std::string& route, const Decision& d) {
  std::string out;
  base::JsonWriter w(out);
  w.begin_object().field("ok", true).field("file", file);
  w.key("request")
      .begin_object()
      .field("tenant", tenant)
      .field("model", model)
      .field("route", route)
      .end_object();
  w.key("decision");
  write_decision_json(w, d);
  w.key("upstream");
  const Upstream* up = d.matched ? policy.route(*d.rule, model) : nullptr;
  if (up) {
    w.begin_object().field("name", up->name).field("url", up->url).end_object();
  } else {
    w.null();
  }
  w.end_object();
  print_json(out);
}

int run_explain(const ExplainArgs& args) {
  const std::string& file = args.file;
  const char* request_path = args.request_path.c_str();
  std::string tenant = args.tenant;
  const std::optional<std::string>& api_key = args.api_key;
  std::string route = args.route;
  const LiveState& live = args.live;
  const std::optional<int64_t>& deadline_ms = args.deadline_ms;
  const auto& headers = args.headers;

  LoadResult r = load_policy_file(file);
  if (args.format == Format::kJson && !r.ok()) {
    print_errors_json(file, r);
    return 1;
  }
  if (print_errors(r)) return 1;
  const Policy& policy = *r.policy;

  std::string error;
  auto body = read_request(request_path, error);
  if (!body) {
    std::fprintf(stderr, "cutline policy explain: %s\n", error.c_str());
    return 1;
  }
  if (!resolve_tenant(policy, api_key, tenant)) return 1;
  std::string inferred_from;
  if (route.empty()) std::tie(route, inferred_from) = infer_route(*body);

  RequestFacts facts;
  facts.tenant = tenant;
  facts.model = body->model;
  facts.route = route;
  facts.client_max_tokens = body->max_tokens;
  facts.client_deadline_ms = deadline_ms;
  facts.header = [&headers](std::string_view name) -> std::optional<std::string_view> {
    for (const auto& [n, v] : headers) {
      if (n == name) return std::string_view(v);
    }
    return std::nullopt;
  };
  Decision d = decide(policy, facts, live);
  // The gateway refuses a request no rule matches: a script sees it in the exit status.
  const int rc = d.matched ? 0 : kExitNoRule;
  if (args.format == Format::kJson) {
    print_explain_json(file, policy, tenant, body->model, route, d);
    return rc;
  }
  std::printf(
      "request: tenant \"%s\", model \"%s\", route %s%s\n", tenant.c_str(), body->model.c_str(),
      route.c_str(),
      inferred_from.empty() ? "" : (" (" + inferred_from + "; --route to override)").c_str());
  std::fputs(explain(d).c_str(), stdout);
  if (d.matched) {
    const Rule& rule = *d.rule;
    const Upstream* up = policy.route(rule, body->model);
    std::printf("upstream: %s\n", up ? (up->name + " " + up->url).c_str()
                                     : "none serves this model (the gateway answers 404)");
  }
  return rc;
}

// `cutline policy explain` and its options, parsed into `ex` (--header into `header_args`).
void add_explain_command(CLI::App& app, ExplainArgs& ex, std::vector<std::string>& header_args) {
  CLI::App* explain = cli::add_command(
      app, "explain",
      "Print the decision for an OpenAI request body, each number with the rule and YAML line "
      "behind it (exit 4 when no rule matches it: the gateway would refuse it)");
  explain->add_option("FILE", ex.file, "Policy file (YAML)")->required()->check(cli::kReadableFile);
  explain->add_option("--request", ex.request_path, "OpenAI request body (JSON)")
      ->required()
      ->check(cli::kReadableFile);
  CLI::Option* tenant_opt = explain->add_option("--tenant", ex.tenant, "Tenant name");
  explain
      ->add_option_function<std::string>(
          "--api-key", [&ex](const std::string& k) { ex.api_key = k; },
          "API key: the tenant it authenticates")
      ->excludes(tenant_opt);
  add_format_option(*explain, ex.format,
                    "text (default) or json: {ok, file, request, decision, upstream}");
  explain->add_option("--route", ex.route,
                      "Route (default: from the body: messages -> /v1/chat/completions, prompt "
                      "-> /v1/completions, input -> /v1/responses or, with encoding_format, "
                      "dimensions, token ids or an *embed* model, /v1/embeddings)");
  explain->add_option("--queue-depth", ex.live.queue_depth, "Queue depth to assume")
      ->check(CLI::NonNegativeNumber);
  explain->add_option("--in-flight", ex.live.in_flight, "Requests in flight to assume")
      ->check(CLI::NonNegativeNumber);
  explain
      ->add_option_function<int64_t>(
          "--deadline-ms", [&ex](const int64_t& ms) { ex.deadline_ms = ms; },
          "The client's own deadline in ms")
      ->check(CLI::PositiveNumber);
  explain
      ->add_option("--header", header_args,
                   "A request header NAME:VALUE (repeatable), for rules that match on headers")
      ->type_name("NAME:VALUE")
      ->allow_extra_args(false)
      ->check([](const std::string& h) {
        return h.find(':') == std::string::npos ? std::string("want NAME:VALUE, got '") + h + "'"
                                                : std::string();
      });
}

// --header NAME:VALUE arguments as (lower-case name, value without leading spaces).
std::vector<std::pair<std::string, std::string>> parse_headers(
    const std::vector<std::string>& header_args) {
  std::vector<std::pair<std::string, std::string>> out;
  for (std::string_view h : header_args) {
    size_t colon = h.find(':');
    std::string name(h.substr(0, colon));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string_view val = h.substr(colon + 1);
    while (!val.empty() && val.front() == ' ') val.remove_prefix(1);
    out.emplace_back(std::move(name), std::string(val));
  }
  return out;
}

}  // namespace

int run_policy(int argc, char** argv) {
  // argv[0] is "policy".
  auto app = cli::make_app("cutline policy", "Validate a policy file and explain its decisions.");
  app->require_subcommand(1);

  std::string check_file;
  Format check_format = Format::kText;
  CLI::App* check = cli::add_command(
      *app, "check",
      "Validate FILE: every error with its line and column (exit 1), or its warnings (what no "
      "request can reach) and a summary");
  check->add_option("FILE", check_file, "Policy file (YAML)")
      ->required()
      ->check(cli::kReadableFile);
  add_format_option(*check, check_format,
                    "text (default) or json: {ok, file, policy, warnings} or {ok: false, "
                    "errors, warnings}, each diagnostic {file, line, column, path, message}");

  std::string diff_before;
  std::string diff_after;
  CLI::App* diff_cmd = cli::add_command(
      *app, "diff",
      "What changes from OLD to NEW for which tenants and routes, in explain's words");
  diff_cmd->add_option("OLD", diff_before, "The policy in force (YAML)")
      ->required()
      ->check(cli::kReadableFile);
  diff_cmd->add_option("NEW", diff_after, "The edited policy (YAML)")
      ->required()
      ->check(cli::kReadableFile);

  std::string advise_log;
  std::string advise_rate = "1%";
  std::string advise_policy;
  CLI::App* advise = cli::add_command(
      *app, "advise",
      "Propose budgets, deadlines, TTFT and idle timeouts and admission limits from a gateway "
      "access log, each cutting at most the target share of the traffic it saw");
  advise->add_option("ACCESS_LOG", advise_log, "The gateway's access log (JSON lines)")
      ->required()
      ->check(cli::kReadableFile);
  advise
      ->add_option("--target-cut-rate", advise_rate,
                   "Most traffic a proposed limit may cut: 1% (default), 0.5%, or 0.01")
      ->check([](const std::string& v) {
        return parse_rate(v) ? std::string()
                             : "want a share in (0, 50%], e.g. 1% or 0.01, got '" + v + "'";
      });
  advise
      ->add_option("--policy", advise_policy,
                   "The policy in force: also print what the proposal changes (policy diff)")
      ->check(cli::kReadableFile);

  ExplainArgs ex;
  std::vector<std::string> header_args;
  add_explain_command(*app, ex, header_args);

  // Rendered from the table the loader checks keys against (keys.h).
  CLI::App* schema = cli::add_command(
      *app, "schema",
      "Print the policy file's JSON Schema (draft-07) for editors: keys, types, enum values, "
      "defaults, descriptions (deploy/policy.schema.json)");

  if (auto rc = cli::parse(*app, argc, argv)) return *rc;
  if (check->parsed()) return run_check(check_file, check_format);
  if (schema->parsed()) {
    std::fputs(policy_json_schema().c_str(), stdout);
    return 0;
  }
  if (diff_cmd->parsed()) return run_diff(diff_before, diff_after);
  if (advise->parsed()) return run_advise(advise_log, *parse_rate(advise_rate), advise_policy);
  ex.headers = parse_headers(header_args);
  return run_explain(ex);
}

}  // namespace cutline::tools
