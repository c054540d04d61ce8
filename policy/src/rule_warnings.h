#pragma once
// The loader's warnings about rules (load_rules.cc calls these): parts of a `match` that no
// request can reach, although the file is valid and the gateway uses it. They err on the side
// of silence: each says "never" only where the gateway's own code makes it so (a route the
// request-target canonicalization never produces, a tenant no authenticated request carries,
// a rule earlier rules match first). Private to policy/src.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cutline/policy/policy.h"
#include "yaml_reader.h"

namespace cutline::policy::detail {

// A warning sentence when no canonical request path (gateway/request_target.h: unreserved
// %-escapes decoded, others upper-case; no "//", dot segments or trailing '/'; no control
// characters, '\' or bytes over 0x7e) can match the route glob `pattern`, saying why; nullopt
// when one can or when that is unsure. A '?' followed by '=' is also reported: it reads as a
// query string, which routes never see.
std::optional<std::string> route_warning(std::string_view pattern);

// Whether every text glob `inner` matches is also matched by glob `outer`. Conservative: a
// '*' of `outer` may stand for any run of `inner` (wildcards included), a '?' for one literal
// or '?' of `inner`, a literal for the same literal; false when that cannot show it.
bool glob_covers(std::string_view outer, std::string_view inner);

// The tenants a request can carry when rules are matched: the configured tenants' names (an
// unauthenticated request gets 401 first), or "" when none are configured.
std::vector<std::string> tenant_universe(const Policy& p);

// Warns at every rule of `p` that earlier rules together match every request it would, on
// every dimension (tenants exactly over tenant_universe(); models, routes and headers by
// glob_covers). `checked[i]` is false for rules left out: a match with errors, or a rule the
// loader already refused as unreachable.
void warn_shadowed_rules(YamlReader& r, const Policy& p, const std::vector<bool>& checked);

// The routes the gateway itself runs (POST /v1/chat/completions, /v1/completions,
// /v1/responses, /v1/embeddings). GET /v1/models is answered from the rules on these.
inline constexpr std::string_view kCoreRoutes[] = {"/v1/chat/completions", "/v1/completions",
                                                   "/v1/responses", "/v1/embeddings"};

// Warns at `policies` (node `at`) when some core route has no rule whose match.routes can
// match it: every such request is refused (and GET /v1/models lists no model for it).
// `checked[i]` as above: rules whose match has errors are left out.
void warn_uncovered_core_routes(YamlReader& r, const YAML::Node& at, const Policy& p,
                                const std::vector<bool>& checked);

}  // namespace cutline::policy::detail
