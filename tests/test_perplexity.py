"""`tallow perplexity` against llama.cpp's llama-perplexity on the same GGUF,
text and chunk length (tests/fixtures/smollm2_ppl_llamacpp.json, made by
tests/fixtures/make_smollm2_ppl_llamacpp.sh).

Tolerance: 1.5% on the final value and 2.5% on each running estimate. Both
engines quantize activations to 8 bits before every Q4_1 matmul, so the
last bit of float summation order flips some roundings and moves each
chunk's NLL a little (test_smollm2_ref.py measures the logit-level effect);
on this short text (5 chunks of 127 scored tokens) that is about 1% per
chunk. The statistical error of the estimate itself is ~13%. Also checks
the error paths: a text shorter than one chunk, a missing file."""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tallow_ctypes import ROOT, skip  # noqa: E402

BIN = os.environ.get("TALLOW_BIN", os.path.join(ROOT, "build", "tallow"))
fx = os.path.join(ROOT, "tests", "fixtures")
ref = json.load(open(os.path.join(fx, "smollm2_ppl_llamacpp.json")))
model = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.path.exists(model):
    skip(f"{model} absent (scripts/fetch_model.sh fetches it)")
passed = failed = 0


def check(cond, what):
    global passed, failed
    passed += bool(cond)
    failed += not cond
    print(("ok   " if cond else "FAIL ") + what)


r = subprocess.run([BIN, "perplexity", "-m", model, "-f", os.path.join(fx, "smollm2_ppl_text.txt"),
                    "-c", str(ref["ctx"]), "-t", "2"], capture_output=True, text=True, timeout=1200)
check(r.returncode == 0, "perplexity runs: " + r.stderr[-300:])
running = [float(x) for x in re.findall(r"\[\d+\]([\d.]+),", r.stdout)]
m = re.search(r"Final estimate: PPL = ([\d.]+) \+/- ([\d.]+)", r.stdout)
check(m is not None and len(running) == len(ref["running_ppl"]), f"output format: {r.stdout[-200:]}")
if m:
    ppl, err = float(m.group(1)), float(m.group(2))
    rel = abs(ppl - ref["ppl"]) / ref["ppl"]
    check(rel <= 0.015, f"PPL {ppl:.4f} vs llama.cpp {ref['ppl']:.4f}: {100 * rel:.2f}% (<= 1.5%)")
    check(abs(err - ref["ppl_err"]) / ref["ppl_err"] <= 0.05, f"error estimate {err:.4f} vs {ref['ppl_err']:.4f}")
    worst = max(abs(a - b) / b for a, b in zip(running, ref["running_ppl"]))
    check(worst <= 0.025, f"running estimates within {100 * worst:.2f}% of llama.cpp's (<= 2.5%)")

with tempfile.TemporaryDirectory() as d:
    short = os.path.join(d, "short.txt")
    open(short, "w").write("Too short for a chunk.")
    r = subprocess.run([BIN, "perplexity", "-m", model, "-f", short, "-c", "256"], capture_output=True, text=True)
    check(r.returncode == 1 and "fewer than one chunk" in r.stderr, "short text refused: " + r.stderr)
    r = subprocess.run([BIN, "perplexity", "-m", model, "-f", os.path.join(d, "nope.txt")], capture_output=True,
                       text=True)
    check(r.returncode == 1 and "nope.txt" in r.stderr, "missing text file named: " + r.stderr)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
