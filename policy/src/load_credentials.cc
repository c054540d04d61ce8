// Loader: the credentials the gateway presents to an upstream (upstreams[i].api_key and
// upstreams[i].headers). A secret is given as `env:VARNAME` or `file:PATH`, never inline: it is
// read once at load, kept only in the Policy, and its label ("env:OPENAI_KEY",
// "file:/run/secrets/key") is all that diagnostics, logs and /v1/cutline/policy ever show.

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "load_sections.h"

namespace cutline::policy::detail {
namespace {

bool valid_env_name(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (digit && i > 0))) return false;
  }
  return true;
}

// A header value must not carry CR, LF or NUL (it would split the upstream request).
bool header_safe(const std::string& v) {
  for (char c : v) {
    if (c == '\r' || c == '\n' || c == '\0') return false;
  }
  return true;
}

bool header_name_ok(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    const auto u = static_cast<unsigned char>(c);
    const bool tchar = (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') ||
                       std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!tchar) return false;
  }
  return true;
}

}  // namespace

std::optional<Secret> read_secret(YamlReader& r, const YAML::Node& node, const std::string& path,
                                  const LoadOptions& options) {
  auto text = r.string(node, path);
  if (!text) return std::nullopt;
  Secret s;
  if (text->rfind("env:", 0) == 0) {
    const std::string name = text->substr(4);
    if (!valid_env_name(name)) {
      r.error(node, path, "expected env:VARNAME with a valid variable name");
      return std::nullopt;
    }
    std::optional<std::string> value;
    if (options.env) {
      value = options.env(name);
    } else if (const char* v = std::getenv(name.c_str())) {
      value = std::string(v);
    }
    if (!value || value->empty()) {
      r.error(node, path, "environment variable " + name + " is not set or empty");
      return std::nullopt;
    }
    s.value = std::move(*value);
    s.label = "env:" + name;
  } else if (text->rfind("file:", 0) == 0) {
    const std::string file = text->substr(5);
    std::ifstream in(file, std::ios::binary);
    if (file.empty() || !in) {
      r.error(node, path, "cannot read the secret file " + quote(file));
      return std::nullopt;
    }
    std::ostringstream buf;
    buf << in.rdbuf();
    s.value = buf.str();
    // A secrets file usually ends with a newline (echo KEY > file): not part of the secret.
    while (!s.value.empty() && (s.value.back() == '\n' || s.value.back() == '\r')) {
      s.value.pop_back();
    }
    if (s.value.empty()) {
      r.error(node, path, "the secret file " + quote(file) + " is empty");
      return std::nullopt;
    }
    s.label = "file:" + file;
  } else {
    // The value is not repeated: it may be a key pasted by mistake.
    r.error(node, path,
            "a secret must be \"env:VARNAME\" or \"file:PATH\"; inline values are not accepted");
    return std::nullopt;
  }
  if (!header_safe(s.value)) {
    r.error(node, path, "the secret from " + s.label + " contains a line break or NUL");
    return std::nullopt;
  }
  return s;
}

bool load_upstream_credentials(YamlReader& r, const Fields& f, const std::string& path,
                               const LoadOptions& options, Upstream& u) {
  bool ok = true;
  if (const Entry* e = f.get("api_key")) {
    if (auto s = read_secret(r, e->value, key_path(path, "api_key"), options)) {
      u.api_key = std::move(*s);
    } else {
      ok = false;
    }
  }
  const Entry* h = f.get("headers");
  if (!h) return ok;
  const std::string hp = key_path(path, "headers");
  if (!h->value.IsMap()) {
    r.error(h->value, hp, "expected a map of header name to \"env:VAR\" or \"file:PATH\"");
    return false;
  }
  for (const auto& kv : h->value) {
    const std::string name = kv.first.as<std::string>("");
    const std::string p = key_path(hp, name);
    if (!header_name_ok(name)) {
      r.error(kv.first, hp, "invalid header name " + quote(name));
      ok = false;
      continue;
    }
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "host" || lower == "content-length" || lower == "transfer-encoding" ||
        lower == "connection") {
      r.error(kv.first, p, "the gateway sets " + name + " itself");
      ok = false;
      continue;
    }
    if (auto s = read_secret(r, kv.second, p, options)) {
      u.headers.push_back(UpstreamHeader{name, std::move(*s)});
    } else {
      ok = false;
    }
  }
  return ok;
}

}  // namespace cutline::policy::detail
