#include "cutline/server/completion_writer.h"

#include <utility>

#include "cutline/base/json_writer.h"
#include "cutline/proto/sse/sse_writer.h"
#include "cutline/proto/wire/openai_error.h"
#include "cutline/proto/wire/openai_writer.h"

namespace cutline::server {

namespace {

// The envelope of a chat chunk whose delta is `delta` (a JSON object).
std::string chat_delta_chunk(const CompletionParams& p, std::string_view delta) {
  std::string json;
  base::JsonWriter w(json);
  w.begin_object()
      .field("id", p.id)
      .field("object", "chat.completion.chunk")
      .field("created", p.created)
      .field("model", p.model)
      .key("choices")
      .begin_array()
      .begin_object()
      .field("index", 0)
      .key("delta")
      .raw(delta)
      .key("finish_reason")
      .null()
      .end_object()
      .end_array()
      .end_object();
  return json;
}

}  // namespace

CompletionWriter::CompletionWriter(CompletionParams params, const model::Tokenizer& tokenizer)
    : params_(std::move(params)), tokenizer_(tokenizer), columns_(tokenizer) {
  if (params_.tools.parse && chat()) {
    tool_parser_.emplace(params_.tools.forced_prefix, params_.tools.parallel,
                         params_.make_call_id ? params_.make_call_id : random_tool_call_ids());
  }
}

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
  if (!tool_parser_) return send_content(http, text, logprobs);
  std::string content;
  std::vector<ParsedToolCall> calls;
  tool_parser_->push(text, content, calls);
  send_content(http, content, logprobs);
  for (const ParsedToolCall& call : calls) send_tool_call(http, call);
}

void CompletionWriter::send_content(proto::ServerStream& http, std::string_view text,
                                    std::span<const engine::TokenLogprobs> logprobs) {
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

void CompletionWriter::send_tool_call(proto::ServerStream& http, const ParsedToolCall& call) {
  std::string head;
  base::JsonWriter h(head);
  h.begin_object()
      .key("tool_calls")
      .begin_array()
      .begin_object()
      .field("index", call.index)
      .field("id", call.id)
      .field("type", "function")
      .key("function")
      .begin_object()
      .field("name", call.name)
      .field("arguments", "")
      .end_object()
      .end_object()
      .end_array()
      .end_object();
  std::string args;
  base::JsonWriter a(args);
  a.begin_object()
      .key("tool_calls")
      .begin_array()
      .begin_object()
      .field("index", call.index)
      .key("function")
      .begin_object()
      .field("arguments", call.arguments)
      .end_object()
      .end_object()
      .end_array()
      .end_object();
  scratch_.clear();
  proto::append_sse_data(scratch_, chat_delta_chunk(params_, head));
  proto::append_sse_data(scratch_, chat_delta_chunk(params_, args));
  http.send_body(scratch_);
}

std::string_view CompletionWriter::finish_reason(const proto::StopRecord& stop) const {
  const bool model_stop =
      stop.cause == proto::Cause::kEos || stop.cause == proto::Cause::kStopSequence;
  if (tool_parser_ && tool_parser_->call_count() > 0 && model_stop) return "tool_calls";
  return proto::default_finish_reason(stop.cause);
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
  if (tool_parser_) {
    std::string held;
    tool_parser_->finish(held);
    send_content(http, held, {});
    scratch_.clear();
  }
  proto::ChunkFields f;
  f.endpoint = params_.endpoint;
  f.id = params_.id;
  f.created = params_.created;
  f.model = params_.model;
  f.finish_reason = finish_reason(stop);
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
  if (tool_parser_) {
    std::string content;
    std::vector<ParsedToolCall> calls;
    tool_parser_->push(text_, content, calls);
    tool_parser_->finish(content);
    text_ = std::move(content);
    if (!calls.empty()) {
      calls_ = std::move(calls);
      http.send_simple(200, headers, tool_calls_body(stop, usage));
      return;
    }
  }
  std::string body;
  proto::CompletionFields f;
  f.endpoint = params_.endpoint;
  f.id = params_.id;
  f.created = params_.created;
  f.model = params_.model;
  f.content = text_;
  f.finish_reason = finish_reason(stop);
  if (!params_.logprobs) {
    f.usage = &usage;
    f.cutline = &stop;
    proto::write_completion(body, f);
  } else {
    // The choice gets its logprobs before usage and the record close the body.
    proto::write_completion(body, f);
    insert_choice_logprobs(body, logprobs_object({}));
    std::string raw;
    base::JsonWriter uw(raw);
    uw.begin_object()
        .field("prompt_tokens", usage.prompt_tokens)
        .field("completion_tokens", usage.completion_tokens)
        .field("total_tokens", usage.total_tokens)
        .end_object();
    append_top_level(body, "usage", raw);
    raw.clear();
    base::JsonWriter rw(raw);
    proto::write_stop_record(rw, stop);
    append_top_level(body, "cutline", raw);
  }
  http.send_simple(200, headers, body);
}

}  // namespace cutline::server

namespace cutline::server {

std::string CompletionWriter::tool_calls_body(const proto::StopRecord& stop,
                                              const proto::Usage& usage) {
  std::vector<proto::AssembledChoice> choices(1);
  proto::AssembledChoice& c = choices[0];
  c.role = "assistant";
  c.content = text_;
  c.has_content = !text_.empty();
  for (const ParsedToolCall& call : calls_)
    c.tool_calls.push_back({call.index, call.id, "function", call.name, call.arguments});
  if (params_.logprobs) c.logprobs_items = chat_items_;
  c.finish_reason = finish_reason(stop);
  proto::CompletionFields f;
  f.endpoint = params_.endpoint;
  f.id = params_.id;
  f.created = params_.created;
  f.model = params_.model;
  f.finish_reason = c.finish_reason;
  f.usage = &usage;
  f.cutline = &stop;
  f.choices = &choices;
  std::string body;
  proto::write_completion(body, f);
  return body;
}

}  // namespace cutline::server
