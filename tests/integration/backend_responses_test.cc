// POST /v1/responses on the real cutline-backend (tiny=builtin): the response object, the
// streaming event sequence of OpenAI's Responses API, the `cutline` record, bad input; and the
// official openai npm SDK's responses.create / responses.stream against it.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "backend_harness.h"
#include "support/ci.h"

namespace cutline::test {
namespace {

class BackendResponses : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    backend_ = new Backend();
    ASSERT_TRUE(backend_->start({"--model", "tiny=builtin"})) << backend_->stderr_text();
  }
  static void TearDownTestSuite() {
    delete backend_;
    backend_ = nullptr;
  }
  static Backend* backend_;
};
Backend* BackendResponses::backend_ = nullptr;

bool json_is_null(const std::string& json, const std::string& pointer) {
  simdjson::dom::parser parser;
  auto doc = parser.parse(json);
  if (doc.error()) return false;
  auto v = doc.at_pointer(pointer);
  return !v.error() && v.is_null();
}

// The SSE frames of a Responses stream: the `event:` name and the data.
struct Frame {
  std::string event;
  std::string data;
};
std::vector<Frame> frames_of(const std::string& body) {
  proto::SseParser p;
  std::string_view in = body;
  std::vector<Frame> out;
  while (p.next(in) == proto::SseParser::Step::kEvent)
    out.push_back({std::string(p.event().event), std::string(p.event().data)});
  return out;
}

TEST_F(BackendResponses, TextInputGivesTheResponseObjectWithRecord) {
  auto r = backend_->post(
      "/v1/responses", R"({"model":"tiny","input":"Hello there","max_output_tokens":8,"seed":7})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string& b = r->body;
  EXPECT_EQ(json_string(b, "/object"), "response");
  EXPECT_EQ(json_string(b, "/id").rfind("resp_", 0), 0u) << b;
  EXPECT_GT(json_number(b, "/created_at"), 1.6e9);
  // The client's limit ended it: incomplete, as the API says it.
  EXPECT_EQ(json_string(b, "/status"), "incomplete") << b;
  EXPECT_EQ(json_string(b, "/incomplete_details/reason"), "max_output_tokens");
  EXPECT_TRUE(json_is_null(b, "/error"));
  EXPECT_EQ(json_number(b, "/max_output_tokens"), 8);
  EXPECT_EQ(json_string(b, "/model"), "tiny");
  EXPECT_EQ(json_string(b, "/output/0/type"), "message");
  EXPECT_EQ(json_string(b, "/output/0/role"), "assistant");
  EXPECT_EQ(json_string(b, "/output/0/status"), "incomplete");
  EXPECT_EQ(json_string(b, "/output/0/id").rfind("msg_", 0), 0u);
  EXPECT_EQ(json_string(b, "/output/0/content/0/type"), "output_text");
  EXPECT_NE(json_string(b, "/output/0/content/0/text"), "<absent>");
  EXPECT_EQ(json_number(b, "/usage/output_tokens"), 8);
  const double input = json_number(b, "/usage/input_tokens");
  EXPECT_GT(input, 0);
  EXPECT_EQ(json_number(b, "/usage/total_tokens"), input + 8);
  EXPECT_GE(json_number(b, "/usage/input_tokens_details/cached_tokens"), 0);
  EXPECT_EQ(json_number(b, "/usage/output_tokens_details/reasoning_tokens"), 0);
  auto rec = cutline_of(b);
  ASSERT_TRUE(rec.has_value()) << b;
  EXPECT_EQ(rec->cause, proto::Cause::kClientMaxTokens);
  EXPECT_EQ(rec->reporter, "backend");
  EXPECT_EQ(rec->output_tokens, 8);
  EXPECT_EQ(rec->requested_max_tokens, 8);
  EXPECT_EQ(rec->request_id, json_string(b, "/id"));
  ASSERT_TRUE(rec->phases.has_value());
  auto header = r->headers.get("Cutline-Stop");
  ASSERT_TRUE(header.has_value());
  EXPECT_NE(header->find("cause=client_max_tokens"), std::string::npos);
}

// The message list goes through the same chat template as chat completions: the same
// conversation and seed give the same text and prompt size on both APIs.
TEST_F(BackendResponses, MessageListAndInstructionsMatchChatCompletions) {
  auto resp = backend_->post(
      "/v1/responses",
      R"({"model":"tiny","instructions":"Be brief.",)"
      R"("input":[{"role":"user","content":"Hello"},)"
      R"({"role":"assistant","content":[{"type":"output_text","text":"Hi!"}]},)"
      R"({"type":"message","role":"user","content":[)"
      R"({"type":"input_text","text":"How "},{"type":"input_text","text":"are you?"}]}],)"
      R"("max_output_tokens":6,"seed":3,"temperature":0.8})");
  auto chat =
      backend_->post("/v1/chat/completions",
                     R"({"model":"tiny","messages":[{"role":"system","content":"Be brief."},)"
                     R"({"role":"user","content":"Hello"},{"role":"assistant","content":"Hi!"},)"
                     R"({"role":"user","content":"How are you?"}],"max_tokens":6,"seed":3,)"
                     R"("temperature":0.8})");
  ASSERT_TRUE(resp.ok() && chat.ok());
  ASSERT_EQ(resp->status, 200) << resp->body;
  ASSERT_EQ(chat->status, 200) << chat->body;
  EXPECT_EQ(json_string(resp->body, "/output/0/content/0/text"),
            json_string(chat->body, "/choices/0/message/content"));
  EXPECT_EQ(json_number(resp->body, "/usage/input_tokens"),
            json_number(chat->body, "/usage/prompt_tokens"));
  EXPECT_EQ(json_string(resp->body, "/instructions"), "Be brief.");
  EXPECT_EQ(json_number(resp->body, "/temperature"), 0.8);

  // A string input is one user message.
  auto as_string = backend_->post(
      "/v1/responses", R"({"model":"tiny","input":"Hello","max_output_tokens":5,"seed":9})");
  auto as_list = backend_->post("/v1/responses",
                                R"({"model":"tiny","input":[{"role":"user","content":"Hello"}],)"
                                R"("max_output_tokens":5,"seed":9})");
  ASSERT_TRUE(as_string.ok() && as_list.ok());
  EXPECT_EQ(json_string(as_string->body, "/output/0/content/0/text"),
            json_string(as_list->body, "/output/0/content/0/text"));
  EXPECT_EQ(json_number(as_string->body, "/usage/input_tokens"),
            json_number(as_list->body, "/usage/input_tokens"));
}

TEST_F(BackendResponses, StreamingEmitsTheApiEventSequence) {
  auto r = backend_->post("/v1/responses", R"({"model":"tiny","input":"Tell me a story",)"
                                           R"("max_output_tokens":10,"seed":7,"stream":true})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->headers.get("Content-Type").value_or(""), "text/event-stream");
  const std::vector<Frame> frames = frames_of(r->body);
  ASSERT_GE(frames.size(), 9u) << r->body;
  std::vector<std::string> types;
  std::string deltas;
  for (size_t i = 0; i < frames.size(); ++i) {
    const Frame& f = frames[i];
    const std::string type = json_string(f.data, "/type");
    EXPECT_EQ(f.event, type) << f.data;  // the SSE event name is the payload's type
    EXPECT_EQ(json_number(f.data, "/sequence_number"), static_cast<double>(i)) << f.data;
    if (type == "response.output_text.delta") {
      deltas += json_string(f.data, "/delta");
      EXPECT_EQ(json_number(f.data, "/output_index"), 0);
      EXPECT_EQ(json_number(f.data, "/content_index"), 0);
      EXPECT_EQ(json_string(f.data, "/item_id").rfind("msg_", 0), 0u);
    }
    if (types.empty() || types.back() != type) types.push_back(type);
  }
  const std::vector<std::string> expected = {
      "response.created",           "response.in_progress",
      "response.output_item.added", "response.content_part.added",
      "response.output_text.delta", "response.output_text.done",
      "response.content_part.done", "response.output_item.done",
      "response.incomplete"};
  EXPECT_EQ(types, expected);
  EXPECT_EQ(json_string(frames[0].data, "/response/status"), "in_progress");
  EXPECT_EQ(json_string(frames[2].data, "/item/role"), "assistant");
  EXPECT_EQ(json_string(frames[3].data, "/part/type"), "output_text");
  const Frame& text_done = frames[frames.size() - 4];
  EXPECT_EQ(json_string(text_done.data, "/text"), deltas);
  EXPECT_EQ(json_string(frames[frames.size() - 2].data, "/item/content/0/text"), deltas);
  // The final response object: the whole text, usage, the record.
  const std::string& last = frames.back().data;
  EXPECT_EQ(json_string(last, "/response/status"), "incomplete");
  EXPECT_EQ(json_string(last, "/response/incomplete_details/reason"), "max_output_tokens");
  EXPECT_EQ(json_string(last, "/response/output/0/content/0/text"), deltas);
  EXPECT_EQ(json_number(last, "/response/usage/output_tokens"), 10);
  auto rec = cutline_of(last);
  ASSERT_TRUE(rec.has_value()) << last;
  EXPECT_EQ(rec->cause, proto::Cause::kClientMaxTokens);
  EXPECT_EQ(rec->output_tokens, 10);
  EXPECT_NE(std::string(r->trailers.get("cutline-stop").value_or("")).find("client_max_tokens"),
            std::string::npos);

  // The same request without streaming gives the same text (same seed).
  auto whole = backend_->post("/v1/responses", R"({"model":"tiny","input":"Tell me a story",)"
                                               R"("max_output_tokens":10,"seed":7})");
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(json_string(whole->body, "/output/0/content/0/text"), deltas);
}

// A model stop (eos) is "completed": no incomplete_details, the item completed, the stream's last
// event response.completed. The tiny model ends some answers with EOS; the first seed that does
// is used.
TEST_F(BackendResponses, ModelStopCompletesStreamedAndNot) {
  std::string seed;
  std::string body;
  for (int s = 1; s <= 60 && seed.empty(); ++s) {
    auto r = backend_->post("/v1/responses",
                            R"({"model":"tiny","input":"Hi","max_output_tokens":300,"seed":)" +
                                std::to_string(s) + "}");
    ASSERT_TRUE(r.ok());
    if (json_string(r->body, "/status") == "completed") {
      seed = std::to_string(s);
      body = r->body;
    }
  }
  ASSERT_FALSE(seed.empty()) << "no seed in 1..60 ended with EOS";
  EXPECT_TRUE(json_is_null(body, "/incomplete_details")) << body;
  EXPECT_EQ(json_string(body, "/output/0/status"), "completed");
  auto rec = cutline_of(body);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->cause, proto::Cause::kEos);
  EXPECT_LT(json_number(body, "/usage/output_tokens"), 300);

  auto streamed = backend_->post(
      "/v1/responses", R"({"model":"tiny","input":"Hi","max_output_tokens":300,"seed":)" + seed +
                           R"(,"stream":true})");
  ASSERT_TRUE(streamed.ok());
  const std::vector<Frame> frames = frames_of(streamed->body);
  ASSERT_FALSE(frames.empty());
  const std::string& last = frames.back().data;
  EXPECT_EQ(json_string(last, "/type"), "response.completed") << last;
  EXPECT_EQ(json_string(last, "/response/status"), "completed");
  EXPECT_EQ(json_string(frames[frames.size() - 2].data, "/item/status"), "completed");
  EXPECT_EQ(json_string(last, "/response/output/0/content/0/text"),
            json_string(body, "/output/0/content/0/text"));
  ASSERT_TRUE(cutline_of(last).has_value());
  EXPECT_EQ(cutline_of(last)->cause, proto::Cause::kEos);
}

TEST_F(BackendResponses, BadInputIsAnOpenAiStyle400) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"model":"tiny"})", "input"},
      {R"({"model":"tiny","input":42})", "input"},
      {R"({"model":"tiny","input":[]})", "input"},
      {R"({"model":"tiny","input":[{"role":"user"}]})", "input"},
      {R"({"model":"tiny","input":[{"role":"robot","content":"x"}]})", "input"},
      {R"({"model":"tiny","input":[{"type":"function_call","call_id":"c","name":"f"}]})", "input"},
      {R"({"model":"tiny","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]})",
       "input"},
      {R"({"model":"tiny","input":"x","max_output_tokens":0})", "max_output_tokens"},
      {R"({"model":"tiny","input":"x","max_output_tokens":"9"})", "max_output_tokens"},
      {R"({"model":"tiny","input":"x","temperature":3})", "temperature"},
      {R"({"model":"tiny","input":"x","top_p":0})", "top_p"},
      {R"({"model":"tiny","input":"x","stream":"yes"})", "stream"},
      {R"({"model":"tiny","input":"x","instructions":5})", "instructions"},
      {R"({"model":"tiny","input":"x","top_logprobs":21})", "top_logprobs"},
      {R"({"model":"tiny","input":"x","tools":[{"type":"function","name":"f"}]})", "tools"},
      {R"({"model":"tiny","input":"x","previous_response_id":"resp_1"})", "previous_response_id"},
      {R"({"input":"x"})", "model"},
      {R"({"model":"tiny","input":"x")", ""},
      {"[1,2]", ""},
      {"{\"model\":\"tiny\",\"input\":\"\xff\xfe\"}", ""},
  };
  for (const auto& [body, param] : cases) {
    auto r = backend_->post("/v1/responses", body);
    ASSERT_TRUE(r.ok()) << body;
    EXPECT_EQ(r->status, 400) << body << " -> " << r->body;
    EXPECT_EQ(json_string(r->body, "/error/type"), "invalid_request_error") << r->body;
    if (!param.empty()) {
      EXPECT_EQ(json_string(r->body, "/error/param"), param) << r->body;
    }
  }
  auto unknown = backend_->post("/v1/responses", R"({"model":"nope","input":"x"})");
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->status, 404);
  EXPECT_NE(unknown->body.find("model_not_found"), std::string::npos) << unknown->body;
  auto get = backend_->get("/v1/responses");
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->status, 400);
  // Still serving.
  auto ok =
      backend_->post("/v1/responses", R"({"model":"tiny","input":"x","max_output_tokens":2})");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 200) << ok->body;
}

// The official openai npm SDK (tests/integration/openai_npm, installed by deploy/setup.sh):
// client.responses.create and client.responses.stream against the backend. Under CI=true a
// missing node or SDK fails the test instead of skipping it.
TEST_F(BackendResponses, OfficialOpenaiNpmSdkCreatesAndStreamsResponses) {
  const bool ci = cutline::test::running_in_ci();
  const std::string dir = CUTLINE_OPENAI_NPM_DIR;
  if (read_file(dir + "/node_modules/openai/package.json").empty()) {
    if (ci) FAIL() << "the openai npm SDK is not installed in " << dir << " (deploy/setup.sh)";
    GTEST_SKIP() << "run `npm install --prefix " << dir << "` (deploy/setup.sh does) first";
  }
  const std::string out = backend_->dir() + "/node_responses.out";
  const std::string err = backend_->dir() + "/node_responses.err";
  const int code = run_to_exit({"/usr/bin/env", "node", dir + "/openai_responses.mjs",
                                "http://127.0.0.1:" + std::to_string(backend_->port()) + "/v1"},
                               out, err, 60000);
  if (code == 127) {
    if (ci) FAIL() << "node is not installed";
    GTEST_SKIP() << "node is not installed";
  }
  const std::string result = read_file(out);
  ASSERT_EQ(code, 0) << result << read_file(err);
  EXPECT_NE(result.find("\"ok\":true"), std::string::npos) << result;
}

}  // namespace
}  // namespace cutline::test
