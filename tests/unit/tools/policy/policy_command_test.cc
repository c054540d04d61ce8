// `cutline policy check|explain --format json` (parsed back as a CI pipeline would) and
// `cutline policy diff OLD NEW` and `cutline policy schema`, run through the command's entry point
// with stdout captured.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <simdjson.h>

#include "cutline/tools/policy/advise.h"
#include "support/unique_temp_path.h"

namespace cutline::tools {
int run_policy(int argc, char** argv);
}

namespace {

struct Outcome {
  int rc = 0;
  std::string out;
};

Outcome run(std::vector<std::string> args);

Outcome run_capturing_stderr(std::vector<std::string> args, std::string& err) {
  ::testing::internal::CaptureStderr();
  Outcome r = run(std::move(args));
  err = ::testing::internal::GetCapturedStderr();
  return r;
}

Outcome run(std::vector<std::string> args) {
  args.insert(args.begin(), "policy");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::testing::internal::CaptureStdout();
  Outcome r;
  r.rc = cutline::tools::run_policy(static_cast<int>(args.size()), argv.data());
  std::fflush(stdout);
  r.out = ::testing::internal::GetCapturedStdout();
  return r;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = cutline::test::unique_temp_path(name);
  std::ofstream(path) << text;
  return path;
}

const std::string kExample = std::string(CUTLINE_SOURCE_DIR) + "/deploy/policies/cutline.yaml";
const std::string kRequest = std::string(CUTLINE_SOURCE_DIR) + "/deploy/examples/req.json";

TEST(PolicyCommand, CheckJsonIsOneDocumentWithThePolicy) {
  Outcome r = run({"check", "--format", "json", kExample});
  ASSERT_EQ(r.rc, 0) << r.out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS) << r.out;
  EXPECT_EQ(doc["ok"].get_bool().value(), true);
  EXPECT_EQ(std::string(doc["file"].get_string().value()), kExample);
  simdjson::dom::array rules;
  ASSERT_EQ(doc["policy"]["policies"].get_array().get(rules), simdjson::SUCCESS) << r.out;
  EXPECT_GT(rules.size(), 0u);
  simdjson::dom::array warnings;
  ASSERT_EQ(doc["warnings"].get_array().get(warnings), simdjson::SUCCESS) << r.out;
  EXPECT_EQ(warnings.size(), 0u) << r.out;
}

// A file whose first rule's route no request path can equal and whose third rule the first two
// shadow: both are warnings, the check passes (exit 0) and the summary follows.
const char* kWarned =
    "listen:\n  - address: 127.0.0.1:8080\n"
    "upstreams:\n  - name: u\n    url: http://127.0.0.1:1\n"
    "policies:\n"
    "  - name: chat\n"
    "    match: {routes: [/v1/chat/completions/, \"/v1/*\"]}\n"
    "  - name: gpt\n"
    "    match: {models: [\"gpt-*\"]}\n"
    "  - name: gpt4\n"
    "    match: {models: [\"gpt-4*\"]}\n";

TEST(PolicyCommand, CheckPrintsWarningsWithTheirPositionAndPasses) {
  const std::string file = write_temp("warned.yaml", kWarned);
  std::string err;
  Outcome r = run_capturing_stderr({"check", file}, err);
  EXPECT_EQ(r.rc, 0) << err;
  EXPECT_EQ(err, file +
                     ":8:22: warning: policies[0].match.routes[0]: no request path can match "
                     "\"/v1/chat/completions/\": it ends with '/', which the gateway removes "
                     "before matching (only \"/\" keeps it): write \"/v1/chat/completions\"\n" +
                     file +
                     ":11:5: warning: policies[2]: never matches (the first matching rule wins): "
                     "policies[1] (\"gpt\", line 9) comes first and matches every request this "
                     "rule would match\n"
                     "2 warnings\n");
  EXPECT_NE(r.out.find("gpt4"), std::string::npos) << r.out;  // the summary, as without warnings
}

TEST(PolicyCommand, CheckJsonListsWarningsBesideThePolicy) {
  const std::string file = write_temp("warned.yaml", kWarned);
  Outcome r = run({"check", "--format", "json", file});
  EXPECT_EQ(r.rc, 0) << r.out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS) << r.out;
  EXPECT_EQ(doc["ok"].get_bool().value(), true);
  EXPECT_TRUE(doc["policy"].is_object());
  simdjson::dom::array warnings;
  ASSERT_EQ(doc["warnings"].get_array().get(warnings), simdjson::SUCCESS) << r.out;
  ASSERT_EQ(warnings.size(), 2u) << r.out;
  simdjson::dom::element first = warnings.at(0);
  EXPECT_EQ(std::string(first["file"].get_string().value()), file);
  EXPECT_EQ(first["line"].get_int64().value(), 8);
  EXPECT_EQ(first["column"].get_int64().value(), 22);
  EXPECT_EQ(std::string(first["path"].get_string().value()), "policies[0].match.routes[0]");
  EXPECT_EQ(std::string(warnings.at(1)["path"].get_string().value()), "policies[2]");
  EXPECT_EQ(warnings.at(1)["line"].get_int64().value(), 11);
  EXPECT_NE(std::string(warnings.at(1)["message"].get_string().value()).find("never matches"),
            std::string::npos);
}

TEST(PolicyCommand, CheckJsonListsEveryErrorWithItsPosition) {
  const std::string bad = write_temp("bad.yaml",
                                     "listen:\n  - address: 127.0.0.1:8080\n"
                                     "upstreams:\n  - name: u\n    url: http://127.0.0.1:1\n"
                                     "policies:\n  - name: p\n    deadline: 60\n"
                                     "    on_cut: {mode: sometimes}\n");
  Outcome r = run({"check", "--format", "json", bad});
  EXPECT_EQ(r.rc, 1);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS) << r.out;
  EXPECT_EQ(doc["ok"].get_bool().value(), false);
  simdjson::dom::array errors;
  ASSERT_EQ(doc["errors"].get_array().get(errors), simdjson::SUCCESS) << r.out;
  ASSERT_EQ(errors.size(), 2u) << r.out;
  simdjson::dom::element first = errors.at(0);
  EXPECT_EQ(first["line"].get_int64().value(), 8);
  EXPECT_EQ(first["column"].get_int64().value(), 15);
  EXPECT_EQ(std::string(first["path"].get_string().value()), "policies[0].deadline");
  EXPECT_EQ(std::string(errors.at(1)["path"].get_string().value()), "policies[0].on_cut.mode");
  EXPECT_NE(std::string(errors.at(1)["message"].get_string().value()).find("observe"),
            std::string::npos);
  simdjson::dom::array warnings;
  ASSERT_EQ(doc["warnings"].get_array().get(warnings), simdjson::SUCCESS) << r.out;
  EXPECT_EQ(warnings.size(), 0u);
}

TEST(PolicyCommand, ExplainJsonCarriesEveryNumberWithItsSource) {
  Outcome r = run({"explain", kExample, "--request", kRequest, "--tenant", "alice", "--queue-depth",
                   "9", "--format", "json"});
  ASSERT_EQ(r.rc, 0) << r.out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS) << r.out;
  EXPECT_EQ(std::string(doc["request"]["tenant"].get_string().value()), "alice");
  simdjson::dom::element d = doc["decision"];
  EXPECT_EQ(d["matched"].get_bool().value(), true);
  // Same numbers as the text form (policy_cli_explain): the adaptive step on line 39.
  EXPECT_EQ(d["max_output_tokens"]["value"].get_int64().value(), 256);
  EXPECT_EQ(std::string(d["max_output_tokens"]["source"]["kind"].get_string().value()), "adaptive");
  EXPECT_EQ(d["max_output_tokens"]["source"]["line"].get_int64().value(), 39);
  EXPECT_EQ(d["live"]["queue_depth"].get_int64().value(), 9);
  EXPECT_TRUE(doc["upstream"].is_object() || doc["upstream"].is_null());
}

// The route explain assumes for `body` (--format json's request.route), and its exit status.
std::string explained_route(const std::string& body, int& rc, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"explain",  kExample, "--request", write_temp("req.json", body),
                                "--tenant", "alice",  "--format",  "json"};
  args.insert(args.end(), extra.begin(), extra.end());
  Outcome r = run(args);
  rc = r.rc;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(r.out).get(doc) != simdjson::SUCCESS) return "unparsed: " + r.out;
  return std::string(doc["request"]["route"].get_string().value());
}

TEST(PolicyCommand, ExplainInfersTheRouteFromTheBody) {
  int rc = -1;
  EXPECT_EQ(explained_route(R"({"model":"tiny","messages":[]})", rc), "/v1/chat/completions");
  EXPECT_EQ(explained_route(R"({"model":"tiny","prompt":"hi"})", rc), "/v1/completions");
  // The Responses API: input as text, as items, or with its own fields.
  EXPECT_EQ(explained_route(R"({"model":"tiny","input":"hi"})", rc), "/v1/responses");
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(explained_route(R"({"model":"tiny","input":[{"role":"user","content":"hi"}]})", rc),
            "/v1/responses");
  EXPECT_EQ(
      explained_route(R"({"model":"text-embedding-x","input":"hi","instructions":"be brief"})", rc),
      "/v1/responses");
  // Embeddings: encoding_format or dimensions, token ids, or an embedding model.
  EXPECT_EQ(explained_route(R"({"model":"tiny","input":"hi","encoding_format":"float"})", rc),
            "/v1/embeddings");
  EXPECT_EQ(explained_route(R"({"model":"tiny","input":[1,2,3]})", rc), "/v1/embeddings");
  EXPECT_EQ(explained_route(R"({"model":"text-embedding-3-small","input":["a","b"]})", rc),
            "/v1/embeddings");
  EXPECT_EQ(rc, 0);
  // --route overrides.
  EXPECT_EQ(explained_route(R"({"model":"tiny","input":"hi"})", rc, {"--route", "/v1/embeddings"}),
            "/v1/embeddings");

  // The text form says where the route came from.
  Outcome r =
      run({"explain", kExample, "--request",
           write_temp("resp.json", R"({"model":"tiny","input":"hi"})"), "--tenant", "alice"});
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("route /v1/responses (the body has \"input\"; --route to override)"),
            std::string::npos)
      << r.out;
}

TEST(PolicyCommand, ExplainExits4WhenNoRuleMatches) {
  const std::string policy = write_temp("chat-only.yaml",
                                        "listen:\n  - address: 127.0.0.1:8080\n"
                                        "upstreams:\n  - name: u\n    url: http://127.0.0.1:1\n"
                                        "policies:\n"
                                        "  - name: chat\n"
                                        "    match: {routes: [/v1/chat/completions]}\n");
  const std::string body = write_temp("input.json", R"({"model":"m","input":"hi"})");
  Outcome r = run({"explain", policy, "--request", body});
  EXPECT_EQ(r.rc, 4) << r.out;
  EXPECT_NE(r.out.find("route /v1/responses"), std::string::npos) << r.out;
  r = run({"explain", policy, "--request", body, "--format", "json"});
  EXPECT_EQ(r.rc, 4) << r.out;
  EXPECT_NE(r.out.find("\"matched\":false"), std::string::npos) << r.out;
  // The same body on the route the rule names is matched.
  EXPECT_EQ(run({"explain", policy, "--request", body, "--route", "/v1/chat/completions"}).rc, 0);
}

TEST(PolicyCommand, DiffSaysWhatChangesForWhichRequests) {
  const std::string head =
      "listen:\n  - address: 127.0.0.1:8080\n"
      "upstreams:\n  - name: u\n    url: http://127.0.0.1:1\n"
      "policies:\n  - name: chat\n    match: {routes: [/v1/chat/completions]}\n";
  const std::string before =
      write_temp("before.yaml", head + "    deadline: 30s\n    on_cut: {mode: observe}\n");
  const std::string after = write_temp("after.yaml", head + "    deadline: 20s\n");
  Outcome r = run({"diff", before, after});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("policy \"chat\"  (policies[0] (line 7))  tenants *  models *  routes "
                       "/v1/chat/completions"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("deadline             30s -> 20s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("on_cut               observe/length -> label/length"), std::string::npos)
      << r.out;
  r = run({"diff", before, before});
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("no changes"), std::string::npos) << r.out;
}

// A log with known distributions. Policy "chat", model "m": 200 answers, the i-th (1-based)
// with i output tokens, a duration of 10*i ms, a TTFT of 3*i ms and a largest gap of 2.5*i ms,
// arriving 5 s apart (never overlapping). Policy "batch": 100 answers of 500 ms arriving four at
// a time each second (1, 2, 3, 4 in flight at their arrivals), plus refused requests that are
// not measured.
std::string generated_log() {
  std::string log;
  char line[512];
  for (int i = 1; i <= 200; ++i) {
    std::snprintf(line, sizeof line,
                  R"({"ts":%d.0,"request_id":"c%d","method":"POST","path":"/v1/chat/completions",)"
                  R"("tenant":"","model":"m","upstream":"u","status":200,"stream":true,)"
                  R"("cause":"eos","origin":"model","truncated":false,"policy":"chat",)"
                  R"("output_tokens":%d,"queue_ms":0.5,"ttft_ms":%g,"itl_max_ms":%g,)"
                  R"("duration_ms":%d,"cutline":{"v":1,"cause":"eos"}})"
                  "\n",
                  1000 + 5 * i, i, i, 3.0 * i, 2.5 * i, 10 * i);
    log += line;
  }
  for (int i = 0; i < 100; ++i) {
    std::snprintf(line, sizeof line,
                  R"({"ts":%d.%03d,"request_id":"b%d","model":"m","policy":"batch",)"
                  R"("cause":"eos","output_tokens":10,"ttft_ms":20,"itl_max_ms":5,)"
                  R"("duration_ms":500,"queue_ms":0})"
                  "\n",
                  5000 + i / 4, i % 4, i);
    log += line;
  }
  log += R"({"ts":6000.0,"model":"m","policy":"chat","cause":"invalid_request","status":400})"
         "\n";
  log += R"({"ts":6000.0,"model":"m","policy":"batch","cause":"admission_rejected"})"
         "\n";
  log += R"({"ts":6000.0,"model":"m","policy":"","cause":"policy_denied","status":404})"
         "\n";
  return log;
}

TEST(PolicyAdvise, QuantilesAreNearestRank) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_EQ(cutline::tools::quantile(v, 0.5), 50);
  EXPECT_EQ(cutline::tools::quantile(v, 0.99), 99);
  EXPECT_EQ(cutline::tools::quantile(v, 1.0), 100);
  EXPECT_EQ(cutline::tools::quantile(v, 0.001), 1);
  std::vector<double> none;
  EXPECT_FALSE(cutline::tools::quantile(none, 0.5).has_value());
}

TEST(PolicyAdvise, ProposesLimitsThatCutAtMostTheTargetShare) {
  auto in = cutline::tools::read_access_log(generated_log());
  ASSERT_TRUE(in.ok()) << in.error().message;
  EXPECT_EQ(in->lines, 303);
  EXPECT_EQ(in->skipped, 3);  // invalid_request, admission_rejected, policy_denied
  cutline::tools::Observed& chat = in->groups.at({"chat", "m"});
  cutline::tools::Proposal p = cutline::tools::propose(chat, 0.01);
  // The p99 (answers 199 and 200, 1%, beyond it) with headroom: x 1.25 on counts, x 1.5 on
  // times, rounded up.
  EXPECT_EQ(p.max_output_tokens, 248);  // 198 x 1.25 = 247.5
  EXPECT_EQ(p.deadline_ms, 2970);       // 1980 ms x 1.5
  EXPECT_EQ(p.ttft_timeout_ms, 900);    // 594 ms x 1.5 = 891, rounded up to 10 ms
  EXPECT_EQ(p.idle_timeout_ms, 750);    // 495 ms x 1.5 = 742.5, rounded up
  EXPECT_EQ(p.max_concurrent, 2);       // 1 x 1.25, rounded up
  p = cutline::tools::propose(chat, 0.10);
  EXPECT_EQ(p.max_output_tokens, 225);  // 180 x 1.25
  EXPECT_EQ(p.deadline_ms, 2700);       // 1800 ms x 1.5
  cutline::tools::Observed& batch = in->groups.at({"batch", "m"});
  EXPECT_EQ(cutline::tools::propose(batch, 0.01).max_concurrent, 5);  // 4 x 1.25
  EXPECT_EQ(cutline::tools::propose(batch, 0.30).max_concurrent, 4);  // a quarter arrive 4th
}

TEST(PolicyAdvise, CommandPrintsTheNumbersBehindEachProposalAndADiff) {
  const std::string log = write_temp("access.log", generated_log());
  const std::string policy = write_temp("advise-policy.yaml",
                                        "listen:\n  - address: 127.0.0.1:8080\n"
                                        "upstreams:\n  - name: u\n    url: http://127.0.0.1:1\n"
                                        "policies:\n"
                                        "  - name: chat\n"
                                        "    match: {routes: [/v1/chat/completions]}\n"
                                        "    deadline: 30s\n"
                                        "  - name: batch\n    match: {models: [other]}\n"
                                        "  - name: rest\n");
  Outcome r = run({"advise", log, "--target-cut-rate", "1%", "--policy", policy});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("303 requests read, 3 refused before an upstream"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("policy \"chat\"  model \"m\"  (200 requests)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  budget.max_output_tokens   248        output tokens: p50 100  p90 180  "
                       "p99 198  max 200  (n 200)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  deadline                   2970ms     duration: p50 1000ms"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  admission.max_concurrent   5          in flight at arrival"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("deadline             30s -> 2970ms            policies[0].deadline "
                       "(proposed)"),
            std::string::npos)
      << r.out;
  // Deterministic: the same log gives the same report.
  EXPECT_EQ(run({"advise", log, "--target-cut-rate", "0.01", "--policy", policy}).out, r.out);
}

// 80 chat answers (too few for a 1% tail) and GET /v1/models, embeddings and passthrough lines,
// which have no generation to measure.
TEST(PolicyAdvise, FewRequestsAreFlaggedAndNonGenerationRoutesAreLeftOut) {
  std::string log;
  char line[512];
  for (int i = 1; i <= 80; ++i) {
    std::snprintf(line, sizeof line,
                  R"({"ts":%d.0,"method":"POST","path":"/v1/chat/completions","model":"m",)"
                  R"("policy":"chat","cause":"eos","output_tokens":%d,"ttft_ms":5,)"
                  R"("itl_max_ms":2,"duration_ms":%d})"
                  "\n",
                  1000 + 5 * i, i, 10 * i);
    log += line;
  }
  for (int i = 0; i < 300; ++i) {
    log += R"({"ts":2000.0,"method":"GET","path":"/v1/models","model":"","policy":"chat",)"
           R"("cause":"eos","output_tokens":0,"duration_ms":1})"
           "\n";
  }
  log += R"({"ts":2000.0,"method":"POST","path":"/v1/embeddings","model":"e","policy":"chat",)"
         R"("cause":"eos","output_tokens":0,"duration_ms":3})"
         "\n";
  log += R"({"ts":2000.0,"method":"POST","path":"/v1/files","model":"","policy":"chat",)"
         R"("cause":"eos","output_tokens":0,"duration_ms":3})"
         "\n";
  Outcome r = run({"advise", write_temp("few.log", log)});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("302 requests not generation (GET /v1/models, embeddings, passthrough): "
                       "not measured"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("headroom: each limit is its quantile x 1.5 for times, x 1.25 for output "
                       "tokens and concurrency"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("policy \"chat\"  model \"m\"  (80 requests)\n  warning: 80 requests, "
                       "fewer than 200"),
            std::string::npos)
      << r.out;
  // Only the chat group: no proposal for the models list, embeddings or passthrough.
  EXPECT_EQ(r.out.find("model \"\""), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("model \"e\""), std::string::npos) << r.out;
  // p99 of 80 is the 80th: 800 ms x 1.5; 80 tokens x 1.25.
  EXPECT_NE(r.out.find("  deadline                   1200ms "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  budget.max_output_tokens   100 "), std::string::npos) << r.out;

  // A log of nothing but the models list has nothing to propose from.
  std::string err;
  r = run_capturing_stderr(
      {"advise", write_temp("models.log", log.substr(log.find("{\"ts\":2000")))}, err);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(err.find("no generation requests"), std::string::npos) << err;
}

TEST(PolicyAdvise, AnEmptyTruncatedOrForeignLogSaysSoAndExits2) {
  std::string err;
  Outcome r = run_capturing_stderr({"advise", write_temp("empty.log", "")}, err);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(err.find("empty"), std::string::npos) << err;

  const std::string log = generated_log();
  const std::string cut = log.substr(0, log.find('\n', log.size() / 2) + 20);  // mid-line
  r = run_capturing_stderr({"advise", write_temp("cut.log", cut)}, err);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;

  r = run_capturing_stderr(
      {"advise",
       write_temp("nginx.log",
                  "127.0.0.1 - - [02/Dec/2026:02:00:00 +0000] \"GET / HTTP/1.1\" 200 612\n")},
      err);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(err.find("line 1: not a JSON object"), std::string::npos) << err;

  r = run_capturing_stderr({"advise", write_temp("other.json", "{\"level\":\"info\"}\n")}, err);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(err.find("line 1: no stop record"), std::string::npos) << err;

  r = run_capturing_stderr({"advise", write_temp("ok.log", log), "--target-cut-rate", "120%"}, err);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(err.find("--target-cut-rate"), std::string::npos) << err;
}

TEST(PolicyAdvise, PrintableEscapesWhatATerminalWouldActOn) {
  EXPECT_EQ(cutline::tools::printable("gpt-4o mini/é✓"), "gpt-4o mini/é✓");
  EXPECT_EQ(cutline::tools::printable("a\x1b]0;t\x07\r\n\x7f"), "a\\x1b]0;t\\x07\\x0d\\x0a\\x7f");
  EXPECT_EQ(cutline::tools::printable("\xc2\x9b"
                                      "2J"),
            "\\xc2\\x9b2J");  // C1 CSI
  EXPECT_EQ(cutline::tools::printable("\xff\xc3(\xe0\x80\x80\xed\xa0\x80"),
            "\\xff\\xc3(\\xe0\\x80\\x80\\xed\\xa0\\x80");  // invalid, overlong, surrogate
  EXPECT_EQ(cutline::tools::printable("q\"\\"), "q\\\"\\\\");
}

TEST(PolicyAdvise, AHostileLogCannotReachTheTerminalOrSetAbsurdLimits) {
  std::string log;
  // Names with ESC, BEL, CR and a C1 CSI (JSON-escaped, as a log line may carry them).
  for (int i = 0; i < 10; ++i) {
    log += R"({"ts":1000,"model":"m\u001b]0;pwned\u0007\r\u009b2J","policy":"p\u001bx",)"
           R"("cause":"eos","output_tokens":5,"ttft_ms":0,"itl_max_ms":0,"duration_ms":0})"
           "\n";
  }
  // Numbers no gateway writes: each line is skipped whole.
  log += R"({"ts":1000,"model":"m","policy":"chat","cause":"eos","duration_ms":1e300})"
         "\n";
  log += R"({"ts":1000,"model":"m","policy":"chat","cause":"eos","duration_ms":9300000000000000})"
         "\n";
  log += R"({"ts":1000,"model":"m","policy":"chat","cause":"eos","duration_ms":-5})"
         "\n";
  log += R"({"ts":1000,"model":"m","policy":"chat","cause":"eos","ttft_ms":1e400})"
         "\n";
  log += R"({"ts":1e300,"model":"m","policy":"chat","cause":"eos","duration_ms":10})"
         "\n";
  log += R"({"ts":1000,"model":"m","policy":"chat","cause":"eos","output_tokens":-1})"
         "\n";
  log += R"({"ts":1000,"model":"m","policy":"chat","cause":"eos","duration_ms":120})"
         "\n";
  Outcome r = run({"advise", write_temp("hostile.log", log)});
  ASSERT_EQ(r.rc, 0) << r.out;
  for (char c : r.out) {
    const unsigned char u = static_cast<unsigned char>(c);
    EXPECT_TRUE(c == '\n' || (u >= 0x20 && u < 0x7f)) << "raw byte " << int(u) << " in " << r.out;
  }
  EXPECT_NE(
      r.out.find(R"(policy "p\x1bx"  model "m\x1b]0;pwned\x07\x0d\xc2\x9b2J"  (10 requests))"),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("warning: 6 lines skipped"), std::string::npos) << r.out;
  // Only the sane line of "chat" counts; no deadline is 0 ms, none is absurdly long.
  EXPECT_NE(r.out.find("policy \"chat\"  model \"m\"  (1 requests)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  deadline                   180ms "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  deadline                   10ms "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("  deadline                   0ms"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("155000000000m"), std::string::npos) << r.out;
}

TEST(PolicyCommand, SchemaPrintsTheCheckedInFile) {
  Outcome r = run({"schema"});
  ASSERT_EQ(r.rc, 0);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_EQ(parser.parse(r.out).get(doc), simdjson::SUCCESS) << r.out;
  std::string_view draft;
  ASSERT_EQ(doc["$schema"].get(draft), simdjson::SUCCESS);
  EXPECT_EQ(draft, "http://json-schema.org/draft-07/schema#");
  bool closed = true;
  ASSERT_EQ(doc["additionalProperties"].get(closed), simdjson::SUCCESS);
  EXPECT_FALSE(closed);  // unknown top-level keys are refused, as the loader refuses them

  std::ifstream in(std::string(CUTLINE_SOURCE_DIR) + "/deploy/policy.schema.json",
                   std::ios::binary);
  ASSERT_TRUE(in);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(r.out == file)
      << "deploy/policy.schema.json differs from `cutline policy schema` (the key table in "
         "policy/src/keys.cc changed); regenerate it: build/tools/cutline policy schema > "
         "deploy/policy.schema.json";
}

}  // namespace
