#pragma once
// ModelsList: GET /v1/models. The gateway asks every upstream for its list at once, keeps each
// model once (the first upstream in upstreams[] order that lists it and whose `models` globs
// serve it), caches the merged list on the worker for kModelsCacheMs, and shows a tenant only the
// models a rule lets it use (a rule matching the tenant, the model and one of the OpenAI routes,
// with the request's headers). An upstream that fails or times out is left out of that answer
// (and not cached); one that sends no response head within its response_head_timeout counts as
// failed. Each upstream is asked through its endpoint pool as the OpenAI routes are
// (upstream_attempts.h): one endpoint, another one when it fails before answering (a connect
// failure, a reset, a 5xx); an upstream with no endpoint available is left out at once and
// counted as an upstream error (no_endpoint).
//
// Its phases, with what it shares with Stream and Passthrough in a RequestLifecycle
// (request_lifecycle.h: request id, arrival, tenant, policy snapshot, phase, the finish guard):
//
//   accept -> authenticate (401) -> route (one request per upstream; skipped when the cache is
//   fresh) -> relay (merge, filter for the tenant) -> finish
//
// Every end — the list answered, a refused key, the client going away while upstreams are asked
// — goes through finish(Ending), which runs once (a later end event is a no-op): it cancels the
// upstream calls still open, writes the one stop record (eos; admission_rejected for a refused
// key; client_cancel) to the access log and the metrics, and then sends the answer with the
// record in its Cutline-Stop header (and an error's body). Runs on the request's worker loop.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cutline/gateway/request_lifecycle.h"
#include "cutline/gateway/upstream_attempts.h"
#include "cutline/policy/policy.h"
#include "cutline/proto/http/http_client.h"
#include "cutline/proto/http/server_stream.h"
#include "cutline/proto/net/timer.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::gateway {

class StreamHost;
struct Worker;

inline constexpr int64_t kModelsCacheMs = 5000;

// One model of the merged list: its id and its object as the upstream wrote it.
struct ListedModel {
  std::string id;
  std::string json;
};

// The merged list a worker keeps (Worker::models_cache).
struct ModelsCache {
  uint64_t policy_generation = 0;
  int64_t fetched_ns = -1;  // -1: never
  std::vector<ListedModel> models;
};

// The models of one upstream's /v1/models answer ({"data": [{"id": ...}, ...]}) that its
// `models` globs serve; appended to `out` unless an earlier upstream listed them.
void merge_model_list(const policy::Upstream& upstream, std::string_view body,
                      std::vector<ListedModel>& out);

class ModelsList : public std::enable_shared_from_this<ModelsList> {
 public:
  ModelsList(StreamHost& host, Worker& worker, std::shared_ptr<proto::ServerStream> client,
             uint64_t id);
  // Runs the phases from accept on. Called once by the gateway's request handler.
  void start();

  uint64_t id() const { return life_.id(); }
  Phase phase() const { return life_.phase(); }

 private:
  // ---- phases ------------------------------------------------------------------------------
  void accept();
  bool authenticate();
  void route();
  void relay(const std::vector<ListedModel>& models);
  void finish(Ending ending);

  void ask(size_t index, proto::ClientRequest up);
  bool retry_elsewhere(size_t index, EndpointOutcome failure);
  // Upstream `index` sent no response head within its response_head_timeout: counted as a
  // connect failure there, asked of another endpoint when one is left, else left out.
  void on_head_timeout(size_t index);
  void on_upstream_done(size_t index, int status, std::string body);

  StreamHost& host_;
  Worker& worker_;
  std::shared_ptr<proto::ServerStream> client_;
  RequestLifecycle life_;
  uint64_t generation_ = 0;  // of the policy snapshot (the cache's key)
  std::string body_;         // relay's answer: the tenant's list
  struct Pending {
    UpstreamAttempts attempts;                        // its endpoints asked (upstream_attempts.h)
    std::unique_ptr<proto::ClientRequest> retry_req;  // as sent, while a retry may follow
    proto::ClientHandle call;
    // Armed when the request goes to an endpoint, for the upstream's response_head_timeout
    // (unless off); disarmed at the response head, a failure, or finish.
    std::unique_ptr<proto::Timer> head_timer;
    int status = 0;
    std::string body;
    bool done = false;
  };
  std::vector<Pending> pending_;  // by upstream index
  size_t outstanding_ = 0;
};

}  // namespace cutline::gateway
