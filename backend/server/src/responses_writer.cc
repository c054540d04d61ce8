#include "cutline/server/responses_writer.h"

#include <utility>

#include "cutline/base/json_writer.h"
#include "cutline/proto/sse/sse_writer.h"
#include "cutline/proto/wire/openai_error.h"
#include "cutline/server/logprobs_writer.h"

namespace cutline::server {

namespace {

// output_index, content_index (with a part) and item_id, as the item and part events carry them.
void write_position(base::JsonWriter& w, std::string_view item_id, bool with_part) {
  w.field("item_id", item_id).field("output_index", static_cast<int64_t>(0));
  if (with_part) w.field("content_index", static_cast<int64_t>(0));
}

ResponseUsage usage_of(const engine::SequenceRecord& rec) {
  ResponseUsage u;
  u.input_tokens = rec.input_tokens;
  u.cached_tokens = rec.cached_prompt_tokens;
  u.output_tokens = rec.output_tokens;
  return u;
}

}  // namespace

ResponsesWriter::ResponsesWriter(ResponsesParams params, const model::Tokenizer& tokenizer)
    : params_(std::move(params)), tokenizer_(tokenizer) {
  if (params_.tools.parse) {
    tool_parser_.emplace(params_.tools.forced_prefix, params_.tools.parallel,
                         params_.make_call_id ? params_.make_call_id : random_tool_call_ids());
  }
}

ResponseObjectFields ResponsesWriter::object_fields() const {
  ResponseObjectFields f;
  f.id = params_.id;
  f.created_at = params_.created_at;
  f.model = params_.model;
  if (params_.instructions) f.instructions = *params_.instructions;
  f.max_output_tokens = params_.max_output_tokens;
  f.temperature = params_.temperature;
  f.top_p = params_.top_p;
  if (params_.top_logprobs >= 0) f.top_logprobs = params_.top_logprobs;
  f.item_id = params_.item_id;
  return f;
}

template <class Body>
void ResponsesWriter::emit(std::string_view type, Body&& body) {
  json_.clear();
  base::JsonWriter w(json_);
  w.begin_object().field("type", type).field("sequence_number", sequence_number_++);
  body(w);
  w.end_object();
  proto::append_sse_event(frames_, type, json_);
}

void ResponsesWriter::send_frames(proto::ServerStream& http) {
  if (frames_.empty()) return;
  // As for chat: the connection's buffer absorbs a slow reader; nothing is dropped.
  http.send_body(frames_);
  frames_.clear();
}

void ResponsesWriter::start(proto::ServerStream& http) {
  if (!params_.stream) return;
  proto::HttpHeaders headers{{"Content-Type", "text/event-stream"},
                             {"Cache-Control", "no-cache"},
                             {"Trailer", "cutline-stop"}};
  http.send_head(200, headers, proto::BodyFraming::chunked());
  const ResponseObjectFields in_progress = object_fields();
  for (std::string_view type : {"response.created", "response.in_progress"}) {
    emit(type, [&](base::JsonWriter& w) {
      w.key("response");
      write_response_object(w, in_progress);
    });
  }
  emit("response.output_item.added", [&](base::JsonWriter& w) {
    w.field("output_index", static_cast<int64_t>(0)).key("item");
    write_output_message(w, params_.item_id, "in_progress", nullptr, nullptr);
  });
  const std::string empty;
  const std::string no_items;
  emit("response.content_part.added", [&](base::JsonWriter& w) {
    write_position(w, params_.item_id, true);
    w.key("part");
    write_output_text_part(w, empty, params_.top_logprobs >= 0 ? &no_items : nullptr);
  });
  send_frames(http);
}

void ResponsesWriter::text(proto::ServerStream& http, std::string_view text,
                           std::span<const engine::TokenLogprobs> logprobs) {
  std::string content;
  std::vector<ParsedToolCall> calls;
  if (tool_parser_) {
    tool_parser_->push(text, content, calls);
    text = content;
  }
  text_.append(text);
  const bool with_logprobs = params_.top_logprobs >= 0 && !logprobs.empty();
  if (with_logprobs) append_chat_logprobs_items(logprobs_items_, logprobs, tokenizer_);
  if (!params_.stream) {
    calls_.insert(calls_.end(), calls.begin(), calls.end());
    return;
  }
  if (!message_closed_ && (!text.empty() || with_logprobs)) {
    delta_items_.clear();
    if (with_logprobs) append_chat_logprobs_items(delta_items_, logprobs, tokenizer_);
    emit("response.output_text.delta", [&](base::JsonWriter& w) {
      write_position(w, params_.item_id, true);
      w.field("delta", text);
      w.key("logprobs").raw("[" + delta_items_ + "]");
    });
  }
  for (const ParsedToolCall& call : calls) {
    close_message("completed");
    calls_.push_back(call);
    emit_call(call);
  }
  send_frames(http);
}

void ResponsesWriter::close_message(std::string_view status) {
  if (message_closed_) return;
  message_closed_ = true;
  const std::string* items = params_.top_logprobs >= 0 ? &logprobs_items_ : nullptr;
  emit("response.output_text.done", [&](base::JsonWriter& w) {
    write_position(w, params_.item_id, true);
    w.field("text", text_);
    w.key("logprobs").raw("[" + (items ? *items : std::string()) + "]");
  });
  emit("response.content_part.done", [&](base::JsonWriter& w) {
    write_position(w, params_.item_id, true);
    w.key("part");
    write_output_text_part(w, text_, items);
  });
  emit("response.output_item.done", [&](base::JsonWriter& w) {
    w.field("output_index", static_cast<int64_t>(0)).key("item");
    write_output_message(w, params_.item_id, status, &text_, items);
  });
}

void ResponsesWriter::emit_call(const ParsedToolCall& call) {
  const int64_t index = static_cast<int64_t>(calls_.size());  // the message is item 0
  const std::string item_id = function_call_item_id(call);
  ParsedToolCall opening = call;
  opening.arguments.clear();
  emit("response.output_item.added", [&](base::JsonWriter& w) {
    w.field("output_index", index).key("item");
    write_function_call_item(w, opening, "in_progress");
  });
  emit("response.function_call_arguments.delta", [&](base::JsonWriter& w) {
    w.field("item_id", item_id).field("output_index", index).field("delta", call.arguments);
  });
  emit("response.function_call_arguments.done", [&](base::JsonWriter& w) {
    w.field("item_id", item_id).field("output_index", index).field("arguments", call.arguments);
  });
  emit("response.output_item.done", [&](base::JsonWriter& w) {
    w.field("output_index", index).key("item");
    write_function_call_item(w, call, "completed");
  });
}

void ResponsesWriter::finish(proto::ServerStream& http, const proto::StopRecord& stop,
                             const engine::SequenceRecord& rec) {
  const ResponseOutcome outcome = response_outcome(stop.cause, rec.runner_error);
  const ResponseUsage usage = usage_of(rec);
  if (tool_parser_) {
    std::string held;
    tool_parser_->finish(held);
    if (params_.stream && !message_closed_ && !held.empty()) {
      emit("response.output_text.delta", [&](base::JsonWriter& w) {
        write_position(w, params_.item_id, true);
        w.field("delta", held);
        w.key("logprobs").raw("[]");
      });
    }
    text_.append(held);
  }
  const std::string* items = params_.top_logprobs >= 0 ? &logprobs_items_ : nullptr;
  ResponseObjectFields final_object = object_fields();
  final_object.status = outcome.status;
  final_object.incomplete_reason = outcome.incomplete_reason;
  if (rec.runner_error) final_object.error_message = rec.message;
  final_object.text = &text_;
  final_object.logprobs_items = items;
  final_object.calls = &calls_;
  final_object.usage = &usage;
  final_object.cutline = &stop;

  if (!params_.stream) {
    const proto::HttpHeaders headers{{"Content-Type", "application/json"},
                                     {"Cutline-Stop", proto::stop_header_value(stop)}};
    if (rec.runner_error) {
      proto::ErrorBodyFields fields;
      fields.cutline = &stop;
      http.send_simple(500, headers,
                       proto::error_body(make_error(ErrorKind::kInternal, rec.message), fields));
      return;
    }
    std::string body;
    base::JsonWriter w(body);
    write_response_object(w, final_object);
    http.send_simple(200, headers, body);
    return;
  }

  if (!rec.runner_error) close_message(outcome.status);
  const std::string type = "response." + std::string(outcome.status);
  emit(type, [&](base::JsonWriter& w) {
    w.key("response");
    write_response_object(w, final_object);
  });
  send_frames(http);
  http.finish({{"cutline-stop", proto::stop_header_value(stop)}});
}

}  // namespace cutline::server
