// Stream's intake phases: accept, authenticate, classify and decide — who is asking, for what,
// and what the policy says about it, up to admission (the phases after it are in stream.cc).
#include <charconv>
#include <chrono>

#include "cutline/gateway/printable.h"
#include "cutline/gateway/request_target.h"
#include "cutline/gateway/stream.h"
#include "cutline/gateway/stream_host.h"
#include "cutline/gateway/worker.h"
#include "cutline/proto/wire/openai_error.h"

namespace cutline::gateway {
namespace {

using proto::Cause;

// Stop strings an upstream must search for after every token: OpenAI allows 4; vLLM and
// llama.cpp take more, so the gateway allows 16 of at most 256 bytes each.
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopStringBytes = 256;

bool is_json_content_type(std::optional<std::string_view> ct) {
  if (!ct) return false;
  std::string_view v = *ct;
  const size_t semi = v.find(';');
  if (semi != std::string_view::npos) v = v.substr(0, semi);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  return proto::iequals(v, "application/json");
}

}  // namespace

// accept: the shared part (request id, policy snapshot; the arrival was taken when the stream
// was made), the body, the client's close callback (client_cancel from here on).
void Stream::accept() {
  life_.accept(client_->request().headers);
  body_ = std::move(client_->request().body);
  hot_.bytes_in = static_cast<int64_t>(body_.size());
  std::weak_ptr<Stream> weak = weak_from_this();
  client_->on_close([weak] {
    if (auto self = weak.lock()) self->on_client_close();
  });
  client_->on_writable([weak] {
    if (auto self = weak.lock()) self->on_client_writable();
  });
  host_.metrics().stream_opened();
}

// authenticate: with tenants configured, the Bearer key's tenant, else 401 (request_lifecycle.h).
// Without tenants every request is tenant "".
bool Stream::authenticate() {
  if (std::optional<Ending> refused = life_.authenticate(client_->request().headers)) {
    finish(std::move(*refused));
    return false;
  }
  return true;
}

// A request refused as malformed: invalid_request (origin client), never admission_rejected, so
// that bad clients do not read as a capacity problem.
Ending Stream::bad_input(ErrorKind kind, std::string message, std::string param, int status) {
  Ending e;
  e.cause = Cause::kInvalidRequest;
  e.rule = param.empty() ? "request" : "request." + param;
  e.message = message;
  e.error = make_error(kind, std::move(message));
  e.param = std::move(param);
  e.status = status;
  host_.metrics().bad_request(to_string(kind));
  return e;
}

Ending Stream::model_not_found() {
  Ending e;
  e.cause = Cause::kInvalidRequest;
  e.rule = "request.model";
  e.message = "The model `" + model_ + "` does not exist or you do not have access to it.";
  e.error = make_error(ErrorKind::kNotFound, e.message);
  e.param = "model";
  e.code = "model_not_found";
  return e;
}

bool Stream::served_on_another_route(policy::RequestFacts facts) const {
  const std::string_view route = facts.route;
  for (const std::string_view other : kCoreRoutePaths) {
    if (other == route || other == "/v1/models") continue;  // models: listed, not decided
    facts.route = other;
    if (policy::match_rule(life_.policy(), facts)) return true;
  }
  return false;
}

Ending Stream::route_not_allowed() {
  Ending e;
  e.cause = Cause::kPolicyDenied;
  e.rule = "policies";
  e.error = make_error(ErrorKind::kUnauthorized, "the model `" + model_ + "` is not served on " +
                                                     std::string(route_path(route_)) +
                                                     " by this gateway's policy");
  e.message = e.error->message;
  e.status = 403;
  e.type = "permission_error";
  e.code = "permission_denied";
  return e;
}

Ending Stream::unserved_model() {
  host_.metrics().bad_request(to_string(ErrorKind::kNotFound));
  Ending e = model_not_found();
  e.operator_message = "model \"" + model_ + "\" is not served by any upstream";
  return e;
}

// classify: content type, body parse and validation (the parser names the field), the
// Cutline-Deadline-Ms header, and whether any upstream serves the model.
bool Stream::classify() {
  life_.enter(Phase::kClassify);
  const proto::HttpRequest& req = client_->request();
  if (!is_json_content_type(req.headers.get("Content-Type"))) {
    finish(bad_input(ErrorKind::kUnsupported,
                     "Content-Type must be application/json, got \"" +
                         printable(req.headers.get("Content-Type").value_or("")) + "\"",
                     "", 415));
    return false;
  }
  if (route_ == Route::kResponses || route_ == Route::kEmbeddings) return classify_route_request();
  auto parsed = worker_.parser.parse_in_place(body_, endpoint_);
  if (!parsed.ok()) {
    finish(bad_input(parsed.error().kind, parsed.error().message, ""));
    return false;
  }
  parsed_ = std::make_unique<proto::ParsedRequest>(std::move(parsed).value());
  parsed_ok_ = true;
  model_ = parsed_->model;
  client_stream_ = parsed_->stream;
  requested_max_tokens_ = parsed_->requested_max_tokens();
  choices_ = parsed_->choices();
  if (parsed_->stop.size() > kMaxStopStrings) {
    finish(bad_input(ErrorKind::kBadRequest,
                     "stop may list at most " + std::to_string(kMaxStopStrings) + " strings, got " +
                         std::to_string(parsed_->stop.size()),
                     "stop"));
    return false;
  }
  for (const std::string& s : parsed_->stop) {
    if (s.size() > kMaxStopStringBytes) {
      finish(bad_input(ErrorKind::kBadRequest,
                       "each stop string may be at most " + std::to_string(kMaxStopStringBytes) +
                           " bytes, got one of " + std::to_string(s.size()),
                       "stop"));
      return false;
    }
  }
  if (!read_deadline_header()) return false;
  if (!life_.policy().upstream_for_model(model_)) {
    finish(unserved_model());
    return false;
  }
  hot_.relay = Relay(RelayOptions{endpoint_, client_stream_, parsed_->include_usage,
                                  life_.request_id(), model_, &worker_.chunk_parser});
  return true;
}

// The Cutline-Deadline-Ms header: a positive integer, else 400 (finish called).
bool Stream::read_deadline_header() {
  auto h = client_->request().headers.get("Cutline-Deadline-Ms");
  if (!h) return true;
  int64_t ms = 0;
  auto r = std::from_chars(h->data(), h->data() + h->size(), ms);
  if (r.ec != std::errc() || r.ptr != h->data() + h->size() || ms <= 0) {
    finish(
        bad_input(ErrorKind::kBadRequest,
                  "Cutline-Deadline-Ms must be a positive integer, got \"" + printable(*h) + "\"",
                  "Cutline-Deadline-Ms"));
    return false;
  }
  client_deadline_ms_ = ms;
  return true;
}

// decide: the first matching rule with the live load of its admission group -> Decision (every
// number with its source). Arms the deadline and TTFT timers from arrival.
bool Stream::decide() {
  life_.enter(Phase::kDecide);
  policy::RequestFacts facts = life_.facts(route_path(route_), model_, client_->request().headers);
  facts.client_max_tokens = requested_max_tokens_;
  facts.client_deadline_ms = client_deadline_ms_;
  facts.choices = choices_;
  policy::LiveState live;
  if (auto idx = policy::match_rule(life_.policy(), facts)) {
    const policy::Rule& rule = life_.policy().rules[*idx];
    queue_ =
        &host_.admission().queue_for(life_.policy().admission_groups[rule.admission.group_index]);
    live = queue_->live();
  }
  decision_ = policy::decide(life_.policy(), facts, live);
  if (!decision_.matched) {
    // A model that a rule serves this tenant on another route is one the tenant knows already:
    // the refusal says what it is (403, this route is not allowed). Any other model is told as
    // an unknown one (404 model_not_found), so that a tenant cannot learn which models other
    // tenants' rules name. The log and the metrics keep the refusal and its reason either way.
    Ending e = served_on_another_route(facts) ? route_not_allowed() : model_not_found();
    facts.header = nullptr;
    e.operator_cause = Cause::kPolicyDenied;
    e.operator_rule = "policies";
    e.operator_message = decision_.no_match_message;
    finish(std::move(e));
    return false;
  }
  facts.header = nullptr;
  if (const auto& max = decision_.rule->budget.max_choices; max && choices_ > max->value) {
    Ending e = bad_input(ErrorKind::kBadRequest,
                         "this policy allows at most " + std::to_string(max->value) +
                             " choices per request (n, best_of), got " + std::to_string(choices_),
                         "n");
    e.rule = max->ref.path;
    e.limit = static_cast<double>(max->value);
    e.observed = static_cast<double>(choices_);
    finish(std::move(e));
    return false;
  }
  const double elapsed = elapsed_ms();
  if (decision_.deadline.ms) {
    deadline_timer_.arm(std::max<int64_t>(0, *decision_.deadline.ms - int64_t(elapsed)));
  }
  if (decision_.ttft_timeout.ms && route_ != Route::kEmbeddings) {
    ttft_timer_.arm(std::max<int64_t>(0, *decision_.ttft_timeout.ms - int64_t(elapsed)));
  }
  return true;
}

}  // namespace cutline::gateway
