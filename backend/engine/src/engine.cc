#include "cutline/engine/engine.h"

#include <algorithm>
#include <random>

#include "cutline/kv/block_hash.h"

namespace cutline::engine {
namespace {

std::function<uint64_t()> default_seed_source() {
  auto gen = std::make_shared<std::mt19937_64>(std::random_device{}());
  return [gen] { return (*gen)(); };
}

double ms(int64_t us) { return static_cast<double>(us) / 1000.0; }

std::string quote_bytes(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20) {
      out += "\\x";
      const char* hex = "0123456789abcdef";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(model::ModelRunner& runner,
                                               const model::Tokenizer& tokenizer,
                                               EngineConfig config) {
  const model::ModelInfo& info = runner.info();
  if (config.block_size <= 0) return make_error(ErrorKind::kBadRequest, "block_size must be > 0");
  if (config.max_step_tokens <= 0)
    return make_error(ErrorKind::kBadRequest, "max_step_tokens must be > 0");
  if (config.max_running <= 0) return make_error(ErrorKind::kBadRequest, "max_running must be > 0");
  if (info.vocab_size <= 0)
    return make_error(ErrorKind::kInternal, "model reports a vocabulary of 0 tokens");
  int32_t n_blocks = config.num_blocks;
  int64_t budget = 0;
  if (n_blocks <= 0) {
    budget = config.kv_memory_bytes > 0
                 ? config.kv_memory_bytes
                 : static_cast<int64_t>(config.kv_memory_fraction *
                                        static_cast<double>(runner.device_free_bytes()));
    n_blocks = kv::blocks_for_budget(budget, info.kv_bytes_per_token, config.block_size);
    // More blocks than max_running full context windows can never be used.
    if (info.context_length > 0) {
      const int64_t per_seq = (info.context_length + config.block_size - 1) / config.block_size;
      n_blocks = static_cast<int32_t>(
          std::min<int64_t>(n_blocks, per_seq * static_cast<int64_t>(config.max_running)));
    }
  }
  if (n_blocks <= 0) {
    return make_error(ErrorKind::kExhausted, "KV memory budget of " + std::to_string(budget) +
                                                 " bytes holds no block of " +
                                                 std::to_string(config.block_size) + " tokens (" +
                                                 std::to_string(info.kv_bytes_per_token) +
                                                 " bytes per token)");
  }
  Status st = runner.allocate_kv(n_blocks, config.block_size);
  if (!st.ok()) return std::move(st).error();
  return std::unique_ptr<Engine>(new Engine(runner, tokenizer, std::move(config), n_blocks));
}

Engine::Engine(model::ModelRunner& runner, const model::Tokenizer& tokenizer, EngineConfig config,
               int32_t num_blocks)
    : runner_(runner),
      tokenizer_(tokenizer),
      config_(std::move(config)),
      clock_(config_.clock ? config_.clock : &monotonic_clock_),
      kv_(num_blocks, config_.block_size,
          kv::model_salt(runner.info().architecture + "/" + runner.info().name + "/" +
                         std::to_string(runner.info().weight_bytes)),
          config_.prefix_caching),
      scheduler_(SchedulerConfig{config_.max_step_tokens, config_.max_running,
                                 config_.max_preemptions, config_.attention_positions_per_token},
                 kv_),
      seed_source_(config_.seed_source ? config_.seed_source : default_seed_source()) {
  refresh_stats();
  stats_ = local_stats_;
}

Engine::~Engine() { stop(); }

Result<SeqId> Engine::add(AddRequest request) {
  const model::ModelInfo& info = runner_.info();
  if (request.prompt.empty()) return make_error(ErrorKind::kBadRequest, "the prompt is empty");
  for (int32_t t : request.prompt) {
    if (t < 0 || t >= info.vocab_size)
      return make_error(ErrorKind::kBadRequest, "prompt token id " + std::to_string(t) +
                                                    " is outside the vocabulary of " +
                                                    std::to_string(info.vocab_size));
  }
  if (info.context_length > 0 &&
      static_cast<int64_t>(request.prompt.size()) >= info.context_length) {
    return make_error(ErrorKind::kBadRequest, "prompt of " + std::to_string(request.prompt.size()) +
                                                  " tokens does not fit the context window of " +
                                                  std::to_string(info.context_length) + " tokens");
  }
  if (std::string msg = validate(request.sampling); !msg.empty())
    return make_error(ErrorKind::kBadRequest, msg);
  if (request.stop.max_tokens && *request.stop.max_tokens < 1)
    return make_error(ErrorKind::kBadRequest, "max_tokens must be >= 1");

  auto seq = std::make_unique<Sequence>();
  seq->request_id = std::move(request.request_id);
  seq->prompt_len = static_cast<int32_t>(request.prompt.size());
  seq->tokens = std::move(request.prompt);
  seq->sampling = request.sampling;
  seq->matcher = StopMatcher(request.stop.stop_strings);
  seq->stop = std::move(request.stop);
  seq->arrival_us = clock_->now_us();

  std::lock_guard<std::mutex> lock(mu_);
  if (seq->sampling.seed) {
    seq->seed = *seq->sampling.seed;
  } else {
    seq->seed = seed_source_();
    seq->seed_generated = true;
  }
  const SeqId id = next_id_++;
  seq->id = id;
  Command cmd;
  cmd.kind = Command::Kind::kAdd;
  cmd.seq = std::move(seq);
  cmd.id = id;
  commands_.push_back(std::move(cmd));
  ++live_sequences_;
  cv_.notify_one();
  return id;
}

void Engine::abort(SeqId id) {
  std::lock_guard<std::mutex> lock(mu_);
  Command cmd;
  cmd.kind = Command::Kind::kAbort;
  cmd.id = id;
  commands_.push_back(std::move(cmd));
  cv_.notify_one();
}

void Engine::set_wake_callback(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  wake_ = std::move(wake);
}

size_t Engine::drain_events(std::vector<EngineEvent>& out) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = events_.size();
  for (auto& e : events_) out.push_back(std::move(e));
  events_.clear();
  return n;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

bool Engine::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_sequences_ == 0 && commands_.empty();
}

void Engine::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return;
  started_ = true;
  stopping_ = false;
  thread_ = std::thread([this] { run_loop(); });
}

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) return;
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  started_ = false;
}

void Engine::run_loop() {
  while (true) {
    const bool has_work = scheduler_.num_running() + scheduler_.num_waiting() > 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!has_work) cv_.wait(lock, [&] { return stopping_ || !commands_.empty(); });
      if (stopping_) return;
    }
    run_step();
  }
}

bool Engine::step() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return false;
  }
  return run_step();
}

bool Engine::take_commands() {
  std::vector<Command> commands;
  {
    std::lock_guard<std::mutex> lock(mu_);
    commands.swap(commands_);
  }
  for (Command& cmd : commands) {
    if (cmd.kind == Command::Kind::kAdd) {
      Sequence* seq = cmd.seq.get();
      seqs_.emplace(cmd.id, std::move(cmd.seq));
      scheduler_.add(seq);
      ++local_stats_.sequences_added;
      continue;
    }
    auto it = seqs_.find(cmd.id);
    if (it == seqs_.end() || it->second->phase == SeqPhase::kFinished) continue;
    finish(it->second.get(), proto::Cause::kClientCancel,
           "aborted: the client went away or cancelled", nullptr);
  }
  return !commands.empty();
}

EngineEvent& Engine::event_for(Sequence* seq) {
  auto [it, inserted] = step_event_index_.emplace(seq->id, step_events_.size());
  if (inserted) {
    step_events_.emplace_back();
    step_events_.back().seq_id = seq->id;
  }
  return step_events_[it->second];
}

void Engine::finish(Sequence* seq, proto::Cause cause, std::string message, EngineEvent* event,
                    bool runner_error) {
  scheduler_.remove(seq);
  EngineEvent& ev = event ? *event : event_for(seq);
  ev.text += seq->matcher.flush();  // nothing after a matched stop string
  const int64_t now = clock_->now_us();
  SequenceRecord rec;
  rec.seq_id = seq->id;
  rec.request_id = seq->request_id;
  rec.cause = cause;
  rec.message = std::move(message);
  rec.runner_error = runner_error;
  rec.input_tokens = seq->prompt_len;
  rec.output_tokens = seq->num_output();
  rec.cached_prompt_tokens = seq->cached_prompt_tokens;
  rec.duration_ms = ms(now - seq->arrival_us);
  if (seq->first_token_us >= 0) {
    const int64_t ttft = seq->first_token_us - seq->arrival_us;
    rec.ttft_ms = ms(ttft);
    rec.prefill_ms = ms(seq->prefill_us);
    rec.first_decode_ms = ms(seq->first_decode_us);
    rec.queue_ms = ms(ttft - seq->prefill_us - seq->first_decode_us);
    rec.decode_ms = ms(now - seq->first_token_us);
  } else {
    rec.prefill_ms = ms(seq->prefill_us);
    rec.queue_ms = ms(now - seq->arrival_us - seq->prefill_us);
  }
  if (rec.output_tokens > 1) {
    rec.itl_mean_ms = ms(seq->itl_sum_us) / static_cast<double>(rec.output_tokens - 1);
    rec.itl_max_ms = ms(seq->itl_max_us);
  }
  rec.preemptions = seq->preemptions;
  rec.kv_blocks_peak = seq->kv_blocks_peak;
  rec.kv_bytes_peak = static_cast<int64_t>(seq->kv_blocks_peak) * config_.block_size *
                      runner_.info().kv_bytes_per_token;
  rec.device_free_bytes = runner_.device_free_bytes();
  rec.seed = seq->seed;
  rec.seed_generated = seq->seed_generated;

  seq->phase = SeqPhase::kFinished;
  ev.finished = true;
  ev.record = std::move(rec);
  ++local_stats_.sequences_finished;
  ++local_stats_.finished_by_cause[static_cast<int>(cause)];
}

bool Engine::run_step() {
  const bool had_commands = take_commands();
  if (scheduler_.num_running() + scheduler_.num_waiting() == 0) {
    publish();
    return had_commands;
  }
  StepPlan plan = scheduler_.schedule();
  for (EndedSequence& e : plan.ended) finish(e.seq, e.cause, std::move(e.message), nullptr);
  if (plan.empty()) {
    publish();
    return had_commands || !plan.ended.empty();
  }

  model::ForwardBatch batch;
  batch.steps.reserve(plan.chunks.size());
  for (const ScheduledChunk& c : plan.chunks) {
    model::SequenceStep s;
    s.seq_id = c.seq->id;
    s.tokens = std::span<const int32_t>(c.seq->tokens).subspan(c.start_pos, c.n_tokens);
    s.start_pos = c.start_pos;
    s.block_table = kv_.block_table(c.seq->id);
    s.want_logits = c.want_logits;
    batch.steps.push_back(s);
  }
  const int64_t t0 = clock_->now_us();
  Status st = runner_.forward(batch, logits_);
  const int64_t t1 = clock_->now_us();
  if (!st.ok()) {
    for (const ScheduledChunk& c : plan.chunks) {
      finish(c.seq, proto::Cause::kUpstreamError,
             "model runner failed: " + std::string(to_string(st.error().kind)) + ": " +
                 st.error().message,
             nullptr, /*runner_error=*/true);
    }
    publish();
    return true;
  }
  for (const ScheduledChunk& c : plan.chunks) scheduler_.complete(c);
  apply_outputs(plan, logits_, t0, t1);

  ++local_stats_.steps;
  local_stats_.last_step_tokens = plan.num_tokens;
  local_stats_.last_step_sequences = static_cast<int32_t>(plan.chunks.size());
  local_stats_.step_tokens_total += plan.num_tokens;
  local_stats_.prefill_tokens_total += plan.prefill_tokens;
  local_stats_.decode_tokens_total += plan.decode_tokens;
  publish();
  return true;
}

void Engine::apply_outputs(const StepPlan& plan, const std::vector<float>& logits, int64_t t0_us,
                           int64_t t1_us) {
  const int64_t vocab = runner_.info().vocab_size;
  const int64_t step_us = t1_us - t0_us;
  const int32_t context = runner_.info().context_length;
  size_t row = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    Sequence* seq = c.seq;
    // Every step that computes part of the prompt before the first token is prefill, the one
    // that completes it included (it also yields the logits of the first token).
    if (seq->first_token_us < 0) seq->prefill_us += step_us;
    if (!c.want_logits) continue;
    std::span<const float> row_logits;
    if (logits.size() >= (row + 1) * static_cast<size_t>(vocab))
      row_logits = std::span<const float>(logits).subspan(row * vocab, vocab);
    ++row;
    if (row_logits.empty()) {
      finish(seq, proto::Cause::kUpstreamError, "model runner returned too few logits rows",
             nullptr, /*runner_error=*/true);
      continue;
    }
    std::span<const int32_t> all(seq->tokens);
    const int32_t token = sampler_.sample(row_logits, seq->sampling, seq->seed, seq->num_output(),
                                          all.first(seq->prompt_len), all.subspan(seq->prompt_len));
    seq->tokens.push_back(token);
    EngineEvent& ev = event_for(seq);
    ev.tokens.push_back(token);
    // From the same raw row the sampler read (before penalties and temperature).
    if (seq->sampling.logprobs >= 0) {
      ev.logprobs.emplace_back();
      logprobs_.compute(row_logits, token, seq->sampling.logprobs, ev.logprobs.back());
    }
    // A token counts as emitted once sampled and queued in its event (published with the step).
    const int64_t token_us = clock_->now_us();
    if (seq->first_token_us < 0) {
      seq->first_token_us = token_us;
      seq->first_decode_us = token_us - t1_us;
    } else {
      const int64_t gap = token_us - seq->last_token_us;
      seq->itl_sum_us += gap;
      seq->itl_max_us = std::max(seq->itl_max_us, gap);
    }
    seq->last_token_us = token_us;
    ++local_stats_.output_tokens_total;

    const StopConditions& stop = seq->stop;
    if (!stop.ignore_eos && tokenizer_.is_eos(token)) {
      finish(seq, proto::Cause::kEos, "end-of-sequence token " + std::to_string(token), &ev);
      continue;
    }
    if (std::find(stop.stop_token_ids.begin(), stop.stop_token_ids.end(), token) !=
        stop.stop_token_ids.end()) {
      finish(seq, proto::Cause::kStopSequence, "stop token id " + std::to_string(token), &ev);
      continue;
    }
    const std::string_view bytes =
        tokenizer_.is_control(token) ? std::string_view() : tokenizer_.token_bytes(token);
    StopMatcher::Scan scan = seq->matcher.push(bytes);
    ev.text += scan.released;
    if (scan.matched) {
      finish(seq, proto::Cause::kStopSequence,
             "stop string " + quote_bytes(scan.matched_string) + " matched", &ev);
      continue;
    }
    if (stop.max_tokens && seq->num_output() >= *stop.max_tokens) {
      finish(seq, proto::Cause::kClientMaxTokens,
             "max_tokens " + std::to_string(*stop.max_tokens) + " reached", &ev);
      continue;
    }
    if (context > 0 && seq->num_tokens() >= context) {
      finish(seq, proto::Cause::kContextLength,
             "context window of " + std::to_string(context) + " tokens reached", &ev);
      continue;
    }
  }
}

void Engine::refresh_stats() {
  const kv::KVStats kv = kv_.stats();
  local_stats_.queue_depth = scheduler_.num_waiting();
  local_stats_.running = scheduler_.num_running();
  local_stats_.kv_blocks_total = kv.blocks_total;
  local_stats_.kv_blocks_used = kv.blocks_used;
  local_stats_.kv_blocks_free = kv.blocks_free;
  local_stats_.kv_blocks_cached = kv.blocks_cached;
  local_stats_.block_size = config_.block_size;
  local_stats_.kv_bytes_per_block =
      static_cast<int64_t>(config_.block_size) * runner_.info().kv_bytes_per_token;
  local_stats_.preemptions_total = scheduler_.preemptions_total();
  local_stats_.prefix_queries = kv.prefix_queries;
  local_stats_.prefix_hits = kv.prefix_hits;
  local_stats_.prefix_hit_tokens = kv.prefix_hit_tokens;
  local_stats_.kv_evictions = kv.evictions;
}

void Engine::publish() {
  refresh_stats();
  std::vector<SeqId> finished;
  for (const EngineEvent& e : step_events_)
    if (e.finished) finished.push_back(e.seq_id);
  std::function<void()> wake;
  bool any = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    any = !step_events_.empty();
    for (auto& e : step_events_) events_.push_back(std::move(e));
    stats_ = local_stats_;
    live_sequences_ -= static_cast<int64_t>(finished.size());
    if (any) wake = wake_;
  }
  step_events_.clear();
  step_event_index_.clear();
  for (SeqId id : finished) seqs_.erase(id);
  if (any && wake) wake();
}

}  // namespace cutline::engine
