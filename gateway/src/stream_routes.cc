// Stream, the routes besides chat and completions: /v1/responses (the Responses API's event
// stream, ResponsesRelay) and /v1/embeddings (one JSON answer). They run the same phases as chat
// (stream_intake.cc, stream.cc) — authenticate, classify, decide, admit, route, relay, finish — and
// end in the same finish (stream_end.cc); this file holds what differs: the request's fields, the
// relay of the upstream's body, and the client's last bytes.

#include <charconv>

#include <simdjson.h>

#include "cutline/gateway/stream.h"
#include "cutline/gateway/worker.h"
#include "cutline/proto/wire/openai_error.h"

namespace cutline::gateway {
namespace {

// Embeddings answers are whole vectors: bounded, but far above a chat answer.
constexpr size_t kMaxEmbeddingsBody = 64u << 20;

}  // namespace

// usage.prompt_tokens of an embeddings answer (scanned, not parsed).
std::optional<int64_t> embeddings_prompt_tokens(std::string_view body) {
  const size_t at = body.rfind("\"prompt_tokens\"");
  if (at == std::string_view::npos) return std::nullopt;
  size_t i = at + 15;
  while (i < body.size() && (body[i] == ' ' || body[i] == ':')) ++i;
  int64_t n = 0;
  auto r = std::from_chars(body.data() + i, body.data() + body.size(), n);
  if (r.ec != std::errc()) return std::nullopt;
  return n;
}

// What is wrong with an upstream's 200 answer on /v1/embeddings, or nullopt when it has the
// shape of one: an object whose "data" is an array of objects, each with an "embedding" that is
// an array of numbers (encoding_format float) or a string (base64). A chat completion, an HTML
// page or a truncated list is not an embeddings answer, whatever its status said.
std::optional<std::string> embeddings_answer_problem(std::string_view body) {
  namespace od = simdjson::ondemand;
  const simdjson::padded_string padded(body);
  od::parser parser;
  od::document doc;
  od::object top;
  if (parser.iterate(padded).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(top) != simdjson::SUCCESS) {
    return "not a JSON object";
  }
  od::array data;
  if (top.find_field_unordered("data").get_array().get(data) != simdjson::SUCCESS) {
    return "no \"data\" array";
  }
  for (auto element : data) {
    od::object item;
    if (element.get_object().get(item) != simdjson::SUCCESS) return "a data[] entry is no object";
    od::value embedding;
    if (item.find_field_unordered("embedding").get(embedding) != simdjson::SUCCESS) {
      return "a data[] entry has no \"embedding\"";
    }
    od::json_type type;
    if (embedding.type().get(type) != simdjson::SUCCESS) return "a malformed \"embedding\"";
    if (type == od::json_type::string) continue;
    od::array values;
    if (type != od::json_type::array || embedding.get_array().get(values) != simdjson::SUCCESS) {
      return "an \"embedding\" that is neither an array nor a base64 string";
    }
    for (auto v : values) {
      double x = 0;
      if (v.get_double().get(x) != simdjson::SUCCESS) return "an \"embedding\" with a non-number";
    }
  }
  return std::nullopt;
}

bool Stream::classify_route_request() {
  const auto kind =
      route_ == Route::kResponses ? proto::RouteKind::kResponses : proto::RouteKind::kEmbeddings;
  auto parsed = proto::parse_route_request(kind, body_);
  if (!parsed.ok()) {
    finish(bad_input(parsed.error().kind, parsed.error().message, ""));
    return false;
  }
  route_req_ = std::move(parsed).value();
  parsed_ok_ = true;
  model_ = route_req_->model;
  client_stream_ = route_req_->stream;
  requested_max_tokens_ = route_req_->max_output_tokens;
  if (!read_deadline_header()) return false;
  if (!life_.policy().upstream_for_model(model_)) {
    finish(unserved_model());
    return false;
  }
  if (route_ == Route::kResponses) {
    responses_ = std::make_unique<ResponsesRelay>(
        ResponsesRelayOptions{client_stream_, life_.request_id(), model_});
  }
  return true;
}

void Stream::on_route_body(std::string_view data) {
  if (route_ == Route::kEmbeddings) {
    if (json_body_.size() + data.size() > kMaxEmbeddingsBody) {
      upstream_call_.cancel();
      Ending e;
      e.cause = proto::Cause::kUpstreamError;
      e.rule = "upstreams." + upstream_->name;
      e.message = "upstream answer over " + std::to_string(kMaxEmbeddingsBody) + " bytes";
      e.error = make_error(ErrorKind::kUpstream, e.message);
      finish(std::move(e));
      return;
    }
    json_body_.append(data);
    return;
  }
  const bool had_first = hot_.timing.has_first_token();
  std::string out;
  auto fed = responses_->feed(data, now_ns(), hot_.timing, out);
  if (!had_first && hot_.timing.has_first_token()) {
    ttft_timer_.release();
    if (decision_.idle_timeout.ms) idle_timer_.arm(*decision_.idle_timeout.ms);
  }
  send_client_bytes(out);
  if (!fed.ok()) {
    upstream_call_.cancel();
    end_from_upstream(false);
  }
}

// The client's last bytes on responses and embeddings (an error answer is finish's own).
void Stream::write_route_end(const Ending& e, const proto::StopRecord& record, std::string& out) {
  if (route_ == Route::kEmbeddings) {
    // The upstream's answer with the record added first in its object.
    const size_t open = json_body_.find('{');
    if (open == std::string::npos) {
      out = json_body_;
      return;
    }
    out.assign(json_body_, 0, open + 1);
    out.append("\"cutline\":").append(proto::stop_record_json(record));
    const size_t next = json_body_.find_first_not_of(" \t\r\n", open + 1);
    if (next != std::string::npos && json_body_[next] != '}') out.push_back(',');
    out.append(json_body_, open + 1);
    return;
  }
  if (!responses_) return;  // ended before classify made it (an error answer is sent instead)
  if (e.error && client_stream_) {
    responses_->write_error_event(*e.error, record, out);
    return;
  }
  // The gateway writes its own response.incomplete for the cuts it made (a timer, shutdown) and
  // when the upstream sent no terminal event; otherwise the upstream's terminal event goes on.
  const bool gateway_cut =
      !responses_->has_terminal() || (proto::origin_of(e.cause) == proto::Origin::kGateway &&
                                      e.cause != proto::Cause::kGatewayBudget);
  responses_->write_end(record, gateway_cut, out);
}

UpstreamEnd Stream::upstream_end(bool transport_closed) const {
  if (hot_.relay.error_status() == 0) {
    if (route_ == Route::kResponses) return responses_->upstream_end(transport_closed);
    if (route_ == Route::kEmbeddings) {
      UpstreamEnd end;
      if (json_complete_) {
        end.kind = UpstreamEndKind::kFinished;
        end.finish_reason = "stop";
      } else {
        end.kind = transport_closed ? UpstreamEndKind::kDisconnect : UpstreamEndKind::kNoFinish;
      }
      return end;
    }
  }
  return hot_.relay.upstream_end(transport_closed);
}

bool Stream::upstream_done() const {
  if (hot_.relay.error_status() != 0) return true;
  if (route_ == Route::kResponses) return responses_->upstream_done();
  if (route_ == Route::kEmbeddings) return json_complete_;
  return hot_.relay.upstream_done();
}

int64_t Stream::output_tokens() const {
  if (responses_) return responses_->output_tokens();
  if (route_ == Route::kEmbeddings) return 0;
  return hot_.relay.output_tokens();
}

proto::CountMethod Stream::count_method() const {
  if (responses_) return responses_->count_method();
  if (route_ == Route::kEmbeddings) return proto::CountMethod::kUsage;
  return hot_.relay.count_method();
}

const std::string& Stream::upstream_error_message() const {
  if (responses_ && hot_.relay.error_status() == 0) return responses_->error_message();
  return hot_.relay.error_message();
}

}  // namespace cutline::gateway
