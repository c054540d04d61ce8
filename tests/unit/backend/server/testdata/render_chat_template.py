#!/usr/bin/env python3
"""Renders a chat template for an OpenAI chat request body, as Hugging Face's apply_chat_template
does (Jinja2 sandbox, trim_blocks/lstrip_blocks, its `tojson`: json.dumps with ensure_ascii=False
and no key sorting) after vLLM's preprocessing (tool-call arguments parsed from their JSON
string). The backend's own rendering is compared with this output byte for byte.

usage: render_chat_template.py TEMPLATE BODY.json   (exit 77 when jinja2 is missing)
"""
import json
import os
import sys

try:
    import jinja2
    import jinja2.sandbox
except ImportError:
    print("python3-jinja2 is not installed", file=sys.stderr)
    sys.exit(77)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def main():
    template_path, body_path = sys.argv[1], sys.argv[2]
    with open(body_path, encoding="utf-8") as f:
        body = json.load(f)
    messages = body["messages"]
    for m in messages:
        for call in m.get("tool_calls") or []:
            args = call["function"]["arguments"]
            if isinstance(args, str):
                call["function"]["arguments"] = json.loads(args)
    tools = body.get("tools") if body.get("tool_choice") != "none" else None
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"],
        loader=jinja2.FileSystemLoader(os.path.dirname(template_path)))
    env.filters["tojson"] = tojson
    template = env.get_template(os.path.basename(template_path))
    kwargs = body.get("chat_template_kwargs") or {}
    # bos_token as a Llama-3-based model's (Hermes 2 Pro, Hermes 3); templates without it ignore it.
    out = template.render(messages=messages, tools=tools, add_generation_prompt=True,
                          bos_token="<|begin_of_text|>", **kwargs)
    sys.stdout.buffer.write(out.encode("utf-8"))


if __name__ == "__main__":
    main()
