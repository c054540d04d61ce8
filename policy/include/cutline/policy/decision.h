#pragma once
// decide(): what one request gets. The gateway's `classify` phase fills RequestFacts, `decide`
// calls decide() with the live load of the matched rule's admission group, and the resulting
// Decision is held for the stream's life together with the Policy snapshot it points into.
//
// Rules are tried in file order and the first whose match holds wins. When none matches, the
// Decision says so (matched == false): the gateway answers 404 model_not_found, as for a model
// that does not exist (a tenant cannot tell another tenant's model from an unknown one), and
// writes no_match_message to its access log. A policy that wants to pass everything through
// ends with a catch-all rule (see deploy/policies/passthrough.yaml) — nothing is unlimited by
// accident.
//
// A client may tighten, never loosen: its max_tokens and its Cutline-Deadline-Ms header are
// used when smaller than the rule's values (or when the rule sets none).
//
// Token pools are not touched here (decide is pure); reserve_budget() (budget.h) is called at
// admission and may lower max_output_tokens further (source tenant_pool / global_pool).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "cutline/policy/policy.h"
#include "cutline/policy/source.h"

namespace cutline::policy {

struct RequestFacts {
  std::string_view tenant;  // authenticated tenant name; "" when no tenants are configured
  std::string_view model;   // the request body's "model"
  std::string_view route;   // request path without the query, e.g. "/v1/chat/completions"
  // Header lookup for match.headers: called with a lower-case name, returns the value or
  // nullopt. May be empty when the policy has no header matches (Policy rules' match.headers).
  std::function<std::optional<std::string_view>(std::string_view lower_name)> header;
  // The client's max_tokens / max_completion_tokens (> 0; the gateway rejects <= 0 with 400).
  std::optional<int64_t> client_max_tokens;
  // The Cutline-Deadline-Ms header (> 0; the gateway rejects other values with 400).
  std::optional<int64_t> client_deadline_ms;
  // Completions the request asks for (max of n and best_of, >= 1): token pools reserve
  // max_output_tokens for each of them.
  int64_t choices = 1;
};

// The live load of the matched rule's admission group, read just before decide()
// (AdmissionQueue::depth() / in_flight()). Adaptive steps compare against queue_depth.
struct LiveState {
  int64_t queue_depth = 0;  // requests waiting in the group's queue
  int64_t in_flight = 0;    // requests admitted and not yet finished
};

struct TokenLimit {
  std::optional<int64_t> tokens;  // nullopt = no limit (source.kind == kNone)
  Source source;
};

struct TimeLimit {
  std::optional<int64_t> ms;  // nullopt = no limit (source.kind == kNone)
  Source source;
};

// A token pool the request must reserve from (budget.h).
struct PoolRef {
  std::string key;  // the PoolStore bucket: "tenant/<rule>/<tenant>" or "global/<rule>"
  int64_t tokens_per_minute = 0;
  Source source;  // kTenantPool / kGlobalPool, path of the *_tokens_per_minute key
};

struct AdmissionDecision {
  std::string_view group;  // admission group name (one AdmissionQueue per group)
  size_t group_index = 0;  // into Policy::admission_groups
  Priority priority = Priority::kInteractive;
  Source priority_source;
  std::optional<int64_t> max_concurrent;  // nullopt = unlimited
  Source max_concurrent_source;
  int64_t queue_depth = 0;
  Source queue_depth_source;
  int64_t queue_timeout_ms = 0;
  Source queue_timeout_source;
};

struct CutPresentation {
  CutMode mode = CutMode::kLabel;
  FinishReasonStyle finish_reason = FinishReasonStyle::kLength;
  Source source;
  // on_cut.mode: observe: the limits of this Decision are computed but not enforced.
  bool observe() const { return mode == CutMode::kObserve; }
};

struct Decision {
  bool matched = false;
  // When !matched: a one-line reason naming tenant, model and route, for the access log.
  std::string no_match_message;

  // The matched rule; points into the Policy snapshot (hold the snapshot as long as this).
  const Rule* rule = nullptr;
  std::string_view policy_name;  // the rule's name
  size_t rule_index = 0;

  std::optional<int64_t> requested_max_tokens;  // the client's own value, for the stop record
  // Effective max output tokens. The smallest of: the client's value, the rule clamp, the
  // tightest adaptive step whose condition held; on a tie the client's own value wins (so a
  // stop there is client_max_tokens, not gateway_budget), then the rule clamp.
  TokenLimit max_output_tokens;
  int64_t choices = 1;  // RequestFacts::choices: a pool reservation is per choice times this
  std::optional<PoolRef> tenant_pool;
  std::optional<PoolRef> global_pool;
  PoolExhausted on_pool_exhausted = PoolExhausted::kReject;
  int64_t min_output_tokens = 1;

  TimeLimit deadline;      // from arrival to last byte
  TimeLimit ttft_timeout;  // from arrival to first content token
  TimeLimit idle_timeout;  // longest gap between tokens

  AdmissionDecision admission;
  CutPresentation on_cut;
  std::string_view upstream;  // the rule's upstream override; "" = route by model

  LiveState live;  // what decide() saw (for explain and logs)
};

// Index of the first rule matching `facts`, or nullopt. Pure; thread-safe.
std::optional<size_t> match_rule(const Policy& policy, const RequestFacts& facts);

// The Decision for `facts` given the live load of the matched rule's admission group.
// Typical gateway use:
//   auto idx = match_rule(*snap, facts);               // to find the rule's admission group
//   LiveState live = idx ? queues[group].live() : LiveState{};
//   Decision d = decide(*snap, facts, live);
// Pure; thread-safe; allocates only the pool keys and the no-match message.
Decision decide(const Policy& policy, const RequestFacts& facts, const LiveState& live);

}  // namespace cutline::policy
