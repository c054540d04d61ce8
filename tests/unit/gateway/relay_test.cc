#include "cutline/gateway/relay.h"

#include <gtest/gtest.h>

#include "cutline/proto/wire/openai_chunk.h"

namespace cutline::gateway {
namespace {

const std::string kStream =
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
    "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},"
    "\"finish_reason\":null}]}\r\n\r\n"
    ": keep-alive\n\n"
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
    "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
    "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
    "\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2,\"total_tokens\":6}}\n\n"
    "data: [DONE]\n\n";

proto::StopRecord eos_record() {
  proto::StopRecord r;
  r.cause = proto::Cause::kEos;
  r.reporter = "gateway";
  return r;
}

// Feeds the stream in pieces of `step` bytes.
std::string relay_all(Relay& relay, TokenTiming& timing, size_t step) {
  std::string out;
  for (size_t i = 0; i < kStream.size(); i += step) {
    auto r = relay.feed(std::string_view(kStream).substr(i, step), static_cast<int64_t>(i) * 1000,
                        timing, out);
    EXPECT_TRUE(r.ok());
  }
  return out;
}

TEST(Relay, AnySplitOfTheUpstreamBytesGivesTheSameClientBytes) {
  std::string whole;
  for (size_t step : {kStream.size(), size_t{1}, size_t{7}, size_t{64}}) {
    Relay relay(RelayOptions{proto::Endpoint::kChatCompletions, true, false, "id", "m"});
    TokenTiming timing;
    std::string out = relay_all(relay, timing, step);
    relay.write_end(eos_record(), "stop", out);
    if (whole.empty()) whole = out;
    EXPECT_EQ(out, whole) << "step " << step;
    EXPECT_TRUE(relay.upstream_done());
    EXPECT_EQ(relay.output_tokens(), 2);
    EXPECT_EQ(relay.count_method(), proto::CountMethod::kUsage);
    EXPECT_EQ(timing.tokens(), 2);
  }
  // Content chunks pass through; the finish chunk comes last with the record; the usage chunk
  // the client did not ask for is gone; [DONE] ends it.
  EXPECT_NE(whole.find("\"content\":\"Hel\""), std::string::npos);
  EXPECT_EQ(whole.find("\"usage\":{"), std::string::npos) << whole;
  const size_t cutline = whole.find("\"cutline\":{");
  const size_t finish = whole.find("\"finish_reason\":\"stop\"");
  ASSERT_NE(cutline, std::string::npos);
  ASSERT_NE(finish, std::string::npos);
  EXPECT_GT(whole.find("data: [DONE]"), finish);
}

TEST(Relay, UsageChunkIsKeptAndLabeledWhenAskedFor) {
  Relay relay(RelayOptions{proto::Endpoint::kChatCompletions, true, true, "id", "m"});
  TokenTiming timing;
  std::string out = relay_all(relay, timing, 13);
  relay.write_end(eos_record(), "stop", out);
  const size_t usage = out.find("\"usage\":{");
  ASSERT_NE(usage, std::string::npos) << out;
  EXPECT_GT(usage, out.find("\"finish_reason\":\"stop\""));
  EXPECT_NE(out.find("\"cutline\"", out.find("\"finish_reason\":\"stop\"") + 1), std::string::npos);
}

// A deadline cut comes before the upstream's usage chunk: a client that asked for usage still
// gets it, from the record's counts, after the finish chunk and before [DONE].
TEST(Relay, ACutBeforeTheUpstreamsUsageStillGivesTheClientItsUsage) {
  Relay relay(RelayOptions{proto::Endpoint::kChatCompletions, true, true, "id", "m"});
  TokenTiming timing;
  std::string out;
  const size_t two_chunks = kStream.find("data: {", kStream.find("\"lo\""));
  ASSERT_TRUE(relay.feed(std::string_view(kStream).substr(0, two_chunks), 1000, timing, out).ok());
  proto::StopRecord rec;
  rec.cause = proto::Cause::kGatewayDeadline;
  rec.output_tokens = relay.output_tokens();
  rec.input_tokens = 4;
  relay.write_end(rec, "length", out);
  const size_t finish = out.find("\"finish_reason\":\"length\"");
  const size_t usage = out.find(
      "\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":2,"
      "\"total_tokens\":6}");
  ASSERT_NE(finish, std::string::npos) << out;
  ASSERT_NE(usage, std::string::npos) << out;
  EXPECT_GT(usage, finish);
  EXPECT_GT(out.find("data: [DONE]"), usage);

  // Not streamed, the completion carries the same counts.
  Relay whole(RelayOptions{proto::Endpoint::kChatCompletions, false, false, "id", "m"});
  std::string body;
  ASSERT_TRUE(whole.feed(std::string_view(kStream).substr(0, two_chunks), 1000, timing, body).ok());
  rec.input_tokens.reset();
  whole.write_end(rec, "length", body);
  EXPECT_NE(body.find("\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":2,"
                      "\"total_tokens\":2}"),
            std::string::npos)
      << body;
}

TEST(Relay, NonStreamingClientsGetOneAssembledCompletion) {
  Relay relay(RelayOptions{proto::Endpoint::kChatCompletions, false, false, "id", "m"});
  TokenTiming timing;
  std::string out = relay_all(relay, timing, 5);
  EXPECT_TRUE(out.empty()) << "nothing is sent before the end";
  relay.write_end(eos_record(), "stop", out);
  EXPECT_NE(out.find("\"object\":\"chat.completion\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"content\":\"Hello\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"cause\":\"eos\""), std::string::npos);
}

TEST(Relay, ACutBeforeAnyChunkWritesAFreshLabeledChunk) {
  Relay relay(RelayOptions{proto::Endpoint::kCompletions, true, false, "req-1", "m"});
  proto::StopRecord rec;
  rec.cause = proto::Cause::kGatewayTtftTimeout;
  std::string out;
  relay.write_end(rec, "length", out);
  EXPECT_NE(out.find("\"object\":\"text_completion\""), std::string::npos) << out;
  EXPECT_NE(out.find("\"id\":\"req-1\""), std::string::npos);
  EXPECT_NE(out.find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_NE(out.find("gateway_ttft_timeout"), std::string::npos);
  EXPECT_NE(out.find("data: [DONE]"), std::string::npos);
}

TEST(Relay, StreamWithoutFinishReasonIsNotACleanEnd) {
  Relay relay(RelayOptions{});
  TokenTiming timing;
  std::string out;
  const std::string partial = kStream.substr(0, kStream.find("data: {", 10));
  ASSERT_TRUE(relay.feed(partial, 0, timing, out).ok());
  EXPECT_EQ(relay.upstream_end(true).kind, UpstreamEndKind::kDisconnect);
  EXPECT_EQ(relay.count_method(), proto::CountMethod::kChunks);
  EXPECT_EQ(relay.output_tokens(), 1);
}

TEST(Relay, MalformedChunkIsAnUpstreamError) {
  Relay relay(RelayOptions{});
  TokenTiming timing;
  std::string out;
  EXPECT_FALSE(relay.feed("data: {not json\n\n", 0, timing, out).ok());
  EXPECT_EQ(relay.upstream_end(false).kind, UpstreamEndKind::kErrorEvent);
}

}  // namespace
}  // namespace cutline::gateway

namespace cutline::gateway {
namespace {

// A non-streaming client asking for tools gets the tool call whole, as the upstream streamed it.
TEST(Relay, NonStreamingAnswerKeepsToolCallsAndEveryChoice) {
  const std::string stream =
      "data: {\"id\":\"c9\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
      "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,"
      "\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"lookup\",\"arguments\":"
      "\"{\\\"q\\\":\"}}]},\"finish_reason\":null},{\"index\":1,\"delta\":{\"content\":\"no "
      "tools\"},\"finish_reason\":null}]}\n\n"
      "data: {\"id\":\"c9\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
      "\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{"
      "\"arguments\":\"\\\"cutline\\\"}\"}}]},\"finish_reason\":\"tool_calls\"},{\"index\":1,"
      "\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
      "data: [DONE]\n\n";
  Relay relay(RelayOptions{proto::Endpoint::kChatCompletions, false, false, "id", "m"});
  TokenTiming timing;
  std::string out;
  ASSERT_TRUE(relay.feed(stream, 0, timing, out).ok());
  EXPECT_TRUE(out.empty());  // nothing is sent before the end
  EXPECT_TRUE(relay.upstream_done());
  relay.write_end(eos_record(), "tool_calls", out);
  EXPECT_NE(
      out.find(
          R"("tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"cutline\"}"}}])"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find(R"("content":null)"), std::string::npos) << out;
  EXPECT_NE(
      out.find(
          R"({"index":1,"message":{"role":"assistant","content":"no tools"},"finish_reason":"stop"})"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("\"cutline\":{"), std::string::npos) << out;
}

}  // namespace
}  // namespace cutline::gateway

namespace cutline::gateway {
namespace {

// Parallel tool calls streamed with the arguments split across chunks, an event type the gateway
// does not know, and a finish_reason it did not cause: all reach a streaming client as sent.
const std::string kToolStream =
    "data: {\"id\":\"t1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
    "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,"
    "\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"arguments\":\"{\\\"ci\"}}]},\"finish_reason\":null}]}\n\n"
    "event: vendor.progress\ndata: {\"pct\":50}\n\n"
    "data: {\"id\":\"t1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
    "\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{"
    "\"arguments\":\"ty\\\":\\\"Oslo\\\"}\"}},{\"index\":1,\"id\":\"call_b\",\"type\":\"function\","
    "\"function\":{\"name\":\"get_time\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\n"
    "data: {\"id\":\"t1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
    "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
    "data: [DONE]\n\n";

TEST(Relay, ToolCallDeltasUnknownEventsAndTheUpstreamFinishReasonPassThrough) {
  for (size_t step : {kToolStream.size(), size_t{1}, size_t{9}}) {
    Relay relay(RelayOptions{proto::Endpoint::kChatCompletions, true, false, "id", "m"});
    TokenTiming timing;
    std::string out;
    for (size_t i = 0; i < kToolStream.size(); i += step) {
      ASSERT_TRUE(relay.feed(std::string_view(kToolStream).substr(i, step), 0, timing, out).ok());
    }
    EXPECT_EQ(relay.finish_reason(), "tool_calls");
    EXPECT_EQ(relay.upstream_end(false).kind, UpstreamEndKind::kFinished);
    relay.write_end(eos_record(), std::nullopt, out);
    EXPECT_NE(out.find(R"("arguments":"{\"ci"})"), std::string::npos) << out;
    EXPECT_NE(out.find(R"("arguments":"ty\":\"Oslo\"}")"), std::string::npos) << out;
    EXPECT_NE(out.find(R"("id":"call_b")"), std::string::npos) << out;
    EXPECT_NE(out.find("event: vendor.progress\ndata: {\"pct\":50}\n\n"), std::string::npos) << out;
    EXPECT_NE(out.find(R"("finish_reason":"tool_calls")"), std::string::npos) << out;
    EXPECT_EQ(out.find(R"("finish_reason":"stop")"), std::string::npos) << out;
    EXPECT_NE(out.find("\"cutline\":{"), std::string::npos) << out;
    EXPECT_EQ(timing.tokens(), 2);
  }
}

TEST(Relay, AGatewayCutStillRewritesTheFinishReason) {
  Relay relay(RelayOptions{proto::Endpoint::kChatCompletions, true, false, "id", "m"});
  TokenTiming timing;
  std::string out;
  ASSERT_TRUE(relay.feed(kToolStream, 0, timing, out).ok());
  proto::StopRecord rec;
  rec.cause = proto::Cause::kGatewayDeadline;
  relay.write_end(rec, "length", out);
  EXPECT_NE(out.find(R"("finish_reason":"length")"), std::string::npos) << out;
  EXPECT_EQ(out.find(R"("finish_reason":"tool_calls")"), std::string::npos) << out;
}

TEST(Relay, UnknownAndContentFilterFinishReasonsAreKeptForNonStreamingClients) {
  for (std::string reason : {"content_filter", "some_future_reason"}) {
    const std::string stream =
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
        "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":null}]}\n\n"
        "event: vendor.note\ndata: not json at all\n\n"
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
        "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"" +
        reason + "\"}]}\n\ndata: [DONE]\n\n";
    Relay relay(RelayOptions{proto::Endpoint::kChatCompletions, false, false, "id", "m"});
    TokenTiming timing;
    std::string out;
    ASSERT_TRUE(relay.feed(stream, 0, timing, out).ok()) << reason;
    relay.write_end(eos_record(), std::nullopt, out);
    EXPECT_NE(out.find("\"finish_reason\":\"" + reason + "\""), std::string::npos) << out;
  }
}

TEST(Relay, EveryChoiceKeepsItsOwnFinishChunk) {
  const std::string stream =
      "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
      "\"choices\":[{\"index\":1,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
      "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\","
      "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
      "data: [DONE]\n\n";
  Relay relay(RelayOptions{proto::Endpoint::kChatCompletions, true, false, "id", "m"});
  TokenTiming timing;
  std::string out;
  ASSERT_TRUE(relay.feed(stream, 0, timing, out).ok());
  relay.write_end(eos_record(), std::nullopt, out);
  EXPECT_NE(out.find(R"("index":1,"delta":{},"finish_reason":"stop")"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("finish_reason":"tool_calls")"), std::string::npos) << out;
}

}  // namespace
}  // namespace cutline::gateway
