// Loading the policy file: the core example, defaults, and every kind of error with its exact
// text and position.
#include "cutline/policy/loader.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "policy_test_util.h"
#include "support/unique_temp_path.h"

namespace cutline::policy {
namespace {

using testing::load_errors;
using testing::load_ok;
using testing::with_policies;

// The policy README's core example, with a real digest in place of the placeholder.
const char* kCore = R"(listen:
  - address: 127.0.0.1:8080
admin:
  address: 127.0.0.1:8091
upstreams:
  - name: local
    url: http://127.0.0.1:8081        # any OpenAI-compatible server
    models: ["*"]                     # globs of model names served there
tenants:
  - name: alice
    api_keys: ["sha256:d48fce52832c460238fb82e9f6c57be593ad27ea6ddb5e15d74d1fb4245a76cd"]
policies:                              # first match wins
  - name: interactive
    match: {tenants: ["*"], models: ["*"], routes: ["/v1/chat/completions", "/v1/completions"]}
    budget:
      max_output_tokens: 1024          # clamp of the request's max_tokens
      tenant_tokens_per_minute: 20000  # token bucket per tenant
      global_tokens_per_minute: 200000
      adaptive:                        # explicit, labeled, never silent
        - when: {queue_depth_gt: 8}
          max_output_tokens: 256
    deadline: 60s                      # from request arrival to last byte
    ttft_timeout: 10s                  # arrival to first content token
    idle_timeout: 5s                   # longest gap between tokens
    admission: {max_concurrent: 8, queue_depth: 64, queue_timeout: 2s, priority: interactive}
    on_cut: {mode: label, finish_reason: length}   # label | error | observe; finish_reason: length | cause
)";

TEST(Loader, AcceptsTheCoreExampleWithEveryValueAndPosition) {
  auto p = load_ok(kCore);
  ASSERT_TRUE(p);
  ASSERT_EQ(p->listen.size(), 1u);
  EXPECT_EQ(p->listen[0].host, "127.0.0.1");
  EXPECT_EQ(p->listen[0].port, 8080);
  ASSERT_TRUE(p->admin);
  EXPECT_EQ(p->admin->port, 8091);
  ASSERT_EQ(p->upstreams.size(), 1u);
  EXPECT_EQ(p->upstreams[0].scheme, UpstreamScheme::kHttp);
  EXPECT_EQ(p->upstreams[0].host, "127.0.0.1");
  EXPECT_EQ(p->upstreams[0].port, 8081);
  EXPECT_EQ(p->upstreams[0].models, std::vector<std::string>{"*"});
  ASSERT_EQ(p->tenants.size(), 1u);
  EXPECT_EQ(p->tenants[0].api_keys[0].digest, sha256_digest("sk-alice-example"));
  EXPECT_EQ(p->tenants[0].api_keys[0].label, "sha256:d48fce52...");

  ASSERT_EQ(p->rules.size(), 1u);
  const Rule& r = p->rules[0];
  EXPECT_EQ(r.name, "interactive");
  EXPECT_EQ(r.ref.line, 13);
  EXPECT_EQ(r.match.routes, (std::vector<std::string>{"/v1/chat/completions", "/v1/completions"}));
  ASSERT_TRUE(r.budget.max_output_tokens);
  EXPECT_EQ(r.budget.max_output_tokens->value, 1024);
  EXPECT_EQ(r.budget.max_output_tokens->ref.path, "policies[0].budget.max_output_tokens");
  EXPECT_EQ(r.budget.max_output_tokens->ref.line, 16);
  EXPECT_EQ(r.budget.max_output_tokens->ref.column, 26);
  EXPECT_EQ(r.budget.tenant_tokens_per_minute->value, 20000);
  EXPECT_EQ(r.budget.global_tokens_per_minute->value, 200000);
  ASSERT_EQ(r.budget.adaptive.size(), 1u);
  EXPECT_EQ(r.budget.adaptive[0].queue_depth_gt, 8);
  EXPECT_EQ(r.budget.adaptive[0].max_output_tokens.value, 256);
  EXPECT_EQ(r.budget.adaptive[0].max_output_tokens.ref.path,
            "policies[0].budget.adaptive[0].max_output_tokens");
  EXPECT_EQ(r.budget.adaptive[0].max_output_tokens.ref.line, 21);
  EXPECT_EQ(r.deadline_ms->value, 60000);
  EXPECT_EQ(r.ttft_timeout_ms->value, 10000);
  EXPECT_EQ(r.idle_timeout_ms->value, 5000);
  EXPECT_EQ(r.admission.max_concurrent->value, 8);
  EXPECT_EQ(r.admission.queue_depth.value, 64);
  EXPECT_EQ(r.admission.queue_timeout_ms.value, 2000);
  EXPECT_EQ(r.admission.priority, Priority::kInteractive);
  EXPECT_EQ(r.admission.group, "interactive");
  EXPECT_EQ(r.on_cut.mode, CutMode::kLabel);
  EXPECT_EQ(r.on_cut.finish_reason, FinishReasonStyle::kLength);
  ASSERT_EQ(p->admission_groups.size(), 1u);
  EXPECT_EQ(p->admission_groups[0].max_concurrent, 8);
  EXPECT_EQ(p->admission_groups[0].queue_depth, 64);
}

TEST(Loader, DefaultsWhenKeysAreLeftOut) {
  auto p = load_ok(with_policies("  - name: all\n"));
  ASSERT_TRUE(p);
  const Rule& r = p->rules[0];
  EXPECT_TRUE(r.match.catch_all());
  EXPECT_FALSE(r.budget.max_output_tokens);
  EXPECT_FALSE(r.deadline_ms);
  EXPECT_FALSE(r.admission.max_concurrent);
  EXPECT_EQ(r.admission.queue_depth.value, 0);
  EXPECT_TRUE(r.admission.queue_depth.ref.is_default());
  EXPECT_EQ(r.admission.queue_timeout_ms.value, 30000);
  EXPECT_EQ(r.budget.on_pool_exhausted, PoolExhausted::kReject);
  EXPECT_EQ(p->budget_store.kind, BudgetStoreKind::kMemory);
  EXPECT_EQ(p->access_log.kind, AccessLogKind::kStdout);
  EXPECT_EQ(p->limits.max_body_bytes, 2 << 20);
  EXPECT_FALSE(p->admin);
  EXPECT_FALSE(p->requires_auth());
}

TEST(Loader, ReportsTheMisspelledKeyWithPathLineAndColumn) {
  std::string yaml = with_policies(
      "  - name: a\n"
      "    match: {models: [\"a\"]}\n"
      "  - name: b\n"
      "    match: {models: [\"b\"]}\n"
      "  - name: c\n"
      "    budget:\n"
      "      max_output_tokens: 512\n"
      "      adaptive:\n"
      "        - when: {queue_deph_gt: 8}\n"
      "          max_output_tokens: 256\n");
  EXPECT_EQ(load_errors(yaml),
            "cutline.yaml:15:18: policies[2].budget.adaptive[0].when: unknown key "
            "\"queue_deph_gt\" (did you mean \"queue_depth_gt\"?)\n");
}

TEST(Loader, CollectsEveryErrorInFileOrder) {
  std::string yaml =
      "listen:\n"
      "  - address: 127.0.0.1:80800\n"  // 2
      "upstreams:\n"
      "  - name: local\n"
      "    url: ftp://example\n"  // 5
      "policies:\n"
      "  - name: p\n"
      "    budget: {max_output_tokens: -5}\n"  // 8
      "    deadline: 60\n"                     // 9
      "    ttft_timeout: 0s\n"                 // 10
      "    admission: {priority: urgent}\n"    // 11
      "    on_cut: {mode: explode}\n"          // 12
      "    colour: blue\n";                    // 13
  EXPECT_EQ(load_errors(yaml),
            "cutline.yaml:2:14: listen[0].address: expected HOST:PORT such as 127.0.0.1:8080 or "
            "[::1]:8080, got \"127.0.0.1:80800\"\n"
            "cutline.yaml:5:10: upstreams[0].url: unsupported scheme \"ftp\" (use http://, "
            "https:// or h2c://)\n"
            "cutline.yaml:8:33: policies[0].budget.max_output_tokens: must be a positive integer, "
            "got -5\n"
            "cutline.yaml:9:15: policies[0].deadline: expected a duration such as 500ms, 10s or "
            "2m, got \"60\" (a unit is required: ms, s or m)\n"
            "cutline.yaml:10:19: policies[0].ttft_timeout: must be a positive duration, got 0s\n"
            "cutline.yaml:11:27: policies[0].admission.priority: must be one of interactive, "
            "batch; got \"urgent\"\n"
            "cutline.yaml:12:20: policies[0].on_cut.mode: must be one of label, error, observe; "
            "got \"explode\"\n"
            "cutline.yaml:13:5: policies[0]: unknown key \"colour\"\n");
}

TEST(Loader, WrongTypesAreNamed) {
  std::string out =
      load_errors(with_policies("  - name: p\n"
                                "    match: {models: \"gpt-4\"}\n"
                                "    budget: [1, 2]\n"
                                "    admission: {max_concurrent: many}\n"));
  EXPECT_NE(out.find("cutline.yaml:8:21: policies[0].match.models: expected a list, got a string"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("cutline.yaml:9:13: policies[0].budget: expected a map, got a list"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("cutline.yaml:10:33: policies[0].admission.max_concurrent: expected a "
                     "positive integer, got \"many\""),
            std::string::npos)
      << out;
}

TEST(Loader, RejectsARuleAfterACatchAll) {
  std::string out =
      load_errors(with_policies("  - name: everything\n"
                                "  - name: gpt\n"
                                "    match: {models: [\"gpt-*\"]}\n"));
  EXPECT_EQ(out,
            "cutline.yaml:8:5: policies[1]: unreachable: policies[0] (\"everything\", line 7) "
            "matches every request this rule would match\n");
}

TEST(Loader, RejectsARuleShadowedByABroaderGlob) {
  std::string out = load_errors(
      with_policies("  - name: gpt\n"
                    "    match: {models: [\"gpt-*\"]}\n"
                    "  - name: gpt4\n"
                    "    match: {models: [\"gpt-4\"], routes: [\"/v1/chat/completions\"]}\n"));
  EXPECT_NE(out.find("policies[1]: unreachable: policies[0] (\"gpt\""), std::string::npos) << out;
}

TEST(Loader, NarrowerRulesBeforeBroaderOnesAreFine) {
  auto p =
      load_ok(with_policies("  - name: gpt4\n"
                            "    match: {models: [\"gpt-4\"]}\n"
                            "  - name: batch\n"
                            "    match: {headers: {X-Priority: batch}}\n"
                            "  - name: rest\n"));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->rules.size(), 3u);
  EXPECT_EQ(p->rules[1].match.headers[0].name, "x-priority");
}

TEST(Loader, DuplicateNamesAndUnknownReferences) {
  std::string out = load_errors(
      "listen:\n  - address: 127.0.0.1:8080\n"
      "upstreams:\n"
      "  - {name: local, url: \"http://127.0.0.1:8081\"}\n"
      "  - {name: local, url: \"http://127.0.0.1:8082\"}\n"
      "tenants:\n"
      "  - {name: alice, api_keys: [\"env:ALICE_KEY\"]}\n"
      "  - {name: alice, api_keys: [\"env:BOB_KEY\"]}\n"
      "policies:\n"
      "  - name: p\n"
      "    match: {tenants: [carol]}\n"
      "    upstream: elsewhere\n"
      "  - name: p\n"
      "    match: {models: [x]}\n",
      LoadOptions{[](const std::string& n) -> std::optional<std::string> { return "key-" + n; }});
  EXPECT_NE(out.find("cutline.yaml:5:12: upstreams[1].name: duplicate upstream name \"local\" "
                     "(first at upstreams[0], line 4)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("cutline.yaml:8:12: tenants[1].name: duplicate tenant name \"alice\""),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("cutline.yaml:13:11: policies[1].name: duplicate policy name \"p\""),
            std::string::npos)
      << out;
  // Upstreams had an error, so the upstream reference is not checked against a broken list;
  // tenants are fine apart from the duplicate name... which also disables tenant checks.
  EXPECT_EQ(out.find("unknown upstream"), std::string::npos) << out;
}

TEST(Loader, UnknownTenantAndUpstreamReferences) {
  std::string out = load_errors(
      with_policies("  - name: p\n"
                    "    match: {tenants: [alice, carol, \"team-*\"]}\n"
                    "    upstream: elsewhere\n",
                    "tenants:\n  - {name: alice, api_keys: [\"env:K\"]}\n"),
      LoadOptions{[](const std::string&) -> std::optional<std::string> { return "k"; }});
  EXPECT_EQ(out,
            "cutline.yaml:10:30: policies[0].match.tenants[1]: unknown tenant \"carol\"\n"
            "cutline.yaml:11:15: policies[0].upstream: unknown upstream \"elsewhere\"\n");
}

TEST(Loader, EnvKeysAreHashedAtLoadAndMissingOnesAreErrors) {
  std::map<std::string, std::string> env{{"ALICE_KEY", "sk-alice"}};
  LoadOptions o{[&](const std::string& n) -> std::optional<std::string> {
    auto it = env.find(n);
    if (it == env.end()) return std::nullopt;
    return it->second;
  }};
  auto p = load_ok(with_policies("  - name: all\n",
                                 "tenants:\n  - {name: alice, api_keys: [\"env:ALICE_KEY\"]}\n"),
                   o);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->tenants[0].api_keys[0].digest, sha256_digest("sk-alice"));
  EXPECT_EQ(p->tenants[0].api_keys[0].label, "env:ALICE_KEY");

  std::string out = load_errors(
      with_policies("  - name: all\n", "tenants:\n  - {name: bob, api_keys: [\"env:BOB_KEY\"]}\n"),
      o);
  EXPECT_EQ(out,
            "cutline.yaml:7:28: tenants[0].api_keys[0]: environment variable BOB_KEY is not set "
            "or empty\n");
}

TEST(Loader, PlainKeysAreRefusedWithoutEchoingThem) {
  std::string out = load_errors(with_policies(
      "  - name: all\n", "tenants:\n  - {name: bob, api_keys: [\"sk-very-secret-123\"]}\n"));
  EXPECT_NE(out.find("plain keys are not accepted"), std::string::npos) << out;
  EXPECT_EQ(out.find("sk-very-secret-123"), std::string::npos) << out;
}

TEST(Loader, TheSameKeyForTwoTenantsIsAnError) {
  const std::string key = "\"sha256:" + std::string(64, 'a') + "\"";
  std::string out =
      load_errors(with_policies("  - name: all\n", "tenants:\n  - {name: a, api_keys: [" + key +
                                                       "]}\n  - {name: b, "
                                                       "api_keys: [" +
                                                       key + "]}\n"));
  EXPECT_NE(out.find("tenants[1].api_keys[0]: the same key is already listed at "
                     "tenants[0].api_keys[0] (line 7, tenant \"a\")"),
            std::string::npos)
      << out;
}

TEST(Loader, PoolsNeedABoundedReservation) {
  std::string out =
      load_errors(with_policies("  - name: p\n"
                                "    budget: {tenant_tokens_per_minute: 1000}\n"));
  EXPECT_NE(out.find("policies[0].budget.tenant_tokens_per_minute: a token pool needs "
                     "budget.max_output_tokens"),
            std::string::npos)
      << out;
  out = load_errors(
      with_policies("  - name: p\n"
                    "    budget: {max_output_tokens: 2000, global_tokens_per_minute: 1000}\n"));
  EXPECT_NE(out.find("is below budget.max_output_tokens (2000)"), std::string::npos) << out;
  // With clamp, a pool smaller than one request is fine.
  EXPECT_TRUE(
      load_ok(with_policies("  - name: p\n"
                            "    budget: {max_output_tokens: 2000, "
                            "global_tokens_per_minute: 1000, on_pool_exhausted: clamp}\n")));
}

TEST(Loader, AdaptiveStepThatCanNeverLowerTheClampIsAnError) {
  std::string out = load_errors(
      with_policies("  - name: p\n"
                    "    budget:\n"
                    "      max_output_tokens: 256\n"
                    "      adaptive: [{when: {queue_depth_gt: 4}, max_output_tokens: 512}]\n"));
  EXPECT_NE(out.find("policies[0].budget.adaptive[0].max_output_tokens: never applies: 512 is "
                     "not below budget.max_output_tokens (256, line 9)"),
            std::string::npos)
      << out;
}

TEST(Loader, AdmissionGroupsShareLimitsAndConflictsAreErrors) {
  auto p =
      load_ok(with_policies("  - name: chat\n"
                            "    match: {routes: [\"/v1/chat/completions\"]}\n"
                            "    admission: {group: gpu, max_concurrent: 4, queue_depth: 16}\n"
                            "  - name: bulk\n"
                            "    admission: {group: gpu, priority: batch}\n"));
  ASSERT_TRUE(p);
  ASSERT_EQ(p->admission_groups.size(), 1u);
  EXPECT_EQ(p->rules[1].admission.group_index, 0u);
  EXPECT_EQ(p->rules[1].admission.max_concurrent->value, 4);
  EXPECT_EQ(p->rules[1].admission.queue_depth.value, 16);
  EXPECT_EQ(p->rules[1].admission.priority, Priority::kBatch);

  std::string out =
      load_errors(with_policies("  - name: chat\n"
                                "    match: {routes: [\"/v1/chat/completions\"]}\n"
                                "    admission: {group: gpu, max_concurrent: 4}\n"
                                "  - name: bulk\n"
                                "    admission: {group: gpu, max_concurrent: 2}\n"));
  EXPECT_NE(out.find("cutline.yaml:11:45: policies[1].admission.max_concurrent: admission group "
                     "\"gpu\" already has max_concurrent 4 (policies[0].admission.max_concurrent, "
                     "line 9)"),
            std::string::npos)
      << out;
}

TEST(Loader, UpstreamUrlsSpawnAndTls) {
  auto p = load_ok(
      "listen:\n  - address: \"[::1]:8443\"\n    tls: {cert: c.pem, key: k.pem, min_version: "
      "\"1.3\"}\n"
      "upstreams:\n"
      "  - name: backend\n"
      "    url: h2c://127.0.0.1:8081/v1/\n"
      "    connect_timeout: 250ms\n"
      "    spawn: {command: [cutline-backend, --port, \"8081\"], ready_timeout: 2m, env: {A: b}}\n"
      "  - name: cloud\n"
      "    url: https://api.example.com\n"
      "    models: [\"gpt-*\"]\n"
      "    tls: {ca_file: ca.pem, server_name: api.example.com}\n"
      "policies:\n  - name: all\n"
      "budget_store: redis://cache:6380/2\n"
      "access_log: /var/log/cutline.log\n"
      "limits: {max_body_bytes: 1048576}\n");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->listen[0].host, "::1");
  EXPECT_EQ(p->listen[0].port, 8443);
  EXPECT_EQ(p->listen[0].tls->min_version, TlsVersion::kTls13);
  const Upstream& b = p->upstreams[0];
  EXPECT_EQ(b.scheme, UpstreamScheme::kH2c);
  EXPECT_EQ(b.base_path, "/v1");
  EXPECT_EQ(b.connect_timeout_ms, 250);
  EXPECT_EQ(b.spawn->command.size(), 3u);
  EXPECT_EQ(b.spawn->ready_timeout_ms, 120000);
  EXPECT_EQ(b.spawn->env[0], (std::pair<std::string, std::string>{"A", "b"}));
  const Upstream& c = p->upstreams[1];
  EXPECT_EQ(c.scheme, UpstreamScheme::kHttps);
  EXPECT_EQ(c.port, 443);
  EXPECT_EQ(c.tls.ca_file, "ca.pem");
  EXPECT_EQ(p->upstream_for_model("gpt-4o"), &b);  // first upstream whose globs match
  EXPECT_EQ(p->budget_store.kind, BudgetStoreKind::kRedis);
  EXPECT_EQ(p->budget_store.host, "cache");
  EXPECT_EQ(p->budget_store.port, 6380);
  EXPECT_EQ(p->budget_store.db, 2);
  EXPECT_EQ(p->access_log.kind, AccessLogKind::kFile);
  EXPECT_EQ(p->limits.max_body_bytes, 1048576);
}

TEST(Loader, BadBudgetStoreAndTlsOnPlainHttp) {
  std::string out = load_errors(
      "listen:\n  - address: 127.0.0.1:8080\n"
      "upstreams:\n  - {name: u, url: \"http://h:1\", tls: {ca_file: x}}\n"
      "policies:\n  - name: all\n"
      "budget_store: redis://:0\n");
  EXPECT_NE(out.find("upstreams[0].tls: tls applies to https:// upstreams only"), std::string::npos)
      << out;
  EXPECT_NE(out.find("budget_store: invalid host or port in \"redis://:0\""), std::string::npos)
      << out;
}

TEST(Loader, SyntaxErrorsAndEmptyFilesAreDiagnosticsNotCrashes) {
  EXPECT_EQ(load_errors("policies: [\n"),
            "cutline.yaml:2:1: YAML syntax error: end of sequence flow not found\n");
  EXPECT_EQ(load_errors(""),
            "cutline.yaml: the file is empty: expected a map with listen, upstreams and "
            "policies\n");
  std::string out = load_errors("- just\n- a list\n");
  EXPECT_EQ(out, "cutline.yaml:1:1: expected a map, got a list\n");
  out = load_errors("listen: []\n");
  EXPECT_NE(out.find("missing required key \"policies\""), std::string::npos) << out;
  // Deep nesting is refused by yaml-cpp's depth guard, not by a stack overflow.
  std::string deep(100000, '[');
  EXPECT_FALSE(load_policy_text(deep, "deep.yaml").ok());
}

TEST(Loader, MalformedInputThatYamlCppReadsAsNullIsASyntaxError) {
  // yaml-cpp 0.7 returns a null document for a stray leading ',' (and LoadAll would loop
  // forever on it); this must be an error at the offending line, not "the file is empty".
  EXPECT_EQ(load_errors("# comment\n,upstreams:\n"),
            "cutline.yaml:2:1: YAML syntax error: no YAML document could be read here\n");
}

TEST(Loader, ASecondDocumentIsAnError) {
  std::string out = load_errors("---\n" + with_policies("  - name: all\n") + "---\nlisten: []\n");
  EXPECT_EQ(out, "cutline.yaml:9:1: the file holds more than one YAML document (---); use one\n");
}

TEST(Loader, DuplicateKeysInOneMap) {
  std::string out = load_errors(with_policies("  - name: p\n    deadline: 1s\n    deadline: 2s\n"));
  EXPECT_EQ(out, "cutline.yaml:9:5: policies[0]: duplicate key \"deadline\"\n");
}

TEST(Loader, ReadsFilesAndReportsUnreadableOnes) {
  LoadResult missing = load_policy_file("/nonexistent/cutline.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.errors[0].to_string(),
            "/nonexistent/cutline.yaml: cannot read: No such file or directory");

  const std::string path = test::unique_temp_path("loader_test.yaml");
  {
    std::ofstream out(path);
    out << with_policies("  - name: all\n");
  }
  LoadResult r = load_policy_file(path);
  ASSERT_TRUE(r.ok()) << r.error_text();
  EXPECT_EQ(r.policy->source_file, path);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace cutline::policy

namespace cutline::policy {
namespace {

TEST(Loader, UpstreamCredentialsComeFromTheEnvironmentOrAFileNeverInline) {
  const std::string dir = ::testing::TempDir();
  const std::string key_file = dir + "/upstream.key";
  {
    std::FILE* f = std::fopen(key_file.c_str(), "w");
    std::fputs("sk-from-file\n", f);
    std::fclose(f);
  }
  LoadOptions o{[](const std::string& n) -> std::optional<std::string> {
    if (n == "OPENAI_KEY") return std::string("sk-from-env");
    return std::nullopt;
  }};
  auto p = load_ok(
      "listen:\n  - address: 127.0.0.1:8080\n"
      "upstreams:\n"
      "  - name: a\n    url: https://api.example.com/v1\n    api_key: env:OPENAI_KEY\n"
      "    headers: {OpenAI-Organization: \"file:" +
          key_file +
          "\"}\n"
          "policies:\n  - name: all\n    forward_client_key: true\n",
      o);
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->upstreams[0].api_key);
  EXPECT_EQ(p->upstreams[0].api_key->value, "sk-from-env");
  EXPECT_EQ(p->upstreams[0].api_key->label, "env:OPENAI_KEY");
  ASSERT_EQ(p->upstreams[0].headers.size(), 1u);
  EXPECT_EQ(p->upstreams[0].headers[0].value.value, "sk-from-file");
  EXPECT_TRUE(p->rules[0].forward_client_key);

  const std::string out = load_errors(
      "listen:\n  - address: 127.0.0.1:8080\n"
      "upstreams:\n"
      "  - name: a\n    url: http://127.0.0.1:1\n    api_key: sk-pasted-inline\n"
      "    headers: {Host: env:OPENAI_KEY, X-Key: env:MISSING}\n"
      "policies:\n  - name: all\n",
      o);
  EXPECT_NE(out.find("upstreams[0].api_key: a secret must be \"env:VARNAME\" or \"file:PATH\""),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("sk-pasted-inline"), std::string::npos) << out;
  EXPECT_NE(out.find("the gateway sets Host itself"), std::string::npos) << out;
  EXPECT_NE(out.find("environment variable MISSING is not set"), std::string::npos) << out;
}

TEST(Loader, AHeaderSelectedRuleMustNameItsTenants) {
  const char* tenants = "tenants:\n  - {name: alice, api_keys: [\"env:A\"]}\n";
  LoadOptions o{[](const std::string&) -> std::optional<std::string> { return "k"; }};
  const std::string out =
      load_errors(testing::with_policies("  - name: batch\n"
                                         "    match: {headers: {x-cutline-class: batch}}\n"
                                         "  - name: rest\n",
                                         tenants),
                  o);
  EXPECT_NE(out.find("policies[0].match.headers: a rule selected by a request header must list "
                     "the tenants"),
            std::string::npos)
      << out;
  EXPECT_TRUE(load_ok(
      testing::with_policies("  - name: batch\n"
                             "    match: {tenants: [alice], headers: {x-cutline-class: batch}}\n"
                             "  - name: rest\n",
                             tenants),
      o));
}

}  // namespace
}  // namespace cutline::policy
