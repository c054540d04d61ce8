// Loader section `tenants`: names and API keys. Keys are kept only as SHA-256 digests; an
// `env:VARNAME` key is read, hashed and dropped at once. Error messages never repeat a key's
// text (a user may have pasted a plain key by mistake).
#include <cstdlib>

#include "load_sections.h"

namespace cutline::policy::detail {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool valid_env_name(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (digit && i > 0))) return false;
  }
  return true;
}

std::optional<std::string> lookup_env(const LoadOptions& options, const std::string& name) {
  if (options.env) return options.env(name);
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

}  // namespace

std::optional<ApiKey> read_api_key(YamlReader& r, const YAML::Node& node, const std::string& path,
                                   const LoadOptions& options) {
  if (!node.IsScalar()) {
    r.error(node, path, "expected a string, got " + std::string(describe(node)));
    return std::nullopt;
  }
  const std::string& text = node.Scalar();
  ApiKey key;
  key.ref = r.ref(node, path);
  if (text.rfind("sha256:", 0) == 0) {
    std::string_view hex = std::string_view(text).substr(7);
    if (hex.size() != 64) {
      r.error(
          node, path,
          "a sha256: key needs 64 hex digits, got " + std::to_string(hex.size()) + " characters");
      return std::nullopt;
    }
    for (size_t i = 0; i < 32; ++i) {
      const int hi = hex_value(hex[2 * i]);
      const int lo = hex_value(hex[2 * i + 1]);
      if (hi < 0 || lo < 0) {
        r.error(node, path, "a sha256: key may contain only hex digits 0-9 a-f");
        return std::nullopt;
      }
      key.digest[i] = static_cast<uint8_t>(hi << 4 | lo);
    }
    key.label = "sha256:" + digest_hex(key.digest).substr(0, 8) + "...";
    return key;
  }
  if (text.rfind("env:", 0) == 0) {
    const std::string name = text.substr(4);
    if (!valid_env_name(name)) {
      r.error(node, path, "expected env:VARNAME with a valid variable name, got " + quote(text));
      return std::nullopt;
    }
    auto value = lookup_env(options, name);
    if (!value || value->empty()) {
      r.error(node, path, "environment variable " + name + " is not set or empty");
      return std::nullopt;
    }
    key.digest = sha256_digest(*value);
    // Overwrite the plain key before the string is freed.
    for (char& c : *value) c = '\0';
    key.label = "env:" + name;
    return key;
  }
  r.error(node, path,
          "API keys must be \"sha256:<64 hex digits>\" or \"env:VARNAME\"; plain keys are not "
          "accepted (hash one with: printf %s \"$KEY\" | sha256sum)");
  return std::nullopt;
}

bool load_tenants(YamlReader& r, const YAML::Node& node, const LoadOptions& options, Policy& p) {
  const std::string base = "tenants";
  auto items = r.list(node, base);
  if (!items) return false;
  bool all_ok = true;
  for (size_t i = 0; i < items->size(); ++i) {
    const YAML::Node& item = (*items)[i];
    const std::string path = index_path(base, i);
    auto f = r.map(item, path, keys::kTenant);
    if (!f) {
      all_ok = false;
      continue;
    }
    Tenant t;
    t.ref = r.ref(item, path);
    const Entry* name = f->get("name");
    if (!name) {
      r.error(item, path, "missing required key \"name\"");
      all_ok = false;
      continue;
    }
    auto n = r.name(name->value, key_path(path, "name"));
    if (!n) {
      all_ok = false;
      continue;
    }
    t.name = *n;
    if (const Tenant* other = p.find_tenant(t.name)) {
      r.error(name->value, key_path(path, "name"),
              "duplicate tenant name " + quote(t.name) + " (first at " + other->ref.path +
                  ", line " + std::to_string(other->ref.line) + ")");
      all_ok = false;
      continue;
    }
    const Entry* keys = f->get("api_keys");
    if (!keys) {
      r.error(item, path, "missing required key \"api_keys\"");
      all_ok = false;
    } else if (auto list = r.list(keys->value, key_path(path, "api_keys"))) {
      if (list->empty()) {
        r.error(keys->value, key_path(path, "api_keys"), "must list at least one key");
        all_ok = false;
      }
      for (size_t k = 0; k < list->size(); ++k) {
        const std::string kp = index_path(key_path(path, "api_keys"), k);
        auto key = read_api_key(r, (*list)[k], kp, options);
        if (!key) {
          all_ok = false;
          continue;
        }
        // The same key for two tenants (or twice) would make authentication ambiguous.
        bool dup = false;
        auto check = [&](const Tenant& owner) {
          for (const auto& other : owner.api_keys) {
            if (!dup && digest_equal(other.digest, key->digest)) {
              r.error((*list)[k], kp,
                      "the same key is already listed at " + other.ref.path + " (line " +
                          std::to_string(other.ref.line) + ", tenant " + quote(owner.name) + ")");
              dup = true;
            }
          }
        };
        for (const auto& other_tenant : p.tenants) check(other_tenant);
        check(t);
        if (dup) {
          all_ok = false;
          continue;
        }
        t.api_keys.push_back(std::move(*key));
      }
    } else {
      all_ok = false;
    }
    p.tenants.push_back(std::move(t));
  }
  return all_ok;
}

}  // namespace cutline::policy::detail
