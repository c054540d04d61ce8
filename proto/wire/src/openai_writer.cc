#include "cutline/proto/wire/openai_writer.h"

#include <algorithm>
#include <vector>

#include "cutline/base/json_writer.h"
#include "json_scan.h"

namespace cutline::proto {
namespace {

using simdjson::SUCCESS;
namespace od = simdjson::ondemand;

void write_usage(base::JsonWriter& w, const Usage& u) {
  w.begin_object()
      .field("prompt_tokens", u.prompt_tokens)
      .field("completion_tokens", u.completion_tokens)
      .field("total_tokens", u.total_tokens)
      .end_object();
}

void write_finish_reason(base::JsonWriter& w, std::optional<std::string_view> reason) {
  w.key("finish_reason");
  if (reason) {
    w.value(*reason);
  } else {
    w.null();
  }
}

// The envelope a chunk and a full completion share: {"id","object","created","model","choices":[
// opened here; the caller writes the choices.
void begin_body(base::JsonWriter& w, std::string_view id, std::string_view object, int64_t created,
                std::string_view model) {
  w.begin_object()
      .field("id", id)
      .field("object", object)
      .field("created", created)
      .field("model", model)
      .key("choices")
      .begin_array();
}

// Closes the choices array, writes usage and the stop record when set, closes the body.
void end_body(base::JsonWriter& w, const Usage* usage, const StopRecord* cutline) {
  w.end_array();
  if (usage) {
    w.key("usage");
    write_usage(w, *usage);
  }
  if (cutline) {
    w.key("cutline");
    write_stop_record(w, *cutline);
  }
  w.end_object();
}

}  // namespace

void write_chunk(std::string& out, const ChunkFields& f) {
  const bool chat = f.endpoint == Endpoint::kChatCompletions;
  base::JsonWriter w(out);
  begin_body(w, f.id, chat ? "chat.completion.chunk" : "text_completion", f.created, f.model);
  if (!f.no_choices) {
    w.begin_object().field("index", 0);
    if (chat) {
      w.key("delta").begin_object();
      if (!f.role.empty()) w.field("role", f.role);
      if (f.content) w.field("content", *f.content);
      w.end_object();
    } else {
      w.field("text", f.content.value_or(std::string_view()));
    }
    write_finish_reason(w, f.finish_reason);
    w.end_object();
  }
  end_body(w, f.usage, f.cutline);
}

static void write_assembled_choice(base::JsonWriter& w, bool chat, const AssembledChoice& c,
                                   std::string_view finish_reason) {
  w.begin_object().field("index", c.index);
  if (!chat) {
    w.field("text", c.content).field("finish_reason", finish_reason).end_object();
    return;
  }
  w.key("message").begin_object().field("role", c.role.empty() ? "assistant" : c.role);
  const bool calls = !c.tool_calls.empty() || c.has_function_call;
  if (c.has_content || !calls) {
    w.field("content", c.content);
  } else {
    w.key("content").null();  // as OpenAI answers a tool call
  }
  if (!c.reasoning_content.empty()) w.field("reasoning_content", c.reasoning_content);
  if (c.has_refusal) w.field("refusal", c.refusal);
  if (!c.tool_calls.empty()) {
    w.key("tool_calls").begin_array();
    for (const AssembledToolCall& t : c.tool_calls) {
      w.begin_object()
          .field("id", t.id)
          .field("type", t.type.empty() ? "function" : t.type)
          .key("function")
          .begin_object()
          .field("name", t.name)
          .field("arguments", t.arguments)
          .end_object()
          .end_object();
    }
    w.end_array();
  }
  if (c.has_function_call) {
    w.key("function_call")
        .begin_object()
        .field("name", c.function_call_name)
        .field("arguments", c.function_call_arguments)
        .end_object();
  }
  w.end_object();
  if (!c.logprobs_items.empty()) {
    std::string items = "{\"content\":[" + c.logprobs_items + "]}";
    w.key("logprobs").raw(items);
  }
  w.field("finish_reason", finish_reason).end_object();
}

void write_completion(std::string& out, const CompletionFields& f) {
  const bool chat = f.endpoint == Endpoint::kChatCompletions;
  base::JsonWriter w(out);
  begin_body(w, f.id, chat ? "chat.completion" : "text_completion", f.created, f.model);
  if (f.choices != nullptr && !f.choices->empty()) {
    for (const AssembledChoice& c : *f.choices) {
      const std::string_view finish =
          c.index == 0 || c.finish_reason.empty() ? f.finish_reason : c.finish_reason;
      write_assembled_choice(w, chat, c, finish);
    }
    end_body(w, f.usage, f.cutline);
    return;
  }
  w.begin_object().field("index", 0);
  if (chat) {
    w.key("message")
        .begin_object()
        .field("role", "assistant")
        .field("content", f.content)
        .end_object();
  } else {
    w.field("text", f.content);
  }
  w.field("finish_reason", f.finish_reason).end_object();
  end_body(w, f.usage, f.cutline);
}

namespace {

Error chunk_error(std::string_view what) {
  return make_error(ErrorKind::kUpstream, "upstream chunk: " + std::string(what));
}

// One replacement patch_chunk makes in the upstream's bytes, at [begin, end).
struct ChunkEdit {
  enum class What : uint8_t {
    kCutline,                // the cutline value
    kFinishReason,           // the finish_reason value
    kInsertFinishReason,     // a finish_reason key at the start of a choice with keys
    kInsertOnlyFinishReason  // the same in an empty choice (no comma after it)
  };
  size_t begin;
  size_t end;
  What what;
};

// The upstream's own "cutline" value, whatever its type, as it stands in the chunk.
Result<std::string_view> cutline_token(od::value value) {
  std::string_view raw;
  od::json_type t;
  if (value.type().get(t) != SUCCESS) return chunk_error("cutline is malformed");
  if (t == od::json_type::object) {
    od::object cobj;
    if (value.get_object().get(cobj) != SUCCESS || cobj.raw_json().get(raw) != SUCCESS)
      return chunk_error("cutline is malformed");
  } else {
    raw = json_scan::token_of(value);
    if (t == od::json_type::array) {
      od::array carr;
      if (value.get_array().get(carr) != SUCCESS || carr.raw_json().get(raw) != SUCCESS)
        return chunk_error("cutline is malformed");
    }
  }
  return json_scan::trim_token(raw);
}

// Where each choice's finish_reason goes: over its value, or inserted first in the choice.
// `base` is the start of the parsed buffer (offsets are into the chunk).
Status finish_reason_edits(od::value value, std::string_view chunk_json, const char* base,
                           std::vector<ChunkEdit>& edits) {
  auto offset = [&](std::string_view token) { return static_cast<size_t>(token.data() - base); };
  od::array arr;
  if (value.get_array().get(arr) != SUCCESS) return chunk_error("choices must be an array");
  for (auto element : arr) {
    od::value cv;
    if (element.get(cv) != SUCCESS) return chunk_error("choices is malformed");
    std::string_view brace = json_scan::token_of(cv);
    od::object choice;
    if (cv.get_object().get(choice) != SUCCESS) return chunk_error("choices[] must be objects");
    bool found = false;
    for (auto cf : choice) {
      od::field c;
      if (std::move(cf).get(c) != SUCCESS) return chunk_error("choice is malformed");
      std::string_view ckey;
      if (c.unescaped_key().get(ckey) != SUCCESS) return chunk_error("choice is malformed");
      if (ckey != "finish_reason") continue;
      od::value fv = c.value();
      od::json_type t;
      if (fv.type().get(t) != SUCCESS || (t != od::json_type::string && t != od::json_type::null))
        return chunk_error("finish_reason must be a string or null");
      std::string_view token = json_scan::token_of(fv);
      edits.push_back(
          {offset(token), offset(token) + token.size(), ChunkEdit::What::kFinishReason});
      found = true;
    }
    if (!found) {
      const size_t at = offset(brace) + 1;
      const size_t next = json_scan::skip_space(chunk_json, at);
      const bool choice_empty = next < chunk_json.size() && chunk_json[next] == '}';
      edits.push_back({at, at,
                       choice_empty ? ChunkEdit::What::kInsertOnlyFinishReason
                                    : ChunkEdit::What::kInsertFinishReason});
    }
  }
  return {};
}

// The chunk with the edits made (sorted by position), and the record inserted first in the
// object (after `open`, its brace) when the upstream sent none.
void apply_chunk_edits(std::string_view chunk_json, const ChunkPatch& patch,
                       std::vector<ChunkEdit>& edits, bool insert_cutline, size_t open,
                       bool empty_object, std::string& out) {
  std::sort(edits.begin(), edits.end(),
            [](const ChunkEdit& a, const ChunkEdit& b) { return a.begin < b.begin; });
  out.clear();
  out.reserve(chunk_json.size() + 512);
  size_t pos = 0;
  if (insert_cutline) {
    out.append(chunk_json.data(), open + 1);
    out.append("\"cutline\":");
    base::JsonWriter w(out);
    write_stop_record(w, *patch.cutline);
    if (!empty_object) out.push_back(',');
    pos = open + 1;
  }
  for (const ChunkEdit& e : edits) {
    out.append(chunk_json.data() + pos, e.begin - pos);
    if (e.what == ChunkEdit::What::kCutline) {
      base::JsonWriter w(out);
      write_stop_record(w, *patch.cutline);
    } else {
      if (e.what != ChunkEdit::What::kFinishReason) out.append("\"finish_reason\":");
      base::append_json_string(out, *patch.finish_reason);
      if (e.what == ChunkEdit::What::kInsertFinishReason) out.push_back(',');
    }
    pos = e.end;
  }
  out.append(chunk_json.data() + pos, chunk_json.size() - pos);
}

}  // namespace

Status patch_chunk(std::string_view chunk_json, const ChunkPatch& patch, std::string& out) {
  std::vector<ChunkEdit> edits;
  od::parser parser;
  simdjson::padded_string padded(chunk_json);
  const char* base = padded.data();

  const size_t open = json_scan::skip_space(chunk_json, 0);
  if (open == chunk_json.size() || chunk_json[open] != '{') return chunk_error("not a JSON object");
  const size_t first = json_scan::skip_space(chunk_json, open + 1);
  const bool empty = first < chunk_json.size() && chunk_json[first] == '}';

  od::document doc;
  if (parser.iterate(padded).get(doc) != SUCCESS) return chunk_error("not valid JSON");
  od::object obj;
  if (doc.get_object().get(obj) != SUCCESS) return chunk_error("not a JSON object");
  bool have_cutline = false;
  for (auto field : obj) {
    od::field f;
    if (std::move(field).get(f) != SUCCESS) return chunk_error("not valid JSON");
    std::string_view key;
    if (f.unescaped_key().get(key) != SUCCESS) return chunk_error("has a malformed key");
    od::value value = f.value();
    if (key == "cutline" && patch.cutline) {
      if (have_cutline) return chunk_error("has two cutline keys");
      have_cutline = true;
      auto raw = cutline_token(value);
      if (!raw.ok()) return std::move(raw).error();
      const auto at = static_cast<size_t>(raw->data() - base);
      edits.push_back({at, at + raw->size(), ChunkEdit::What::kCutline});
    } else if (key == "choices" && patch.finish_reason) {
      if (Status s = finish_reason_edits(value, chunk_json, base, edits); !s.ok()) return s;
    }
  }
  apply_chunk_edits(chunk_json, patch, edits, patch.cutline && !have_cutline, open, empty, out);
  return {};
}

}  // namespace cutline::proto
