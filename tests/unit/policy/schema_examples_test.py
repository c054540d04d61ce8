#!/usr/bin/env python3
"""Every policy file shipped in the repository validates against deploy/policy.schema.json, and
the schema refuses a key the loader does not know (additionalProperties). A Kubernetes
ConfigMap's *.yaml data entries are checked as policies too.

usage: schema_examples_test.py SCHEMA POLICY.yaml...

Needs Python's jsonschema and yaml modules (Debian python3-jsonschema, python3-yaml;
deploy/setup.sh test): skipped (exit 77) where one is missing, a failure under CI=true."""
import json
import os
import re
import sys

try:
    import jsonschema
    import yaml
except ImportError as e:
    if os.environ.get("CI") == "true":
        print(f"FAIL: CI=true but {e.name} is missing (Debian python3-jsonschema, python3-yaml; "
              "deploy/setup.sh test)", file=sys.stderr)
        sys.exit(1)
    print(f"SKIP: Python module {e.name} is not installed (python3-jsonschema, python3-yaml)")
    sys.exit(77)


class Yaml12Loader(yaml.SafeLoader):
    """YAML 1.2 booleans, as yaml-cpp and yaml-language-server read them: `health: off` is the
    string "off", not false (PyYAML follows YAML 1.1)."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:bool",
                                   re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                   list("tTfF"))


def policies(path):
    """(name, document) for the policy in `path`, or for each policy a ConfigMap carries."""
    with open(path, encoding="utf-8") as f:
        doc = yaml.load(f, Loader=Yaml12Loader)
    if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
        for key, text in sorted((doc.get("data") or {}).items()):
            if key.endswith((".yaml", ".yml")):
                yield f"{path} ({key})", yaml.load(text, Loader=Yaml12Loader)
        return
    yield path, doc


def errors(validator, doc):
    return sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    failed = 0
    checked = 0
    for path in sys.argv[2:]:
        for name, doc in policies(path):
            checked += 1
            problems = errors(validator, doc)
            for e in problems:
                where = ".".join(str(p) for p in e.absolute_path) or "(top level)"
                print(f"{name}: {where}: {e.message}")
            failed += bool(problems)
            # The same document with an unknown key at the top and in its first rule must be
            # refused, as the loader refuses it.
            for target in (doc, (doc.get("policies") or [{}])[0]):
                target["not_a_policy_key"] = 1
                if not any(e.validator == "additionalProperties" for e in errors(validator, doc)):
                    print(f"{name}: the schema accepts the unknown key 'not_a_policy_key'")
                    failed += 1
                del target["not_a_policy_key"]
    print(f"{checked} policies checked against {sys.argv[1]}, {failed} failed")
    return 1 if failed or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
