"""The real model (SmolLM2-135M-Instruct Q4_1) against llama.cpp.

tests/fixtures/make_smollm2_ref.py ran llama.cpp (CPU, 1 thread, f16 KV
cache, greedy) on five prompts and stored its prompt tokenization, its
32-token greedy continuation, the top-40 logits at the last prompt position
and the next four positions, and the full logit vector of prompt 0.

Why the logit tolerances are what they are: both engines quantize every
activation vector to 8 bits (Q8_1) before each Q4_1 matmul. Any difference
in float summation order, however small, flips a few of those roundings,
and each flip moves an activation by 1/127 of its block's range; through 30
layers this gives logit differences of a few tenths. The fixture measures
the same effect inside llama.cpp (llamacpp_self_consistency): switching only
its KV cache from f16 to f32, or feeding the prompt token by token instead
of as one batch, moves its own logits by up to ~0.7-1.4 and changes its
greedy continuation on every prompt within 3-16 tokens. So:
  * prompt tokens must equal llama.cpp's exactly (no numerics involved);
  * teacher-forced on llama.cpp's continuation, our argmax must equal its
    token at every position, except at near-ties: where we disagree, the
    two tokens' logits must be within NEAR_TIE of each other in our output;
  * at the stored positions our top-40 logits must be within MAX_TOL of
    llama.cpp's, rms <= RMS_TOL = 0.7 (its batch-vs-token-by-token change alone
    reaches 0.70 over the full vocabulary, its f16->f32 KV change 0.2-0.9
    on the top-40);
  * the free-running greedy text must equal llama.cpp's up to the first
    near-tie (reported).
The smooth path without 8-bit activations (f32 weights) is compared much
more tightly against transformers in test_forward_hf.py."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tallow_ctypes import ROOT, Model, load_lib, skip  # noqa: E402

try:
    import numpy as np
except ImportError:
    skip("numpy not installed")
from llamacpp_ref import Checker, compare_prompt  # noqa: E402

MAX_TOL, RMS_TOL, NEAR_TIE = 1.0, 0.7, 0.5
fx = os.path.join(ROOT, "tests", "fixtures")
ref = json.load(open(os.path.join(fx, "smollm2_ref.json")))
model_path = os.path.join(ROOT, "models", ref["model_file"])
if not os.path.exists(model_path):
    skip(f"{model_path} absent (scripts/fetch_model.sh fetches it)")

lib = load_lib()
nv = ref["n_vocab"]
m = Model(lib, model_path, n_ctx=512, n_batch=512, n_threads=2)
check = Checker()
for p in ref["prompts"]:
    compare_prompt(m, p, nv, check, MAX_TOL, RMS_TOL, NEAR_TIE)

full = np.fromfile(os.path.join(fx, ref["full_logits_file"]["file"]), dtype="<f4")
m.rewind(0)
got = m.eval_last(ref["prompts"][0]["prompt_ids"], nv)
err = float(np.abs(got - full).max())
rms = float(np.sqrt(((got - full) ** 2).mean()))
check(err <= MAX_TOL and rms <= RMS_TOL and int(got.argmax()) == int(full.argmax()),
      f"prompt 0, all {nv} logits: max |diff| {err:.3f}, rms {rms:.4f}, same argmax")
m.close()
sys.exit(check.finish())
