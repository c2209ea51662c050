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
    llama.cpp's, rms <= RMS_TOL (its batch-vs-token-by-token change alone
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

MAX_TOL, RMS_TOL, NEAR_TIE = 1.0, 0.5, 0.5
fx = os.path.join(ROOT, "tests", "fixtures")
ref = json.load(open(os.path.join(fx, "smollm2_ref.json")))
model_path = os.path.join(ROOT, "models", ref["model_file"])
if not os.path.exists(model_path):
    skip(f"{model_path} absent (scripts/fetch_model.sh fetches it)")

lib = load_lib()
nv = ref["n_vocab"]
m = Model(lib, model_path, n_ctx=512, n_batch=512, n_threads=2)
passed = failed = 0


def check(cond, what):
    global passed, failed
    passed += bool(cond)
    failed += not cond
    print(("ok   " if cond else "FAIL ") + what)


for p in ref["prompts"]:
    name, pids, gids = p["name"], p["prompt_ids"], p["gen_ids"]
    ids = m.tokenize(p["text"], add_special=True, parse_special=True)
    check(ids == pids, f"{name}: prompt tokens equal llama.cpp's ({len(ids)} tokens)")

    # teacher forcing: logits at the last prompt position and after each llama.cpp token
    m.rewind(0)
    seq = pids + gids[:-1]
    lg = m.eval_all(seq, nv)[len(pids) - 1:]
    agree, ties, bad = 0, [], []
    for i, want in enumerate(gids):
        got = int(lg[i].argmax())
        gap = float(lg[i][got] - lg[i][want])
        if got == want:
            agree += 1
        elif p["gen_margins"][i] <= NEAR_TIE and gap <= NEAR_TIE:
            ties.append(i)
        else:
            bad.append((i, got, want, round(gap, 3), round(p["gen_margins"][i], 3)))
    check(not bad, f"{name}: teacher-forced argmax equals llama.cpp's at {agree}/{len(gids)} positions, "
          f"near-ties at {ties}, real disagreements {bad}")

    stats = []
    for i, top in enumerate(p["topk"]):
        d = np.array([float(lg[i][t]) - lv for t, lv in top])
        stats.append((float(np.abs(d).max()), float(np.sqrt((d ** 2).mean()))))
    worst = max(s[0] for s in stats)
    rms = max(s[1] for s in stats)
    check(worst <= MAX_TOL and rms <= RMS_TOL,
          f"{name}: top-40 logits at {len(stats)} positions: max |diff| {worst:.3f} (<= {MAX_TOL}), "
          f"max rms {rms:.3f} (<= {RMS_TOL}); llama.cpp vs itself on top-40, f16->f32 KV: "
          f"{', '.join(f'{x:.2f}' for x in p['llamacpp_self_consistency']['kv_f16_vs_f32_max_abs_diff_on_top40'])}")

    # free-running greedy must follow llama.cpp's text up to the first near-tie
    m.rewind(0)
    logits = m.eval_last(pids, nv)
    near = [i for i, mg in enumerate(p["gen_margins"]) if mg <= NEAR_TIE]
    first_tie = near[0] if near else len(gids)
    gen = []
    for i in range(len(gids)):
        tok = int(logits.argmax())
        gen.append(tok)
        if tok != gids[i]:
            break
        logits = m.eval_last([tok], nv)
    same = sum(1 for a, b in zip(gen, gids) if a == b) if gen == gids[:len(gen)] else \
        next(i for i, (a, b) in enumerate(zip(gen, gids)) if a != b)
    check(same >= first_tie, f"{name}: free-running greedy equals llama.cpp's for {same}/{len(gids)} tokens "
          f"(first near-tie at {first_tie})")

full = np.fromfile(os.path.join(fx, ref["full_logits_file"]["file"]), dtype="<f4")
m.rewind(0)
got = m.eval_last(ref["prompts"][0]["prompt_ids"], nv)
err = float(np.abs(got - full).max())
rms = float(np.sqrt(((got - full) ** 2).mean()))
check(err <= MAX_TOL and rms <= RMS_TOL and int(got.argmax()) == int(full.argmax()),
      f"prompt 0, all {nv} logits: max |diff| {err:.3f}, rms {rms:.4f}, same argmax")
m.close()
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
