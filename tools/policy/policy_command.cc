// `cutline policy check FILE` and `cutline policy explain FILE --request REQ.json ...`.
//   check:   prints every error (exit 1) or a summary of the policy (exit 0).
//   explain: prints the Decision for an OpenAI request body, each number with the rule and YAML
//            line that produced it (exit 0), or the policy's errors (exit 1).
#include <cctype>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "cutline/cli/cli.h"
#include "cutline/policy/api_key.h"
#include "cutline/policy/decision.h"
#include "cutline/policy/explain.h"
#include "cutline/policy/loader.h"

namespace cutline::tools {

namespace {

using namespace cutline::policy;

bool print_errors(const LoadResult& r) {
  if (r.ok()) return false;
  std::fputs(r.error_text().c_str(), stderr);
  std::fprintf(stderr, "%zu error%s\n", r.errors.size(), r.errors.size() == 1 ? "" : "s");
  return true;
}

struct RequestBody {
  std::string model;
  std::optional<int64_t> max_tokens;
  bool has_messages = false;
};

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
    } else if (key == "max_tokens" || key == "max_completion_tokens") {
      int64_t v = 0;
      if (field.value().get_int64().get(v) || v <= 0) {
        error = std::string(path) + ": \"" + std::string(key) + "\" must be a positive integer";
        return std::nullopt;
      }
      if (!body.max_tokens || v < *body.max_tokens) body.max_tokens = v;
    } else if (key == "messages") {
      body.has_messages = true;  // the value is skipped by the iteration
    }
  }
  if (!have_model) {
    error = std::string(path) + ": missing \"model\"";
    return std::nullopt;
  }
  return body;
}

int run_check(const std::string& file) {
  LoadResult r = load_policy_file(file);
  if (print_errors(r)) return 1;
  std::fputs(summarize(*r.policy).c_str(), stdout);
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
};

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
  if (print_errors(r)) return 1;
  const Policy& policy = *r.policy;

  std::string error;
  auto body = read_request(request_path, error);
  if (!body) {
    std::fprintf(stderr, "cutline policy explain: %s\n", error.c_str());
    return 1;
  }
  if (api_key) {
    const Tenant* t = authenticate(policy, *api_key);
    if (!t) {
      std::fprintf(stderr, "cutline policy explain: the API key belongs to no tenant (401)\n");
      return 1;
    }
    tenant = t->name;
  } else if (!tenant.empty() && !policy.find_tenant(tenant)) {
    std::fprintf(stderr, "cutline policy explain: unknown tenant \"%s\" (401)\n", tenant.c_str());
    return 1;
  } else if (tenant.empty() && policy.requires_auth()) {
    std::fprintf(stderr,
                 "cutline policy explain: this policy authenticates clients; pass --tenant T or "
                 "--api-key KEY\n");
    return 1;
  }
  if (route.empty()) route = body->has_messages ? "/v1/chat/completions" : "/v1/completions";

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
  std::printf("request: tenant \"%s\", model \"%s\", route %s\n", tenant.c_str(),
              body->model.c_str(), route.c_str());
  std::fputs(explain(d).c_str(), stdout);
  if (d.matched) {
    const Rule& rule = *d.rule;
    const Upstream* up = policy.route(rule, body->model);
    std::printf("upstream: %s\n", up ? (up->name + " " + up->url).c_str()
                                     : "none serves this model (the gateway answers 404)");
  }
  return 0;
}

}  // namespace

int run_policy(int argc, char** argv) {
  // argv[0] is "policy".
  auto app = cli::make_app("cutline policy", "Validate a policy file and explain its decisions.");
  app->require_subcommand(1);

  std::string check_file;
  CLI::App* check = cli::add_command(
      *app, "check", "Validate FILE: every error with its line and column (exit 1), or a summary");
  check->add_option("FILE", check_file, "Policy file (YAML)")
      ->required()
      ->check(cli::kReadableFile);

  ExplainArgs ex;
  std::vector<std::string> header_args;
  CLI::App* explain = cli::add_command(
      *app, "explain",
      "Print the decision for an OpenAI request body, each number with the rule and YAML line "
      "behind it");
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
  explain->add_option("--route", ex.route,
                      "Route (default /v1/chat/completions with messages, else /v1/completions)");
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

  if (auto rc = cli::parse(*app, argc, argv)) return *rc;
  if (check->parsed()) return run_check(check_file);
  for (std::string_view h : header_args) {
    size_t colon = h.find(':');
    std::string name(h.substr(0, colon));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string_view val = h.substr(colon + 1);
    while (!val.empty() && val.front() == ' ') val.remove_prefix(1);
    ex.headers.emplace_back(std::move(name), std::string(val));
  }
  return run_explain(ex);
}

}  // namespace cutline::tools
