#include "cutline/server/completion_writer.h"

#include <utility>

#include "cutline/proto/json_writer.h"
#include "cutline/proto/openai_error.h"
#include "cutline/proto/openai_writer.h"
#include "cutline/proto/sse_writer.h"

namespace cutline::server {

CompletionWriter::CompletionWriter(CompletionParams params, const model::Tokenizer& tokenizer)
    : params_(std::move(params)), tokenizer_(tokenizer), columns_(tokenizer) {}

void CompletionWriter::start(proto::ServerStream& http) {
  if (!params_.stream) return;
  proto::HttpHeaders headers{{"Content-Type", "text/event-stream"},
                             {"Cache-Control", "no-cache"},
                             {"Trailer", "cutline-stop"}};
  http.send_head(200, headers, proto::BodyFraming::chunked());
  if (!chat()) return;
  // OpenAI's first chunk carries the role.
  std::string json;
  proto::ChunkFields f;
  f.endpoint = params_.endpoint;
  f.id = params_.id;
  f.created = params_.created;
  f.model = params_.model;
  f.role = "assistant";
  f.content = std::string_view();
  proto::write_chunk(json, f);
  scratch_.clear();
  proto::append_sse_data(scratch_, json);
  http.send_body(scratch_);
}

std::string CompletionWriter::logprobs_object(std::span<const engine::TokenLogprobs> logprobs) {
  if (chat()) {
    if (params_.stream) {
      chat_items_.clear();
      append_chat_logprobs_items(chat_items_, logprobs, tokenizer_);
    }
    return chat_logprobs_object(chat_items_);
  }
  if (params_.stream) {
    columns_.clear();
    columns_.add(logprobs);
  }
  return columns_.object();
}

void CompletionWriter::text(proto::ServerStream& http, std::string_view text,
                            std::span<const engine::TokenLogprobs> logprobs) {
  if (!params_.stream) {
    text_.append(text);
    if (params_.logprobs) {
      if (chat()) {
        append_chat_logprobs_items(chat_items_, logprobs, tokenizer_);
      } else {
        columns_.add(logprobs);
      }
    }
    return;
  }
  const bool with_logprobs = params_.logprobs && !logprobs.empty();
  if (text.empty() && !with_logprobs) return;
  std::string json;
  proto::ChunkFields f;
  f.endpoint = params_.endpoint;
  f.id = params_.id;
  f.created = params_.created;
  f.model = params_.model;
  f.content = text;
  proto::write_chunk(json, f);
  if (with_logprobs) insert_choice_logprobs(json, logprobs_object(logprobs));
  scratch_.clear();
  proto::append_sse_data(scratch_, json);
  // Tokens come at model speed; the connection's buffer absorbs them. send_body's false (above
  // high water) only means the client reads slowly; nothing is dropped.
  http.send_body(scratch_);
}

void CompletionWriter::finish_stream(proto::ServerStream& http, const proto::StopRecord& stop,
                                     const engine::SequenceRecord& rec) {
  proto::Usage usage;
  usage.prompt_tokens = rec.input_tokens;
  usage.completion_tokens = rec.output_tokens;
  usage.total_tokens = rec.input_tokens + rec.output_tokens;
  std::string json;
  scratch_.clear();
  if (rec.runner_error) {
    proto::ErrorBodyFields fields;
    fields.cutline = &stop;
    proto::write_error_body(json, make_error(ErrorKind::kInternal, rec.message), fields);
    proto::append_sse_error(scratch_, json);
    json.clear();
  }
  proto::ChunkFields f;
  f.endpoint = params_.endpoint;
  f.id = params_.id;
  f.created = params_.created;
  f.model = params_.model;
  f.finish_reason = proto::default_finish_reason(stop.cause);
  f.cutline = &stop;
  if (chat()) f.content.reset();
  proto::write_chunk(json, f);
  proto::append_sse_data(scratch_, json);
  if (params_.include_usage) {
    json.clear();
    proto::ChunkFields u;
    u.endpoint = params_.endpoint;
    u.id = params_.id;
    u.created = params_.created;
    u.model = params_.model;
    u.no_choices = true;
    u.usage = &usage;
    proto::write_chunk(json, u);
    proto::append_sse_data(scratch_, json);
  }
  proto::append_sse_done(scratch_);
  http.send_body(scratch_);
  http.finish({{"cutline-stop", proto::stop_header_value(stop)}});
}

void CompletionWriter::finish(proto::ServerStream& http, const proto::StopRecord& stop,
                              const engine::SequenceRecord& rec) {
  if (params_.stream) return finish_stream(http, stop, rec);
  const proto::HttpHeaders headers{{"Content-Type", "application/json"},
                                   {"Cutline-Stop", proto::stop_header_value(stop)}};
  if (rec.runner_error) {
    proto::ErrorBodyFields fields;
    fields.cutline = &stop;
    http.send_simple(500, headers,
                     proto::error_body(make_error(ErrorKind::kInternal, rec.message), fields));
    return;
  }
  proto::Usage usage;
  usage.prompt_tokens = rec.input_tokens;
  usage.completion_tokens = rec.output_tokens;
  usage.total_tokens = rec.input_tokens + rec.output_tokens;
  std::string body;
  proto::CompletionFields f;
  f.endpoint = params_.endpoint;
  f.id = params_.id;
  f.created = params_.created;
  f.model = params_.model;
  f.content = text_;
  f.finish_reason = proto::default_finish_reason(stop.cause);
  if (!params_.logprobs) {
    f.usage = &usage;
    f.cutline = &stop;
    proto::write_completion(body, f);
  } else {
    // The choice gets its logprobs before usage and the record close the body.
    proto::write_completion(body, f);
    insert_choice_logprobs(body, logprobs_object({}));
    std::string raw;
    proto::JsonWriter uw(raw);
    uw.begin_object()
        .field("prompt_tokens", usage.prompt_tokens)
        .field("completion_tokens", usage.completion_tokens)
        .field("total_tokens", usage.total_tokens)
        .end_object();
    append_top_level(body, "usage", raw);
    raw.clear();
    proto::JsonWriter rw(raw);
    proto::write_stop_record(rw, stop);
    append_top_level(body, "cutline", raw);
  }
  http.send_simple(200, headers, body);
}

}  // namespace cutline::server
