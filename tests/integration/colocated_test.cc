// The co-located pair, end to end: the real cutline-gateway with a config whose upstream
// `spawn`s the real cutline-backend (tiny=builtin synthesized into a temp dir, plus a slower
// synthesized model for long streams). Checks what a user of deploy/run.sh relies on: a
// streamed answer carries the backend's TTFT phases inside the gateway's record; killing the
// backend mid-stream ends the stream with upstream_disconnect and the gateway restarts it;
// stopping the gateway stops the backend; the HTTP layer's own 413 carries a stop record.

#include <errno.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <simdjson.h>

#include "cutline/model/synth.h"
#include "cutline/proto/http/http_fetch.h"
#include "cutline/proto/wire/stop_record.h"
#include "gateway_harness.h"
#include "support/count_of.h"

namespace cutline::test {
namespace {

using proto::Cause;

// The stop record of an SSE body's last chunk (or of a JSON body's error.cutline).
std::optional<proto::StopRecord> record_in(const std::string& json) {
  simdjson::ondemand::parser parser;
  simdjson::padded_string padded(json);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS) return std::nullopt;
  simdjson::ondemand::object obj;
  simdjson::padded_string again;  // outlives the parse: `obj` points into it
  if (doc["cutline"].get_object().get(obj) != simdjson::SUCCESS) {
    again = simdjson::padded_string(json);
    if (parser.iterate(again).get(doc) != simdjson::SUCCESS) return std::nullopt;
    if (doc["error"]["cutline"].get_object().get(obj) != simdjson::SUCCESS) return std::nullopt;
  }
  auto r = proto::parse_stop_record(obj);
  if (!r.ok()) return std::nullopt;
  return std::move(r).value();
}

// "pid":N of the first process in a /readyz body; 0 when absent.
int pid_in(const std::string& readyz) {
  const size_t at = readyz.find("\"pid\":");
  return at == std::string::npos ? 0 : std::atoi(readyz.c_str() + at + 6);
}

int64_t restarts_in(const std::string& readyz) {
  const size_t at = readyz.find("\"restarts\":");
  return at == std::string::npos ? -1 : std::atoll(readyz.c_str() + at + 11);
}

class Colocated : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(make_temp_dir());
    // A model slow enough on the CPU that a long stream is still running when the test acts.
    model::SynthOptions slow;
    slow.layers = 8;
    slow.dim = 512;
    slow.heads = 8;
    slow.kv_heads = 4;
    slow.context = 8192;
    slow.seed = 3;
    const std::string slow_path = *dir_ + "/slow.gguf";
    ASSERT_TRUE(model::synthesize_tiny_model(slow, slow_path).ok());
    backend_port_ = free_port();
    const std::string config = *dir_ + "/cutline.yaml";
    std::ofstream(config) << "listen:\n  - address: 127.0.0.1:0\n"
                             "admin:\n  address: 127.0.0.1:0\n"
                             "access_log: "
                          << *dir_
                          << "/access.log\n"
                             "limits: {max_body_bytes: 4096}\n"
                             "upstreams:\n"
                             "  - name: local\n"
                             "    url: http://127.0.0.1:"
                          << backend_port_
                          << "\n"
                             "    models: [tiny, slow]\n"
                             "    spawn:\n"
                             "      command: ["
                          << CUTLINE_BACKEND_BIN << ", --port, \"" << backend_port_
                          << "\", --cache-dir, " << *dir_
                          << "/cache, --device, cpu, --kv-memory, 160MiB, --model, tiny=builtin, "
                             "--model, slow="
                          << slow_path
                          << "]\n"
                             "      ready_timeout: 60s\n"
                             // A second upstream (the same process under a path prefix) for
                             // passthrough routing by model.
                             "  - name: other\n"
                             "    url: http://127.0.0.1:"
                          << backend_port_
                          << "/other\n"
                             "    models: [\"alt-*\"]\n"
                             "policies:\n"
                             "  - name: clamp\n"
                             "    match: {routes: [/v1/responses], headers: {x-policy: clamp}}\n"
                             "    budget: {max_output_tokens: 4}\n"
                             "  - name: default\n"
                             "    deadline: 60s\n";
    gateway_ = new Process();
    gateway_->start({CUTLINE_GATEWAY_BIN, "--config", config, "--ready-file", *dir_ + "/ready.json",
                     "--drain-timeout", "1s"},
                    *dir_ + "/gateway.out", *dir_ + "/gateway.err");
    ASSERT_TRUE(wait_for([] { return !read_file(*dir_ + "/ready.json").empty(); }, 60000))
        << read_file(*dir_ + "/gateway.err");
    const std::string ready = read_file(*dir_ + "/ready.json");
    port_ = static_cast<uint16_t>(std::atoi(ready.c_str() + ready.find(':') + 1));
    admin_port_ = static_cast<uint16_t>(std::atoi(ready.c_str() + ready.rfind(':') + 1));
  }
  static void TearDownTestSuite() {
    delete gateway_;  // stops it (SIGTERM) if a test did not
    gateway_ = nullptr;
  }

  static std::string url(const std::string& path) {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  static proto::HttpResponse readyz() {
    auto r = proto::http_fetch("http://127.0.0.1:" + std::to_string(admin_port_) + "/readyz", "GET",
                               {}, {}, 5000);
    return r.ok() ? std::move(r).value() : proto::HttpResponse{};
  }
  static Result<proto::HttpResponse> chat(const std::string& model, int max_tokens) {
    return proto::http_fetch(
        url("/v1/chat/completions"), "POST", {{"Content-Type", "application/json"}},
        R"({"model":")" + model +
            R"(","messages":[{"role":"user","content":"Hello"}],"max_tokens":)" +
            std::to_string(max_tokens) + R"(,"stream":true})",
        30000);
  }

  static std::string* dir_;
  static Process* gateway_;
  static uint16_t backend_port_, port_, admin_port_;
};

std::string* Colocated::dir_ = nullptr;
Process* Colocated::gateway_ = nullptr;
uint16_t Colocated::backend_port_ = 0;
uint16_t Colocated::port_ = 0;
uint16_t Colocated::admin_port_ = 0;

TEST_F(Colocated, ReadyzReportsTheSupervisedBackend) {
  const proto::HttpResponse r = readyz();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find(R"("upstream":"local","state":"ready")"), std::string::npos) << r.body;
  EXPECT_GT(pid_in(r.body), 0) << r.body;
  auto m = proto::http_fetch("http://127.0.0.1:" + std::to_string(admin_port_) + "/metrics");
  ASSERT_TRUE(m.ok());
  EXPECT_NE(m->body.find(R"(cutline_upstream_ready{upstream="local"} 1)"), std::string::npos);
}

TEST_F(Colocated, StreamCarriesBackendPhasesInTheGatewayRecord) {
  auto r = chat("tiny", 12);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->status, 200) << r->body;
  bool done = false;
  const auto chunks = sse_payloads(r->body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(chunks.size(), 2u) << r->body;
  auto rec = record_in(chunks.back());
  ASSERT_TRUE(rec) << chunks.back();
  EXPECT_EQ(rec->reporter, "gateway");
  EXPECT_TRUE(rec->cause == Cause::kClientMaxTokens || rec->cause == Cause::kEos)
      << proto::to_string(rec->cause);
  EXPECT_GT(rec->output_tokens, 0);
  ASSERT_TRUE(rec->phases) << chunks.back();  // merged from the backend's own record
  EXPECT_GT(rec->phases->prefill_ms + rec->phases->first_decode_ms, 0) << chunks.back();
  EXPECT_FALSE(rec->model_state.empty()) << chunks.back();
}

TEST_F(Colocated, BodyTooLargeAnsweredByTheHttpLayerCarriesAStopRecord) {
  const std::string big(8192, 'x');
  auto r = proto::http_fetch(
      url("/v1/chat/completions"), "POST", {{"Content-Type", "application/json"}},
      R"({"model":"tiny","messages":[{"role":"user","content":")" + big + R"("}]})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 413) << r->body;
  EXPECT_TRUE(r->headers.get("Cutline-Stop").has_value());
  auto rec = record_in(r->body);
  ASSERT_TRUE(rec) << r->body;
  EXPECT_EQ(rec->cause, Cause::kInvalidRequest);  // the client's request, not capacity
  EXPECT_EQ(rec->rule, "limits.max_body_bytes");
  EXPECT_TRUE(wait_for([] {
    return read_file(*dir_ + "/access.log").find("limits.max_body_bytes") != std::string::npos;
  })) << read_file(*dir_ + "/access.log");
  auto m = proto::http_fetch("http://127.0.0.1:" + std::to_string(admin_port_) + "/metrics");
  ASSERT_TRUE(m.ok());
  EXPECT_NE(m->body.find(R"(cause="invalid_request")"), std::string::npos) << m->body;
}

TEST_F(Colocated, KilledBackendEndsTheStreamLabeledAndIsRestarted) {
  const int pid = pid_in(readyz().body);
  ASSERT_GT(pid, 0);
  const int64_t restarts = restarts_in(readyz().body);
  RawClient client(port_);
  ASSERT_TRUE(client.connected());
  client.send_all(http_post_raw(
      "/v1/chat/completions",
      R"({"model":"slow","messages":[{"role":"user","content":"Tell me a long story"}],"max_tokens":6000,"ignore_eos":true,"stream":true})"));
  const std::string first = client.read_until("\"content\":", 30000);
  ASSERT_NE(first.find("\"content\":"), std::string::npos) << first;
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  const std::string all = client.read_until("[DONE]", 15000);
  ASSERT_NE(all.find("[DONE]"), std::string::npos)
      << all.substr(all.size() > 2000 ? all.size() - 2000 : 0);
  // Chunked framing: the SSE parser sees the size lines as noise only between events, so pick
  // the last "data: {" line directly.
  const size_t at = all.rfind("data: {");
  ASSERT_NE(at, std::string::npos);
  const std::string last = all.substr(at + 6, all.find('\n', at) - at - 6);
  auto rec = record_in(last);
  ASSERT_TRUE(rec) << last;
  EXPECT_EQ(rec->cause, Cause::kUpstreamDisconnect) << last;
  // A failed stream's end, not a finish: an error event carrying the record.
  EXPECT_EQ(last.rfind(R"({"error":{)", 0), 0u) << last;
  EXPECT_EQ(all.find(R"("finish_reason":"length")"), std::string::npos) << last;

  // The gateway starts a new backend and says so on /readyz and in the metrics.
  std::string ready_body;
  ASSERT_TRUE(wait_for(
      [&] {
        const proto::HttpResponse r = readyz();
        ready_body = r.body;
        return r.status == 200 && restarts_in(r.body) == restarts + 1;
      },
      30000))
      << ready_body << read_file(*dir_ + "/gateway.err");
  EXPECT_NE(pid_in(ready_body), pid);
  EXPECT_NE(ready_body.find(R"("last_exit":"killed by signal 9)"), std::string::npos) << ready_body;
  auto m = proto::http_fetch("http://127.0.0.1:" + std::to_string(admin_port_) + "/metrics");
  ASSERT_TRUE(m.ok());
  EXPECT_NE(m->body.find(R"(cutline_upstream_process_restarts_total{upstream="local"})"),
            std::string::npos);
  // The next request is served by the new process.
  auto r = chat("tiny", 4);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 200) << r->body;
  auto rec2 = record_in(sse_payloads(r->body).back());
  ASSERT_TRUE(rec2);
  EXPECT_FALSE(rec2->truncated() && rec2->cause != Cause::kClientMaxTokens)
      << proto::to_string(rec2->cause);
}

// The Responses API against the real backend, through the policy: the rule's budget clamps
// max_output_tokens on the way in, and the answer ends `incomplete` (reason max_output_tokens)
// with the gateway's record, streamed and not; the backend's TTFT phases are merged into it.
TEST_F(Colocated, ResponsesFromTheBackendAreClampedByTheBudgetAndEndIncompleteLabeled) {
  const proto::HttpHeaders headers{{"Content-Type", "application/json"}, {"X-Policy", "clamp"}};
  const std::string body =
      R"({"model":"tiny","input":"Tell me a long story","max_output_tokens":64,"temperature":0)";
  auto whole = proto::http_fetch(url("/v1/responses"), "POST", headers, body + "}", 30000);
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  ASSERT_EQ(whole->status, 200) << whole->body;
  EXPECT_NE(whole->body.find(R"("object":"response")"), std::string::npos) << whole->body;
  EXPECT_NE(whole->body.find(R"("status":"incomplete")"), std::string::npos) << whole->body;
  EXPECT_NE(whole->body.find(R"("incomplete_details":{"reason":"max_output_tokens"})"),
            std::string::npos)
      << whole->body;
  EXPECT_NE(whole->body.find(R"("output_tokens":4)"), std::string::npos) << whole->body;
  EXPECT_NE(whole->body.find(R"("cause":"gateway_budget")"), std::string::npos) << whole->body;
  // One record, the gateway's: the backend's own (client_max_tokens, from its point of view) is
  // replaced, not left beside it for a JSON reader that keeps the last member to pick up.
  EXPECT_EQ(count_of(whole->body, R"("cutline":)"), 1u) << whole->body;
  EXPECT_EQ(whole->body.find(R"("cause":"client_max_tokens")"), std::string::npos) << whole->body;
  EXPECT_NE(whole->body.find(R"("phases":{)"), std::string::npos) << whole->body;
  EXPECT_EQ(whole->headers.get("Cutline-Stop").value_or("").rfind("cause=gateway_budget;", 0), 0u);

  auto streamed =
      proto::http_fetch(url("/v1/responses"), "POST", headers, body + R"(,"stream":true})", 30000);
  ASSERT_TRUE(streamed.ok()) << streamed.error().message;
  ASSERT_EQ(streamed->status, 200) << streamed->body;
  const std::string& sse = streamed->body;
  EXPECT_NE(sse.find("event: response.output_text.delta"), std::string::npos) << sse;
  const size_t last_event = sse.rfind("event: ");
  ASSERT_NE(last_event, std::string::npos) << sse;
  EXPECT_EQ(sse.compare(last_event, 27, "event: response.incomplete\n"), 0) << sse;
  const std::string last = sse.substr(last_event);
  EXPECT_NE(last.find(R"("reason":"max_output_tokens")"), std::string::npos) << last;
  EXPECT_NE(last.find(R"("cause":"gateway_budget")"), std::string::npos) << last;
  EXPECT_EQ(count_of(last, R"("cutline":)"), 1u) << last;
  EXPECT_EQ(last.find(R"("cause":"client_max_tokens")"), std::string::npos) << last;
  EXPECT_NE(last.find(R"("effective_max_tokens":4)"), std::string::npos) << last;
  EXPECT_NE(last.find(R"("phases":{)"), std::string::npos) << last;  // the backend's, merged
  EXPECT_EQ(sse.find("[DONE]"), std::string::npos);
}

// Passthrough and embeddings requests go to the upstream serving the model they name; the model
// list merges every upstream's (so its log line names none).
TEST_F(Colocated, PassthroughIsRoutedByTheModelItNames) {
  auto a = proto::http_fetch(url("/v1/models/alt-1"));
  ASSERT_TRUE(a.ok());
  auto b = proto::http_fetch(url("/v1/embeddings"), "POST", {{"Content-Type", "application/json"}},
                             R"({"input":"x","model":"alt-2"})");
  ASSERT_TRUE(b.ok());
  auto c = proto::http_fetch(url("/v1/models"));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->status, 200) << c->body;
  EXPECT_NE(c->body.find("tiny"), std::string::npos) << c->body;
  std::string log;
  ASSERT_TRUE(wait_for([&] {
    log = read_file(*dir_ + "/access.log");
    return log.find(R"("path":"/v1/models")") != std::string::npos;
  })) << log;
  auto upstream_of = [&](const std::string& path) {
    const size_t at = log.find(R"("path":")" + path + "\"");
    if (at == std::string::npos) return std::string("(no line)");
    const size_t u = log.find(R"("upstream":")", at);
    return log.substr(u + 12, log.find('"', u + 12) - u - 12);
  };
  EXPECT_EQ(upstream_of("/v1/models/alt-1"), "other") << log;
  EXPECT_EQ(upstream_of("/v1/embeddings"), "other") << log;
  EXPECT_EQ(upstream_of("/v1/models"), "") << log;
}

// Last: stops the gateway of the suite. A stream still running when the drain timeout (1 s
// here) passes ends labeled; then the gateway stops its backend.
TEST_F(Colocated, ZzShutdownDrainsCutsTheRestAndStopsTheBackend) {
  const int pid = pid_in(readyz().body);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, 0), 0);
  RawClient client(port_);
  ASSERT_TRUE(client.connected());
  client.send_all(http_post_raw(
      "/v1/chat/completions",
      R"({"model":"slow","messages":[{"role":"user","content":"Tell me a long story"}],"max_tokens":6000,"ignore_eos":true,"stream":true})"));
  ASSERT_NE(client.read_until("\"content\":", 30000).find("\"content\":"), std::string::npos);
  gateway_->signal(SIGTERM);
  const std::string all = client.read_until("[DONE]", 15000);
  const size_t at = all.rfind("data: {");
  ASSERT_NE(at, std::string::npos);
  const std::string last = all.substr(at + 6, all.find('\n', at) - at - 6);
  auto rec = record_in(last);
  ASSERT_TRUE(rec) << last;
  EXPECT_EQ(rec->cause, Cause::kGatewayDeadline) << last;
  EXPECT_EQ(rec->rule, "shutdown.drain_timeout") << last;
  EXPECT_EQ(rec->limit, 1000) << last;
  // Waits for the gateway to exit; it stops its child first (SIGTERM, SIGKILL after 10 s), so
  // allow more than that before killing the gateway itself.
  gateway_->stop(20000);
  EXPECT_EQ(kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  const std::string err = read_file(*dir_ + "/gateway.err");
  // Either it stopped on SIGTERM or, past the 10 s grace, the gateway killed it; what a user
  // relies on is that no backend outlives the gateway (checked above). On a loaded machine the
  // backend has been seen to need the SIGKILL.
  EXPECT_TRUE(err.find("upstream \"local\": stopped") != std::string::npos ||
              err.find("upstream \"local\": no exit") != std::string::npos)
      << err;
}

// /readyz answers (503, naming it) even when an upstream accepts connections but never answers.
TEST(ReadyzProbe, AnUpstreamThatNeverAnswersIsReportedWithinTheProbeTimeout) {
  const int silent = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(silent, 16), 0);  // the kernel completes connections; nobody reads
  socklen_t len = sizeof a;
  getsockname(silent, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string dir = make_temp_dir();
  std::ofstream(dir + "/cutline.yaml")
      << "listen:\n  - address: 127.0.0.1:0\nadmin:\n  address: 127.0.0.1:0\naccess_log: off\n"
         "upstreams:\n  - name: silent\n    url: http://127.0.0.1:"
      << ntohs(a.sin_port) << "\npolicies:\n  - name: default\n";
  Process gateway;
  gateway.start(
      {CUTLINE_GATEWAY_BIN, "--config", dir + "/cutline.yaml", "--ready-file", dir + "/ready.json"},
      dir + "/gateway.out", dir + "/gateway.err");
  ASSERT_TRUE(wait_for([&] { return !read_file(dir + "/ready.json").empty(); }))
      << read_file(dir + "/gateway.err");
  const std::string ready = read_file(dir + "/ready.json");
  const int admin = std::atoi(ready.c_str() + ready.rfind(':') + 1);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = proto::http_fetch("http://127.0.0.1:" + std::to_string(admin) + "/readyz", "GET", {}, {},
                             10000);
  const double took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_NE(r->body.find(R"("unreachable":["silent"])"), std::string::npos) << r->body;
  EXPECT_LT(took_s, 5.0);
  gateway.stop();
  ::close(silent);
}

// A KV pool far too small for 8 concurrent answers: the backend preempts (recompute) and the
// gateway's record for each answer carries the count it merged from the backend's own record;
// the access log says the same. Every answer either completes or says why not.
TEST(ColocatedTinyKv, PreemptionsAreCountedAndVisibleThroughTheGateway) {
  const std::string dir = make_temp_dir();
  const uint16_t backend_port = free_port();
  const std::string config = dir + "/cutline.yaml";
  std::ofstream(config) << "listen:\n  - address: 127.0.0.1:0\n"
                           "admin:\n  address: 127.0.0.1:0\n"
                           "access_log: "
                        << dir
                        << "/access.log\n"
                           "upstreams:\n"
                           "  - name: local\n"
                           "    url: http://127.0.0.1:"
                        << backend_port
                        << "\n"
                           "    models: [tiny]\n"
                           "    spawn:\n"
                           "      command: ["
                        << CUTLINE_BACKEND_BIN << ", --port, \"" << backend_port
                        << "\", --cache-dir, " << dir
                        << "/cache, --device, cpu, --kv-memory, 96KiB, --model, tiny=builtin]\n"
                           "      ready_timeout: 60s\n"
                           "policies:\n"
                           "  - name: default\n"
                           "    deadline: 60s\n";
  Process gateway;
  gateway.start({CUTLINE_GATEWAY_BIN, "--config", config, "--ready-file", dir + "/ready.json"},
                dir + "/gateway.out", dir + "/gateway.err");
  ASSERT_TRUE(wait_for([&] { return !read_file(dir + "/ready.json").empty(); }, 60000))
      << read_file(dir + "/gateway.err");
  const std::string ready = read_file(dir + "/ready.json");
  const auto port = static_cast<uint16_t>(std::atoi(ready.c_str() + ready.find(':') + 1));
  const std::string chat_url = "http://127.0.0.1:" + std::to_string(port) + "/v1/chat/completions";

  constexpr int kClients = 8;
  std::vector<std::future<std::optional<proto::StopRecord>>> answers;
  for (int i = 0; i < kClients; ++i) {
    answers.push_back(
        std::async(std::launch::async, [&chat_url]() -> std::optional<proto::StopRecord> {
          auto r = proto::http_fetch(
              chat_url, "POST", {{"Content-Type", "application/json"}},
              R"({"model":"tiny","messages":[{"role":"user","content":"Hello"}],"max_tokens":100,)"
              R"("ignore_eos":true,"seed":1,"stream":true})",
              60000);
          if (!r.ok() || r->status != 200) return std::nullopt;
          const auto chunks = sse_payloads(r->body, nullptr);
          if (chunks.empty()) return std::nullopt;
          return record_in(chunks.back());
        }));
  }
  int64_t preemptions = 0;
  for (auto& a : answers) {
    auto rec = a.get();
    ASSERT_TRUE(rec.has_value());
    EXPECT_EQ(rec->reporter, "gateway");
    preemptions += rec->preemptions.value_or(0);
    EXPECT_TRUE(rec->cause == Cause::kClientMaxTokens || rec->cause == Cause::kBackendPreempted)
        << proto::to_string(rec->cause);
  }
  EXPECT_GT(preemptions, 0) << "a 96 KiB pool should not fit 8 answers of 100 tokens";
  const std::string log = read_file(dir + "/access.log");
  EXPECT_NE(log.find("\"preemptions\":"), std::string::npos) << log;
  gateway.stop();
}

}  // namespace
}  // namespace cutline::test
