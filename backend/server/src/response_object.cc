#include "cutline/server/response_object.h"

namespace cutline::server {

ResponseOutcome response_outcome(proto::Cause cause, bool runner_error) {
  if (runner_error) return {"failed", std::nullopt};
  if (!proto::is_truncated(cause)) return {"completed", std::nullopt};
  switch (cause) {
    case proto::Cause::kClientMaxTokens:
    case proto::Cause::kGatewayBudget:
    case proto::Cause::kContextLength:
      return {"incomplete", "max_output_tokens"};
    default:
      break;
  }
  // By name: content_filter is a model stop whose origin is the upstream's filter.
  if (proto::to_string(cause) == "content_filter") return {"incomplete", "content_filter"};
  return {"incomplete", std::nullopt};
}

void write_output_text_part(base::JsonWriter& w, std::string_view text,
                            const std::string* logprobs_items) {
  w.begin_object().field("type", "output_text").field("text", text);
  w.key("annotations").begin_array().end_array();
  if (logprobs_items) w.key("logprobs").raw("[" + *logprobs_items + "]");
  w.end_object();
}

void write_output_message(base::JsonWriter& w, std::string_view item_id, std::string_view status,
                          const std::string* text, const std::string* logprobs_items) {
  w.begin_object()
      .field("id", item_id)
      .field("type", "message")
      .field("status", status)
      .field("role", "assistant");
  w.key("content").begin_array();
  if (text) write_output_text_part(w, *text, logprobs_items);
  w.end_array().end_object();
}

std::string function_call_item_id(const ParsedToolCall& call) {
  std::string_view id = call.id;
  if (id.starts_with("call_")) id.remove_prefix(5);
  return "fc_" + std::string(id);
}

void write_function_call_item(base::JsonWriter& w, const ParsedToolCall& call,
                              std::string_view status) {
  w.begin_object()
      .field("id", function_call_item_id(call))
      .field("type", "function_call")
      .field("status", status)
      .field("call_id", call.id)
      .field("name", call.name)
      .field("arguments", call.arguments)
      .end_object();
}

namespace {

// "error" (failed) and "incomplete_details" (incomplete), null otherwise.
void write_error_and_incomplete_details(base::JsonWriter& w, const ResponseObjectFields& f) {
  w.key("error");
  if (f.error_message) {
    w.begin_object().field("code", "server_error").field("message", *f.error_message).end_object();
  } else {
    w.null();
  }
  w.key("incomplete_details");
  if (f.status == "incomplete") {
    w.begin_object().key("reason");
    if (f.incomplete_reason) {
      w.value(*f.incomplete_reason);
    } else {
      w.null();
    }
    w.end_object();
  } else {
    w.null();
  }
}

// "usage", with the token details the Responses API names; null when unset.
void write_usage(base::JsonWriter& w, const ResponseUsage* usage) {
  w.key("usage");
  if (usage) {
    w.begin_object()
        .field("input_tokens", usage->input_tokens)
        .key("input_tokens_details")
        .begin_object()
        .field("cached_tokens", usage->cached_tokens)
        .end_object()
        .field("output_tokens", usage->output_tokens)
        .key("output_tokens_details")
        .begin_object()
        .field("reasoning_tokens", static_cast<int64_t>(0))
        .end_object()
        .field("total_tokens", usage->input_tokens + usage->output_tokens)
        .end_object();
  } else {
    w.null();
  }
}

}  // namespace

void write_response_object(base::JsonWriter& w, const ResponseObjectFields& f) {
  w.begin_object()
      .field("id", f.id)
      .field("object", "response")
      .field("created_at", f.created_at)
      .field("status", f.status);
  write_error_and_incomplete_details(w, f);
  w.key("instructions");
  if (f.instructions) {
    w.value(*f.instructions);
  } else {
    w.null();
  }
  w.key("max_output_tokens");
  if (f.max_output_tokens) {
    w.value(*f.max_output_tokens);
  } else {
    w.null();
  }
  w.field("model", f.model);
  w.key("output").begin_array();
  if (f.text) {
    const std::string_view item_status =
        f.status == "in_progress" || f.status == "completed" ? f.status : "incomplete";
    write_output_message(w, f.item_id, item_status, f.text, f.logprobs_items);
  }
  if (f.calls) {
    for (const ParsedToolCall& call : *f.calls) write_function_call_item(w, call, "completed");
  }
  w.end_array();
  w.field("parallel_tool_calls", true);
  w.key("previous_response_id").null();
  w.key("reasoning").begin_object().key("effort").null().key("summary").null().end_object();
  w.field("store", false);
  w.field("temperature", f.temperature);
  w.key("text").begin_object().key("format").begin_object().field("type", "text").end_object();
  w.end_object();
  w.field("tool_choice", "auto");
  w.key("tools").begin_array().end_array();
  if (f.top_logprobs) w.field("top_logprobs", static_cast<int64_t>(*f.top_logprobs));
  w.field("top_p", f.top_p);
  w.field("truncation", "disabled");
  write_usage(w, f.usage);
  w.key("metadata").begin_object().end_object();
  if (f.cutline) {
    w.key("cutline");
    proto::write_stop_record(w, *f.cutline);
  }
  w.end_object();
}

}  // namespace cutline::server
