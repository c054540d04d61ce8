#include "cutline/gateway/relay.h"

#include "cutline/base/clock.h"
#include "cutline/proto/sse/sse_writer.h"
#include "cutline/proto/wire/openai_error.h"
#include "cutline/proto/wire/openai_writer.h"

namespace cutline::gateway {
namespace {

// vLLM names the matched stop string or token in choices[].stop_reason; any non-null value
// means the stop was a stop sequence rather than end-of-sequence. Checked on the finish chunk
// only (not on the per-token path).
bool has_stop_reason(std::string_view json) {
  const std::string_view key = "\"stop_reason\"";
  size_t at = json.find(key);
  if (at == std::string_view::npos) return false;
  at += key.size();
  while (at < json.size() && (json[at] == ' ' || json[at] == ':' || json[at] == '\t')) ++at;
  return at < json.size() && json[at] != 'n';
}

proto::SseOptions sse_options() {
  proto::SseOptions o;
  o.max_line_bytes = 4u << 20;
  o.max_event_bytes = 4u << 20;
  return o;
}

}  // namespace

Relay::Relay(RelayOptions options)
    : options_(std::move(options)), sse_(sse_options()), chunks_(options_.chunk_parser) {}

Result<FeedResult> Relay::feed(std::string_view bytes, int64_t now_ns, TokenTiming& timing,
                               std::string& out) {
  FeedResult result;
  while (!done_) {
    const auto step = sse_.next(bytes);
    if (step == proto::SseParser::Step::kNeedMore) break;
    if (step == proto::SseParser::Step::kError) {
      error_event_ = true;
      error_message_ = sse_.error().message;
      done_ = true;
      result.ended = true;
      return sse_.error();
    }
    if (Status s = on_event(sse_.event(), now_ns, timing, out, result); !s.ok()) {
      error_event_ = true;
      error_message_ = s.error().message;
      done_ = true;
      result.ended = true;
      return s.error();
    }
  }
  if (done_) result.ended = true;
  return result;
}

Status Relay::on_event(const proto::SseEvent& event, int64_t now_ns, TokenTiming& timing,
                       std::string& out, FeedResult& result) {
  if (event.done) {
    done_ = true;
    return {};
  }
  if (!event.event.empty() && event.event != "message" && event.event != "error") {
    // An event type the gateway does not know (a newer API's, a vendor's): passed on as sent to
    // a streaming client, never parsed as a chunk. A non-streaming answer has no place for it.
    if (options_.client_stream) proto::append_sse_event(out, event.event, event.data);
    return {};
  }
  if (chunks_ == nullptr) {
    own_chunks_ = std::make_unique<proto::ChunkParser>();
    chunks_ = own_chunks_.get();
  }
  if (Status s = chunks_->parse(event.data); !s.ok()) return s;
  const proto::ParsedChunk& c = chunks_->chunk();
  if (!options_.client_stream && !c.error && event.event != "error") {
    if (!assembler_) assembler_ = std::make_unique<proto::CompletionAssembler>();
    // A chunk of plain choices (text, role, finish_reason) is taken from the parse above; one
    // with more (tool calls, reasoning, logprobs, ...) is read whole by the assembler.
    if (Status s = c.choices_plain ? assembler_->add(c) : assembler_->add(event.data); !s.ok()) {
      return s;
    }
  }
  if (c.error || event.event == "error") {
    error_event_ = true;
    error_message_ = c.error ? std::string(c.error->message) : std::string(event.data);
    if (c.cutline) keep_backend_record(*c.cutline);
    done_ = true;
    return {};
  }
  if (id_.empty() && !c.id.empty()) {
    id_ = c.id;
    model_ = c.model;
    created_ = c.created;
  }
  if (c.cutline) keep_backend_record(*c.cutline);
  if (c.usage) usage_ = *c.usage;
  for (const proto::ChunkChoice& choice : c.choices) {
    if (choice.index != 0) continue;
    if ((choice.has_content && !choice.content.empty()) || choice.has_tool_calls) {
      timing.on_token(now_ns);
      ++content_chunks_;
      ++result.tokens;
    }
  }
  const std::string_view finish = c.finish_reason();
  if (!finish.empty()) {
    finish_reason_ = finish;
    stop_reason_present_ = has_stop_reason(event.data);
    if (options_.client_stream) {
      // n > 1: each choice ends in its own chunk. Only the last one is held for the record; an
      // earlier one goes out as the upstream sent it.
      if (!held_finish_.empty()) proto::append_sse_data(out, held_finish_);
      held_finish_.assign(event.data);
    }
    return {};
  }
  if (c.usage && c.choices.empty()) {
    if (options_.client_stream) held_usage_.assign(event.data);
    return {};
  }
  if (options_.client_stream) proto::append_sse_data(out, event.data);
  return {};
}

void Relay::keep_backend_record(const proto::StopRecord& record) {
  if (backend_record_) {
    *backend_record_ = record;
  } else {
    backend_record_ = std::make_unique<proto::StopRecord>(record);
  }
}

void Relay::on_error_status(int status, std::string_view body) {
  error_status_ = status;
  auto parsed = proto::parse_error_body(body);
  if (parsed.ok()) {
    error_message_ = parsed->error.message;
    if (parsed->cutline) keep_backend_record(*parsed->cutline);
  } else {
    error_message_ = std::string(body.substr(0, 200));
  }
  done_ = true;
}

UpstreamEnd Relay::upstream_end(bool transport_closed) const {
  UpstreamEnd end;
  if (backend_record_) end.backend_cause = backend_record_->cause;
  if (error_status_ != 0) {
    end.kind = UpstreamEndKind::kErrorStatus;
  } else if (error_event_) {
    end.kind = UpstreamEndKind::kErrorEvent;
  } else if (!finish_reason_.empty()) {
    end.kind = UpstreamEndKind::kFinished;
    end.finish_reason = finish_reason_;
    end.stop_reason_present = stop_reason_present_;
  } else {
    end.kind = transport_closed ? UpstreamEndKind::kDisconnect : UpstreamEndKind::kNoFinish;
  }
  return end;
}

int64_t Relay::output_tokens() const {
  return usage_ ? usage_->completion_tokens : content_chunks_;
}

proto::CountMethod Relay::count_method() const {
  return usage_ ? proto::CountMethod::kUsage : proto::CountMethod::kChunks;
}

namespace {

// The usage a client is owed when the upstream sent none before the end (a gateway cut comes
// before the upstream's usage chunk): the record's counts, prompt tokens 0 where no upstream
// reported them.
proto::Usage usage_from_record(const proto::StopRecord& record) {
  proto::Usage u;
  u.prompt_tokens = record.input_tokens.value_or(0);
  u.completion_tokens = record.output_tokens;
  u.total_tokens = u.prompt_tokens + u.completion_tokens;
  return u;
}

}  // namespace

void Relay::write_end(const proto::StopRecord& record,
                      std::optional<std::string_view> finish_reason, std::string& out) {
  const std::string_view id = id_.empty() ? std::string_view(options_.fallback_id) : id_;
  const std::string_view model =
      model_.empty() ? std::string_view(options_.fallback_model) : model_;
  const int64_t created = created_ != 0 ? created_ : static_cast<int64_t>(base::wall_time_s());
  if (!options_.client_stream) {
    proto::CompletionFields f;
    f.endpoint = options_.endpoint;
    f.id = id;
    f.created = created;
    f.model = model;
    if (assembler_) f.choices = &assembler_->choices();
    if (finish_reason) {
      f.finish_reason = *finish_reason;
    } else if (assembler_ && !assembler_->choices().empty() &&
               assembler_->choices().front().index == 0 &&
               !assembler_->choices().front().finish_reason.empty()) {
      f.finish_reason = assembler_->choices().front().finish_reason;
    } else if (!finish_reason_.empty()) {
      f.finish_reason = finish_reason_;
    }
    const proto::Usage counted = usage_ ? *usage_ : usage_from_record(record);
    f.usage = &counted;
    f.cutline = &record;
    proto::write_completion(out, f);
    return;
  }
  bool wrote = false;
  if (!held_finish_.empty()) {
    proto::ChunkPatch patch{&record, finish_reason};
    wrote = proto::patch_chunk(held_finish_, patch, scratch_).ok();
  }
  if (!wrote) {
    scratch_.clear();
    proto::ChunkFields f;
    f.endpoint = options_.endpoint;
    f.id = id;
    f.created = created;
    f.model = model;
    f.finish_reason = finish_reason
                          ? *finish_reason
                          : (finish_reason_.empty() ? std::string_view("stop") : finish_reason_);
    f.cutline = &record;
    proto::write_chunk(scratch_, f);
  }
  proto::append_sse_data(out, scratch_);
  if (options_.client_include_usage) {
    const proto::Usage counted = usage_ ? *usage_ : usage_from_record(record);
    bool patched = false;
    if (!held_usage_.empty()) {
      patched =
          proto::patch_chunk(held_usage_, proto::ChunkPatch{&record, std::nullopt}, scratch_).ok();
    }
    if (!patched) {
      scratch_.clear();
      proto::ChunkFields f;
      f.endpoint = options_.endpoint;
      f.id = id;
      f.created = created;
      f.model = model;
      f.no_choices = true;
      f.usage = &counted;
      f.cutline = &record;
      proto::write_chunk(scratch_, f);
    }
    proto::append_sse_data(out, scratch_);
  }
  proto::append_sse_done(out);
}

void Relay::write_error_event(const Error& error, const proto::StopRecord& record,
                              std::string& out) {
  proto::ErrorBodyFields fields;
  fields.cutline = &record;
  proto::append_sse_error(out, proto::error_body(error, fields));
  proto::append_sse_done(out);
}

}  // namespace cutline::gateway
