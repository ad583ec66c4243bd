#!/usr/bin/env python3
"""Renders chat templates with Python's jinja2 in the environment Hugging Face transformers uses: the
reference that Tessera's C++ interpreter is tested against (tests/unit/chat_template_reference_test.cpp).

    render_chat_template.py TEMPLATE CONTEXT.json [--now EPOCH]   # one render: the text on stdout
    render_chat_template.py --batch CASES.json [--now EPOCH]      # many renders: JSON results on stdout

TEMPLATE is a .jinja file, or a tokenizer_config.json whose "chat_template" field holds the template; CONTEXT.json
holds the variables of the render (messages, add_generation_prompt, bos_token, ...). A single render that raises
prints the message on stderr and exits 1.

CASES.json holds a JSON array of {"template": TEXT, "context": {...}}; the output is a JSON array with one result
per case: {"text": ...} when it renders, {"raised": MESSAGE} when the template called raise_exception, or
{"error": MESSAGE, "type": EXCEPTION_CLASS} for anything else (syntax errors included).

The environment matches transformers' _compile_jinja_template: ImmutableSandboxedEnvironment(trim_blocks=True,
lstrip_blocks=True) with jinja2.ext.loopcontrols and the {% generation %} tag, tojson = json.dumps with
ensure_ascii=False, raise_exception, and strftime_now, here on a fixed clock (--now) so that both sides agree.
"""
import argparse
import json
import sys
from datetime import datetime

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError as e:  # the test must fail loudly, not skip: say what to install
    sys.stderr.write(f"render_chat_template.py: cannot import jinja2 ({e}); install python3-jinja2\n")
    sys.exit(3)


class Raised(Exception):
    """What the template's raise_exception() throws (transformers raises jinja2's TemplateError)."""


class GenerationTag(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: transformers marks assistant text with it; rendering is the body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_environment(now):
    def raise_exception(message):
        raise Raised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.fromtimestamp(now).strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, source, context):
    try:
        return {"text": env.from_string(source).render(**context)}
    except Raised as e:
        return {"raised": str(e)}
    except Exception as e:
        return {"error": str(e), "type": type(e).__name__}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("template", nargs="?")
    ap.add_argument("context", nargs="?")
    ap.add_argument("--batch", metavar="CASES.json")
    ap.add_argument("--now", type=float, default=1721952000.0)  # 2024-07-26 00:00:00 UTC
    args = ap.parse_args()
    env = make_environment(args.now)

    if args.batch:
        with open(args.batch, encoding="utf-8") as f:
            cases = json.load(f)
        results = [render(env, case["template"], case["context"]) for case in cases]
        sys.stdout.buffer.write(json.dumps(results, ensure_ascii=False).encode("utf-8"))
        return 0

    if not args.template or not args.context:
        ap.error("give TEMPLATE and CONTEXT.json, or --batch CASES.json")
    with open(args.template, encoding="utf-8", newline="") as f:  # newline="": jinja2 normalizes line ends itself
        source = f.read()
    if args.template.endswith(".json"):
        source = json.loads(source)["chat_template"]
    with open(args.context, encoding="utf-8") as f:
        context = json.load(f)
    result = render(env, source, context)
    if "text" not in result:
        sys.stderr.write(result.get("raised") or f"{result['type']}: {result['error']}")
        sys.stderr.write("\n")
        return 1
    sys.stdout.buffer.write(result["text"].encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
