#!/usr/bin/env python3
"""Writes the fuzz harnesses' seed corpora (tests/fuzz/corpus/<harness>/).

Each seed is a small valid input, so the fuzzer starts inside the format
instead of having to discover it: tiny random-weight GGUF models of each
architecture (written with the `gguf` package, an independent writer),
safetensors files and a sharded index (laid out by hand from the format's
spec), tokenizer.json / encoder.json + vocab.bpe files, texts for the
encoder, chat templates and message lists, and HF config.json files.
Deterministic: rerunning rewrites the same bytes.
Run from the source root: python3 tests/fuzz/make_seeds.py
"""
import json
import os
import shutil
import struct

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")


def out(harness, name, data):
    d = os.path.join(ROOT, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def split2(a, b):
    """Two files in one input: a 2-byte little-endian length, a, b."""
    a = a if isinstance(a, bytes) else a.encode()
    b = b if isinstance(b, bytes) else b.encode()
    return struct.pack("<H", len(a)) + a + b


# ---- GGUF models ------------------------------------------------------------

def byte_level_vocab():
    """GPT-2 byte-level tokens for a few bytes plus merges and specials."""
    def b2u(b):
        bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
        if b in bs:
            return chr(b)
        return chr(256 + sorted(set(range(256)) - set(bs)).index(b))
    toks = [b2u(b) for b in b"abcdehilnorstuw ,!\n"]
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), (b2u(32), "w")]
    toks += [a + b for a, b in merges]
    toks += ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = [1] * (len(toks) - 3) + [3, 3, 3]
    return toks, [a + " " + b for a, b in merges], types


def spm_vocab():
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in (0x0A, 0x20, 0xC3, 0xA9)]
    toks += ["\u2581", "\u2581H", "i", "\u2581t", "h", "e", "r", "\u2581th", "\u2581the", "er", "\u2581there"]
    scores = [0.0, 0.0, 0.0] + [0.0] * 4 + [-float(i) for i in range(len(toks) - 7)]
    types = [2, 3, 3] + [6] * 4 + [1] * (len(toks) - 7)
    return toks, scores, types


def write_model(name, arch, tokenizer, n_embd=8, n_head=2, n_head_kv=1, n_ff=16, n_layer=1, seed=0):
    import gguf
    rng = np.random.default_rng(seed)
    path = os.path.join(ROOT, "model", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    w = gguf.GGUFWriter(path, arch)
    head_dim = n_embd // n_head
    w.add_context_length(16)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    if arch == "gpt2":
        w.add_layer_norm_eps(1e-5)
    else:
        w.add_layer_norm_rms_eps(1e-5)
        w.add_rope_freq_base(10000.0)
    if arch == "gemma3":
        w.add_sliding_window(4)
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if tokenizer == "bpe":
        toks, merges, types = byte_level_vocab()
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("qwen2" if arch == "qwen3" else "gpt-2")
        w.add_token_list(toks)
        w.add_token_types(types)
        w.add_token_merges(merges)
        w.add_eos_token_id(len(toks) - 3)
    else:
        toks, scores, types = spm_vocab()
        w.add_tokenizer_model("llama")
        w.add_token_list(toks)
        w.add_token_scores(scores)
        w.add_token_types(types)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
    n_vocab = len(toks)
    w.add_chat_template("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}")

    def t(nm, *shape, f16=False, one=False):
        a = np.ones(shape, np.float32) if one else rng.standard_normal(shape).astype(np.float32) * 0.2
        w.add_tensor(nm, a.astype(np.float16) if f16 else a)

    qd, kvd = n_head * head_dim, n_head_kv * head_dim
    t("token_embd.weight", n_vocab, n_embd, f16=True)
    t("output_norm.weight", n_embd, one=True)
    if arch == "gpt2":
        t("position_embd.weight", 16, n_embd)
        t("output_norm.bias", n_embd)
    for i in range(n_layer):
        b = "blk.%d." % i
        t(b + "attn_norm.weight", n_embd, one=True)
        if arch == "gpt2":
            t(b + "attn_norm.bias", n_embd)
            t(b + "attn_qkv.weight", qd + 2 * kvd, n_embd, f16=True)
            t(b + "attn_qkv.bias", qd + 2 * kvd)
            t(b + "attn_output.weight", n_embd, qd)
            t(b + "attn_output.bias", n_embd)
            t(b + "ffn_norm.weight", n_embd, one=True)
            t(b + "ffn_norm.bias", n_embd)
            t(b + "ffn_up.weight", n_ff, n_embd)
            t(b + "ffn_up.bias", n_ff)
            t(b + "ffn_down.weight", n_embd, n_ff)
            t(b + "ffn_down.bias", n_embd)
            continue
        t(b + "attn_q.weight", qd, n_embd, f16=True)
        t(b + "attn_k.weight", kvd, n_embd)
        t(b + "attn_v.weight", kvd, n_embd)
        t(b + "attn_output.weight", n_embd, qd)
        if arch in ("qwen3", "gemma3"):
            t(b + "attn_q_norm.weight", head_dim, one=True)
            t(b + "attn_k_norm.weight", head_dim, one=True)
        if arch == "gemma3":
            t(b + "post_attention_norm.weight", n_embd, one=True)
            t(b + "post_ffw_norm.weight", n_embd, one=True)
        t(b + "ffn_norm.weight", n_embd, one=True)
        t(b + "ffn_gate.weight", n_ff, n_embd)
        t(b + "ffn_up.weight", n_ff, n_embd)
        t(b + "ffn_down.weight", n_embd, n_ff)
    if arch == "llama":
        t("output.weight", n_vocab, n_embd)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(path, "rb") as f:
        out("gguf", name, f.read())


def models():
    write_model("llama_spm.gguf", "llama", "spm", seed=1)
    write_model("qwen3_bpe.gguf", "qwen3", "bpe", seed=2)
    write_model("gemma3_spm.gguf", "gemma3", "spm", n_layer=2, seed=3)
    write_model("gpt2_bpe.gguf", "gpt2", "bpe", seed=4)


# ---- safetensors -------------------------------------------------------------

def safetensors(tensors, meta=None):
    """tensors: list of (name, dtype, shape, bytes); laid out in order."""
    hdr, off, data = {}, 0, b""
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dt, shape, raw in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data += raw
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def st_seeds():
    f32 = np.arange(6, dtype=np.float32).tobytes()
    a = safetensors([("w", "F32", [2, 3], f32), ("b", "BF16", [2], b"\x80\x3f\x00\x40"),
                     ("e", "I64", [0], b"")], {"format": "pt"})
    out("safetensors", "small.safetensors", a)
    out("safetensors", "escapes.safetensors",
        safetensors([("\u00e9\\\"t\u4e2d", "F16", [1, 1, 1, 1], b"\x00\x3c"), ("u8", "U8", [3], b"abc")],
                    {"k\n": "v\u00e9"}))
    out("safetensors", "empty.safetensors", safetensors([]))
    idx = json.dumps({"metadata": {"total_size": 28}, "weight_map": {"w": "a.safetensors", "b": "a.safetensors",
                                                                     "e": "a.safetensors"}})
    out("st_index", "one_shard", split2(idx, a))
    idx2 = json.dumps({"weight_map": {"x": "a.safetensors"}})
    out("st_index", "tiny", split2(idx2, safetensors([("x", "F32", [1], b"\x00\x00\x80\x3f")])))


# ---- tokenizers --------------------------------------------------------------

def tok_seeds():
    with open(os.path.join(FIX, "hf_tiny_tokenizer", "tokenizer.json"), "rb") as f:
        out("tokenizer_json", "hf_tiny.json", f.read())
    bl = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120ab": 4},
                    "merges": ["a b", "\u0120 ab"]},
          "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
          "decoder": {"type": "ByteLevel"},
          "added_tokens": [{"id": 5, "content": "<|end|>", "special": True}]}
    out("tokenizer_json", "byte_level.json", json.dumps(bl))
    spm = {"normalizer": {"type": "Sequence", "normalizers": [
               {"type": "Prepend", "prepend": "\u2581"},
               {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
           "pre_tokenizer": None,
           "model": {"type": "BPE", "byte_fallback": True, "fuse_unk": True, "unk_token": "<unk>",
                     "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "\u2581": 4, "h": 5, "i": 6,
                               "\u2581h": 7, "\u2581hi": 8},
                     "merges": [["\u2581", "h"], ["\u2581h", "i"]]},
           "added_tokens": [{"id": 1, "content": "<s>", "special": True}, {"id": 2, "content": "</s>", "special": True}],
           "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}},
                                                                       {"Sequence": {"id": "A"}}],
                              "special_tokens": {"<s>": {"ids": [1]}}},
           "decoder": {"type": "Sequence", "decoders": [{"type": "Strip", "content": " ", "start": 1}]}}
    out("tokenizer_json", "spm.json", json.dumps(spm))
    split = {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                 {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}| ?\\p{L}+|\\s+(?!\\S)|\\s+"},
                  "behavior": "Isolated", "invert": False},
                 {"type": "Digits", "individual_digits": True},
                 {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]},
             "normalizer": {"type": "NFC"},
             "model": {"vocab": {"1": 0, "2": 1, "h": 2, "i": 3, "hi": 4}, "merges": ["h i"]}}
    out("tokenizer_json", "split_digits.json", json.dumps(split))
    enc = {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120ab": 4, "<|endoftext|>": 5}
    out("gpt2_files", "small", split2(json.dumps(enc), "#version: 0.2\na b\n\u0120 ab\n"))
    out("gpt2_files", "empty_key", split2('{"":1,"a":0}', "#version: 0.2\n"))


def encode_seeds():
    texts = ["Hello, world! The quick brown fox jumps over 1234 lazy dogs.\n",
             "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
             "<s>[INST] caf\u00e9 na\u00efve \u00e9t\u00e9 [/INST]</s>",
             "  \t\n\n   spaces   and\ttabs\r\n",
             "\u4f60\u597d\uff0c\u4e16\u754c\u3002 \U0001F600\U0001F44D \u0645\u0631\u062d\u0628\u0627",
             "<start_of_turn>user\nx<end_of_turn>\n<bos><eos><|endoftext|><|eot_id|>"]
    for i, t in enumerate(texts):
        for v in range(5):
            flags = (0x40 if i % 2 else 0) | (0x80 if i % 3 == 1 else 0)
            out("encode", "t%d_v%d" % (i, v), bytes([v | flags]) + t.encode())
    out("encode", "bad_utf8", bytes([0x01]) + b"ok \xff\xfe \xc3 \xe2\x82 \xed\xa0\x80 end")


# ---- jinja -------------------------------------------------------------------

def jinja_seeds():
    d = os.path.join(FIX, "chat_templates")
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".jinja"):
            with open(os.path.join(d, fn), "rb") as f:
                out("jinja_template", fn, f.read())
    feats = ["{% set ns = namespace(n=0) %}{% for m in messages if m.role != 'system' %}{% set ns.n = ns.n + 1 %}"
             "{{ loop.index }}/{{ loop.length }} {{ m.content|trim|upper }}{% if not loop.last %}, {% endif %}"
             "{% endfor %}{{ ns.n }}",
             "{{ messages|tojson(indent=2, sort_keys=True) }}{{ tools|map(attribute='function')|map(attribute='name')|join(',') }}",
             "{% macro r(x, d=0) %}{% if x is mapping %}{% for k, v in x|dictsort %}{{ k }}={{ r(v, d + 1) }}"
             "{% endfor %}{% elif x is iterable and x is not string %}[{% for i in x %}{{ r(i, d + 1) }}{% endfor %}]"
             "{% else %}{{ x }}{% endif %}{% endmacro %}{{ r(messages) }}",
             "{{ '%5.2f|%-4s|%x' % (3.14159, 'ab', 255) }} {{ '{} {}'.format(1, 'b') }} {{ 'a,b,,c'.split(',') }}"
             " {{ 'abcdef'[1:-1:2] }} {{ 'x' * 3 }} {{ 2 ** 10 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ range(5)|sum }}",
             "{%- for m in messages -%}{%- if m.role == 'user' -%}U{%- elif m.role == 'assistant' -%}A"
             "{%- elif m.role == 'tool' -%}T{%- else -%}S{%- endif -%}{%- endfor -%}"
             "{{ raise_exception('bad') if messages|length > 99 }}",
             "{{ (messages|selectattr('role', 'equalto', 'user')|list|last).content|replace('U', 'u')|length }}"
             "{{ messages[0].content.startswith('S') }} {{ 'k' in {'k': 1} }} {{ [3, 1, 2]|sort(reverse=true)|unique|list }}"]
    for i, t in enumerate(feats):
        out("jinja_template", "features%d.jinja" % i, t)
    msgs = [[{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi \u00e9"},
             {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}],
            [{"role": "user", "content": "What is 2+2?"},
             {"role": "assistant", "content": "",
              "tool_calls": [{"id": "abcdefghi", "type": "function",
                              "function": {"name": "calc", "arguments": {"expr": "2+2"}}}]},
             {"role": "tool", "tool_call_id": "abcdefghi", "content": "4"}]]
    tools = [{"type": "function", "function": {"name": "calc", "description": "d",
                                               "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}}}}]
    for ti in range(8):
        for mi, m in enumerate(msgs):
            out("jinja_messages", "t%d_m%d" % (ti, mi), bytes([ti | (0x80 if mi else 0)]) + json.dumps(m).encode())
        out("jinja_messages", "t%d_vars" % ti, bytes([ti]) + json.dumps(
            {"messages": msgs[1], "tools": tools, "enable_thinking": True, "date_string": "1 Jan 2025"}).encode())


# ---- HF config.json ------------------------------------------------------------

def config_seeds():
    for name in ("hf_tiny_llama", "hf_tiny_qwen2", "hf_tiny_qwen3", "hf_tiny_gemma3", "hf_tiny_llama3rope",
                 "hf_tiny_llama_tied"):
        p = os.path.join(FIX, name, "config.json")
        if os.path.exists(p):
            with open(p) as f:
                cfg = json.load(f)
            cfg["vocab_size"] = 260  # the tiny tokenizer's size, so the token list is written too
            out("hf_config", name + ".json", json.dumps(cfg, indent=1))
    out("hf_config", "rope_params.json", json.dumps({
        "architectures": ["Gemma3ForCausalLM"], "hidden_size": 8, "num_hidden_layers": 2, "intermediate_size": 16,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4, "vocab_size": 300, "sliding_window": 4,
        "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
        "bos_token_id": 1, "eos_token_id": [2, 3], "pad_token_id": 0}))


def main():
    if os.path.isdir(ROOT):
        shutil.rmtree(ROOT)
    models()
    st_seeds()
    tok_seeds()
    encode_seeds()
    jinja_seeds()
    config_seeds()
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(ROOT) for f in fs)
    print("seeds: %d files, %d bytes" % (sum(len(fs) for _, _, fs in os.walk(ROOT)), total))


if __name__ == "__main__":
    main()
