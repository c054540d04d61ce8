#pragma once
// The authenticate step every client request takes when the policy lists tenants (the OpenAI
// routes' authenticate phase, passthrough, /v1/models, and `Expect: 100-continue`): the key of
// `Authorization: Bearer <key>` hashed and compared with every tenant's digests
// (policy::authenticate, constant time). Without tenants nobody calls it.

#include <string_view>

#include "cutline/policy/policy.h"
#include "cutline/proto/http1/http_message.h"

namespace cutline::gateway {

struct BearerAuth {
  const policy::Tenant* tenant = nullptr;  // null: refused (401)
  bool key_sent = false;                   // a Bearer key was sent (refused: it matched no tenant)
};

BearerAuth authenticate_bearer(const policy::Policy& policy, const proto::HttpHeaders& headers);

}  // namespace cutline::gateway
