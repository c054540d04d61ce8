#pragma once
// The policy file's JSON Schema (draft-07, what yaml-language-server and VS Code's YAML
// extension read), rendered from the loader's key table (keys.h): every map with its keys,
// types, enum values, defaults and descriptions, and additionalProperties false since the
// loader refuses unknown keys. `cutline policy schema` prints it; deploy/policy.schema.json is
// a copy checked against it by a test.
//
// The schema checks the shape of a policy, not everything the loader checks (references
// between sections, duplicates, cross-key rules): `cutline policy check` has the last word.

#include <string>

namespace cutline::policy {

// The schema as indented JSON, ending with a newline.
std::string policy_json_schema();

}  // namespace cutline::policy
