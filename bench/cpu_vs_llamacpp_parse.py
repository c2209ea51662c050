#!/usr/bin/env python3
"""Parsing for bench/cpu_vs_llamacpp.sh.

round LLAMA.json TALLOW.txt MODEL THREADS: one round's results as TSV rows (model, threads,
    test, llama.cpp t/s, tallow t/s, tallow's kernel set); llama-bench rows at the same test with
    flash attention off and on keep the faster.
table RESULTS.tsv: the medians over the rounds of each (model, threads, test), as a markdown table.
"""
import json
import re
import statistics
import sys


def one_round(lj, tl, base, t):
    rows = {}
    for r in json.load(open(lj)):
        test = ("pp%d" % r["n_prompt"]) if r["n_gen"] == 0 else ("tg%d" % r["n_gen"])
        if r.get("n_depth"):
            test += " @ d%d" % r["n_depth"]
        cur = rows.setdefault(test, {})
        cur["llama"] = max(cur.get("llama", 0.0), r["avg_ts"])
    kset = "?"
    for line in open(tl):
        c = [x.strip() for x in line.strip().strip("|").split("|")]
        if len(c) >= 7 and re.fullmatch(r"(pp|tg)\d+( @ d\d+)?", c[5]):
            rows.setdefault(c[5], {})["tallow"] = float(re.match(r"([\d.]+)", c[6]).group(1))
            kset = c[3]
    for test, v in rows.items():
        print("\t".join([base, t, test, "%.3f" % v.get("llama", float("nan")),
                         "%.3f" % v.get("tallow", float("nan")), kset]))


def table(res):
    runs = {}
    for line in open(res):
        if not line.strip():
            continue
        b, t, test, lm, am, kset = line.rstrip("\n").split("\t")
        r = runs.setdefault((b, t, test), {"l": [], "a": [], "k": kset})
        r["l"].append(float(lm))
        r["a"].append(float(am))
    hdr = ["model", "threads", "test", "tallow kernels", "llama.cpp t/s", "tallow t/s", "tallow / llama.cpp",
           "rounds"]
    body = []
    for (b, t, test), r in sorted(runs.items(), key=lambda kv: (kv[0][0], kv[0][2][:2] != "pp", kv[0][2], kv[0][1])):
        lm, am = statistics.median(r["l"]), statistics.median(r["a"])
        body.append([b, t, test, r["k"], "%.2f" % lm, "%.2f" % am,
                     "%.2fx" % (am / lm) if lm > 0 else "nan", str(len(r["l"]))])
    w = [max(len(x[i]) for x in [hdr] + body) for i in range(len(hdr))]
    right = [False, True, False, False, True, True, True, True]

    def line(c):
        return "| " + " | ".join(x.rjust(w[i]) if right[i] else x.ljust(w[i]) for i, x in enumerate(c)) + " |"

    print(line(hdr))
    print("|" + "|".join(("-" * (w[i] + 1) + ":") if right[i] else "-" * (w[i] + 2) for i in range(len(hdr))) + "|")
    for c in body:
        print(line(c))
    print("\n(t/s: medians over the rounds of each round's mean)")


if __name__ == "__main__":
    if sys.argv[1] == "round":
        one_round(*sys.argv[2:6])
    else:
        table(sys.argv[2])
