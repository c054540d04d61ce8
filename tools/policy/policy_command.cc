// `cutline policy check FILE` and `cutline policy explain FILE --request REQ.json ...`.
//   check:   prints every error (exit 1) or a summary of the policy (exit 0).
//   explain: prints the Decision for an OpenAI request body, each number with the rule and YAML
//            line that produced it (exit 0), or the policy's errors (exit 1).
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "cutline/policy/api_key.h"
#include "cutline/policy/decision.h"
#include "cutline/policy/explain.h"
#include "cutline/policy/loader.h"

namespace cutline::tools {

namespace {

using namespace cutline::policy;

constexpr const char* kUsage =
    "usage: cutline policy check FILE\n"
    "       cutline policy explain FILE --request REQ.json [--tenant T | --api-key KEY]\n"
    "                              [--route PATH] [--queue-depth N] [--in-flight N]\n"
    "                              [--deadline-ms N] [--header NAME:VALUE]...\n";

int usage_error(const char* why) {
  if (why) std::fprintf(stderr, "cutline policy: %s\n", why);
  std::fputs(kUsage, stderr);
  return 2;
}

bool print_errors(const LoadResult& r) {
  if (r.ok()) return false;
  std::fputs(r.error_text().c_str(), stderr);
  std::fprintf(stderr, "%zu error%s\n", r.errors.size(), r.errors.size() == 1 ? "" : "s");
  return true;
}

std::optional<int64_t> parse_int(std::string_view s, int64_t min) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || v < min) return std::nullopt;
  return v;
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

int run_check(int argc, char** argv) {
  if (argc != 3) return usage_error("check takes exactly one FILE");
  LoadResult r = load_policy_file(argv[2]);
  if (print_errors(r)) return 1;
  std::fputs(summarize(*r.policy).c_str(), stdout);
  return 0;
}

int run_explain(int argc, char** argv) {
  if (argc < 3) return usage_error("explain needs a FILE");
  const char* file = argv[2];
  const char* request_path = nullptr;
  std::string tenant;
  std::optional<std::string> api_key;
  std::string route;
  LiveState live;
  std::optional<int64_t> deadline_ms;
  std::vector<std::pair<std::string, std::string>> headers;
  for (int i = 3; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = value();
    if (!v) return usage_error("an option is missing its value");
    if (a == "--request") {
      request_path = v;
    } else if (a == "--tenant") {
      tenant = v;
    } else if (a == "--api-key") {
      api_key = v;
    } else if (a == "--route") {
      route = v;
    } else if (a == "--queue-depth" || a == "--in-flight") {
      auto n = parse_int(v, 0);
      if (!n) return usage_error("--queue-depth and --in-flight take an integer >= 0");
      (a == "--queue-depth" ? live.queue_depth : live.in_flight) = *n;
    } else if (a == "--deadline-ms") {
      deadline_ms = parse_int(v, 1);
      if (!deadline_ms) return usage_error("--deadline-ms takes a positive integer");
    } else if (a == "--header") {
      std::string_view h = v;
      size_t colon = h.find(':');
      if (colon == std::string_view::npos) return usage_error("--header takes NAME:VALUE");
      std::string name(h.substr(0, colon));
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string_view val = h.substr(colon + 1);
      while (!val.empty() && val.front() == ' ') val.remove_prefix(1);
      headers.emplace_back(std::move(name), std::string(val));
    } else {
      return usage_error("unknown option");
    }
  }
  if (!request_path) return usage_error("explain needs --request REQ.json");

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
  if (argc < 2) return usage_error(nullptr);
  std::string_view sub = argv[1];
  if (sub == "check") return run_check(argc, argv);
  if (sub == "explain") return run_explain(argc, argv);
  if (sub == "-h" || sub == "--help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  return usage_error("unknown subcommand");
}

}  // namespace cutline::tools
