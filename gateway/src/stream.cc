// Stream (stream.h): start, the admit and route phases, and the relay callbacks that carry the
// upstream's answer to the client until it ends. The intake phases before admission are in
// stream_intake.cc, the timers and finish in stream_end.cc.
#include "cutline/gateway/stream.h"

#include "cutline/gateway/stream_host.h"
#include "cutline/gateway/upstream_headers.h"
#include "cutline/gateway/worker.h"
#include "cutline/proto/net/event_loop.h"
#include "cutline/proto/wire/openai_error.h"
#include "cutline/proto/wire/request_rewriter.h"

namespace cutline::gateway {
namespace {

using proto::Cause;

constexpr size_t kMaxUpstreamErrorBody = 64 * 1024;

// The bytes for the client that one upstream read produced: one buffer per worker thread,
// emptied by send_client_bytes() before the read callback returns (a per-stream buffer would keep
// its capacity, ~0.5 KiB, on every open stream).
std::string& client_out() {
  thread_local std::string out;
  return out;
}

}  // namespace

std::string_view route_path(Route route) {
  switch (route) {
    case Route::kChatCompletions:
      return "/v1/chat/completions";
    case Route::kCompletions:
      return "/v1/completions";
    case Route::kResponses:
      return "/v1/responses";
    case Route::kEmbeddings:
      return "/v1/embeddings";
  }
  return "/v1/chat/completions";
}

Stream::Stream(StreamHost& host, Worker& worker, std::shared_ptr<proto::ServerStream> client,
               uint64_t id, Route route)
    : host_(host),
      clock_(host.clock()),
      worker_(worker),
      client_(std::move(client)),
      route_(route),
      endpoint_(route == Route::kCompletions ? proto::Endpoint::kCompletions
                                             : proto::Endpoint::kChatCompletions),
      life_(host, id),
      hot_(life_.arrival_ns()),
      deadline_timer_(worker.loop, [this] { on_deadline(); }),
      ttft_timer_(worker.loop, [this] { on_ttft_timeout(); }),
      idle_timer_(worker.loop, [this] { on_idle_timeout(); }),
      queue_timer_(worker.loop, [this] { on_queue_timeout(); }),
      head_timer_(worker.loop, [this] { on_head_timeout(); }) {}

Stream::~Stream() = default;

int64_t Stream::now_ns() const { return clock_.now_ns(); }
double Stream::elapsed_ms() const { return hot_.timing.elapsed_ms(now_ns()); }

void Stream::start() {
  accept();
  if (!authenticate()) return;
  if (!classify()) return;
  if (!decide()) return;
  admit();
}

// admit: a slot of the rule's admission group now, a place in its queue (queue timer armed), or
// 429 when the queue is full. Then the token pools (reserve_pools): clamp or 429.
void Stream::admit() {
  life_.enter(Phase::kAdmit);
  if (observe()) return admit_observed();
  const auto& a = decision_.admission;
  const policy::ArrivalResult result =
      queue_->arrive(life_.id(), life_.tenant(), a.priority, a.queue_timeout_ms);
  const policy::Arrival arrival = result.arrival;
  // This arrival took the place of another tenant's newest waiter (its fair share of the queue):
  // that one ends refused, on its own loop.
  if (result.displaced) host_.admission().dispatch_displaced(*result.displaced);
  host_.metrics().set_queue_depth(decision_.policy_name, static_cast<double>(queue_->depth()));
  if (arrival == policy::Arrival::kRejectedQueueFull) {
    Ending e;
    e.cause = Cause::kAdmissionRejected;
    e.rule = std::string(a.queue_depth_source.path);
    e.limit = static_cast<double>(a.queue_depth);
    e.observed = static_cast<double>(queue_->depth());
    e.message = "admission queue full";
    e.error = make_error(ErrorKind::kRateLimited,
                         "admission queue of \"" + std::string(a.group) + "\" is full");
    e.retry_after_s = 1;
    finish(std::move(e));
    return;
  }
  if (arrival == policy::Arrival::kQueued) {
    queued_ = true;
    host_.admission().register_waiter(life_.id(), &worker_.loop, weak_from_this());
    queue_timer_.arm(a.queue_timeout_ms);
    return;
  }
  admitted_ = true;
  on_admitted();
}

bool Stream::on_admitted() {
  if (life_.phase() != Phase::kAdmit) return false;
  if (queued_) {
    queued_ = false;
    host_.admission().unregister_waiter(life_.id());
    queue_timer_.release();
    admitted_ = true;
    host_.metrics().set_queue_depth(decision_.policy_name, static_cast<double>(queue_->depth()));
  }
  hot_.timing.on_admitted(now_ns());
  reserve_pools();  // then route (stream_budget.cc)
  return true;
}

// route: the upstream for the model (or the rule's override), the body rewritten (max_tokens
// clamped to the Decision, stream: true, include_usage), and the upstream request started.
void Stream::route() {
  life_.enter(Phase::kRoute);
  upstream_ = life_.policy().route(*decision_.rule, model_);
  if (!upstream_) {
    finish(unserved_model());
    return;
  }
  proto::RewriteOptions rw;
  rw.max_tokens = upstream_max_tokens();
  if (route_ == Route::kEmbeddings) rw.max_tokens.reset();
  // A limit the gateway adds where the client set none: what each route's API documents.
  rw.inserted_limit_key =
      endpoint_ == proto::Endpoint::kChatCompletions ? "max_completion_tokens" : "max_tokens";
  rw.force_stream = true;
  rw.force_include_usage = true;
  const policy::SourceKind src = decision_.max_output_tokens.source.kind;
  if (rw.max_tokens && src != policy::SourceKind::kClient && src != policy::SourceKind::kNone &&
      !observe()) {
    clamp_rule_ = std::string(decision_.max_output_tokens.source.path);
  }
  proto::ClientRequest req;
  req.method = "POST";
  if (Status s = fill_upstream_target(*upstream_, host_.upstream_tls(), req); !s.ok()) {
    return on_upstream_error(
        proto::ClientError{proto::ClientErrorKind::kConnectFailed, s.error().message});
  }
  std::string base_path = upstream_->base_path;
  if (Status s = pick_endpoint(req, base_path); !s.ok()) {
    Ending e;
    e.cause = Cause::kUpstreamError;
    e.rule = "upstreams." + upstream_->name;
    e.error = s.error();
    // The pool's reason names its endpoints (addresses, DNS names): for operators only.
    if (!host_.upstream_error_detail()) {
      e.operator_message = e.error->message;
      e.error->message = "upstream \"" + upstream_->name + "\": no endpoint is available";
    }
    e.message = e.error->message;
    finish(std::move(e));
    return;
  }
  req.target = base_path + std::string(route_path(route_));
  req.headers = std::move(client_->request().headers);
  req.headers.remove("Accept-Encoding");  // the relay parses the stream: no compression
  const std::string peer = client_->peer_address();
  build_upstream_headers(
      *upstream_, upstream_header_options(life_.policy(), decision_.rule, peer, life_.request_id()),
      req.headers);
  req.headers.set("Content-Type", "application/json");
  if (route_ == Route::kEmbeddings) {
    req.headers.set("Accept", "application/json");
    req.body = body_;
  } else if (route_ == Route::kResponses) {
    req.headers.set("Accept", "text/event-stream");
    req.body = proto::rewrite_responses_request(body_, *route_req_, rw.max_tokens, true);
  } else {
    req.headers.set("Accept", "text/event-stream");
    proto::rewrite_request(*parsed_, rw, req.body);
  }

  if (!decision_.ttft_timeout.ms && decision_.idle_timeout.ms && route_ != Route::kEmbeddings) {
    idle_timer_.arm(*decision_.idle_timeout.ms);
  }
  start_upstream(std::move(req));
  release_request();
}

// Sends `req` to the endpoint it names: at route, and again on a retry (stream_endpoint.cc),
// which needs its own copy while one may follow.
void Stream::start_upstream(proto::ClientRequest req) {
  if (attempts_.may_retry()) {
    retry_req_ = std::make_unique<proto::ClientRequest>(req);
  }
  proto::ClientCallbacks cb;
  cb.on_head = [this](int status, proto::HttpHeaders& h) { on_upstream_head(status, h); };
  cb.on_body = [this](std::string_view data) { on_upstream_body(data); };
  cb.on_complete = [this](proto::HttpHeaders&) { on_upstream_complete(); };
  cb.on_error = [this](const proto::ClientError& e) { on_upstream_error(e); };
  // What relaying a token touches: the relay state here, the client stream and its socket.
  cb.prefetch = {proto::PrefetchSpan{&hot_, static_cast<uint32_t>(sizeof hot_)},
                 proto::PrefetchSpan{client_.get(), 64},
                 proto::PrefetchSpan{client_->send_path_hint(), 96}};
  if (upstream_->response_head_timeout_ms > 0) {
    head_armed_ns_ = now_ns();
    head_timer_.arm(upstream_->response_head_timeout_ms);
  }
  upstream_call_ = worker_.upstream->start(std::move(req), std::move(cb));
}

// The upstream request is built (and holds its own copy of the body for a retry): the client's
// body, what was parsed out of it and the client's headers are not needed any more. What the
// record, the log and the metrics use stays (model, stream, include_usage, max tokens, method,
// path).
void Stream::release_request() {
  parsed_.reset();
  std::string().swap(body_);
  client_->request().headers = proto::HttpHeaders();
}

void Stream::start_client_head() {
  if (client_->head_sent() || !client_stream_) return;
  proto::HttpHeaders h{{"Content-Type", "text/event-stream"},
                       {"Cache-Control", "no-cache"},
                       {"Trailer", "cutline-stop"},
                       {"Cutline-Request-Id", life_.request_id()},
                       {"X-Request-Id", life_.request_id()}};
  client_->send_head(200, h, proto::BodyFraming::chunked());
}

void Stream::on_upstream_head(int status, proto::HttpHeaders& headers) {
  head_timer_.cancel();
  hot_.upstream_status = status;
  if (status >= 500 && retry_elsewhere(EndpointOutcome::kServerError)) return;
  if (status != 200) {
    // The error body is collected, then passed on with these headers (finish).
    upstream_error_type_ = std::string(headers.get("Content-Type").value_or(""));
    upstream_retry_after_ = std::string(headers.get("Retry-After").value_or(""));
    return;
  }
  life_.enter(Phase::kRelay);
  retry_req_.reset();  // the answer has begun: no retry from here on
  start_client_head();
}

void Stream::send_client_bytes(std::string& out) {
  if (out.empty()) return;
  hot_.bytes_out += static_cast<int64_t>(out.size());
  const bool more = client_->send_body(out);
  out.clear();
  if (!more && !client_->closed() && !hot_.upstream_paused) {
    // Back-pressure: the client reads slower than the upstream writes. Stop reading the upstream
    // (its sends back up into the socket buffers); the timers keep running.
    hot_.upstream_paused = true;
    hot_.client_held_bytes = client_->buffered_bytes();
    upstream_call_.pause();
  }
}

void Stream::on_client_writable() {
  if (hot_.upstream_paused && life_.phase() == Phase::kRelay) {
    // The client took what was waiting: progress, as a token is (the idle timer counts from it).
    hot_.client_drained_ns = now_ns();
    hot_.upstream_paused = false;
    upstream_call_.resume();
  }
}

void Stream::on_upstream_body(std::string_view data) {
  if (hot_.upstream_status != 200) {
    if (hot_.upstream_error_body.size() < kMaxUpstreamErrorBody) {
      hot_.upstream_error_body.append(data.substr(0, kMaxUpstreamErrorBody));
    }
    return;
  }
  if (route_ == Route::kResponses || route_ == Route::kEmbeddings) return on_route_body(data);
  const bool had_first = hot_.timing.has_first_token();
  std::string& out = client_out();
  auto fed = hot_.relay.feed(data, now_ns(), hot_.timing, out);
  if (!had_first && hot_.timing.has_first_token()) {
    ttft_timer_.release();  // fires at most once: free its event for the rest of the stream
    if (decision_.idle_timeout.ms) idle_timer_.arm(*decision_.idle_timeout.ms);
  }
  send_client_bytes(out);
  if (!fed.ok()) {
    upstream_call_.cancel();
    end_from_upstream(false);
  }
  // [DONE] or an error event: the end comes with on_complete (keeps the connection pooled).
}

void Stream::on_upstream_complete() {
  attempts_.report(hot_.upstream_status >= 500 ? EndpointOutcome::kServerError
                                               : EndpointOutcome::kSuccess);
  if (hot_.upstream_status != 200) {
    hot_.relay.on_error_status(hot_.upstream_status, hot_.upstream_error_body);
    host_.metrics().upstream_error(upstream_->name,
                                   "status_" + std::to_string(hot_.upstream_status));
  }
  if (route_ == Route::kEmbeddings && hot_.upstream_status == 200) {
    if (auto problem = embeddings_answer_problem(json_body_)) {
      // Relayed as a 200, a wrong answer would reach the client as a valid embeddings list.
      Ending e;
      e.cause = Cause::kUpstreamError;
      e.rule = "upstreams." + upstream_->name;
      e.message = "upstream answer is not an embeddings list: " + *problem;
      e.error = make_error(ErrorKind::kUpstream, e.message);
      host_.metrics().upstream_error(upstream_->name, "bad_answer");
      finish(std::move(e));
      return;
    }
    json_complete_ = true;
    embed_input_tokens_ = embeddings_prompt_tokens(json_body_);
  }
  end_from_upstream(!upstream_done());
}

void Stream::on_upstream_error(const proto::ClientError& error) {
  head_timer_.cancel();
  host_.metrics().upstream_error(upstream_->name, proto::to_string(error.kind));
  report_endpoint_failure(error.kind);
  if (error.kind != proto::ClientErrorKind::kParse &&
      retry_elsewhere(EndpointOutcome::kConnectFailure)) {
    return;
  }
  if (error.kind == proto::ClientErrorKind::kClosedMidBody && hot_.upstream_status == 200) {
    return end_from_upstream(true);
  }
  Ending e;
  e.cause = error.kind == proto::ClientErrorKind::kClosedMidBody ||
                    error.kind == proto::ClientErrorKind::kClosedBeforeHead
                ? Cause::kUpstreamDisconnect
                : Cause::kUpstreamError;
  e.rule = "upstreams." + upstream_->name;
  e.error = error.to_error();
  e.error->message = upstream_error_text(upstream_->name, error, host_.upstream_error_detail());
  e.message = e.error->message;
  if (!host_.upstream_error_detail())
    e.operator_message = upstream_error_text(upstream_->name, error, true);
  finish(std::move(e));
}

// The upstream ended (normally, with an error status or event, or by closing): classify.
void Stream::end_from_upstream(bool transport_closed) {
  TokenLimits limits;
  limits.requested_max_tokens = requested_max_tokens_;
  limits.effective_max_tokens = upstream_max_tokens();
  limits.output_tokens = output_tokens();
  limits.exact_count = count_method() == proto::CountMethod::kUsage;
  Ending e;
  const UpstreamEnd end = upstream_end(transport_closed);
  e.cause = classify_upstream_stop(end, limits);
  if (e.cause == Cause::kGatewayBudget) {
    e.rule = std::string(decision_.max_output_tokens.source.path);
    e.limit = static_cast<double>(*decision_.max_output_tokens.tokens);
    e.observed = static_cast<double>(limits.output_tokens);
    e.unit = "tokens";
  } else if (e.cause == Cause::kClientMaxTokens) {
    e.rule = "request.max_tokens";
    if (limits.requested_max_tokens) e.limit = static_cast<double>(*limits.requested_max_tokens);
    e.observed = static_cast<double>(limits.output_tokens);
    e.unit = "tokens";
  }
  if (e.cause == Cause::kUpstreamError || e.cause == Cause::kUpstreamDisconnect) {
    e.rule = "upstreams." + upstream_->name;
    e.message = upstream_error_message().empty()
                    ? (transport_closed ? "upstream closed the stream without a finish_reason"
                                        : "upstream ended the stream without a finish_reason")
                    : upstream_error_message();
    if (hot_.relay.error_status() != 0 && !client_->head_sent()) {
      // Nothing was sent: the upstream's status and error body reach the client (its codes, e.g.
      // context_length_exceeded, included), the stop record in the header and, when the body
      // is a JSON object, in the body as well.
      e.upstream_error_body = true;
      e.status = hot_.relay.error_status();
    } else if (end.kind != UpstreamEndKind::kFinished) {
      // A broken answer ends as the OpenAI API ends a failed one, whatever on_cut says (on_cut
      // presents the gateway's own cuts): a 502 before the first byte, an error event after it,
      // each with the record. A client that reads only finish_reason never takes it for an
      // answer that reached its max_tokens. (A finish_reason the gateway does not know is
      // labeled upstream_error too, but passes through as sent.)
      e.error = make_error(ErrorKind::kUpstream, e.message);
    }
  }
  finish(std::move(e));
}

}  // namespace cutline::gateway
