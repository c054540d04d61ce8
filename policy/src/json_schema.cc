// The policy's JSON Schema from the key table (json_schema.h).
#include "cutline/policy/json_schema.h"

#include <charconv>
#include <optional>
#include <string_view>

#include "cutline/base/json_writer.h"
#include "cutline/policy/duration.h"
#include "cutline/policy/keys.h"

namespace cutline::policy {

namespace {

using base::JsonWriter;
using keys::KeySpec;
using keys::MapSpec;
using keys::Type;

// Mirrors YamlReader::name, read_secret and read_api_key (policy/src).
constexpr std::string_view kNamePattern = "^[A-Za-z0-9_.-]{1,128}$";
constexpr std::string_view kSecretPattern = "^(env:[A-Za-z_][A-Za-z0-9_]*|file:.+)$";
constexpr std::string_view kApiKeyPattern = "^(sha256:[0-9A-Fa-f]{64}|env:[A-Za-z_][A-Za-z0-9_]*)$";

void write_object(JsonWriter& w, const MapSpec& map);
void write_key(JsonWriter& w, const KeySpec& k);

std::optional<double> as_number(std::string_view text) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

// A default as JSON of the key's type ("5" -> 5 for an integer, "*" -> ["*"] for a list).
void write_default(JsonWriter& w, const KeySpec& k) {
  if (k.default_value.empty()) return;
  w.key("default");
  if (k.list) w.begin_array();
  if (k.type == Type::kInteger || k.type == Type::kNumber) {
    w.raw(k.default_value);
  } else if (k.type == Type::kBool) {
    w.value(k.default_value == "true");
  } else {
    w.value(k.default_value);
  }
  if (k.list) w.end_array();
}

// The fields of one value's schema (one item's, for a list).
void write_value_fields(JsonWriter& w, Type type, const KeySpec& k) {
  switch (type) {
    case Type::kString:
      if (k.pattern.empty()) {
        // The loader reads any scalar's text: `command: [server, --port, 8081]` is fine.
        w.key("type").begin_array().value("string").value("number").end_array();
      } else {
        w.field("type", "string");
      }
      w.field("minLength", 1);
      if (!k.pattern.empty()) w.field("pattern", k.pattern);
      break;
    case Type::kName:
      w.field("type", "string").field("pattern", kNamePattern);
      break;
    case Type::kInteger:
      w.field("type", "integer").field("minimum", k.min);
      break;
    case Type::kNumber:
      w.field("type", "number").field("minimum", k.min);
      break;
    case Type::kDuration:
      w.field("type", "string").field("pattern", kDurationPattern);
      break;
    case Type::kBool:
      w.field("type", "boolean");
      break;
    case Type::kEnum:
      // The loader compares the text; YAML reads 1.2 as a number, so a numeric choice is
      // accepted both ways.
      w.key("enum").begin_array();
      for (std::string_view c : k.choices) w.value(c);
      for (std::string_view c : k.choices) {
        if (as_number(c)) w.raw(c);
      }
      w.end_array();
      break;
    case Type::kSecret:
      w.field("type", "string").field("pattern", kSecretPattern);
      break;
    case Type::kApiKey:
      w.field("type", "string").field("pattern", kApiKeyPattern);
      break;
    case Type::kObject:
      write_object(w, *k.object);
      break;
    case Type::kMap:
      w.field("type", "object");
      if (!k.pattern.empty()) {
        w.key("propertyNames").begin_object().field("pattern", k.pattern).end_object();
      }
      w.key("additionalProperties").begin_object();
      if (k.value == Type::kString) {
        // Any scalar: the loader reads the text (an environment value may be 8080).
        w.key("type").begin_array().value("string").value("number").value("boolean").end_array();
      } else {
        KeySpec value{};
        write_value_fields(w, k.value, value);
      }
      w.end_object();
      break;
  }
}

// The value's schema fields without description: a list of items, or one value.
void write_form_fields(JsonWriter& w, const KeySpec& k) {
  if (!k.list) {
    write_value_fields(w, k.type, k);
    return;
  }
  w.field("type", "array");
  if (k.min_items > 0) w.field("minItems", k.min_items);
  w.key("items").begin_object();
  write_value_fields(w, k.type, k);
  w.end_object();
}

void write_key(JsonWriter& w, const KeySpec& k) {
  w.begin_object().field("description", k.description);
  write_default(w, k);
  if (k.alternative) {
    w.key("anyOf").begin_array().begin_object();
    write_form_fields(w, k);
    w.end_object();
    write_key(w, *k.alternative);
    w.end_array();
  } else {
    write_form_fields(w, k);
  }
  w.end_object();
}

void write_object(JsonWriter& w, const MapSpec& map) {
  w.field("type", "object").field("title", map.name);
  w.key("properties").begin_object();
  for (const KeySpec& k : map.keys) {
    w.key(k.name);
    write_key(w, k);
  }
  w.end_object();
  bool any_required = false;
  for (const KeySpec& k : map.keys) any_required = any_required || k.required;
  if (any_required) {
    w.key("required").begin_array();
    for (const KeySpec& k : map.keys) {
      if (k.required) w.value(k.name);
    }
    w.end_array();
  }
  w.field("additionalProperties", false);
}

// Compact JSON (as JsonWriter writes it) indented by two spaces per level, one member a line.
std::string indent(std::string_view json) {
  std::string out;
  int depth = 0;
  bool in_string = false;
  auto newline = [&] {
    out += '\n';
    out.append(static_cast<size_t>(depth) * 2, ' ');
  };
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      out += c;
      if (c == '\\') {
        out += json[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        out += c;
        break;
      case '{':
      case '[':
        out += c;
        if (i + 1 < json.size() && (json[i + 1] == '}' || json[i + 1] == ']')) {
          out += json[++i];
        } else {
          ++depth;
          newline();
        }
        break;
      case '}':
      case ']':
        --depth;
        newline();
        out += c;
        break;
      case ',':
        out += c;
        newline();
        break;
      case ':':
        out += ": ";
        break;
      default:
        out += c;
    }
  }
  out += '\n';
  return out;
}

}  // namespace

std::string policy_json_schema() {
  std::string out;
  JsonWriter w(out);
  w.begin_object()
      .field("$schema", "http://json-schema.org/draft-07/schema#")
      .field("description",
             "A Cutline gateway policy (cutline-gateway --config FILE). Generated by `cutline "
             "policy schema` from the loader's key table; `cutline policy check FILE` checks "
             "everything else.");
  write_object(w, keys::kDocument);
  w.end_object();
  return indent(out);
}

}  // namespace cutline::policy
