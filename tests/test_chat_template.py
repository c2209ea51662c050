#!/usr/bin/env python3
"""Chat-template parity: `tallow template` must render exactly what Python's
jinja2 renders with Hugging Face's settings (apply_chat_template: sandboxed
environment, trim_blocks + lstrip_blocks, loopcontrols, raise_exception,
strftime_now, and HF's tojson = json.dumps(ensure_ascii=False, ...)).

Real templates: Qwen3, Llama-3, Gemma-3 (tokenizer_config.json in
../shared/tokenizers, skipped with a reason if absent), Llama-2-chat,
Mistral-7B-Instruct-v0.1, Mistral-Nemo-Instruct-2407, DeepSeek-R1 (distill),
DeepSeek-V3.1, Llama-3.1-Instruct, Qwen2.5-Instruct and SmolLM2 (committed
fixtures in tests/fixtures/chat_templates, sources in SOURCES.md; SmolLM2 is
also read from the GGUF file through `-m` when models/ has it). Each runs a
set of conversations (with/without system message, multi-turn, tools and
tool calls, reasoning content) with add_generation_prompt true and false.
Where jinja2 raises (e.g. a template rejects a role order), tallow must fail
too. A second table of small templates exercises single Jinja features.

Needs: pip install jinja2 (and gguf for the GGUF check). Exit 77 = skipped.
Usage: test_chat_template.py [-v] [--sweep DIR]  (--sweep: compare every
*.jinja in DIR, a manual tool to find unsupported constructs).
"""
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures", "chat_templates")
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared", "tokenizers"))
GGUF_MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
VERBOSE = "-v" in sys.argv

try:
    import jinja2
    from jinja2 import nodes
    from jinja2.exceptions import TemplateError
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("SKIP: python jinja2 not installed (pip install jinja2)")
    sys.exit(77)


def find_bin():
    b = os.environ.get("TALLOW_BIN")
    if b and os.path.exists(b):
        return b
    # newest of the usual build folders
    cands = [os.path.join(ROOT, d, "tallow") for d in ("build", "build-jinja", "build-release")]
    cands = [p for p in cands if os.path.exists(p)]
    return max(cands, key=os.path.getmtime) if cands else None


BIN = find_bin()
if not BIN:
    print("SKIP: tallow binary not found (set TALLOW_BIN or build into build/)")
    sys.exit(77)


# ---- the reference: jinja2 configured as HF's apply_chat_template does --------

class GenerationTag(Extension):
    """HF's {% generation %} tag (AssistantTracker) when not tracking: the body
    is rendered through a call block."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_passthrough"), [], [], body).set_lineno(lineno)

    def _passthrough(self, caller):
        return caller()


def hf_env():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = hf_env()


def ref_render(src, messages, tools, agp, bos, eos, extra):
    try:
        t = ENV.from_string(src)
        # as HF: special tokens the tokenizer lacks are left out (undefined), not None
        special = {k: v for k, v in (("bos_token", bos), ("eos_token", eos)) if v is not None}
        out = t.render(messages=messages, tools=tools, documents=None, add_generation_prompt=agp,
                       **special, **extra)
        return True, out
    except Exception as e:  # any failure of the reference: tallow must fail too
        return False, f"{type(e).__name__}: {e}"


TMP = tempfile.mkdtemp(prefix="tl_chat_tmpl_")


def write_tmp(name, text):
    p = os.path.join(TMP, name)
    with open(p, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    return p


def our_render(src_path, messages, tools, agp, bos, eos, extra, model=None):
    cmd = [BIN, "template"]
    cmd += ["-m", model] if model else ["--template", src_path]
    cmd += ["--messages", "@" + write_tmp("m.json", json.dumps(messages, ensure_ascii=False))]
    if tools is not None:
        cmd += ["--tools", "@" + write_tmp("t.json", json.dumps(tools, ensure_ascii=False))]
    if extra:
        cmd += ["--vars", "@" + write_tmp("v.json", json.dumps(extra, ensure_ascii=False))]
    if agp:
        cmd.append("--add-generation-prompt")
    if bos is not None:
        cmd += ["--bos", bos]
    if eos is not None:
        cmd += ["--eos", eos]
    r = subprocess.run(cmd, capture_output=True, timeout=60)
    err = r.stderr.decode("utf-8", "replace")
    if r.returncode not in (0, 1) or "Sanitizer" in err or "runtime error:" in err:
        return False, f"exit {r.returncode}: {r.stderr.decode('utf-8', 'replace').strip()}", True
    if r.returncode != 0:
        return False, r.stderr.decode("utf-8", "replace").strip(), False
    return True, r.stdout.decode("utf-8"), False


# ---- conversations ------------------------------------------------------------

SYS = {"role": "system", "content": "You are a helpful assistant.\nAnswer briefly."}
U1 = {"role": "user", "content": "Hello! What's 2+2?"}
A1 = {"role": "assistant", "content": "2+2 = 4."}
U2 = {"role": "user", "content": "  And in \"French\"? Réponds en français 🙂 <b>&</b>\ttab  "}
A_THINK = {"role": "assistant", "content": "<think>\nThe user wants French.\n</think>\n\nQuatre."}
UW = {"role": "user", "content": "What's the weather in Paris?"}
TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
            },
            "required": ["city"],
        },
    },
}, {
    "type": "function",
    "function": {"name": "get_time", "description": "Current time (UTC)", "parameters": {"type": "object", "properties": {}}},
}]


def tool_call(args, content):
    return {"role": "assistant", "content": content, "tool_calls": [{
        "id": "call12345", "type": "function",
        "function": {"name": "get_weather", "arguments": args}}]}


TOOL_RES = {"role": "tool", "tool_call_id": "call12345", "name": "get_weather",
            "content": "{\"temp\": 18, \"sky\": \"cloudy\"}"}
A_FINAL = {"role": "assistant", "content": "It is 18 °C and cloudy in Paris."}

CASES = [
    # name, messages, tools, extra variables
    ("user", [U1], None, {}),
    ("sys+user", [SYS, U1], None, {}),
    ("multi", [U1, A1, U2], None, {}),
    ("sys+multi", [SYS, U1, A1, U2], None, {}),
    ("sys+multi+reply", [SYS, U1, A1, U2, A_THINK], None, {}),
    ("tools", [SYS, UW], TOOLS, {}),
    ("tools-nosys", [UW], TOOLS, {}),
    ("toolcall-dict", [SYS, UW, tool_call({"city": "Paris", "unit": "celsius"}, ""), TOOL_RES, A_FINAL],
     TOOLS, {}),
    ("toolcall-str", [UW, tool_call("{\"city\": \"Paris\"}", None), TOOL_RES], TOOLS, {}),
    ("no-thinking", [SYS, U1, A1, U2], None, {"enable_thinking": False}),
    ("date", [SYS, U1], TOOLS, {"date_string": "01 Dec 2026"}),
]


# ---- templates ----------------------------------------------------------------

def tok_text(v):
    if isinstance(v, dict):
        return v.get("content")
    return v


def shared_template(name):
    p = os.path.join(SHARED, name, "tokenizer_config.json")
    if not os.path.exists(p):
        return None
    with open(p, encoding="utf-8") as f:
        cfg = json.load(f)
    t = cfg.get("chat_template")
    if isinstance(t, list):  # named templates: use "default"
        t = {d["name"]: d["template"] for d in t}.get("default")
    if not t:
        return None
    return t, tok_text(cfg.get("bos_token")), tok_text(cfg.get("eos_token"))


def fixture(name):
    with open(os.path.join(FIX, name), encoding="utf-8", newline="") as f:
        return f.read()


def gguf_template():
    """SmolLM2's template and special tokens read with the `gguf` package."""
    if not os.path.exists(GGUF_MODEL):
        return None, "models/SmolLM2-135M-Instruct.Q4_1.gguf absent"
    try:
        import gguf
    except ImportError:
        return None, "python gguf package not installed"
    r = gguf.GGUFReader(GGUF_MODEL)

    def field_str(f, i=None):
        idx = f.data[0] if i is None else f.data[i]
        return bytes(f.parts[idx]).decode("utf-8")

    tmpl = field_str(r.fields["tokenizer.chat_template"])
    toks = r.fields["tokenizer.ggml.tokens"]
    bos = int(r.fields["tokenizer.ggml.bos_token_id"].parts[-1][0])
    eos = int(r.fields["tokenizer.ggml.eos_token_id"].parts[-1][0])
    return (tmpl, field_str(toks, bos), field_str(toks, eos)), None


def templates():
    out = []  # (name, source, bos, eos, model_path or None)
    for name, label in (("qwen3", "Qwen3"), ("llama3", "Llama-3"), ("gemma3", "Gemma-3")):
        t = shared_template(name)
        if t is None:
            print(f"SKIP template {label}: {SHARED}/{name}/tokenizer_config.json absent or has no chat_template")
            continue
        out.append((label, t[0], t[1], t[2], None))
    out += [
        ("Llama-2-chat", fixture("llama-2-chat.jinja"), "<s>", "</s>", None),
        ("Mistral-7B-v0.1", fixture("mistral-7b-instruct-v0.1.jinja"), "<s>", "</s>", None),
        ("Mistral-Nemo", fixture("mistral-nemo-instruct-2407.jinja"), "<s>", "</s>", None),
        ("DeepSeek-R1", fixture("deepseek-r1-distill-qwen-32b.jinja"), "<｜begin▁of▁sentence｜>",
         "<｜end▁of▁sentence｜>", None),
        ("DeepSeek-V3.1", fixture("deepseek-v3.1.jinja"), "<｜begin▁of▁sentence｜>",
         "<｜end▁of▁sentence｜>", None),
        ("Llama-3.1", fixture("llama-3.1-8b-instruct.jinja"), "<|begin_of_text|>", "<|eot_id|>", None),
        ("Qwen2.5", fixture("qwen2.5-7b-instruct.jinja"), None, "<|im_end|>", None),
        ("SmolLM2", fixture("smollm2-135m-instruct.jinja"), "<|im_start|>", "<|im_end|>", None),
    ]
    g, why = gguf_template()
    if g is None:
        print(f"SKIP template SmolLM2-GGUF (-m): {why}")
    else:
        if g[0] != fixture("smollm2-135m-instruct.jinja"):
            print("FAIL: SmolLM2 fixture differs from the GGUF's tokenizer.chat_template")
            sys.exit(1)
        out.append(("SmolLM2-GGUF", g[0], g[1], g[2], GGUF_MODEL))
    return out


# ---- single-feature templates (vars passed as `extra`) -------------------------

FEATURES = [
    ("{{ x }}|{{ y }}|{{ z }}|{{ w }}|{{ u }}", {"x": None, "y": True, "z": 1.5, "w": [1, "a", None, {"k": False}], "u": 3}),
    ("{{ 1e20 }} {{ 1e16 }} {{ 1.5e-5 }} {{ 0.0001 }} {{ 123456789012345.6 }} {{ 10/3 }} {{ -0.0 }} {{ 0.1+0.2 }}", {}),
    ("{{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2**10 }} {{ 2**-1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}", {}),
    ("{{ 'a' ~ none ~ 1 ~ undefinedvar ~ true }}", {}),
    ("{{ \"\\n\\\\n\\t\\x41\\u00e9\\U0001F600\" }}|{{ 'it\\'s' }}|{{ 'a' 'b' }}", {}),
    ("{{ [1,2,3][::-1] }}{{ 'héllo'[1:3] }}{{ 'héllo'|length }}{{ 'abcdef'[::2] }}{{ 'abcdef'[-2:] }}{{ [1,2,3,4][1:-1] }}{{ 'abc'[5:] }}", {}),
    ("{{ (1,) }}{{ () }}{{ [(1, 'a')] }}{{ {'a': {'b': [1, 2.5, none]}}|tojson }}{{ {'a': []}|tojson(indent=2) }}", {}),
    ("{{ x|tojson }}|{{ x|tojson(indent=4) }}|{{ x|tojson(sort_keys=true) }}|{{ x|tojson(separators=(',', ':')) }}",
     {"x": {"z": "é\"\\\n\t\u0001<>&'", "a": [1, 2.0, True, None, {}], "m": {"k": [[]]}}}),
    ("{{ 'é😀'|tojson }}{{ 'é😀'|tojson(ensure_ascii=true) }}", {}),
    ("{% for m in ms %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", {"ms": ["a", "b", "c"]}),
    ("{% for m in ms if m != 'b' %}{{ loop.index }}{{ m }}{{ loop.last }}{% else %}empty{% endfor %}|{% for x in [] %}x{% else %}none{% endfor %}", {"ms": ["a", "b", "c"]}),
    ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for c in 'hé' %}[{{ c }}]{% endfor %}", {"d": {"b": 1, "a": [2]}}),
    ("{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("{% for x in [1,2] %}{% for y in 'ab' %}{{ loop.index }}{{ x }}{{ y }}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('o', 'e') }} {% endfor %}{% endfor %}", {}),
    ("{% set y = 5 %}{% for x in [1,2] %}[{{ y }}]{% set y = x %}({{ y }}){% endfor %}{{ y }}{% if true %}{% set z = 3 %}{% endif %}{{ z }}", {}),
    ("{% set ns = namespace(n=0, s='') %}{% for x in range(5) %}{% set ns.n = ns.n + x %}{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }} {{ ns.s }}", {}),
    ("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = [1, 2] + [3] %}{{ c }}{% set t %}  block {{ a }}  {% endset %}[{{ t }}]", {}),
    ("{% macro m(a, b='x', c=none) %}<{{ a }}{{ b }}{{ c }}{{ g }}>{% endmacro %}{% set g = 7 %}{{ m(1) }}{{ m(1, 2) }}{{ m(1, c=3) }}{{ m(b='q', a=0) }}", {}),
    ("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n }}*{{ fact(n - 1) }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    # no --bos/--eos: the special tokens are undefined (print nothing), never a literal "None"
    ("[{{ bos_token }}][{{ eos_token }}]{{ bos_token is defined }}{{ eos_token is none }}", {}),
    ("{{ 1 if x else 2 }}{{ 'a' if false }}|{{ x is defined }}{{ y is defined }}{{ y is undefined }}{{ none is none }}{{ x is not none }}", {"x": 0}),
    ("{{ 'a' is string }}{{ 1 is number }}{{ true is number }}{{ true is integer }}{{ 1.0 is float }}{{ {} is mapping }}{{ [] is iterable }}{{ 'x' is iterable }}{{ u is iterable }}{{ none is iterable }}{{ [] is sequence }}", {}),
    ("{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}{{ 'AB' is upper }}{{ 'ab' is lower }}{{ x is sameas false }}{{ x is false }}{{ true is true }}{{ 1 is eq 1 }}{{ 'a' is in 'cat' }}", {"x": False}),
    ("{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 'a' in 'abc' }}{{ 'z' not in 'abc' }}{{ 2 in [1, 2] }}{{ 'k' in {'k': 1} }}{{ [1, 2] == [1, 2] }}{{ 1 == 1.0 }}{{ true == 1 }}{{ 'b' > 'a' }}{{ [1, 2] < [1, 3] }}", {}),
    ("{{ not x or y and z }}{{ x or 'dflt' }}{{ 0 and 1 }}{{ [] or {} }}{{ -x }}{{ +3 }}{{ - 2 ** 2 }}", {"x": 0, "y": 1, "z": "zz"}),
    ("{{ '  a b  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ s|upper }}|{{ s|lower }}|{{ s|capitalize }}|{{ 'hello wORLD-foo (bar'|title }}|{{ s|length }}|{{ s|count }}", {"s": "hÉllo Wörld"}),
    ("{{ ['a', 1, none]|join(', ') }}|{{ [1, 2]|join }}|{{ u|default('d') }}|{{ ''|default('e', true) }}|{{ none|default('f') }}|{{ u|d('g') }}", {}),
    ("{{ [3, 1, 2]|first }}{{ 'xyz'|last }}{{ []|first }}|{{ 'ab'|list }}{{ {'a': 1}|list }}{{ {'a': 1, 'b': [2]}|items|list }}{{ u|items|list }}", {}),
    ("{{ 'a-b-c'|replace('-', '+') }}{{ 'aaa'|replace('a', 'b', 2) }}{{ 'ab'|replace('', '.') }}|{{ 5|string }}{{ none|string }}{{ [1]|string }}|{{ '42'|int + 1 }}{{ '4.7'|int }}{{ 'x'|int }}{{ 3.9|int }}{{ '2.5'|float }}{{ 3|float }}", {}),
    ("{{ ms|selectattr('role', 'equalto', 'user')|list|length }}{{ ms|rejectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }}{{ ms|selectattr('tool_calls')|list|length }}{{ ms|selectattr('tool_calls', 'defined')|list|length }}{{ ms|map(attribute='role')|list }}",
     {"ms": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "tool_calls": [1]}, {"role": "user", "content": "c"}]}),
    ("{{ [1, 2, 3, 4]|select('odd')|list }}{{ [1, 2, 3, 4]|reject('even')|list }}{{ [1, 0, '', 'a']|select|list }}{{ ['a', 'B']|map('upper')|list }}{{ [-1, 2]|map('abs')|list }}", {}),
    ("{{ [3, 1, 2]|sort }}{{ ['b', 'A', 'c']|sort }}{{ [3, 1]|sort(reverse=true) }}{{ [1, 2, 1, 'a', 'A']|unique|list }}{{ [1, 5, 3]|max }}{{ [4, 2]|min }}{{ [1, 2.5]|sum }}{{ [1, 2, 3]|reverse|list }}{{ 'abc'|reverse }}", {}),
    ("{{ -3|abs }}{{ 2.567|round(2) }}{{ 2.5|round }}{{ 3.5|round }}{{ 7|round }}{{ 2.1|round(0, 'ceil') }}|{{ 'a\nb\n\nc'|indent(2) }}|{{ 'x\ny'|indent(2, true) }}|{{ {'b': 1, 'a': 2}|dictsort }}{{ 'one two, three'|wordcount }}{{ [1,2,3]|batch(2)|list }}{{ '<&>'|e }}{{ 'x'|safe }}", {}),
    ("{{ s.startswith('he') }}{{ s.endswith(('x', 'lo')) }}{{ '  x '.strip() }}|{{ 'xxyxx'.lstrip('x') }}|{{ 'xxyxx'.rstrip('x') }}|{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a b c'.split(' ', 1) }}{{ 'a b c'.rsplit(' ', 1) }}", {"s": "hello"}),
    ("{{ 'Hello'.upper() }}{{ 'Hello'.lower() }}{{ \"they're bill's\".title() }}{{ 'hELLO'.capitalize() }}{{ 'abcabc'.find('c') }}{{ 'abcabc'.rfind('c') }}{{ 'abcabc'.count('b') }}{{ '-'.join(['a', 'b']) }}{{ 'a\\nb\\r\\nc'.splitlines() }}{{ '12'.isdigit() }}{{ 'x'.replace('x', 'y') }}{{ '{} and {x}'.format(1, x=2) }}", {}),
    ("{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 5) }}{{ d.keys()|list }}{{ d.values()|list }}{{ d['a'] }}{{ d.a }}{{ d.missing is defined }}{{ d['missing'] is defined }}{{ l[10] is defined }}{{ l[-1] }}{{ l.0 }}", {"d": {"a": 1, "b": 2}, "l": [7, 8]}),
    ("{{ 'abc'.content is defined }}{{ none.attr is defined }}{{ 5.x is defined }}{{ d['items'] }}{{ d.items()|list }}", {"d": {"items": "key"}}),
    ("{{ range(3)|list }}{{ range(1, 10, 3)|list }}{{ range(5, 0, -2)|list }}{{ dict(a=1, b=2) }}{{ namespace(a=1).a }}", {}),
    ("{{ 'x' * 3 }}{{ [0] * 2 }}{{ 3 * 'ab' }}{{ 1 + 2 * 3 - 4 / 2 }}{{ 'a' + 'b' ~ 1 + 2 }}{{ (1 + 2) * 3 }}{{ 10 - 2 - 3 }}{{ 2 ** 3 ** 2 }}", {}),
    ("a\n{# c #}\nb\n  {# d #}  \nc\n  {% if true %}\n  x\n  {% endif %}\n  y {{ 1 }}\n{%+ if 1 %}a{% endif +%}\nb", {}),
    ("x  {% if 1 %}y{% endif %}\n{% if 1 %}\n  {{ 1 }}\n{% endif %}\n\n", {}),
    ("  {%- if true -%}  \n  a  \n  {%- endif -%}  \n  b  {{- ' c ' -}}  d\n", {}),
    ("line1\r\nline2\r{% if 1 %}\r\nx{% endif %}\n", {}),
    ("{% raw %}{{ not rendered }}{% if %}{% endraw %}|{{ 1 }}", {}),
    ("{% raw %}\nX {{ y }}\n  {% endraw %}\nY|  {% raw -%}  X  {%- endraw %}  Y|a\n  {% raw %}X{% endraw +%}\nY", {}),
    ("{% generation %}gen {{ 1 }}{% endgeneration %}", {}),
    ("{% for i in range(3) %}{{ i }}{% endfor %}{{ i is defined }}", {}),
    ("{{ {'a': 1, 'b': {'c': [1, 2]}} }}{{ ['it\\'s', \"q\\\"\", 'x\\ny', 'é'] }}{{ {1: 'int', none: 'n'} }}", {}),
    ("{%- set sys = msgs[0]['content'] if msgs[0]['role'] == 'system' else '' -%}{{ sys }}|{{ msgs[1:]|length }}|{{ (msgs|last).content }}", {"msgs": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]}),
    ("{% if false %}{{ x|nosuch }}{% endif %}{{ 1 if true else x|nosuch2 }}{% if x is nosuchtest %}{% endif %}ok", {}),
    ("{% set g = [1, 2, 3]|select('odd') %}{{ g|list }}{{ g|list }}{{ 'T' if g }}{{ [1, 2]|map('string')|join('-') }}{{ none|selectattr('a')|list }}{{ none|map('upper')|list }}", {}),
    ("{{ d.items()|length }}{{ d.keys()|list }}{{ d.items() }}{{ d.keys() }}{{ d.values() }}{{ 'a' in d.keys() }}{{ d.items()[0] is defined }}", {"d": {"a": 1}}),
    ("{{ 'a<'|safe + '<b>' }}{{ '<c>' + '&'|safe }}{{ ('x'|safe + '\"') ~ '<' }}{{ '<'|e|e }}", {}),
    ("{{ '%s-%d-%r-%5.2f|%-4s|%03d%%'|format('a', 7, 'q', 3.14159, 'x', 5) }}{{ 'n=%s' % 3 }}{{ '%s+%s' % (1, 'b') }}{{ {'k': 1}|attr('k') }}{{ x|attr('upper') is defined }}", {"x": "s"}),
    # errors: both must fail
    ("{{ '%s %s'|format(1) }}", {}),
    ("{{ '%d'|format('x') }}", {}),
    ("{{ [1, 2]|select('odd')|length }}", {}),
    ("{{ [1, 2]|map('string')|tojson }}", {}),
    ("{{ {'a': 1}.items()|tojson }}", {}),
    ("{% for x in [1] %}{{ x|nosuch }}{% endfor %}", {}),
    ("{% if true %}{{ x|nosuch }}{% endif %}", {}),
    ("{{ raise_exception('custom failure') }}", {}),
    ("{{ x.y }}", {}),
    ("{{ u + 1 }}", {}),
    ("{{ 1 / 0 }}", {}),
    ("{{ 'a' + 1 }}", {}),
    ("{{ foo|nosuchfilter }}", {}),
    ("{% if x %}unclosed", {}),
    ("{{ unclosed ", {}),
    ("{% for %}{% endfor %}", {}),
    ("{% endif %}", {}),
    ("{{ range(1000000)|length }}", {}),
    ("{% set ns = 1 %}{% set ns.x = 2 %}", {}),
    ("{{ x is nosuchtest }}", {}),
    ("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", {}),
]


def same_raise(ref, our):
    """When the template itself raised (raise_exception), tallow's error must carry its message."""
    if ref.startswith("TemplateError: "):
        return "raise_exception: " + ref[len("TemplateError: "):] in our
    return True


def main():
    if "--sweep" in sys.argv:
        return sweep(sys.argv[sys.argv.index("--sweep") + 1])
    fails = 0
    total = 0
    both_err = 0
    rows = []
    for (name, src, bos, eos, model) in templates():
        path = write_tmp("tmpl.jinja", src)
        src_path = os.path.join(TMP, f"tmpl_{len(rows)}.jinja")
        os.replace(path, src_path)
        cells = []
        for (cname, msgs, tools, extra) in CASES:
            for agp in (False, True):
                total += 1
                ok_ref, ref = ref_render(src, msgs, tools, agp, bos, eos, extra)
                ok_our, our, crashed = our_render(src_path, msgs, tools, agp, bos, eos, extra, model)
                tag = f"{cname}/{'gen' if agp else 'nogen'}"
                if crashed:
                    fails += 1
                    cells.append(f"{tag}:CRASH")
                    print(f"FAIL {name} {tag}: tallow crashed: {our}")
                elif ok_ref and ok_our and ref == our:
                    cells.append(f"{tag}:ok")
                elif not ok_ref and not ok_our and not same_raise(ref, our):
                    fails += 1
                    cells.append(f"{tag}:MISMATCH")
                    print(f"FAIL {name} {tag}: raise_exception message differs:\n  jinja2: {ref}\n  tallow: {our}")
                elif not ok_ref and not ok_our:
                    both_err += 1
                    cells.append(f"{tag}:both-error")
                    if VERBOSE:
                        print(f"  {name} {tag}: both error\n    ref: {ref}\n    our: {our}")
                else:
                    fails += 1
                    cells.append(f"{tag}:MISMATCH")
                    print(f"FAIL {name} {tag}:\n  jinja2 {'ok' if ok_ref else 'error'}: {ref!r}\n"
                          f"  tallow {'ok' if ok_our else 'error'}: {our!r}")
        nok = sum(c.endswith(":ok") for c in cells)
        nerr = sum(c.endswith(":both-error") for c in cells)
        rows.append((name, nok, nerr, len(cells) - nok - nerr))
    print(f"\n{'template':<18} {'equal':>6} {'both-err':>9} {'mismatch':>9}")
    for r in rows:
        print(f"{r[0]:<18} {r[1]:>6} {r[2]:>9} {r[3]:>9}")

    # single features
    fok = ferr = ffail = 0
    for i, (src, vars_) in enumerate(FEATURES):
        p = write_tmp(f"feat_{i}.jinja", src)
        ok_ref, ref = ref_render(src, [], None, False, None, None, vars_)
        ok_our, our, crashed = our_render(p, [], None, False, None, None, vars_)
        if crashed or not ((ok_ref and ok_our and ref == our) or
                           (not ok_ref and not ok_our and same_raise(ref, our))):
            ffail += 1
            print(f"FAIL feature {i}: {src!r}\n  jinja2 {'ok' if ok_ref else 'error'}: {ref!r}\n"
                  f"  tallow {'ok' if ok_our else 'error'}{' (CRASH)' if crashed else ''}: {our!r}")
        elif ok_ref:
            fok += 1
        else:
            ferr += 1
            if VERBOSE:
                print(f"  feature {i} both error:\n    ref: {ref}\n    our: {our}")
    print(f"features: {fok} equal, {ferr} both-error, {ffail} mismatch (of {len(FEATURES)})")
    fails += ffail
    print(f"\nreal templates: {total} renders, {total - fails + ffail - both_err} equal, {both_err} both-error, "
          f"{fails - ffail} mismatch")
    return 1 if fails else 0


def sweep(d):
    """Manual: compare every template in a folder on the standard cases."""
    bad = 0
    for fn in sorted(os.listdir(d)):
        if not fn.endswith(".jinja"):
            continue
        src = open(os.path.join(d, fn), encoding="utf-8").read()
        p = write_tmp("sweep.jinja", src)
        n = eq = be = 0
        first = None
        for (cname, msgs, tools, extra) in CASES:
            for agp in (False, True):
                n += 1
                ok_ref, ref = ref_render(src, msgs, tools, agp, "<s>", "</s>", extra)
                ok_our, our, crashed = our_render(p, msgs, tools, agp, "<s>", "</s>", extra)
                if ok_ref and ok_our and ref == our:
                    eq += 1
                elif not ok_ref and not ok_our and not crashed:
                    be += 1
                elif first is None:
                    first = f"{cname}/{agp}: ref={'ok' if ok_ref else ref[:150]!r} our={our[:300]!r}"
        status = "OK " if eq + be == n else "BAD"
        bad += eq + be != n
        print(f"{status} {fn:<60} equal={eq} both-err={be} of {n}" + (f"\n     {first}" if first else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
