"""Shared comparison of tallow against a llama.cpp reference fixture
(tests/fixtures/make_smollm2_ref.py, make_gemma3_ref.py): one prompt's
tokenization, teacher-forced argmax with near-tie allowance, top-40 logits,
and free-running greedy up to llama.cpp's first near-tie. The tolerances are
the caller's, justified in each test's docstring."""
import numpy as np


class Checker:
    """Counts results and prints one line per check; finish() gives the
    closing 'N passed, N failed' line and the exit status."""

    def __init__(self):
        self.passed = self.failed = 0

    def __call__(self, cond, what):
        self.passed += bool(cond)
        self.failed += not cond
        print(("ok   " if cond else "FAIL ") + what, flush=True)

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0


def compare_prompt(m, p, nv, check, max_tol, rms_tol, near_tie):
    name, pids, gids = p["name"], p["prompt_ids"], p["gen_ids"]
    ids = m.tokenize(p["text"], add_special=True, parse_special=True)
    check(ids == pids, f"{name}: prompt tokens equal llama.cpp's ({len(ids)} tokens)")

    # teacher forcing on llama.cpp's ids: logits at the last prompt position and
    # after each generated token (the prompt body only fills the cache)
    m.rewind(0)
    if len(pids) > 1:
        m.eval_last(pids[:-1], nv)
    lg = m.eval_all(pids[-1:] + gids[:-1], nv)
    agree, ties, bad = 0, [], []
    for i, want in enumerate(gids):
        got = int(lg[i].argmax())
        gap = float(lg[i][got] - lg[i][want])
        if got == want:
            agree += 1
        elif p["gen_margins"][i] <= near_tie and gap <= near_tie:
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
    sc = p["llamacpp_self_consistency"]
    check(worst <= max_tol and rms <= rms_tol,
          f"{name}: top-40 logits at {len(stats)} positions: max |diff| {worst:.3f} (<= {max_tol}), "
          f"max rms {rms:.3f} (<= {rms_tol}); llama.cpp vs itself on top-40, f16->f32 KV: "
          f"{max(sc['kv_f16_vs_f32_max_abs_diff_on_top40']):.2f}")

    # free-running greedy follows llama.cpp's up to its first near-tie (the
    # prompt's cache from teacher forcing is kept; lg[0] are its last logits)
    m.rewind(len(pids))
    logits = lg[0]
    near = [i for i, mg in enumerate(p["gen_margins"]) if mg <= near_tie]
    first_tie = near[0] if near else len(gids)
    same = 0
    for i in range(len(gids)):
        tok = int(logits.argmax())
        if tok != gids[i]:
            break
        same += 1
        if i + 1 < len(gids):
            logits = m.eval_last([tok], nv)
    check(same >= first_tie, f"{name}: free-running greedy equals llama.cpp's for {same}/{len(gids)} tokens "
          f"(first near-tie at {first_tie})")
