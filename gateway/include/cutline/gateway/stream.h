#pragma once
// Stream: one client request to an OpenAI route, through its phases (STYLE.md "A request is a
// list of named phases"):
//
//   accept -> authenticate -> classify -> decide -> admit -> route -> relay -> finish
//
// Each phase is one member function. A phase that fails calls finish() with an Ending that says
// why; `finish` runs exactly once on every path (bad input, rejection, timeouts, upstream
// failures, client disconnects, normal ends) and is the only place that answers the client's last
// bytes, writes the stop record, cancels the upstream, releases the admission slot, settles the
// token reservation, and emits the access-log line and the metrics.
//
// What is not particular to the OpenAI routes lives in its RequestLifecycle (request_lifecycle.h),
// shared with Passthrough and ModelsList: accept's request id, arrival and policy snapshot,
// authenticate, the facts rule matching reads, the phase, and finish's guard (begin_finish: the
// first end event wins, later ones are no-ops) and its one record (record_for, record). The
// relay's per-token path does not touch it.
//
// Collaborators: the StreamHost (stream_host.h: clock, metrics, access log, policy, upstream
// pools, admission queues; the Gateway in production, fakes in the phase tests) and the Worker of
// its loop (parsers, token-pool store, upstream caller). Neither is called through an interface
// per token: the relay reads the clock it took at construction.
//
// Threading: everything runs on the stream's worker loop. The admission queue may hand this
// stream a slot from another worker's thread; that arrives through loop().post() as
// on_admitted().

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cutline/base/json_writer.h"
#include "cutline/gateway/admission_dispatch.h"
#include "cutline/gateway/async_pool_store.h"
#include "cutline/gateway/endpoint_pool.h"
#include "cutline/gateway/relay.h"
#include "cutline/gateway/request_lifecycle.h"
#include "cutline/gateway/responses_relay.h"
#include "cutline/gateway/token_timing.h"
#include "cutline/gateway/upstream_attempts.h"
#include "cutline/policy/admission_queue.h"
#include "cutline/policy/budget.h"
#include "cutline/policy/decision.h"
#include "cutline/policy/policy.h"
#include "cutline/proto/http/http_client.h"
#include "cutline/proto/http/server_stream.h"
#include "cutline/proto/net/timer.h"
#include "cutline/proto/wire/openai_request.h"
#include "cutline/proto/wire/route_request.h"
#include "cutline/proto/wire/stop_record.h"

namespace cutline::gateway {

class StreamHost;
struct Worker;

// The OpenAI routes that run the phases (every one under the same rules: budget, pools,
// deadline, admission, labels). Chat and completions relay chunks (Relay); responses relays the
// Responses API's events (ResponsesRelay); embeddings relays one JSON body (no tokens: no TTFT
// or idle timer, no output-token pool).
enum class Route : uint8_t { kChatCompletions, kCompletions, kResponses, kEmbeddings };
std::string_view route_path(Route route);
// usage.prompt_tokens of an embeddings answer, when it has one.
std::optional<int64_t> embeddings_prompt_tokens(std::string_view body);
// What makes an upstream's 200 answer on /v1/embeddings no embeddings answer (nullopt: none).
std::optional<std::string> embeddings_answer_problem(std::string_view body);

class Stream final : public std::enable_shared_from_this<Stream>, public AdmissionWaiter {
 public:
  Stream(StreamHost& host, Worker& worker, std::shared_ptr<proto::ServerStream> client, uint64_t id,
         Route route);
  ~Stream();

  // Runs the phases from accept on. Called once by the gateway's request handler.
  void start();
  // The admission queue gave this stream a slot (posted onto its loop). Returns false when the
  // stream is no longer waiting (it ended meanwhile): the caller must release the slot.
  bool on_admitted() override;
  void on_displaced() override;

  // The gateway is shutting down and its drain timeout has passed: ends the stream now with
  // cause gateway_deadline, rule "shutdown.drain_timeout", limit = the drain timeout, observed =
  // the time since the drain began. No-op once the stream is finishing.
  void cut_for_shutdown(int64_t drain_timeout_ms, double drained_ms);

  uint64_t id() const { return life_.id(); }
  Phase phase() const { return life_.phase(); }
  // One entry of /v1/cutline/streams.
  void describe(base::JsonWriter& w, int64_t now_ns) const;

 private:
  // ---- phases ------------------------------------------------------------------------------
  void accept();
  bool authenticate();
  bool classify();
  bool decide();
  void admit();
  void route();
  void finish(Ending ending);

  // ---- relay callbacks ---------------------------------------------------------------------
  void on_upstream_head(int status, proto::HttpHeaders& headers);
  void on_upstream_body(std::string_view data);
  void on_upstream_complete();
  void on_upstream_error(const proto::ClientError& error);
  void on_client_writable();
  void on_client_close();
  void end_from_upstream(bool transport_closed);
  // Responses and embeddings (stream_routes.cc).
  bool classify_route_request();
  void on_route_body(std::string_view data);
  void write_route_end(const Ending& ending, const proto::StopRecord& record, std::string& out);
  UpstreamEnd upstream_end(bool transport_closed) const;
  bool upstream_done() const;
  int64_t output_tokens() const;
  proto::CountMethod count_method() const;
  const std::string& upstream_error_message() const;
  bool read_deadline_header();

  // ---- timers ------------------------------------------------------------------------------
  void on_deadline();
  void on_ttft_timeout();
  void on_idle_timeout();
  void on_queue_timeout();
  void on_head_timeout();  // stream_endpoint.cc
  Ending timer_cut(proto::Cause cause, const policy::TimeLimit& limit, double observed_ms);

  // ---- observe mode (stream_observe.cc) ---------------------------------------------------
  // With on_cut.mode: observe the rule's limits are computed but nothing is enforced: the
  // request takes no admission slot and never waits, max_tokens goes upstream as the client
  // sent it, and a timer that fires notes the cut instead of making it.
  bool observe() const { return decision_.on_cut.observe(); }
  // max_tokens sent upstream: the Decision's, or in observe mode the client's own.
  std::optional<int64_t> upstream_max_tokens() const;
  // admit in observe mode: the arrival the admission group would have given (a rejection is
  // noted), then on to the pools and route.
  void admit_observed();
  void note_would_cut(proto::Cause cause, std::string_view rule, double limit, double observed,
                      const char* unit);
  // The noted cuts and the budget cut the answer's length implies, completed with what the
  // whole answer measured, into record.would_cut.
  void add_would_cuts(proto::StopRecord& record) const;

  // ---- helpers -----------------------------------------------------------------------------
  proto::StopRecord build_record(const Ending& ending) const;
  int64_t pool_used_tokens(const proto::StopRecord& record) const;
  std::optional<std::string> client_finish_reason(const Ending& ending) const;
  // Sends `out` to the client (emptying it); pauses the upstream when the client is slow.
  void send_client_bytes(std::string& out);
  void release_request();
  void start_client_head();
  void release_admission();
  void record_outcome(const proto::StopRecord& record, int status);
  // finish: the client's last bytes, prepared before the stream is recorded and sent after.
  struct LastBytes;
  LastBytes prepare_last_bytes(const Ending& ending, const proto::StopRecord& record);
  void send_last_bytes(const Ending& ending, LastBytes& last, const std::string& stop_header);
  int64_t now_ns() const;
  double elapsed_ms() const;
  Ending bad_input(ErrorKind kind, std::string message, std::string param, int status = 0);
  // 404 model_not_found for model_, worded as OpenAI's unknown-model answer: what a client is
  // told both when no upstream serves the model and when no rule lets the tenant use the model
  // on any route.
  Ending model_not_found();
  // No rule serves the request, but one serves its model to this tenant on another core route.
  bool served_on_another_route(policy::RequestFacts facts) const;
  Ending route_not_allowed();
  // model_not_found for a model no upstream serves (a bad request; the log says so).
  Ending unserved_model();

  StreamHost& host_;
  const base::Clock& clock_;  // host_.clock(), read per chunk without a virtual call
  Worker& worker_;
  std::shared_ptr<proto::ServerStream> client_;
  const Route route_;
  const proto::Endpoint endpoint_;  // chat and completions
  // What every request's phases share (request_lifecycle.h): arrival, request id, tenant, the
  // policy snapshot (taken at accept, held for the stream's life: decision_ points into it), the
  // phase, and the guard that lets finish run and record once.
  RequestLifecycle life_;

  // The request (body owned here; parsed_ refers into it). Both are freed once the upstream
  // request is built (release_request); what later phases, the record and the log need is
  // copied out at classify.
  std::string body_;
  std::unique_ptr<proto::ParsedRequest> parsed_;
  std::string model_;                            // the request's "model"
  bool client_stream_ = false;                   // the request's "stream"
  std::optional<int64_t> requested_max_tokens_;  // max_completion_tokens, else max_tokens
  int64_t choices_ = 1;                          // max(n, best_of)
  bool parsed_ok_ = false;
  std::optional<int64_t> client_deadline_ms_;

  policy::Decision decision_;                // decide's, pointing into life_'s policy snapshot
  policy::AdmissionQueue* queue_ = nullptr;  // the rule's admission group (AdmissionDispatch's)
  bool queued_ = false;                      // waiting in queue_
  bool admitted_ = false;                    // holds a slot of queue_
  // The rule's token pools (stream_budget.cc): reserved after the admission slot, one pool at a
  // time, each an asynchronous step (Redis answers later); settled in finish.
  AsyncGrant grant_;
  int64_t pool_want_ = 0;  // tokens still wanted from the next pool
  void reserve_pools();
  void reserve_pool(bool tenant);
  void on_pool_reserved(bool tenant, const policy::PoolAsk& ask, AsyncReservation r);
  std::string clamp_rule_;  // set when the policy lowered max_tokens
  const policy::Upstream* upstream_ = nullptr;
  // The endpoints of upstream_'s pool this request went to (upstream_attempts.h): picked at
  // route, reported when the upstream exchange ends (unreported: cancelled, at destruction).
  UpstreamAttempts attempts_;
  // route: picks the endpoint (stream_endpoint.cc) and points `req` at it; an error when the
  // pool has none available.
  Status pick_endpoint(proto::ClientRequest& req, std::string& base_path);
  // The upstream exchange failed: tells the pool how (connect failure, disconnect, ...).
  void report_endpoint_failure(proto::ClientErrorKind kind) { attempts_.report_error(kind); }
  // Before the first byte went to the client (phase kRoute: no 200 head yet), an exchange that
  // failed (connect failure, reset before the head, a 5xx) is sent again to an endpoint of the
  // pool it has not failed on, at most UpstreamAttempts::kMaxAttempts in all. Reports the failure
  // to the pool; false when no retry was started (the caller ends the stream as before).
  bool retry_elsewhere(EndpointOutcome failure);
  // Sends `req` upstream with the relay callbacks (route, and every retry).
  void start_upstream(proto::ClientRequest req);
  // The record's attempts, endpoints and routed_cold (absent without a pool).
  void fill_pool_record(proto::StopRecord& record) const { attempts_.fill_record(record); }
  std::unique_ptr<proto::ClientRequest> retry_req_;  // as sent; kept while a retry may follow

  // Upstream exchange and relay state.
  proto::ClientHandle upstream_call_;
  // What relaying a token touches, in one block so that start_upstream() can prefetch it whole
  // (with the client stream and its socket) before each upstream read.
  struct Hot {
    explicit Hot(int64_t arrival_ns) : timing(arrival_ns) {}
    int upstream_status = 0;
    bool upstream_paused = false;
    std::string upstream_error_body;  // body of a non-200 upstream answer (bounded)
    Relay relay;                      // chat and completions (and the error status of every route)
    TokenTiming timing;
    // When a client the upstream was held back for last took some of its bytes
    // (on_client_writable, or fewer bytes held when the idle timer fires); the idle timer counts
    // from it as from a token. client_held_bytes: the client's unsent bytes when last looked at.
    int64_t client_drained_ns = 0;
    size_t client_held_bytes = 0;
    int64_t bytes_out = 0;
    int64_t bytes_in = 0;
  };
  Hot hot_;
  // Not on the per-token path of chat and completions.
  std::string upstream_error_type_;               // the error answer's Content-Type
  std::string upstream_retry_after_;              // its Retry-After
  std::unique_ptr<ResponsesRelay> responses_;     // responses
  std::optional<proto::RouteRequest> route_req_;  // responses, embeddings
  std::string json_body_;                         // embeddings: the upstream's answer
  std::optional<int64_t> embed_input_tokens_;
  bool json_complete_ = false;

  // Observe mode: the cuts noted so far, at most one per cause. Empty (no allocation) unless a
  // timer fired or admission would have refused: never touched per token. `rule` points into
  // life_'s policy snapshot.
  struct NotedCut {
    proto::Cause cause = proto::Cause::kGatewayDeadline;
    std::string_view rule;
    double limit = 0;
    double observed = 0;
    const char* unit = "";
    int64_t at_token = 0;
  };
  std::vector<NotedCut> noted_cuts_;
  bool observe_counted_ = false;  // holds an observe_arrive() of queue_ (released in finish)

  // ---- timers (one per timeout; all disarmed in finish) -------------------------------------
  // deadline: armed at decide when the Decision has one, for the time left from arrival;
  //   disarmed in finish.
  proto::Timer deadline_timer_;
  // ttft: armed at decide when the Decision has one, from arrival (queue wait counts); disarmed
  //   at the first content token.
  proto::Timer ttft_timer_;
  // idle: armed at the first content token (at route when there is no TTFT timeout); when it
  //   fires it re-arms itself for the rest of the gap if a token came meanwhile (or a slow
  //   client the upstream was held back for took its bytes); disarmed in finish.
  proto::Timer idle_timer_;
  // queue: armed in admit when the request is queued, for queue_timeout; disarmed when a slot is
  //   granted or in finish.
  proto::Timer queue_timer_;
  // head: armed when a request goes to an endpoint (route, and each retry) for the upstream's
  //   response_head_timeout (unless off); disarmed when the response head arrives, when the
  //   exchange fails, and in finish. `head_armed_ns_` is when it was armed.
  proto::Timer head_timer_;
  int64_t head_armed_ns_ = 0;
};

}  // namespace cutline::gateway
