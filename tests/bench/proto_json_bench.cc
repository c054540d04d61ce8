// proto_json_bench: what the wire costs per token and per request.
//   BM_SseParse            one SSE event of a typical chat chunk through SseParser
//   BM_SseParseOneByte     the same event fed one byte at a time (worst-case socket reads)
//   BM_ChunkParse          the event's data through ChunkParser (simdjson On-Demand)
//   BM_SseAndChunk         both, as the gateway does for every upstream token
//   BM_ChunkWrite          write_chunk + append_sse_data, as the backend does for every token
//   BM_RequestParseRewrite parse a ~1 KiB chat request and rewrite it (clamp, stream, usage)
// Run: build/tests/bench/proto_json_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <string>

#include "cutline/proto/sse/sse_parser.h"
#include "cutline/proto/sse/sse_writer.h"
#include "cutline/proto/wire/openai_chunk.h"
#include "cutline/proto/wire/openai_request.h"
#include "cutline/proto/wire/openai_writer.h"
#include "cutline/proto/wire/request_rewriter.h"

namespace {

using namespace cutline::proto;

const std::string kData =
    R"({"id":"chatcmpl-8f3a2c","object":"chat.completion.chunk","created":1732968000,)"
    R"("model":"meta-llama/Llama-3.1-8B-Instruct","system_fingerprint":"fp_44709d6fcb",)"
    R"("choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]})";
const std::string kEvent = "data: " + kData + "\n\n";

void BM_SseParse(benchmark::State& state) {
  SseParser parser;
  size_t bytes = 0;
  for (auto _ : state) {
    std::string_view in = kEvent;
    auto step = parser.next(in);
    benchmark::DoNotOptimize(step);
    bytes += parser.event().data.size();
  }
  benchmark::DoNotOptimize(bytes);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kEvent.size()));
}
BENCHMARK(BM_SseParse);

void BM_SseParseOneByte(benchmark::State& state) {
  SseParser parser;
  for (auto _ : state) {
    for (size_t i = 0; i < kEvent.size(); ++i) {
      std::string_view in(kEvent.data() + i, 1);
      benchmark::DoNotOptimize(parser.next(in));
    }
  }
}
BENCHMARK(BM_SseParseOneByte);

void BM_ChunkParse(benchmark::State& state) {
  ChunkParser parser;
  for (auto _ : state) {
    auto s = parser.parse(kData);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(parser.chunk().content().data());
  }
}
BENCHMARK(BM_ChunkParse);

void BM_SseAndChunk(benchmark::State& state) {
  SseParser sse;
  ChunkParser chunk;
  for (auto _ : state) {
    std::string_view in = kEvent;
    while (sse.next(in) == SseParser::Step::kEvent) {
      auto s = chunk.parse(sse.event().data);
      benchmark::DoNotOptimize(s);
    }
  }
}
BENCHMARK(BM_SseAndChunk);

void BM_ChunkWrite(benchmark::State& state) {
  std::string json;
  std::string out;
  ChunkFields f;
  f.id = "chatcmpl-8f3a2c";
  f.created = 1732968000;
  f.model = "meta-llama/Llama-3.1-8B-Instruct";
  f.content = " token";
  for (auto _ : state) {
    json.clear();
    out.clear();
    write_chunk(json, f);
    append_sse_data(out, json);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_ChunkWrite);

std::string make_request() {
  std::string body =
      R"({"model":"meta-llama/Llama-3.1-8B-Instruct","messages":[{"role":"system",)"
      R"("content":"You are a helpful assistant. Answer briefly and cite sources."},)";
  body += R"({"role":"user","content":")";
  for (int i = 0; i < 12; ++i) body += "Explain paged attention and continuous batching. ";
  body += R"("}],"temperature":0.7,"top_p":0.95,"max_tokens":4096,"stream":true,)"
          R"("stop":["\n\nUser:"],"user":"tenant-a","metadata":{"trace":"abc"}})";
  return body;
}

void BM_RequestParseRewrite(benchmark::State& state) {
  const std::string body = make_request();
  RequestParser parser;
  std::string out;
  RewriteOptions opt;
  opt.force_stream = true;
  opt.force_include_usage = true;
  for (auto _ : state) {
    auto req = parser.parse(body, Endpoint::kChatCompletions);
    if (!req.ok()) state.SkipWithError("parse failed");
    opt.max_tokens = clamp_max_tokens(*req, 1024);
    rewrite_request(*req, opt, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
  state.counters["body_bytes"] = static_cast<double>(body.size());
}
BENCHMARK(BM_RequestParseRewrite);

}  // namespace

BENCHMARK_MAIN();
