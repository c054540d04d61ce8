#include "cutline/server/backend_server.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <utility>

#include "cutline/base/clock.h"
#include "cutline/base/json_writer.h"
#include "cutline/model/synth.h"
#include "cutline/proto/wire/openai_error.h"
#include "cutline/server/completion_request.h"
#include "cutline/server/completion_stream.h"
#include "cutline/server/completion_writer.h"
#include "cutline/server/responses_request.h"
#include "cutline/server/responses_writer.h"
#include "cutline/server/served_model.h"
#include "cutline/server/tokenize_api.h"

namespace cutline::server {

namespace {

void send_error(proto::ServerStream& http, const Error& error, std::string_view param = {},
                std::string_view code = {}) {
  proto::ErrorBodyFields fields;
  fields.param = param;
  fields.code = code;
  http.send_simple(error.status(), {{"Content-Type", "application/json"}},
                   proto::error_body(error, fields));
}

void send_json(proto::ServerStream& http, int status, std::string_view body) {
  http.send_simple(status, {{"Content-Type", "application/json"}}, body);
}

device::DeviceKind device_kind(DeviceChoice choice) {
  switch (choice) {
    case DeviceChoice::kCpu:
      return device::DeviceKind::kCpu;
    case DeviceChoice::kCuda:
      return device::DeviceKind::kCuda;
    case DeviceChoice::kAuto:
      return device::DeviceKind::kAuto;
  }
  return device::DeviceKind::kAuto;
}

// What the Responses writer echoes and names.
ResponsesParams responses_params(const ResponsesRequest& r, const std::string& id,
                                 int64_t created_at) {
  ResponsesParams p;
  p.id = id;
  p.item_id = "msg_" + id.substr(id.find('_') + 1);
  p.model = r.model;
  p.created_at = created_at;
  p.stream = r.stream;
  p.instructions = r.instructions;
  p.max_output_tokens = r.max_output_tokens;
  p.temperature = r.temperature.value_or(1.0);  // as sent (the engine's is a float)
  p.top_p = r.top_p.value_or(1.0);
  p.top_logprobs = r.top_logprobs;
  return p;
}

}  // namespace

// A parsed request waiting for its model's lease (on a loop, or off-loop while the model loads).
struct BackendServer::PendingRequest {
  std::shared_ptr<proto::ServerStream> http;
  proto::ParsedRequest parsed;                // chat/completions: views into http->request().body
  std::optional<ResponsesRequest> responses;  // set for /v1/responses
  int64_t arrival_us = 0;
  const std::string& model() const { return responses ? responses->model : parsed.model; }
  // Set for requests that only need the model's tokenizer (/tokenize): runs instead of admit.
  std::function<void(residency::Lease)> on_lease;
};

BackendServer::BackendServer(BackendOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<BackendServer>> BackendServer::create(BackendOptions options) {
  auto server = std::unique_ptr<BackendServer>(new BackendServer(std::move(options)));
  BackendServer& s = *server;
  s.started_unix_s_ = static_cast<int64_t>(base::wall_time_s());

  device::DeviceOptions dev_options;
  dev_options.kind = device_kind(s.options_.device);
  auto dev = device::make_device(dev_options);
  if (!dev.ok()) return std::move(dev).error();
  s.device_ = std::shared_ptr<device::Device>(std::move(dev).value());
  std::fprintf(stderr, "cutline-backend: device %s\n", s.device_->description().c_str());

  const auto n_models = static_cast<int64_t>(s.options_.models.size());
  int64_t budget = 0;
  if (s.options_.weights_memory_bytes) {
    budget = *s.options_.weights_memory_bytes;
  } else {
    // What the device has minus the KV pools (one per resident model, at most one per model).
    budget = s.device_->free_bytes() - s.options_.kv_memory_bytes * n_models;
    if (budget <= 0) budget = s.device_->free_bytes();
  }

  s.workers_ = std::make_unique<proto::WorkerThreads>(s.options_.threads);
  ServedModelOptions model_options;
  model_options.kv_memory_bytes = s.options_.kv_memory_bytes;
  model_options.block_size = s.options_.block_size;
  model_options.max_step_tokens = s.options_.max_step_tokens;
  model_options.attention_positions_per_token = s.options_.attention_positions_per_token;
  model_options.chat_template = s.options_.chat_template;
  model_options.parse_special = s.options_.parse_special;
  BackendMetrics* metrics = &s.metrics_;
  model_options.on_drained = [metrics](engine::Engine& engine, int64_t& last_steps) {
    const engine::EngineStats stats = engine.stats();
    if (stats.steps > last_steps) {
      metrics->observe_step_tokens(stats.last_step_tokens);
      last_steps = stats.steps;
    }
  };
  std::shared_ptr<device::Device> device = s.device_;
  proto::EventLoop* dispatch = &s.workers_->loop(0);
  residency::Loader loader = [model_options, device, dispatch](const residency::ModelSpec& spec,
                                                               residency::PhaseRecorder& recorder) {
    return load_served_model(spec, model_options, device, *dispatch, recorder);
  };
  s.residency_ =
      std::make_unique<residency::Residency>(residency::ResidencyOptions{budget}, s.clock_, loader);
  s.residency_->set_on_load([metrics](const std::string& name, const residency::LoadReport& r) {
    metrics->on_model_load(name, r);
    std::fprintf(stderr,
                 "cutline-backend: loaded model '%s' in %.1f ms (load %.1f ms, warm-up %.1f ms, "
                 "read %.1f MB/s)\n",
                 name.c_str(), r.total_ms, r.total_ms - r.warmup_ms(), r.warmup_ms(),
                 r.read_bytes_per_s() / 1e6);
  });
  s.residency_->set_on_evict([metrics](const std::string& name) {
    metrics->on_model_evicted(name);
    std::fprintf(stderr, "cutline-backend: evicted model '%s'\n", name.c_str());
  });

  for (const auto& m : s.options_.models) {
    std::string path = m.path;
    if (m.builtin()) {
      auto built = model::ensure_builtin_model(s.options_.cache_dir);
      if (!built.ok())
        return make_error(built.error().kind,
                          "--model " + m.name + "=builtin: " + built.error().message);
      path = *built;
    }
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec)
      return make_error(ErrorKind::kNotFound, "--model " + m.name + "=" + m.path +
                                                  ": cannot read " + path + ": " + ec.message());
    residency::ModelSpec spec;
    spec.name = m.name;
    spec.path = path;
    spec.weight_bytes_estimate = static_cast<int64_t>(size);
    for (const auto& pin : s.options_.keep_resident) spec.pinned = spec.pinned || pin == m.name;
    if (auto st = s.residency_->add_model(std::move(spec)); !st.ok()) return std::move(st).error();
  }
  for (int i = 0; i < s.workers_->size(); ++i)
    s.parsers_.push_back(std::make_unique<proto::RequestParser>());
  return server;
}

BackendServer::~BackendServer() { shutdown(0); }

Status BackendServer::start() {
  // Pinned models and the default model load before the port opens: /healthz answering means
  // the default model is ready.
  std::vector<std::string> preload = options_.keep_resident;
  preload.push_back(options_.models.front().name);
  for (const auto& name : preload) {
    auto lease = residency_->acquire(name);
    if (!lease.ok()) return std::move(lease).error();
  }
  workers_->start();
  proto::ServerOptions http_options;
  http_options.address = options_.host;
  http_options.port = static_cast<uint16_t>(options_.port);
  http_ = std::make_unique<proto::HttpServer>(
      http_options, [this](std::shared_ptr<proto::ServerStream> s) { handle(std::move(s)); },
      *workers_);
  return http_->start();
}

uint16_t BackendServer::port() const { return http_ ? http_->port() : 0; }

std::string BackendServer::next_request_id(proto::Endpoint endpoint) {
  return next_id(endpoint == proto::Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-");
}

std::string BackendServer::next_id(const char* prefix) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%s%llx%06llx", prefix,
                static_cast<unsigned long long>(started_unix_s_),
                static_cast<unsigned long long>(++request_counter_));
  return buf;
}

void BackendServer::handle(std::shared_ptr<proto::ServerStream> http) {
  const auto& req = http->request();
  const std::string_view path = req.path();
  const bool get = req.method == "GET";
  const bool post = req.method == "POST";
  if (path == "/v1/chat/completions" || path == "/v1/completions") {
    if (!post)
      return send_error(*http,
                        make_error(ErrorKind::kBadRequest, "use POST for " + std::string(path)));
    return handle_completion(std::move(http), path == "/v1/completions"
                                                  ? proto::Endpoint::kCompletions
                                                  : proto::Endpoint::kChatCompletions);
  }
  if (path == "/v1/responses") {
    if (!post)
      return send_error(*http,
                        make_error(ErrorKind::kBadRequest, "use POST for " + std::string(path)));
    return handle_responses(std::move(http));
  }
  if (path == "/tokenize" || path == "/detokenize") {
    if (!post)
      return send_error(*http,
                        make_error(ErrorKind::kBadRequest, "use POST for " + std::string(path)));
    return handle_tokenize(std::move(http), path == "/detokenize");
  }
  if (!get && (path == "/healthz" || path == "/health" || path == "/metrics" ||
               path == "/v1/models" || path == "/v1/cutline/state"))
    return send_error(*http,
                      make_error(ErrorKind::kBadRequest, "use GET for " + std::string(path)));
  // /health as vLLM, SGLang, TGI and llama.cpp's server answer it (a gateway's default check).
  if (path == "/healthz" || path == "/health") {
    if (draining_.load()) return send_json(*http, 503, R"({"status":"draining"})");
    return send_json(*http, 200, R"({"status":"ok"})");
  }
  if (path == "/metrics") {
    const std::string text = metrics_.render(gauges_of(state()));
    http->send_simple(200, {{"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}}, text);
    return;
  }
  if (path == "/v1/models") return send_models(*http);
  if (path == "/v1/cutline/state") return send_json(*http, 200, backend_state_json(state()));
  send_error(*http, make_error(ErrorKind::kNotFound, "no route for " + std::string(path)));
}

void BackendServer::send_models(proto::ServerStream& http) {
  std::string body;
  base::JsonWriter w(body);
  w.begin_object().field("object", "list").key("data").begin_array();
  for (const auto& m : residency_->snapshot()) {
    w.begin_object();
    w.field("id", m.name);
    w.field("object", "model");
    w.field("created", started_unix_s_);
    w.field("owned_by", "cutline");
    w.key("cutline").begin_object();
    w.field("resident", m.resident);
    w.field("pinned", m.pinned);
    w.field("weight_bytes", m.weight_bytes);
    w.end_object();
    w.end_object();
  }
  w.end_array().end_object();
  send_json(http, 200, body);
}

BackendState BackendServer::state() const {
  BackendState st;
  st.now_us = clock_.now_us();
  st.weights_budget_bytes = residency_->budget_bytes();
  st.kv_memory_bytes = options_.kv_memory_bytes;
  st.device = device_->description();
  st.device_free_bytes = device_->free_bytes();
  st.draining = draining_.load();
  {
    std::lock_guard<std::mutex> lock(active_mu_);
    st.active_requests = active_;
    st.waiting_for_model = waiting_for_model_;
  }
  for (auto& status : residency_->snapshot()) {
    ModelStateView view;
    view.status = std::move(status);
    residency_->visit_resident(view.status.name, [&view](residency::ResidentModel& m) {
      view.engine = static_cast<ServedModel&>(m).engine().stats();
    });
    st.models.push_back(std::move(view));
  }
  return st;
}

void BackendServer::handle_completion(std::shared_ptr<proto::ServerStream> http,
                                      proto::Endpoint endpoint) {
  const int64_t arrival_us = clock_.now_us();
  if (draining_.load())
    return send_error(*http, make_error(ErrorKind::kExhausted, "the backend is shutting down"));
  auto& parser = *parsers_[static_cast<size_t>(http->loop().index())];
  auto parsed = parser.parse_in_place(http->request().body, endpoint);
  if (!parsed.ok()) {
    metrics_.on_request_rejected("");
    return send_error(*http, parsed.error());
  }
  auto pending = std::make_shared<PendingRequest>();
  pending->http = http;
  pending->parsed = std::move(parsed).value();
  pending->arrival_us = arrival_us;
  acquire_model(std::move(pending));
}

void BackendServer::handle_responses(std::shared_ptr<proto::ServerStream> http) {
  const int64_t arrival_us = clock_.now_us();
  if (draining_.load())
    return send_error(*http, make_error(ErrorKind::kExhausted, "the backend is shutting down"));
  RequestErrorDetail detail;
  auto parsed = parse_responses_request(http->request().body, detail);
  if (!parsed.ok()) {
    metrics_.on_request_rejected("");
    return send_error(*http, parsed.error(), detail.param, detail.code);
  }
  auto pending = std::make_shared<PendingRequest>();
  pending->http = std::move(http);
  pending->responses = std::move(parsed).value();
  pending->arrival_us = arrival_us;
  acquire_model(std::move(pending));
}

void BackendServer::acquire_model(std::shared_ptr<PendingRequest> pending) {
  const std::string& name = pending->model();
  proto::ServerStream* http = pending->http.get();
  auto lease = residency_->try_acquire(name);
  if (!lease.ok()) {
    metrics_.on_request_rejected(name);
    const bool unknown = lease.error().kind == ErrorKind::kNotFound;
    return send_error(*http, lease.error(), unknown ? "model" : "",
                      unknown ? "model_not_found" : "");
  }
  if (lease->has_value()) return admit(std::move(pending), std::move(**lease));
  wait_for_load(std::move(pending));
}

void BackendServer::handle_tokenize(std::shared_ptr<proto::ServerStream> http, bool detokenize) {
  if (draining_.load())
    return send_error(*http, make_error(ErrorKind::kExhausted, "the backend is shutting down"));
  auto name = tokenize_model_of(http->request().body);
  if (!name.ok()) return send_error(*http, name.error());
  auto pending = std::make_shared<PendingRequest>();
  pending->http = http;
  pending->parsed.model = name->value_or(options_.models.front().name);
  pending->on_lease = [http, detokenize](residency::Lease lease) {
    const ModelTextInfo info = static_cast<ServedModel&>(lease.model()).text_info();
    std::string param;
    auto body = detokenize ? detokenize_json(http->request().body, info, param)
                           : tokenize_json(http->request().body, info, param);
    if (!body.ok()) return send_error(*http, body.error(), param);
    send_json(*http, 200, *body);
  };
  auto lease = residency_->try_acquire(pending->parsed.model);
  if (!lease.ok()) {
    const bool unknown = lease.error().kind == ErrorKind::kNotFound;
    return send_error(*http, lease.error(), unknown ? "model" : "",
                      unknown ? "model_not_found" : "");
  }
  if (lease->has_value()) return pending->on_lease(std::move(**lease));
  wait_for_load(std::move(pending));
}

void BackendServer::wait_for_load(std::shared_ptr<PendingRequest> pending) {
  std::lock_guard<std::mutex> lock(active_mu_);
  if (shut_down_) {
    send_error(*pending->http, make_error(ErrorKind::kExhausted, "the backend is shutting down"));
    return;
  }
  ++active_;
  ++waiting_for_model_;
  // Join the waiters that are done: a finished thread keeps its stack until it is joined.
  std::erase_if(load_waiters_, [](LoadWaiter& w) {
    if (!w.done->load()) return false;
    w.thread.join();
    return true;
  });
  auto done = std::make_shared<std::atomic<bool>>(false);
  auto waiter = [this, done, pending = std::move(pending)]() mutable {
    auto lease = residency_->acquire(pending->model());
    {
      std::lock_guard<std::mutex> lock(active_mu_);
      --waiting_for_model_;
    }
    proto::EventLoop& loop = pending->http->loop();
    auto shared_lease = std::make_shared<Result<residency::Lease>>(std::move(lease));
    loop.post([this, pending, shared_lease] {
      auto& result = *shared_lease;
      if (!result.ok()) {
        metrics_.on_request_rejected(pending->model());
        send_error(*pending->http, result.error());
      } else if (pending->http->closed()) {
        proto::StopRecord gone;
        gone.cause = proto::Cause::kClientCancel;
        metrics_.on_request_finished(pending->model(), gone);
      } else {
        admit(pending, std::move(result).value());
      }
      std::lock_guard<std::mutex> lock(active_mu_);
      --active_;
      active_cv_.notify_all();
    });
    done->store(true);
  };
  load_waiters_.push_back({std::thread(std::move(waiter)), std::move(done)});
}

void BackendServer::admit(std::shared_ptr<PendingRequest> pending, residency::Lease lease) {
  if (pending->on_lease) return pending->on_lease(std::move(lease));
  auto& served = static_cast<ServedModel&>(lease.model());
  RequestErrorDetail detail;
  auto refuse = [&](const Error& error) {
    metrics_.on_request_rejected(pending->model());
    send_error(*pending->http, error, detail.param, detail.code);
  };
  ExchangeParams params;
  params.model = pending->model();
  params.arrival_us = pending->arrival_us;
  const int64_t now_unix_s = static_cast<int64_t>(base::wall_time_s());

  if (pending->responses) {
    const ResponsesRequest& r = *pending->responses;
    params.id = next_id("resp_");
    params.requested_max_tokens = r.max_output_tokens;
    ToolCallOptions tool_calls;
    auto add = build_responses_add_request(r, served.text_info(), params.id, detail, &tool_calls);
    if (!add.ok()) return refuse(add.error());
    ResponsesParams rp = responses_params(r, params.id, now_unix_s);
    rp.tools = std::move(tool_calls);
    auto writer = std::make_unique<ResponsesWriter>(std::move(rp), served.tokenizer());
    return launch(pending->http, std::move(lease), std::move(add).value(), std::move(params),
                  std::move(writer));
  }

  const proto::ParsedRequest& parsed = pending->parsed;
  params.id = next_request_id(parsed.endpoint);
  params.requested_max_tokens = parsed.requested_max_tokens();
  ToolCallOptions tool_calls;
  auto add = build_add_request(parsed, served.text_info(), params.id, detail, &tool_calls);
  if (!add.ok()) return refuse(add.error());
  CompletionParams cp;
  cp.tools = std::move(tool_calls);
  cp.endpoint = parsed.endpoint;
  cp.stream = parsed.stream;
  cp.include_usage = parsed.include_usage;
  cp.model = parsed.model;
  cp.id = params.id;
  cp.created = now_unix_s;
  cp.requested_max_tokens = params.requested_max_tokens;
  cp.arrival_us = pending->arrival_us;
  cp.logprobs = add->sampling.logprobs >= 0;
  auto writer = std::make_unique<CompletionWriter>(std::move(cp), served.tokenizer());
  launch(pending->http, std::move(lease), std::move(add).value(), std::move(params),
         std::move(writer));
}

void BackendServer::launch(std::shared_ptr<proto::ServerStream> http, residency::Lease lease,
                           engine::AddRequest add, ExchangeParams params,
                           std::unique_ptr<ExchangeWriter> writer) {
  const std::string model = params.model;
  auto stream = std::make_shared<CompletionStream>(
      std::move(http), std::move(lease), std::move(params), std::move(writer), metrics_, clock_,
      [this](CompletionStream* s) { stream_done(s); });
  {
    std::lock_guard<std::mutex> lock(active_mu_);
    ++active_;
    streams_[stream.get()] = stream;
  }
  if (auto st = stream->start(std::move(add)); !st.ok()) {
    metrics_.on_request_rejected(model);
    stream_done(stream.get());
  }
}

void BackendServer::stream_done(CompletionStream* stream) {
  std::lock_guard<std::mutex> lock(active_mu_);
  if (streams_.erase(stream) > 0) --active_;
  if (draining_.load()) drained_http_.push_back(stream->http());
  active_cv_.notify_all();
}

void BackendServer::wait_for_flush(int64_t timeout_ms) {
  std::vector<std::shared_ptr<proto::ServerStream>> streams;
  {
    std::lock_guard<std::mutex> lock(active_mu_);
    streams.swap(drained_http_);
  }
  if (streams.empty() || !workers_ || !workers_->running()) return;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    std::atomic<size_t> queued{0};
    // buffered_bytes() is loop-thread only: ask every loop about its own streams.
    workers_->run_on_all_and_wait([&](proto::EventLoop& loop) {
      for (const auto& s : streams)
        if (&s->loop() == &loop && !s->closed()) queued += s->buffered_bytes();
    });
    if (queued.load() == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void BackendServer::shutdown(int64_t drain_timeout_ms) {
  // Each phase is timed: the line at the end says where a slow stop spent its time.
  const int64_t begin_us = clock_.now_us();
  int64_t mark_us = begin_us;
  std::string phases;
  auto phase_done = [&](const char* name) {
    const int64_t now = clock_.now_us();
    phases += std::string(phases.empty() ? "" : ", ") + name + " " +
              std::to_string((now - mark_us) / 1000) + " ms";
    mark_us = now;
  };
  size_t cut = 0;
  // Once: a second call (the destructor after main's) returns here.
  if (draining_.exchange(true)) return;
  // create() failed before the models existed (no usable device, e.g. --device cuda where the
  // CUDA plugin or libraries are absent): nothing was started.
  if (!residency_) return;
  // Stop accepting: new connections are refused; open ones may finish (new requests on them
  // get 503 "draining"). Not under active_mu_: this waits for every loop, and a loop may be
  // waiting for active_mu_ (state(), stream_done(), a load's completion) - holding it here
  // deadlocked the shutdown.
  if (http_) http_->stop_accepting();
  {
    std::unique_lock<std::mutex> lock(active_mu_);
    active_cv_.wait_for(lock, std::chrono::milliseconds(drain_timeout_ms),
                        [this] { return active_ == 0; });
    phase_done("drain");
    // Drain timeout: end what is still running with a labeled stop.
    std::vector<std::shared_ptr<CompletionStream>> rest;
    for (auto& [ptr, weak] : streams_)
      if (auto s = weak.lock()) rest.push_back(std::move(s));
    cut = rest.size();
    lock.unlock();
    for (auto& s : rest) s->abort_for_shutdown();
    lock.lock();
    active_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return streams_.empty(); });
    phase_done("abort");
    shut_down_ = true;
  }
  residency_->shutdown();  // wakes requests waiting for a load slot
  std::vector<LoadWaiter> waiters;
  {
    std::lock_guard<std::mutex> lock(active_mu_);
    waiters.swap(load_waiters_);
  }
  for (auto& w : waiters) w.thread.join();
  phase_done("load waiters");
  wait_for_flush(2000);
  phase_done("flush");
  if (http_) http_->stop();
  if (workers_) workers_->stop();
  phase_done("close");
  // No engine may wake a loop that is about to be destroyed.
  for (const auto& name : residency_->model_names())
    residency_->visit_resident(
        name, [](residency::ResidentModel& m) { static_cast<ServedModel&>(m).stop(); });
  phase_done("engines");
  http_.reset();
  workers_.reset();  // destroys posted work, releasing any lease it held
  residency_->unload_all_idle();
  phase_done("unload");
  std::fprintf(stderr, "cutline-backend: shut down in %lld ms (%s; %zu streams cut)\n",
               static_cast<long long>((clock_.now_us() - begin_us) / 1000), phases.c_str(), cut);
}

}  // namespace cutline::server
