"""Model forward vs HF transformers, per architecture.

tests/fixtures/make_hf_tiny.py built tiny random-weight llama / llama
(tied embeddings) / llama (Llama-3 RoPE scaling) / qwen2 / qwen3 models with
transformers, saved transformers' float32 logits for every position of a
fixed prompt, and converted the weights to GGUF with the gguf package (the
llama Q/K row permutation included). Here the engine loads each GGUF and
must reproduce those logits.

Tolerance: the engine keeps its KV cache in f16 and rounds the query to f16
for the QK dot (as llama.cpp's CPU path does), so each attention score
carries ~2^-11 relative error; through 2 layers that gives logit errors of a
few 1e-3 of the logit scale. We allow max |diff| <= 2e-2 * std(logits) and
require the same argmax at every position."""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tallow_ctypes import ROOT, Model, load_lib, skip  # noqa: E402

try:
    import numpy as np
except ImportError:
    skip("numpy not installed (scripts/setup.sh installs it)")

lib = load_lib()
fixtures = sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "tiny_*.json")))
if not fixtures:
    skip("no tests/fixtures/tiny_*.json")
passed = failed = 0
for fj in fixtures:
    meta = json.load(open(fj))
    name = meta["name"]
    gg = fj[:-5] + ".gguf"
    if not os.path.exists(gg):
        # fixtures made only as HF checkpoints (tiny_gemma3) are checked through
        # `tallow convert` in test_convert.py; the GGUF-writer ones must exist
        hf_dir = os.path.join(ROOT, "tests", "fixtures", "hf_tiny_" + name)
        if os.path.isdir(hf_dir):
            print(f"{name:16s} no {os.path.basename(gg)}: HF-only fixture, tested by test_convert.py")
            continue
        print(f"{name:16s} MISSING {gg}")
        failed += 1
        continue
    ref = np.fromfile(os.path.join(os.path.dirname(fj), meta["logits_file"]), dtype="<f4")
    n_tok, n_vocab = meta["logits_shape"]
    ref = ref.reshape(n_tok, n_vocab)
    for n_batch in (512, 5, 1):  # one batch, chunked prefill, token-by-token decode
        m = Model(lib, gg, n_ctx=64, n_batch=n_batch)
        got = m.eval_all(meta["prompt_ids"], n_vocab)
        m.close()
        err = float(np.abs(got - ref).max())
        tol = 2e-2 * float(ref.std())
        top_ok = bool((got.argmax(1) == ref.argmax(1)).all())
        ok = err <= tol and top_ok
        print(f"{name:16s} n_batch={n_batch:3d} max|diff|={err:.2e} (tol {tol:.2e}) top1 {'same' if top_ok else 'DIFFERENT'}")
        passed += ok
        failed += not ok
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
