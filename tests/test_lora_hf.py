"""LoRA adapters against HF transformers + PEFT, and llama.cpp's GGUF adapter converter.

tests/fixtures/make_lora_ref.py made PEFT adapters (random non-zero A and B) for the tiny
random-weight llama, qwen3 and gemma3 models (ranks 1, 8, 64; attention-only, MLP-only, all seven
projections; rsLoRA; rank_pattern / alpha_pattern), saved PEFT's float32 logits for every position
of a fixed prompt, also with several adapters active at once under user scales, and converted some
of the directories with llama.cpp's convert_lora_to_gguf.py (f32, f16, q8_0 tensors).

Checked here, for every case:
  * runtime: the base model + the adapter attached to the session (PEFT directory, and the GGUF
    made by llama.cpp's converter) gives PEFT's logits, in one prefill, in chunks and token by token;
  * merge: `tl_lora_merge` (f32) gives a model whose logits equal PEFT's too, and the merged model
    equals the runtime application;
  * bad input: an adapter for another model, a missing lora_b, a wrong rank, a non-adapter GGUF,
    a DoRA config: each an error naming the tensor or key, and the model is unchanged.

Tolerance: as test_forward_hf.py (the engine keeps its KV cache in f16 and rounds the query to
f16 for QK, so logits carry a few 1e-3 of their spread through 2-6 layers): max |diff| <= 2e-2 *
std(logits) and the same argmax at every position. Adapters from llama.cpp's converter in f16 /
q8_0 are rounded once more (q8_0: 8 bits per value, about 4e-3 relative per A/B entry), so those
get 4e-2 * std. The converter ignores use_rslora (it writes lora_alpha as is), so the rsLoRA qwen3
GGUF runs at user scale sqrt(r), which is what turns alpha / r into PEFT's alpha / sqrt(r)."""
import ctypes
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tallow_ctypes import ROOT, Model, load_lib, skip  # noqa: E402

try:
    import numpy as np
except ImportError:
    skip("numpy not installed (scripts/setup.sh installs it)")

FIX = os.path.join(ROOT, "tests", "fixtures")
REF = os.path.join(FIX, "lora_ref.json")
if not os.path.exists(REF):
    skip("no tests/fixtures/lora_ref.json (make_lora_ref.py makes it)")
BIN = os.environ.get("TALLOW_BIN") or os.path.join(os.environ.get("TALLOW_BUILD", os.path.join(ROOT, "build")),
                                                   "tallow")
if not os.path.exists(BIN):
    skip("tallow binary not found (set TALLOW_BIN or TALLOW_BUILD)")

lib = load_lib()


class LoraUse(ctypes.Structure):
    _fields_ = [("lora", ctypes.c_void_p), ("scale", ctypes.c_float)]


lib.tl_lora_load.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
lib.tl_lora_free.argtypes = [ctypes.c_void_p]
lib.tl_lora_merge.argtypes = [ctypes.c_void_p, ctypes.POINTER(LoraUse), ctypes.c_int32, ctypes.c_char_p,
                              ctypes.c_char_p, ctypes.c_int32]
HAVE_RUNTIME = hasattr(lib, "tl_session_set_lora")
if HAVE_RUNTIME:
    lib.tl_session_set_lora.argtypes = [ctypes.c_void_p, ctypes.POINTER(LoraUse), ctypes.c_int32]

passed = failed = 0


def check(ok, msg):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + msg, flush=True)
    passed += bool(ok)
    failed += not ok


def err():
    return lib.tl_last_error().decode(errors="replace")


def load_lora(model, path):
    p = ctypes.c_void_p()
    st = lib.tl_lora_load(model.m, path.encode(), ctypes.byref(p))
    return (p, None) if st == 0 else (None, err())


def uses_array(uses):
    arr = (LoraUse * max(1, len(uses)))()
    for i, (p, s) in enumerate(uses):
        arr[i].lora = p
        arr[i].scale = s
    return arr


def close_to(got, ref, rel):
    e = float(np.abs(got - ref).max())
    tol = rel * float(ref.std())
    return e <= tol and bool((got.argmax(1) == ref.argmax(1)).all()), e, tol


meta = json.load(open(REF))
prompt = meta["prompt_ids"]
tmp = tempfile.mkdtemp(prefix="tallow_lora_")


def base_gguf(base):
    p = os.path.join(FIX, "tiny_%s.gguf" % base)
    if os.path.exists(p):
        return p
    out = os.path.join(tmp, "tiny_%s.gguf" % base)  # gemma3 ships as an HF checkpoint only
    if not os.path.exists(out):
        r = subprocess.run([BIN, "convert", os.path.join(FIX, "hf_tiny_" + base), out, "--type", "f32",
                            "--tokenizer", os.path.join(FIX, "hf_tiny_tokenizer"), "-t", "2"],
                           capture_output=True, text=True, timeout=600)
        if r.returncode:
            raise RuntimeError("convert %s: %s" % (base, r.stderr[-400:]))
    return out


def ref_logits(entry):
    return np.fromfile(os.path.join(FIX, entry["logits_file"]), dtype="<f4").reshape(entry["logits_shape"])


def run_case(label, base, adapters, ref, rel):
    """adapters: [(path, user scale)]; runtime (if built) and merged logits vs ref."""
    gg = base_gguf(base)
    n_vocab = ref.shape[1]
    m = Model(lib, gg, n_ctx=64, n_batch=64)
    loras = []
    for path, sc in adapters:
        p, e = load_lora(m, path)
        check(p is not None, "%s: load %s %s" % (label, os.path.basename(path), e or ""))
        if p is None:
            m.close()
            return
        loras.append((p, sc))
    arr = uses_array(loras)
    base_before = m.eval_all(prompt, n_vocab)
    m.rewind(0)
    runtime = None
    if HAVE_RUNTIME:
        for n_batch in (64, 5, 1):
            mb = Model(lib, gg, n_ctx=64, n_batch=n_batch)
            st = lib.tl_session_set_lora(mb.s, arr, len(loras))
            check(st == 0, "%s: attach to session %s" % (label, "" if st == 0 else err()))
            got = mb.eval_all(prompt, n_vocab)
            mb.close()
            ok, e, tol = close_to(got, ref, rel)
            check(ok, "%s: runtime n_batch=%d max|diff| %.2e (tol %.2e)" % (label, n_batch, e, tol))
            if n_batch == 64:
                runtime = got
    merged = os.path.join(tmp, label + "_merged.gguf")
    st = lib.tl_lora_merge(m.m, arr, len(loras), merged.encode(), b"f32", 2)
    check(st == 0, "%s: merge %s" % (label, "" if st == 0 else err()))
    base_after = m.eval_all(prompt, n_vocab)
    check(np.array_equal(base_before, base_after), "%s: base model unchanged by loading and merging" % label)
    for p, _ in loras:
        lib.tl_lora_free(p)
    m.close()
    if st:
        return
    mm = Model(lib, merged, n_ctx=64, n_batch=64)
    got = mm.eval_all(prompt, n_vocab)
    mm.close()
    ok, e, tol = close_to(got, ref, rel)
    check(ok, "%s: merged f32 model vs PEFT max|diff| %.2e (tol %.2e)" % (label, e, tol))
    if runtime is not None:
        d = float(np.abs(got - runtime).max())
        check(d <= 2e-3 * float(ref.std()), "%s: merged vs runtime max|diff| %.2e" % (label, d))


for name, c in meta["cases"].items():
    run_case("peft " + name, c["base"], [(os.path.join(FIX, c["adapter_dir"]), 1.0)], ref_logits(c), 2e-2)
for name, mx in meta["mixes"].items():
    run_case("peft " + name, mx["base"], [(os.path.join(FIX, "lora_" + u), s) for u, s in mx["uses"]],
             ref_logits(mx), 2e-2)
for name, g in meta.get("gguf", {}).items():
    if name == "converter":
        continue
    c = meta["cases"][name]
    scale = math.sqrt(c["r"]) if c.get("rslora") else 1.0
    rel = 2e-2 if g["outtype"].startswith("f32") else 4e-2
    run_case("gguf %s (%s)" % (name, g["outtype"]), c["base"], [(os.path.join(FIX, g["file"]), scale)],
             ref_logits(c), rel)


# ---- bad input: errors name what is wrong; the model keeps working ------------------------------
def bad_cases():
    llama = Model(lib, base_gguf("llama"), n_ctx=64, n_batch=64)
    qwen = Model(lib, base_gguf("qwen3"), n_ctx=64, n_batch=64)
    n_vocab = 260
    before = llama.eval_all(prompt, n_vocab)
    llama.rewind(0)
    p, e = load_lora(qwen, os.path.join(FIX, "lora_llama_r8.gguf"))
    check(p is None and "architecture 'llama'" in (e or ""), "llama GGUF adapter on qwen3 refused: %s" % e)
    p, e = load_lora(qwen, os.path.join(FIX, "lora_llama_r8"))
    check(p is None and "blk.0" in (e or "") and "lora_A" in (e or ""), "llama PEFT adapter on qwen3 refused: %s" % e)
    p, e = load_lora(llama, base_gguf("llama"))
    check(p is None and "not an adapter" in (e or ""), "a model GGUF is not an adapter: %s" % e)
    p, e = load_lora(llama, os.path.join(tmp, "nope"))
    check(p is None and "nope" in (e or ""), "missing path: %s" % e)
    # PEFT directories edited one way each
    src = os.path.join(FIX, "lora_llama_r8")
    st_path = os.path.join(src, "adapter_model.safetensors")
    blob = open(st_path, "rb").read()
    n = int.from_bytes(blob[:8], "little")
    hdr = json.loads(blob[8:8 + n])

    def variant(tag, cfg_edit=None, drop=None, reshape=None):
        d = os.path.join(tmp, "bad_" + tag)
        os.makedirs(d, exist_ok=True)
        cfg = json.load(open(os.path.join(src, "adapter_config.json")))
        if cfg_edit:
            cfg_edit(cfg)
        json.dump(cfg, open(os.path.join(d, "adapter_config.json"), "w"))
        h = {k: dict(v) for k, v in hdr.items() if k != "__metadata__"}
        datas, off, order = [], 0, sorted(h)
        newh = {}
        for k in order:
            if drop and drop in k:
                continue
            a, b = h[k]["data_offsets"]
            raw = blob[8 + n + a: 8 + n + b]
            shape = list(h[k]["shape"])
            if reshape and reshape in k:
                shape = [shape[0] * 2, shape[1] // 2]
            newh[k] = {"dtype": h[k]["dtype"], "shape": shape, "data_offsets": [off, off + len(raw)]}
            datas.append(raw)
            off += len(raw)
        hj = json.dumps(newh).encode()
        hj += b" " * ((8 - len(hj) % 8) % 8)
        with open(os.path.join(d, "adapter_model.safetensors"), "wb") as f:
            f.write(len(hj).to_bytes(8, "little") + hj + b"".join(datas))
        return d

    cases = [
        ("dora", dict(cfg_edit=lambda c: c.update(use_dora=True)), "DoRA"),
        ("rank", dict(cfg_edit=lambda c: c.update(r=4)), "rank 8"),
        ("targets", dict(cfg_edit=lambda c: c.update(target_modules=["q_proj"])), "not in target_modules"),
        ("no_b", dict(drop="layers.1.mlp.up_proj.lora_B"), "layers.1.mlp.up_proj.lora_A.weight' has no"),
        ("shape", dict(reshape="layers.0.self_attn.v_proj.lora_A"), "v_proj"),
    ]
    for tag, kw, want in cases:
        p, e = load_lora(llama, variant(tag, **kw))
        check(p is None and want in (e or ""), "bad PEFT adapter (%s) refused: %s" % (tag, e))
        if p is not None:
            lib.tl_lora_free(p)
    after = llama.eval_all(prompt, n_vocab)
    check(np.array_equal(before, after), "base model unchanged after the refused adapters")
    llama.close()
    qwen.close()


bad_cases()
shutil.rmtree(tmp, ignore_errors=True)
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
