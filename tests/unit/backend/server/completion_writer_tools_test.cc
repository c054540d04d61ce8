// The chat writer with tool calling on: the text a model streams, cut anywhere, comes out as
// OpenAI's tool-call shapes, which an OpenAI client's merging (the assembler) puts back together.
#include <gtest/gtest.h>

#include <cstdlib>

#include "cutline/proto/sse/sse_parser.h"
#include "cutline/proto/wire/completion_assembler.h"
#include "cutline/server/completion_writer.h"
#include "writer_test_support.h"

namespace cutline::server {
namespace {

using test::ByteTokenizer;
using test::RecordingStream;

std::vector<std::string> data_of(const std::string& body) {
  proto::SseParser p;
  std::string_view in = body;
  std::vector<std::string> out;
  while (p.next(in) == proto::SseParser::Step::kEvent) out.emplace_back(p.event().data);
  return out;
}

CompletionParams tool_params(bool stream, std::string forced_prefix = "") {
  CompletionParams p;
  p.stream = stream;
  p.model = "qwen";
  p.id = "chatcmpl-1";
  p.created = 1700000000;
  p.tools.parse = true;
  p.tools.forced_prefix = std::move(forced_prefix);
  p.make_call_id = [n = 0]() mutable { return "call_" + std::to_string(n++); };
  return p;
}

// Writes `pieces` as the model's text events, then ends with `cause`.
std::string run(CompletionParams params, const std::vector<std::string>& pieces,
                proto::Cause cause) {
  ByteTokenizer tok;
  RecordingStream http;
  CompletionWriter w(std::move(params), tok);
  w.start(http);
  for (const std::string& piece : pieces) w.text(http, piece, {});
  proto::StopRecord stop;
  stop.cause = cause;
  engine::SequenceRecord rec;
  rec.cause = cause;
  rec.output_tokens = 40;
  w.finish(http, stop, rec);
  EXPECT_TRUE(http.finished_);
  EXPECT_EQ(http.status_, 200);
  return http.body_;
}

const std::string kAnswer =
    "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": "
    "{}}\n</tool_call>";

TEST(CompletionWriterTools, StreamedCallsSplitAnywhereAssembleAsOpenAISendsThem) {
  for (size_t cut = 0; cut <= kAnswer.size(); ++cut) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    const std::string body =
        run(tool_params(true), {kAnswer.substr(0, cut), kAnswer.substr(cut)}, proto::Cause::kEos);
    std::vector<std::string> chunks = data_of(body);
    ASSERT_GE(chunks.size(), 6u);
    ASSERT_EQ(chunks.back(), "[DONE]");
    chunks.pop_back();
    proto::CompletionAssembler assembler;
    for (const std::string& c : chunks) {
      ASSERT_TRUE(assembler.add(c).ok()) << c;
      EXPECT_EQ(c.find("<tool_call>"), std::string::npos) << c;
    }
    ASSERT_EQ(assembler.choices().size(), 1u);
    const proto::AssembledChoice& choice = assembler.choices()[0];
    EXPECT_EQ(choice.content, "Checking.");
    EXPECT_EQ(choice.finish_reason, "tool_calls");
    ASSERT_EQ(choice.tool_calls.size(), 2u);
    EXPECT_EQ(choice.tool_calls[0].id, "call_0");
    EXPECT_EQ(choice.tool_calls[0].type, "function");
    EXPECT_EQ(choice.tool_calls[0].name, "get_weather");
    EXPECT_EQ(choice.tool_calls[0].arguments, "{\"city\":\"Paris\"}");
    EXPECT_EQ(choice.tool_calls[1].id, "call_1");
    EXPECT_EQ(choice.tool_calls[1].name, "now");
    EXPECT_EQ(choice.tool_calls[1].arguments, "{}");
    // The first chunk of a call names it; the next carries the arguments.
    const std::string first_call =
        R"("delta":{"tool_calls":[{"index":0,"id":"call_0","type":"function",)"
        R"("function":{"name":"get_weather","arguments":""}}]})";
    EXPECT_NE(body.find(first_call), std::string::npos) << body;
    EXPECT_NE(body.find(R"("delta":{"tool_calls":[{"index":0,"function":{"arguments":)"),
              std::string::npos);
    // The record keeps the engine's cause: the model ended its answer.
    EXPECT_NE(chunks.back().find(R"("cutline":{)"), std::string::npos);
    EXPECT_NE(chunks.back().find(R"("cause":"eos")"), std::string::npos) << chunks.back();
  }
}

TEST(CompletionWriterTools, WholeResponseCarriesMessageToolCalls) {
  const std::string body = run(tool_params(false), {kAnswer.substr(10)}, proto::Cause::kEos);
  EXPECT_NE(body.find(R"("message":{"role":"assistant","content":null,"tool_calls":[)"
                      R"({"id":"call_0","type":"function","function":{"name":"get_weather",)"
                      R"("arguments":"{\"city\":\"Paris\"}"}},{"id":"call_1","type":"function",)"
                      R"("function":{"name":"now","arguments":"{}"}}]})"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find(R"("finish_reason":"tool_calls")"), std::string::npos);
  EXPECT_NE(body.find(R"("cause":"eos")"), std::string::npos);
  const std::string with_text = run(tool_params(false), {kAnswer}, proto::Cause::kEos);
  EXPECT_NE(with_text.find(R"("content":"Checking.","tool_calls":[)"), std::string::npos)
      << with_text;
}

TEST(CompletionWriterTools, MalformedCallIsPlainContentWithStop) {
  const std::string text = "Sure <tool_call>\n{\"name\": \"f\", \"arguments\": {x}}\n</tool_call>";
  const std::string body = run(tool_params(false), {text}, proto::Cause::kEos);
  EXPECT_NE(body.find(R"("content":"Sure <tool_call>\n{\"name\": \"f\", \"arguments\": )"
                      R"({x}}\n</tool_call>")"),
            std::string::npos)
      << body;
  EXPECT_EQ(body.find("tool_calls"), std::string::npos);
  EXPECT_NE(body.find(R"("finish_reason":"stop")"), std::string::npos);
  // Streaming: the held block goes out as content before the last chunk.
  const std::string streamed = run(tool_params(true), {text}, proto::Cause::kEos);
  proto::CompletionAssembler assembler;
  for (const std::string& c : data_of(streamed)) {
    if (c != "[DONE]") {
      ASSERT_TRUE(assembler.add(c).ok());
    }
  }
  EXPECT_EQ(assembler.choices()[0].content, text);
  EXPECT_EQ(assembler.choices()[0].finish_reason, "stop");
}

TEST(CompletionWriterTools, ACallCutByMaxTokensIsContentWithLength) {
  const std::string body = run(tool_params(false, "<tool_call>\n"), {"{\"name\": \"f\", \"argu"},
                               proto::Cause::kClientMaxTokens);
  EXPECT_NE(body.find(R"("content":"<tool_call>\n{\"name\": \"f\", \"argu")"), std::string::npos)
      << body;
  EXPECT_NE(body.find(R"("finish_reason":"length")"), std::string::npos);
  EXPECT_NE(body.find(R"("cause":"client_max_tokens")"), std::string::npos);
}

TEST(CompletionWriterTools, ForcedOpeningIsCompletedByTheModel) {
  const std::string body =
      run(tool_params(true, "<tool_call>\n"),
          {"{\"name\": \"now\", ", "\"arguments\": {}}\n</tool", "_call>"}, proto::Cause::kEos);
  EXPECT_NE(body.find(R"("function":{"name":"now","arguments":""})"), std::string::npos) << body;
  EXPECT_NE(body.find(R"("finish_reason":"tool_calls")"), std::string::npos);
  EXPECT_EQ(body.find(R"("content":"{)"), std::string::npos);
}

}  // namespace
}  // namespace cutline::server
