// Loader section: budget_store's map form (load_sections.h). The string form is
// `budget_store: memory | redis://HOST[:PORT][/DB] | rediss://...` (load_network.cc); the map form
// adds what a shared Redis needs: credentials from the environment, the failure policy, the
// timeouts and, for rediss://, how its certificate is verified.
#include <utility>

#include "load_sections.h"

namespace cutline::policy::detail {

void load_budget_store_map(YamlReader& r, const YAML::Node& node, const LoadOptions& options,
                           Policy& p) {
  const std::string path = "budget_store";
  auto f = r.map(node, path, keys::kBudgetStore);
  if (!f) return;
  const Entry* url = f->get("url");
  if (!url) {
    r.error(node, path, "missing required key \"url\"");
    return;
  }
  auto s = r.string(url->value, key_path(path, "url"));
  BudgetStore b;
  if (!s || !parse_budget_store_url(r, url->value, key_path(path, "url"), *s, b)) return;
  bool ok = true;
  const bool redis = b.kind == BudgetStoreKind::kRedis;
  auto only_redis = [&](const Entry* e) {
    if (!redis) {
      r.error(e->key, key_path(path, e->name), "applies to redis:// stores only");
      ok = false;
    }
  };
  if (auto* e = f->get("user")) {
    only_redis(e);
    if (auto v = r.name(e->value, key_path(path, "user")))
      b.user = *v;
    else
      ok = false;
  }
  if (auto* e = f->get("password")) {
    only_redis(e);
    if (auto v = read_secret(r, e->value, key_path(path, "password"), options))
      b.password = std::move(v->value);
    else
      ok = false;
  }
  if (!b.user.empty() && b.password.empty() && ok) {
    r.error(node, path, "user needs a password");
    ok = false;
  }
  if (auto* e = f->get("on_error")) {
    only_redis(e);
    if (auto c = r.choice(e->value, key_path(path, "on_error"), keys::kBudgetStoreOnError))
      b.fail_closed = *c == 1;
    else
      ok = false;
  }
  if (auto* e = f->get("timeout")) {
    only_redis(e);
    if (auto v = r.duration(e->value, key_path(path, "timeout")))
      b.timeout_ms = *v;
    else
      ok = false;
  }
  if (auto* e = f->get("reservation_ttl")) {
    only_redis(e);
    if (auto v = r.duration(e->value, key_path(path, "reservation_ttl"))) {
      b.reservation_ttl_ms = *v;
      if (*v < 1000) {
        r.error(e->value, key_path(path, "reservation_ttl"), "must be at least 1s");
        ok = false;
      }
    } else {
      ok = false;
    }
  }
  if (auto* e = f->get("tls")) {
    only_redis(e);
    ok = load_client_tls(r, e->value, key_path(path, "tls"), b.tls) && ok;
    if (redis && !b.use_tls) {
      r.error(e->key, key_path(path, "tls"), "applies to rediss:// stores only");
      ok = false;
    }
  }
  b.ref = r.ref(node, path);
  if (ok) p.budget_store = std::move(b);
}

}  // namespace cutline::policy::detail
