#pragma once
// Worker: the gateway's per-event-loop state. Every stream lives on the loop that accepted its
// connection and uses that loop's HttpClient (keep-alive pools to the upstreams) and
// RequestParser and ChunkParser (reused simdjson buffers). Touched on its loop's thread only.
// The phase tests build one on a loop of their own with a scripted UpstreamCaller and no client.

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "cutline/gateway/async_pool_store.h"
#include "cutline/gateway/models_list.h"
#include "cutline/gateway/upstream_caller.h"
#include "cutline/proto/http/http_client.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/wire/openai_chunk.h"
#include "cutline/proto/wire/openai_request.h"

namespace cutline::gateway {

class ModelsList;
class Passthrough;
class Stream;

struct Worker {
  explicit Worker(proto::EventLoop& l) : loop(l) {}

  proto::EventLoop& loop;
  std::unique_ptr<proto::HttpClient> client;  // created on the loop thread at start
  // How streams, passthroughs and /v1/models send their upstream requests: `client`'s
  // HttpUpstreamCaller, created with it.
  std::unique_ptr<UpstreamCaller> upstream;
  // The token pools as this loop sees them (budget_store: memory or Redis), created at start.
  std::unique_ptr<AsyncPoolStore> pools;
  proto::RequestParser parser;
  // Shared by the relays of every stream on this loop (one chunk is parsed at a time; see
  // RelayOptions::chunk_parser).
  proto::ChunkParser chunk_parser;
  // Streams between accept and the end of finish; erased by a post from finish (never inline, so
  // a stream is not destroyed inside its own callback).
  std::unordered_map<uint64_t, std::shared_ptr<Stream>> streams;
  std::unordered_map<uint64_t, std::shared_ptr<Passthrough>> passthroughs;  // same rule
  std::unordered_map<uint64_t, std::shared_ptr<ModelsList>> model_lists;    // same rule
  // GET /v1/models: the merged list of every upstream, fetched at most every kModelsCacheMs.
  ModelsCache models_cache;
};

}  // namespace cutline::gateway
