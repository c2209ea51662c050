#!/usr/bin/env python3
"""Tokenizer parity: tallow's token ids must equal HF `tokenizers`' ids.

Needs (scripts/setup.sh installs them): pip `tokenizers`, `gguf` (for the
GGUF references, read from the files' own metadata).
Oracle: HF tokenizers (PyPI) on
  - every tokenizer in ../shared/tokenizers (gpt2 encoder.json+vocab.bpe,
    qwen3, llama3, llama2, gemma3 tokenizer.json),
  - the default model's GGUF tokenizer (models/SmolLM2-135M-Instruct.Q4_1.gguf,
    byte-level BPE; reference built from the file's vocab and merges) and,
    when models/ has it, Gemma-3's GGUF (SentencePiece scores, no merges;
    reference: HF's Gemma-3 tokenizer.json),
  - variants on real vocabularies for components those files do not use
    (Metaspace, DeepSeek-V3 splits, lstrip/rstrip/single_word added tokens),
on the whole of ../shared/corpora (in ~2 KB chunks cut at line ends, so the
chunks concatenate to the corpus), tests/fixtures/tokenizer_adversarial.txt
and 3000 seeded random concatenations of tricky pieces (FUZZ_POOL).
Checked: ids identical (100% required) with special-token parsing on, and off
(HF's encode_special_tokens; adversarial + fuzz + 300 chunks), and
decode(encode(x)) == x wherever HF's own decode round-trips (adversarial +
fuzz + 500 chunks). Skips (exit 77) with a reason when ../shared, the tallow
binary or the Python packages are missing. TOK_PARITY_QUICK=1 limits the
corpus to its first 300 KB per file; TOK_PARITY_ONLY=name,name picks cases;
TOK_PARITY_FUZZ_N / TOK_PARITY_FUZZ_SEED change the random set;
--bench prints encode MB/s against HF on one thread instead.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))
SMOL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
GEMMA_GGUF = os.path.join(ROOT, "models", "gemma-3-270m-Q4_K_M.gguf")
ADV = os.path.join(ROOT, "tests", "fixtures", "tokenizer_adversarial.txt")


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def find_bin():
    b = os.environ.get("TALLOW_BIN")
    if b and os.path.exists(b):
        return b
    for d in ("build", "build-tok"):
        p = os.path.join(ROOT, d, "tallow")
        if os.path.exists(p):
            return p
    return None


def chunks_of(text, size=2048):
    out, cur, n = [], [], 0
    for line in text.splitlines(keepends=True):
        cur.append(line)
        n += len(line)
        if n >= size:
            out.append("".join(cur))
            cur, n = [], 0
    if cur:
        out.append("".join(cur))
    return out


def load_inputs():
    adv = []
    with open(ADV, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            adv.append(json.loads(line))
    adv += fuzz_strings(int(os.environ.get("TOK_PARITY_FUZZ_N", "3000")),
                        int(os.environ.get("TOK_PARITY_FUZZ_SEED", "20261130")))
    corp = []
    limit = 300_000 if os.environ.get("TOK_PARITY_QUICK") else None
    cdir = os.path.join(SHARED, "corpora")
    for name in sorted(os.listdir(cdir)):
        with open(os.path.join(cdir, name), encoding="utf-8", newline="") as f:
            t = f.read()
        if limit:
            t = t[:limit]
        corp.extend(chunks_of(t))
    return adv, corp


FUZZ_POOL = [
    " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\u0085", "\u200b", "\u200d", "\ufe0f",
    "a", "Z", "the", " The", "ing", "'s", "'T", "'ll", "n't", "\u017f", "0", "7", "42", "2024", "\u0663", "\u00bd",
    ".", ",", "!", "?", "...", "--", "(", ")", "\"", "'", "`", "#", "$", "%", "&", "*", "/", "\\", "_", "<", ">", "|",
    "\u00e9", "e\u0301", "\u00c5", "A\u030a", "\u0308", "\u00df", "\u0130", "\u03a3", "\u03c2", "\u0416",
    "\u4e2d", "\u6587", "\u3042", "\u30a2", "\ud55c", "\u0645", "\u05e9", "\u0928\u094d", "\u0e2a\u0e35",
    "\U0001f600", "\U0001f44d\U0001f3fd", "\U0001f468\u200d\U0001f469", "\U0001f1fa\U0001f1f8", "\u2764",
    "\u2581", "\u0120", "<0x41>", "<|", "|>", "im_start", "<|im_start|>", "<|im_end|>", "<s>", "</s>", "<bos>",
    "<|endoftext|>", "<|begin_of_text|>", "<start_of_turn>", "<think>", "<unused5>", "\x00", "\x1b", "\x7f",
    "<mask>", " <mask> ", "[R]", "[R]  ", "#sw#", " #sw# ", "\u00e9#sw#", "#sw#_", "<both>",
]


def fuzz_strings(n=3000, seed=20261130):
    """Random concatenations of the pool above (fixed seed): HF decides what
    they encode to, nothing here is an expected value."""
    import random

    rng = random.Random(seed)
    return ["".join(rng.choice(FUZZ_POOL) for _ in range(rng.randint(1, 24))) for _ in range(n)]


def smol_reference(tk_mod):
    """HF tokenizer built from the GGUF's own vocab/merges with SmolLM2's
    published pre-tokenizer (Digits individual + ByteLevel)."""
    import gguf
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    r = gguf.GGUFReader(SMOL)
    f = r.fields

    def strs(k):
        return [bytes(f[k].parts[i]).decode("utf-8") for i in f[k].data]

    toks = strs("tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in strs("tokenizer.ggml.merges")]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    tk = Tokenizer(models.BPE({t: i for i, t in enumerate(toks)}, merges))
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    )
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(toks[i], special=True, normalized=False) for i in range(len(toks)) if types[i] == 3])
    tk.add_tokens([AddedToken(toks[i], special=False, normalized=False) for i in range(len(toks)) if types[i] == 4])
    return tk


def gemma_gguf_reference(tdir):
    """HF's Gemma-3 tokenizer.json, with the tokens the GGUF marks CONTROL
    (type 3, e.g. <unused0>, which the json lists as non-special) made
    special, so both sides work from the same metadata."""
    import gguf
    from tokenizers import AddedToken, Tokenizer

    tk = Tokenizer.from_file(os.path.join(tdir, "gemma3", "tokenizer.json"))
    f = gguf.GGUFReader(GEMMA_GGUF).fields
    toks = f["tokenizer.ggml.tokens"]
    types = f["tokenizer.ggml.token_type"]
    ctl = [bytes(toks.parts[toks.data[i]]).decode("utf-8") for i in range(len(types.data))
           if int(types.parts[types.data[i]][0]) == 3]
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ctl])
    return tk


DSV3_PRE = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
    {"type": "Split", "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"}, "behavior": "Isolated",
     "invert": False},
    {"type": "Split", "pattern": {"Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|"
                                           "[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|"
                                           "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}


def variants(tdir, tmpdir):
    """Components the shared tokenizers do not use, on real vocabularies:
    Metaspace pre-tokenizer/decoder (Mistral-style json) on Llama-2's vocab,
    DeepSeek-V3's split sequence on Qwen3's vocab. Compared on the
    adversarial + fuzz set only."""
    out = []
    l2 = os.path.join(tdir, "llama2", "tokenizer.json")
    if os.path.exists(l2):
        for scheme, split in (("first", False), ("always", True)):
            with open(l2, encoding="utf-8") as f:
                j = json.load(f)
            meta = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": split}
            j["normalizer"] = None
            j["pre_tokenizer"] = meta
            j["decoder"] = {"type": "Sequence", "decoders": [meta, {"type": "ByteFallback"}, {"type": "Fuse"}]}
            p = os.path.join(tmpdir, "metaspace-%s-%d.json" % (scheme, split))
            with open(p, "w", encoding="utf-8") as f:
                json.dump(j, f)
            out.append(("meta-%s%s" % (scheme, "-split" if split else ""), p))
    q3 = os.path.join(tdir, "qwen3", "tokenizer.json")
    if os.path.exists(q3):
        with open(q3, encoding="utf-8") as f:
            j = json.load(f)
        j["normalizer"] = None
        j["pre_tokenizer"] = DSV3_PRE
        p = os.path.join(tmpdir, "dsv3.json")
        with open(p, "w", encoding="utf-8") as f:
            json.dump(j, f)
        out.append(("dsv3-splits", p))
    l3 = os.path.join(tdir, "llama3", "tokenizer.json")
    if os.path.exists(l3):
        # added-token flags: lstrip, rstrip, single_word, special or not
        # (contents absent from the vocab, as in real files)
        with open(l3, encoding="utf-8") as f:
            j = json.load(f)
        n = max(t["id"] for t in j["added_tokens"]) + 1
        for k, (c, extra) in enumerate([("<mask>", {"lstrip": True, "special": True}),
                                        ("[R]", {"rstrip": True}),
                                        ("#sw#", {"single_word": True}),
                                        ("<both>", {"lstrip": True, "rstrip": True, "special": True})]):
            t = {"id": n + k, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": False}
            t.update(extra)
            j["added_tokens"].append(t)
        p = os.path.join(tmpdir, "flags.json")
        with open(p, "w", encoding="utf-8") as f:
            json.dump(j, f)
        out.append(("added-flags", p))
    return out


def gpt2_reference():
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    d = os.path.join(SHARED, "tokenizers", "gpt2")
    tk = Tokenizer(models.BPE.from_file(os.path.join(d, "encoder.json"), os.path.join(d, "vocab.bpe")))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
    return tk


def run_tallow(binary, args, lines):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for x in lines:
            f.write(x + "\n")
        path = f.name
    try:
        t0 = time.time()
        p = subprocess.run([binary, "tokenize"] + args + ["--jsonl", "-f", path], capture_output=True, timeout=900)
        dt = time.time() - t0
    finally:
        os.unlink(path)
    if p.returncode != 0:
        raise RuntimeError("tallow tokenize %s failed (%d): %s" % (args, p.returncode, p.stderr.decode()[-2000:]))
    # split on "\n" only: JSON escapes it, but U+2028 etc. stay raw
    return [json.loads(l) for l in p.stdout.decode("utf-8").split("\n") if l], dt


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def check_one(name, binary, src_args, tk, adv, corp):
    fails = 0
    for parse_special in (True, False):
        # special-token text off: the adversarial set holds the special
        # cases; a slice of the corpus keeps the CI run short
        texts = adv + (corp if parse_special else corp[:300])
        nbytes = sum(len(t.encode("utf-8")) for t in texts)
        enc_lines = [json.dumps(t) for t in texts]
        tk.encode_special_tokens = not parse_special
        t0 = time.time()
        ref = [e.ids for e in tk.encode_batch(texts, add_special_tokens=True)]
        t_hf = time.time() - t0
        args = list(src_args) + ([] if parse_special else ["--no-special"])
        ours, t_ours = run_tallow(binary, args, enc_lines)
        bad = [i for i in range(len(texts)) if ours[i] != ref[i]]
        fails += len(bad)
        print("%-11s special=%-5s %6d strings %9d bytes: %d mismatches (tallow %.2fs incl. load, HF batch %.2fs)"
              % (name, parse_special, len(texts), nbytes, len(bad), t_ours, t_hf))
        for i in bad[:5]:
            k = first_diff(ours[i], ref[i])
            print("  MISMATCH %r\n    at token %d: tallow %s\n               hf     %s"
                  % (texts[i][:200], k, ours[i][max(0, k - 3):k + 6], ref[i][max(0, k - 3):k + 6]))
        if not parse_special:
            continue
        # round trip: where HF's decode gives the text back, ours must too
        # (adversarial + fuzz + 500 corpus chunks: plain prose adds little)
        tk.encode_special_tokens = False
        nrt = len(adv) + 500
        hf_dec = tk.decode_batch(ref[:nrt], skip_special_tokens=True)
        dec, _ = run_tallow(binary, list(src_args) + ["--decode", "--skip-control"], [json.dumps(x) for x in ours[:nrt]])
        rt_need = [i for i in range(len(hf_dec)) if hf_dec[i] == texts[i]]
        rt_bad = [i for i in rt_need if dec[i] != texts[i]]
        same = sum(1 for i in range(len(hf_dec)) if dec[i] == hf_dec[i])
        fails += len(rt_bad)
        print("%-11s round trip: HF round-trips %d/%d, tallow fails %d of those; decode == HF decode on %d/%d"
              % (name, len(rt_need), len(hf_dec), len(rt_bad), same, len(hf_dec)))
        for i in rt_bad[:5]:
            print("  ROUNDTRIP %r -> %r" % (texts[i][:100], dec[i][:100]))
    return fails


def bench(binary, cases, corp):
    """Encode MB/s, one thread, same text and same run: tallow (load
    excluded) vs HF tokenizers' Tokenizer.encode per chunk."""
    texts = corp
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps(t) + "\n")
        path = f.name
    print("encode speed on %d chunks, %.1f MB (machine load %.1f)" % (len(texts), nbytes / 1e6, os.getloadavg()[0]))
    for name, args, ref in cases:
        tk = ref()
        best_hf = 1e9
        for _ in range(2):
            t0 = time.perf_counter()
            for t in texts:
                tk.encode(t)
            best_hf = min(best_hf, time.perf_counter() - t0)
        best_ours = 0.0
        for _ in range(2):
            p = subprocess.run([binary, "tokenize"] + args + ["--jsonl", "--bench", "-f", path], capture_output=True)
            line = [l for l in p.stderr.decode().splitlines() if l.startswith("encode:")]
            mbs = float(line[0].split("=")[1].split()[0]) if line else 0.0
            best_ours = max(best_ours, mbs)
        hf = nbytes / best_hf / 1e6
        print("%-11s tallow %7.2f MB/s   HF tokenizers %6.2f MB/s   ratio %.1fx" % (name, best_ours, hf, best_ours / hf))
    os.unlink(path)


def main():
    try:
        import tokenizers  # noqa: F401
        from tokenizers import Tokenizer
    except ImportError:
        skip("python package 'tokenizers' is not installed (pip install tokenizers)")
    binary = find_bin()
    if not binary:
        skip("tallow binary not found (set TALLOW_BIN)")
    if not os.path.isdir(os.path.join(SHARED, "tokenizers")) or not os.path.isdir(os.path.join(SHARED, "corpora")):
        skip("%s (tokenizers + corpora) is absent" % SHARED)
    adv, corp = load_inputs()
    cases = []
    if os.path.exists(SMOL):
        try:
            import gguf  # noqa: F401
            cases.append(("smollm2", ["-m", SMOL], lambda: smol_reference(tokenizers)))
        except ImportError:
            print("note: python package 'gguf' missing: SmolLM2 GGUF case skipped")
    else:
        print("note: %s absent (make run fetches it): SmolLM2 GGUF case skipped" % SMOL)
    tdir = os.path.join(SHARED, "tokenizers")
    if os.path.exists(GEMMA_GGUF):
        # SentencePiece BPE from GGUF scores (no merges in the file) against
        # HF's Gemma-3 tokenizer.json, which uses merges
        cases.append(("gemma3-gguf", ["-m", GEMMA_GGUF], lambda: gemma_gguf_reference(tdir)))
    else:
        print("note: %s absent: Gemma-3 GGUF case skipped" % GEMMA_GGUF)
    cases.append(("gpt2", ["--tokenizer", os.path.join(tdir, "gpt2", "encoder.json")], gpt2_reference))
    for n in ("qwen3", "llama3", "llama2", "gemma3"):
        p = os.path.join(tdir, n, "tokenizer.json")
        if os.path.exists(p):
            cases.append((n, ["--tokenizer", p], (lambda p=p: Tokenizer.from_file(p))))
    only = os.environ.get("TOK_PARITY_ONLY")
    if only:
        cases = [c for c in cases if c[0] in only.split(",")]
    if "--bench" in sys.argv:
        bench(binary, cases, corp)
        return 0
    total = 0
    for name, args, ref in cases:
        total += check_one(name, binary, args, ref(), adv, corp)
    with tempfile.TemporaryDirectory() as tmpdir:
        for name, p in variants(tdir, tmpdir):
            if only and name not in only.split(","):
                continue
            total += check_one(name, binary, ["--tokenizer", p], Tokenizer.from_file(p), adv, [])
    print("%d passed, %d failed" % (0 if total else 1, 1 if total else 0))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
