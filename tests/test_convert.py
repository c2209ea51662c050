#!/usr/bin/env python3
"""tallow convert (HF safetensors -> GGUF) against independent oracles.

Oracles:
  - models: HF transformers' logits for the tiny random-weight checkpoints in
    tests/fixtures/hf_tiny_<name>/ (tiny_<name>_logits.bin, made by make_hf_tiny.py and
    make_hf_tiny_gemma3.py on a machine with torch). Each checkpoint is converted with the CLI
    (--type f32, f16, q8_0), run through libtallow on the fixture prompt, and every logit is
    compared. Tolerance as tests/test_forward_hf.py: f32 weights max|diff| <= 2e-2 * std(logits)
    (tallow's f16 KV cache; transformers' own f32-vs-f64 noise is ~1e-5) and top-1 equal at every
    position; f16 weights 4e-2 * std, q8_0 weights 0.15 * std (weight rounding, measured noise
    well below these), top-1 equal where transformers' top-1/top-2 margin exceeds 3x the tolerance.
  - layout: the `--type f32` output must equal, tensor by tensor (names, shapes, types, values
    bit for bit), tiny_<name>.gguf, which the `gguf` PyPI package wrote from the same weights with
    llama.cpp's layout (and which llama.cpp itself matches transformers on, see
    tests/fixtures/README.md). Read with the `gguf` package.
  - tokenizers: `--vocab-only` on ../shared/tokenizers/{llama3,qwen3,gemma3,llama2}; tallow's GGUF
    tokenizer (`tallow tokenize -m`) must give the same ids as HF `tokenizers` on tokenizer.json
    for ~300 KB of ../shared/corpora plus tests/fixtures/tokenizer_adversarial.txt (special-token
    parsing on, BOS/EOS as the tokenizer adds them), and tokenizer.chat_template must equal
    tokenizer_config.json's chat_template.
  - vocabulary size: config.json's vocab_size pads the token list ([PAD<id>], UNUSED) or drops added
    tokens past it (Gemma 3's <image_soft_token>); where models/gemma-3-270m-Q4_K_M.gguf (made by
    llama.cpp) is present, the converted Gemma-3 token texts, types and special keys are compared
    with it;
  - BF16 / F16 checkpoints (made here with numpy) convert to exactly the bf16/f16-rounded values;
  - a sharded checkpoint (one tiny model split into two shards + model.safetensors.index.json,
    made here with numpy) must convert to the same bytes as the single file;
  - errors: missing config.json, unknown architecture, truncated shard, missing tensor, bad JSON,
    shape mismatch, missing shard must exit non-zero with a message naming the file/tensor.
Skips (exit 77) with a reason if the tallow binary, libtallow, numpy, gguf or tokenizers are
missing; the tokenizer part is skipped (with a message) when ../shared is absent.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tallow_ctypes import ROOT, Model, load_lib, skip  # noqa: E402

try:
    import numpy as np
    import gguf
except ImportError:
    skip("numpy or gguf not installed (scripts/setup.sh installs them)")

FIX = os.path.join(ROOT, "tests", "fixtures")
TOKDIR = os.path.join(FIX, "hf_tiny_tokenizer")
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))
MODELS = ["llama", "llama_tied", "llama3rope", "qwen2", "qwen3", "gemma3"]
FAILS = []


def check(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    if not ok:
        FAILS.append(msg)


def find_bin():
    b = os.environ.get("TALLOW_BIN")
    if b and os.path.exists(b):
        return b
    build = os.environ.get("TALLOW_BUILD", os.path.join(ROOT, "build"))
    p = os.path.join(build, "tallow")
    return p if os.path.exists(p) else None


BIN = find_bin()
if not BIN:
    skip("tallow binary not found (set TALLOW_BIN or TALLOW_BUILD)")


def convert(src, out, *extra):
    return subprocess.run([BIN, "convert", src, out, "-t", "2"] + list(extra), capture_output=True, text=True,
                          timeout=600)


def gguf_tensors(path):
    r = gguf.GGUFReader(path)
    return r, {t.name: t for t in r.tensors}


# ---- models ------------------------------------------------------------------------------------
def model_tests(lib, tmp):
    for name in MODELS:
        src = os.path.join(FIX, "hf_tiny_" + name)
        jpath = os.path.join(FIX, "tiny_%s.json" % name)
        if not os.path.exists(os.path.join(src, "model.safetensors")) or not os.path.exists(jpath):
            print("note: no hf_tiny_%s checkpoint or tiny_%s.json; skipping it" % (name, name))
            continue
        meta = json.load(open(jpath))
        ref = np.fromfile(os.path.join(FIX, meta["logits_file"]), dtype="<f4").reshape(meta["logits_shape"])
        std = float(ref.std())
        top2 = np.sort(ref, axis=1)[:, -2:]
        margin = top2[:, 1] - top2[:, 0]
        f32_tensors = None
        for typ, rel in (("f32", 2e-2), ("f16", 4e-2), ("q8_0", 0.3)):
            out = os.path.join(tmp, "%s_%s.gguf" % (name, typ))
            p = convert(src, out, "--type", typ, "--tokenizer", TOKDIR)
            check(p.returncode == 0, "convert %s --type %s (rc %d) %s" % (name, typ, p.returncode, p.stderr[-300:]
                                                                           if p.returncode else ""))
            if p.returncode:
                continue
            m = Model(lib, out, n_ctx=64, n_batch=64, n_threads=2)
            got = m.eval_all(meta["prompt_ids"], ref.shape[1])
            m.close()
            err = float(np.abs(got - ref).max())
            tol = rel * std
            sure = margin > 3 * tol
            top_ok = bool((got.argmax(1) == ref.argmax(1))[sure].all()) if typ != "f32" else \
                bool((got.argmax(1) == ref.argmax(1)).all())
            check(err <= tol and top_ok, "%-10s %-4s logits vs transformers: max|diff| %.2e (tol %.2e), top-1 %s" %
                  (name, typ, err, tol, "same" if top_ok else "DIFFERENT"))
            r, ts = gguf_tensors(out)
            ft = r.fields["general.file_type"].parts[-1][0]
            want_ft = {"f32": 0, "f16": 1, "q8_0": 7}[typ]
            check(int(ft) == want_ft, "%s %s general.file_type %d" % (name, typ, int(ft)))
            # norms / 1-d tensors / biases stay f32, matrices take the type (llama.cpp's rule)
            want_t = {"f32": 0, "f16": 1, "q8_0": 8}[typ]
            bad = []
            for n, t in ts.items():
                stays = len(t.shape) < 2 or n.endswith("_norm.weight") or not n.endswith(".weight")
                if int(t.tensor_type) != (0 if stays else want_t):
                    bad.append(n)
            check(not bad, "%s %s tensor types (f32 for norms/1-d, %s for matrices) %s" % (name, typ, typ, bad[:4]))
            if typ == "f32":
                f32_tensors = ts
            else:
                rounding_check(name, typ, ts, f32_tensors)
            if typ == "f32":
                fx = os.path.join(FIX, "tiny_%s.gguf" % name)
                if os.path.exists(fx):
                    compare_with_fixture(name, out, fx)
        if name == "llama":
            chat_and_tokenizer_keys(out)
        if name == "gemma3":
            gemma_norm_check(src, os.path.join(tmp, "gemma3_f32.gguf"))


def rounding_check(name, typ, ts, f32_ts):
    """The gguf package's dequantizer (independent of tallow) must give back the f32 conversion's
    values within the format's rounding: f16 half an ulp (2^-11 relative), q8_0 one step of its
    block scale (max|x| of the 32-value block / 127)."""
    from gguf.quants import dequantize
    worst, bad = 0.0, []
    for n, t in ts.items():
        ref = np.asarray(f32_ts[n].data, dtype=np.float32).reshape(-1)
        got = dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32).reshape(-1)
        if int(t.tensor_type) == 0:
            ok = np.array_equal(got, ref)
            r = 0.0
        elif typ == "f16":
            bound = np.abs(ref) * 2.0 ** -11 * 1.0001 + 6e-8
            r = float((np.abs(got - ref) / bound).max())
            ok = r <= 1.0
        else:
            blocks = ref.reshape(-1, 32)
            step = np.abs(blocks).max(axis=1, keepdims=True) / 127.0 + 1e-12
            r = float((np.abs(got.reshape(-1, 32) - blocks) / step).max())
            ok = r <= 1.0
        worst = max(worst, r)
        if not ok:
            bad.append(n)
    check(not bad, "%s %s: gguf-package dequantization within the format's rounding of the f32 values "
          "(worst %.2f of the bound) %s" % (name, typ, worst, bad[:4]))


def gemma_norm_check(src, out):
    """llama.cpp stores Gemma's RMSNorm weights as 1 + w (HF multiplies by 1 + w)."""
    hdr, data, _ = read_st(os.path.join(src, "model.safetensors"))
    _, ts = gguf_tensors(out)
    pairs = [("output_norm.weight", "model.norm.weight"),
             ("blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"),
             ("blk.0.post_attention_norm.weight", "model.layers.0.post_attention_layernorm.weight"),
             ("blk.0.ffn_norm.weight", "model.layers.0.pre_feedforward_layernorm.weight"),
             ("blk.0.post_ffw_norm.weight", "model.layers.0.post_feedforward_layernorm.weight"),
             ("blk.5.attn_q_norm.weight", "model.layers.5.self_attn.q_norm.weight"),
             ("blk.5.attn_k_norm.weight", "model.layers.5.self_attn.k_norm.weight")]
    ok = all(np.array_equal(np.asarray(ts[g].data), np.frombuffer(data[h], "<f4") + np.float32(1)) for g, h in pairs)
    check(ok and "output.weight" not in ts, "gemma3 norms stored as 1 + w, output tied (no output.weight)")


def compare_with_fixture(name, ours, theirs):
    _, a = gguf_tensors(ours)
    _, b = gguf_tensors(theirs)
    check(set(a) == set(b), "%s tensor names equal tiny_%s.gguf (extra %s, missing %s)" %
          (name, name, sorted(set(a) - set(b)), sorted(set(b) - set(a))))
    bad = []
    for n in set(a) & set(b):
        ta, tb = a[n], b[n]
        if (int(ta.tensor_type) != int(tb.tensor_type) or list(ta.shape) != list(tb.shape) or
                not np.array_equal(np.asarray(ta.data), np.asarray(tb.data))):
            bad.append(n)
    check(not bad, "%s: %d tensors bit-equal to tiny_%s.gguf (gguf package), mismatches %s" %
          (name, len(a), name, sorted(bad)[:5]))


def field_str(r, key):
    f = r.fields.get(key)
    return None if f is None else bytes(f.parts[-1]).decode("utf-8")


def gguf_kvs(path):
    """GGUF v3 metadata as {key: value} straight from the spec (gguf.GGUFReader takes ~30 s on a
    250k-token vocabulary: it builds numpy views for every string). Arrays of strings become lists
    of str, other arrays lists of numbers."""
    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
    with open(path, "rb") as f:
        buf = f.read()
    assert buf[:4] == b"GGUF"
    n_kv = struct.unpack_from("<Q", buf, 16)[0]
    pos = 24

    def rd_str(pos):
        (n,) = struct.unpack_from("<Q", buf, pos)
        return buf[pos + 8:pos + 8 + n].decode("utf-8"), pos + 8 + n

    def rd_val(t, pos):
        if t == 8:
            return rd_str(pos)
        if t == 9:
            et, n = struct.unpack_from("<IQ", buf, pos)
            pos += 12
            if et == 8:
                out = []
                for _ in range(n):
                    v, pos = rd_str(pos)
                    out.append(v)
                return out, pos
            fmt = scalar[et]
            sz = struct.calcsize(fmt)
            return list(np.frombuffer(buf, dtype=fmt, count=n, offset=pos)), pos + n * sz
        fmt = scalar[t]
        return struct.unpack_from(fmt, buf, pos)[0], pos + struct.calcsize(fmt)

    kv = {}
    for _ in range(n_kv):
        k, pos = rd_str(pos)
        (t,) = struct.unpack_from("<I", buf, pos)
        kv[k], pos = rd_val(t, pos + 4)
    return kv


def chat_and_tokenizer_keys(path):
    r, _ = gguf_tensors(path)
    cfg = json.load(open(os.path.join(TOKDIR, "tokenizer_config.json")))
    check(field_str(r, "tokenizer.chat_template") == cfg["chat_template"], "tiny chat template copied")
    f = r.fields
    toks = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode() for i in f["tokenizer.ggml.tokens"].data]
    fx = gguf.GGUFReader(os.path.join(FIX, "tiny_llama.gguf")).fields
    toks_fx = [bytes(fx["tokenizer.ggml.tokens"].parts[i]).decode() for i in fx["tokenizer.ggml.tokens"].data]
    check(toks == toks_fx, "tiny vocabulary equals tiny_llama.gguf's (260 tokens)")
    for k in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"):
        check(int(f[k].parts[-1][0]) == 259, "%s = 259" % k)
    check(field_str(r, "tokenizer.ggml.pre") == "gpt-2", "tiny pre-tokenizer name gpt-2")


# ---- sharded -------------------------------------------------------------------------------------
def read_st(path):
    blob = open(path, "rb").read()
    (hl,) = struct.unpack("<Q", blob[:8])
    hdr = json.loads(blob[8:8 + hl])
    meta = hdr.pop("__metadata__", None)
    data = {k: blob[8 + hl + v["data_offsets"][0]: 8 + hl + v["data_offsets"][1]] for k, v in hdr.items()}
    return hdr, data, meta


def write_st(path, names, hdr, data):
    h, off = {}, 0
    for n in names:
        h[n] = {"dtype": hdr[n]["dtype"], "shape": hdr[n]["shape"], "data_offsets": [off, off + len(data[n])]}
        off += len(data[n])
    hb = json.dumps(h).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb)
        for n in names:
            f.write(data[n])


def make_sharded(src, dst):
    os.makedirs(dst, exist_ok=True)
    shutil.copy(os.path.join(src, "config.json"), dst)
    hdr, data, _ = read_st(os.path.join(src, "model.safetensors"))
    names = sorted(hdr)
    half = len(names) // 2
    parts = {"model-00001-of-00002.safetensors": names[:half], "model-00002-of-00002.safetensors": names[half:]}
    wm = {}
    for fn, ns in parts.items():
        write_st(os.path.join(dst, fn), ns, hdr, data)
        wm.update({n: fn for n in ns})
    with open(os.path.join(dst, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(len(v) for v in data.values())}, "weight_map": wm}, f)
    return hdr, data, parts


def to_bf16_bytes(a):
    """float32 -> bfloat16 bits, round to nearest even (numpy, independent of tallow)."""
    u = a.astype("<f4").view("<u4").astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
    return r.tobytes()


def bf16_to_f32(b):
    return (np.frombuffer(b, "<u2").astype(np.uint32) << 16).view("<f4")


def source_dtype_tests(tmp):
    """BF16 and F16 checkpoints (made here from the f32 ones with numpy): `--type f32` must give
    exactly the fixture's values rounded through that dtype; `--type bf16` from the f32
    checkpoint must equal numpy's bf16 rounding."""
    for name in ("llama", "qwen2"):
        src = os.path.join(FIX, "hf_tiny_" + name)
        fx = os.path.join(FIX, "tiny_%s.gguf" % name)
        if not os.path.exists(os.path.join(src, "model.safetensors")) or not os.path.exists(fx):
            continue
        _, ref = gguf_tensors(fx)
        hdr, data, _ = read_st(os.path.join(src, "model.safetensors"))
        for dt in ("BF16", "F16"):
            d = os.path.join(tmp, "%s_%s" % (name, dt))
            os.makedirs(d, exist_ok=True)
            shutil.copy(os.path.join(src, "config.json"), d)
            h2, d2 = {}, {}
            for n in hdr:
                a = np.frombuffer(data[n], "<f4")
                d2[n] = to_bf16_bytes(a) if dt == "BF16" else a.astype("<f2").tobytes()
                h2[n] = {"dtype": dt, "shape": hdr[n]["shape"]}
            write_st(os.path.join(d, "model.safetensors"), sorted(hdr), h2, d2)
            out = os.path.join(tmp, "%s_%s.gguf" % (name, dt))
            p = convert(d, out, "--type", "f32", "--tokenizer", TOKDIR)
            ok = p.returncode == 0
            if ok:
                _, got = gguf_tensors(out)
                for n, t in ref.items():
                    v = np.asarray(t.data, dtype=np.float32)
                    want = bf16_to_f32(to_bf16_bytes(v)) if dt == "BF16" else v.astype("<f2").astype("<f4")
                    ok = ok and np.array_equal(np.asarray(got[n].data, dtype=np.float32).reshape(-1), want.reshape(-1))
            check(ok, "%s %s checkpoint -> f32 GGUF equals the fixture rounded through %s %s" %
                  (name, dt, dt, p.stderr[-200:] if p.returncode else ""))
        out = os.path.join(tmp, "%s_to_bf16.gguf" % name)
        p = convert(src, out, "--type", "bf16", "--tokenizer", TOKDIR)
        ok = p.returncode == 0
        if ok:
            _, got = gguf_tensors(out)
            for n, t in ref.items():
                v = np.asarray(t.data, dtype=np.float32).reshape(-1)
                g = got[n]
                if int(g.tensor_type) == 30:  # BF16
                    ok = ok and np.asarray(g.data).tobytes() == to_bf16_bytes(v)
                else:
                    ok = ok and int(g.tensor_type) == 0 and (len(g.shape) == 1 or n.endswith("_norm.weight"))
        check(ok, "%s --type bf16 matrices equal numpy's bf16 rounding, norms f32" % name)


def vocab_padding_test(tmp):
    """config.json's vocab_size larger than the tokenizer (Qwen's 151936 vs 151669 tokens): the
    token list is padded with [PAD<id>] UNUSED entries, as llama.cpp does."""
    d = os.path.join(SHARED, "tokenizers", "qwen3")
    if not os.path.exists(os.path.join(d, "tokenizer.json")):
        return
    t = os.path.join(tmp, "qwen3_pad")
    os.makedirs(t, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(d, f), t)
    cfg = json.load(open(os.path.join(FIX, "hf_tiny_qwen3", "config.json")))
    cfg["vocab_size"] = 151936
    json.dump(cfg, open(os.path.join(t, "config.json"), "w"))
    out = os.path.join(tmp, "qwen3_pad.gguf")
    p = convert(t, out, "--vocab-only")
    ok = p.returncode == 0
    if ok:
        kv = gguf_kvs(out)
        toks, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
        ok = len(toks) == 151936 and len(types) == 151936 and toks[-1] == "[PAD151935]" and types[-1] == 5 and \
            types[151668] != 5 and kv["qwen3.block_count"] == 2 and kv["general.architecture"] == "qwen3"
    check(ok, "vocab padded to config.json's vocab_size with [PAD<id>] UNUSED tokens, hparams written %s" %
          (p.stderr[-200:] if p.returncode else ""))

    # Gemma 3: tokenizer.json has 262145 entries (<image_soft_token> = 262144), config.json 262144;
    # llama.cpp drops the extra one. Its own Gemma-3 GGUF (models/, from scripts/fetch_model.sh)
    # is the oracle for the token texts and types where present.
    d = os.path.join(SHARED, "tokenizers", "gemma3")
    if not os.path.exists(os.path.join(d, "tokenizer.json")):
        return
    t = os.path.join(tmp, "gemma3_cfg")
    os.makedirs(t, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(d, f), t)
    cfg = json.load(open(os.path.join(FIX, "hf_tiny_gemma3", "config.json")))
    cfg["vocab_size"] = 262144
    json.dump(cfg, open(os.path.join(t, "config.json"), "w"))
    out = os.path.join(tmp, "gemma3_cfg.gguf")
    p = convert(t, out, "--vocab-only")
    ok = p.returncode == 0
    kv = gguf_kvs(out) if ok else {}
    toks = kv.get("tokenizer.ggml.tokens", [])
    check(ok and len(toks) == 262144 and "<image_soft_token>" not in toks[-8:],
          "gemma3 added token past config.json's vocab_size dropped (%d tokens) %s" %
          (len(toks), p.stderr[-200:] if p.returncode else ""))
    real = os.path.join(ROOT, "models", "gemma-3-270m-Q4_K_M.gguf")
    if not ok or not os.path.exists(real):
        print("note: models/gemma-3-270m-Q4_K_M.gguf absent; llama.cpp vocabulary comparison skipped")
        return
    rk = gguf_kvs(real)
    special = {a["id"] for a in json.load(open(os.path.join(d, "tokenizer.json")))["added_tokens"] if a["special"]}
    rt, ty, rty = rk["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"], rk["tokenizer.ggml.token_type"]
    text_diff = [i for i in range(len(rt)) if i >= len(toks) or toks[i] != rt[i]]
    type_diff = [i for i in range(len(rt)) if i < len(ty) and ty[i] != rty[i]]
    # tokenizer.json marks a few pieces special that the SentencePiece model calls user-defined
    check(not text_diff and len(toks) == len(rt) and all(i in special and ty[i] == 3 for i in type_diff),
          "gemma3 token texts equal llama.cpp's Gemma-3 GGUF (%d tokens, %d text diffs); types equal but for %d "
          "tokens tokenizer.json marks special %s" % (len(rt), len(text_diff), len(type_diff),
                                                     [toks[i] for i in type_diff[:4]]))
    for k in ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.add_space_prefix",
              "tokenizer.ggml.bos_token_id", "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
              "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"):
        check(kv.get(k) == rk.get(k), "gemma3 %s = %r (llama.cpp's file: %r)" % (k, kv.get(k), rk.get(k)))


def shard_and_error_tests(tmp):
    src = os.path.join(FIX, "hf_tiny_llama")
    sh = os.path.join(tmp, "sharded")
    hdr, data, parts = make_sharded(src, sh)
    a, b = os.path.join(tmp, "single.gguf"), os.path.join(tmp, "sharded.gguf")
    p1 = convert(src, a, "--type", "f32", "--tokenizer", TOKDIR)
    p2 = convert(sh, b, "--type", "f32", "--tokenizer", TOKDIR)
    same = p1.returncode == 0 and p2.returncode == 0
    if same:
        _, ta = gguf_tensors(a)
        _, tb = gguf_tensors(b)
        same = set(ta) == set(tb) and all(np.array_equal(np.asarray(ta[n].data), np.asarray(tb[n].data)) for n in ta)
    check(same, "sharded checkpoint (2 shards + index) converts to the same tensors as the single file %s" %
          (p2.stderr[-300:] if p2.returncode else ""))

    def expect_fail(label, d, *words):
        out = os.path.join(tmp, "err.gguf")
        p = convert(d, out, "--type", "f32", "--tokenizer", TOKDIR)
        msg = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
        ok = p.returncode != 0 and all(w in msg for w in words) and not os.path.exists(out) and \
            not os.path.exists(out + ".tmp")
        check(ok, "error %-22s rc %d: %s" % (label, p.returncode, msg))

    def clone(name):
        d = os.path.join(tmp, name)
        shutil.copytree(sh, d)
        return d

    d = clone("no_config")
    os.remove(os.path.join(d, "config.json"))
    expect_fail("missing config.json", d, "config.json")

    d = clone("bad_arch")
    c = json.load(open(os.path.join(d, "config.json")))
    c["architectures"] = ["FalconForCausalLM"]
    json.dump(c, open(os.path.join(d, "config.json"), "w"))
    expect_fail("unknown architecture", d, "FalconForCausalLM", "not supported")

    d = clone("bad_json")
    open(os.path.join(d, "config.json"), "w").write('{"architectures": ["LlamaForCausalLM"], ')
    expect_fail("bad JSON", d, "config.json", "JSON")

    d = clone("truncated")
    shard = os.path.join(d, "model-00002-of-00002.safetensors")
    sz = os.path.getsize(shard)
    with open(shard, "r+b") as f:
        f.truncate(sz - 100)  # inside the last tensor (model.norm.weight, 256 bytes)
    last = parts["model-00002-of-00002.safetensors"][-1]  # write_st lays tensors out in list order
    expect_fail("truncated shard", d, "model-00002-of-00002.safetensors", last, "truncated")

    d = clone("missing_tensor")
    fn = "model-00002-of-00002.safetensors"
    keep = [n for n in parts[fn] if n != "model.norm.weight"]
    assert len(keep) < len(parts[fn])
    write_st(os.path.join(d, fn), keep, hdr, data)
    idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    del idx["weight_map"]["model.norm.weight"]
    json.dump(idx, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    expect_fail("missing tensor", d, "model.norm.weight", "missing")

    d = clone("missing_shard")
    os.remove(os.path.join(d, "model-00001-of-00002.safetensors"))
    expect_fail("missing shard", d, "model-00001-of-00002.safetensors", "missing")

    d = clone("bad_shape")
    c = json.load(open(os.path.join(d, "config.json")))
    c["intermediate_size"] = 96
    json.dump(c, open(os.path.join(d, "config.json"), "w"))
    expect_fail("shape mismatch", d, "mlp", "shape")

    out = os.path.join(tmp, "err.gguf")
    p = convert(src, out, "--type", "f32")  # the tiny checkpoints carry no tokenizer.json
    check(p.returncode != 0 and "tokenizer.json" in p.stderr, "error missing tokenizer.json: %s" %
          p.stderr.strip()[-200:])


# ---- tokenizers ----------------------------------------------------------------------------------
def corpus_sample():
    text = []
    for fn, start in (("austen.txt", 200_000), ("kjv.txt", 500_000), ("mobydick.txt", 100_000)):
        with open(os.path.join(SHARED, "corpora", fn), encoding="utf-8") as f:
            t = f.read()
        text.append(t[start:start + 100_000])
    lines = []
    for t in text:  # ~2 KB chunks cut at line ends
        cur = []
        n = 0
        for line in t.splitlines(keepends=True):
            cur.append(line)
            n += len(line)
            if n >= 2048:
                lines.append("".join(cur))
                cur, n = [], 0
        if cur:
            lines.append("".join(cur))
    with open(os.path.join(FIX, "tokenizer_adversarial.txt"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            lines.append(json.loads(line))
    return lines


def tokenizer_tests(tmp):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        print("note: HF tokenizers not installed; tokenizer parity skipped")
        FAILS.append("tokenizers package missing")
        return
    if not os.path.isdir(os.path.join(SHARED, "tokenizers")) or not os.path.isdir(os.path.join(SHARED, "corpora")):
        print("note: ../shared/tokenizers or ../shared/corpora absent; tokenizer parity skipped")
        return
    lines = corpus_sample()
    nbytes = sum(len(x.encode()) for x in lines)
    inp = os.path.join(tmp, "lines.jsonl")
    with open(inp, "w", encoding="utf-8") as f:
        for x in lines:
            f.write(json.dumps(x) + "\n")
    for name in ("llama3", "qwen3", "gemma3", "llama2"):
        d = os.path.join(SHARED, "tokenizers", name)
        if not os.path.exists(os.path.join(d, "tokenizer.json")):
            print("note: no %s tokenizer; skipped" % name)
            continue
        out = os.path.join(tmp, "tok_%s.gguf" % name)
        p = convert(d, out, "--vocab-only")
        check(p.returncode == 0, "convert --vocab-only %s %s" % (name, p.stderr[-300:] if p.returncode else ""))
        if p.returncode:
            continue
        tk = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        ref = [e.ids for e in tk.encode_batch(lines, add_special_tokens=True)]
        q = subprocess.run([BIN, "tokenize", "-m", out, "--jsonl", "-f", inp], capture_output=True, timeout=600)
        if q.returncode:
            check(False, "tallow tokenize -m %s: %s" % (out, q.stderr.decode()[-300:]))
            continue
        ours = [json.loads(l) for l in q.stdout.decode("utf-8").split("\n") if l]
        bad = [i for i in range(len(lines)) if i >= len(ours) or ours[i] != ref[i]]
        check(len(ours) == len(ref) and not bad,
              "%-7s converted GGUF tokenizer == HF tokenizer.json on %d strings (%d bytes): %d mismatches%s" %
              (name, len(lines), nbytes, len(bad), " first %r" % lines[bad[0]][:60] if bad else ""))
        cfg = json.load(open(os.path.join(d, "tokenizer_config.json")))
        want = cfg.get("chat_template")
        got = gguf_kvs(out).get("tokenizer.chat_template")
        check(got == want, "%-7s tokenizer.chat_template equals tokenizer_config.json's (%s chars)" %
              (name, len(want) if want else None))


def main():
    lib = load_lib()
    tmp = tempfile.mkdtemp(prefix="tallow_convert_")
    try:
        for part in (lambda: model_tests(lib, tmp), lambda: source_dtype_tests(tmp),
                     lambda: shard_and_error_tests(tmp), lambda: tokenizer_tests(tmp),
                     lambda: vocab_padding_test(tmp) if os.path.isdir(os.path.join(SHARED, "tokenizers")) else None):
            t0 = time.time()
            part()
            print("  (%.1f s)" % (time.time() - t0), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILS:
        print("FAILED: %d checks" % len(FAILS))
        for f in FAILS:
            print("  " + f)
        sys.exit(1)
    print("all convert checks passed")


if __name__ == "__main__":
    main()
