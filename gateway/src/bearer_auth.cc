#include "cutline/gateway/bearer_auth.h"

#include "cutline/policy/api_key.h"

namespace cutline::gateway {

BearerAuth authenticate_bearer(const policy::Policy& policy, const proto::HttpHeaders& headers) {
  BearerAuth out;
  const auto h = headers.get("Authorization");
  if (!h || h->size() <= 7 || !proto::iequals(h->substr(0, 7), "Bearer ")) return out;
  out.key_sent = true;
  out.tenant = policy::authenticate(policy, h->substr(7));
  return out;
}

}  // namespace cutline::gateway
