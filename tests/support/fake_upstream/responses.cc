// cutline-fake-upstream: POST /v1/responses answered as the Responses API does, streaming
// (response.created ... response.completed or response.incomplete, every event with `event:` and
// a sequence_number, no [DONE]) or as one response object.
#include <string>

#include "cutline/base/json_writer.h"
#include "fake_upstream.h"

namespace cutline::fake_upstream {
namespace {

using cutline::base::JsonWriter;

// The Responses API's response object (status "in_progress", "completed" or "incomplete").
void write_response_object(JsonWriter& w, const FakeStream& s, const std::string& status) {
  w.begin_object().field("id", "resp_fake").field("object", "response");
  w.field("created_at", static_cast<int64_t>(1700000000)).field("status", status);
  w.field("model", s.model).key("output").begin_array();
  if (status != "in_progress") {
    w.begin_object().field("id", "msg_fake").field("type", "message").field("status", status);
    w.field("role", "assistant").key("content").begin_array().begin_object();
    w.field("type", "output_text").field("text", s.text).key("annotations").begin_array();
    w.end_array().end_object().end_array().end_object();
  }
  w.end_array().key("incomplete_details");
  if (status == "incomplete") {
    w.begin_object().field("reason", "max_output_tokens").end_object();
  } else {
    w.null();
  }
  w.key("usage");
  if (status == "in_progress") {
    w.null();
  } else {
    w.begin_object().field("input_tokens", 5).field("output_tokens", s.sent);
    w.field("total_tokens", 5 + s.sent).end_object();
  }
  w.end_object();
}

// One Responses API event: `fill` writes the fields after type and sequence_number.
template <typename Fill>
void send_responses_event(FakeStream& s, const std::string& type, Fill fill) {
  std::string out;
  JsonWriter w(out);
  w.begin_object().field("type", type).field("sequence_number", s.sequence++);
  fill(w);
  w.end_object();
  send_named_event(s, type, out);
}

void responses_item_fields(JsonWriter& w) {
  w.field("item_id", "msg_fake").field("output_index", 0).field("content_index", 0);
}

}  // namespace

// Responses API streaming: the preamble before the first token, a delta per token, the end.
void responses_tick(FakeStream* s) {
  const Script& sc = s->script;
  if (s->sent == 0 && s->sequence == 0) {
    send_responses_event(*s, "response.created", [&](JsonWriter& w) {
      w.key("response");
      write_response_object(w, *s, "in_progress");
    });
    send_responses_event(*s, "response.output_item.added", [&](JsonWriter& w) {
      w.field("output_index", 0).key("item").begin_object().field("id", "msg_fake");
      w.field("type", "message").field("status", "in_progress").field("role", "assistant");
      w.key("content").begin_array().end_array().end_object();
    });
    send_responses_event(*s, "response.content_part.added", [&](JsonWriter& w) {
      responses_item_fields(w);
      w.key("part").begin_object().field("type", "output_text").field("text", "");
      w.key("annotations").begin_array().end_array().end_object();
    });
    if (!sc.event.empty()) send_named_event(*s, sc.event, R"({"note":"x"})");
  }
  if (s->sent == sc.drop_at) return finish_stream(s, true);
  if (s->sent < s->limit) {
    const std::string t = token_text(s->sent);
    send_responses_event(*s, "response.output_text.delta", [&](JsonWriter& w) {
      responses_item_fields(w);
      w.field("delta", t);
    });
    s->text += t;
    ++s->sent;
    const bool stall = s->sent == sc.stall_at;
    if (s->sent < s->limit || sc.drop_at == s->sent) {
      return schedule(s, stall ? sc.stall_ms : sc.interval_ms, stall);
    }
  }
  const std::string status = s->limit < sc.tokens ? "incomplete" : "completed";
  send_responses_event(*s, "response.output_text.done", [&](JsonWriter& w) {
    responses_item_fields(w);
    w.field("text", s->text);
  });
  send_responses_event(*s, "response." + status, [&](JsonWriter& w) {
    w.key("response");
    write_response_object(w, *s, status);
  });
  finish_stream(s, false);
}

void responses_answer(FakeStream* s) {
  const Script& sc = s->script;
  while (s->sent < s->limit) s->text += token_text(s->sent++);
  std::string out;
  JsonWriter w(out);
  write_response_object(w, *s, s->limit < sc.tokens ? "incomplete" : "completed");
  answer_json(s, out);
}

}  // namespace cutline::fake_upstream
