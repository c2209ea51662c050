#!/usr/bin/env bash
# cpu_vs_llamacpp.sh: tallow vs llama.cpp CPU speed on the same GGUF files, in the same run.
#
# Why: a speed claim is a ratio measured in the same run as its peer (docs/PERFORMANCE.md). For
# every model and thread count this runs llama-bench and `tallow bench` back to back with the same
# prompt/generation lengths and repetitions, then prints one table with the ratio.
#
# Usage: bench/cpu_vs_llamacpp.sh [-p 512] [-n 128] [-r 1] [-k 3] [-d 0] [-t "1 2"] [--all-types]
#                                 [MODEL.gguf ...]
#   -k K: rounds; each round runs llama-bench then tallow bench (-r R repetitions each) for every
#   model and thread count, so the engines' runs interleave over the run; the table gives the
#   median over the rounds of each round's mean (bench/cpu_vs_llamacpp_parse.py).
#   -d N: tests at depth N (both engines' -d; llama-bench runs -fa 0,1 and the faster is kept).
#   default models: models/SmolLM2-135M-Instruct.{Q4_1,Q8_0,F16}.gguf (those present; the Q8_0
#   and F16 files are made from Q4_1 with `bench/cpu_vs_llamacpp.sh --make-variants`, which also
#   makes the Q5_0 ... IQ4_XS variants below from the F16 file)
#   --all-types: every SmolLM2 variant present (ALL_TYPES below) and models/gemma-3-270m-Q4_K_M.gguf
#   env: TALLOW=path/to/tallow (default build/tallow), LLAMA_BIN=dir with llama-bench
#        (default build-llamacpp/bin), OUT=dir for the raw logs (default build-llamacpp/bench-logs)
# Needs: bench/build_llamacpp.sh done, tallow built, python3 (to parse/print).
# Both programs read the weights through mmap and use random/synthetic tokens; llama-bench runs
# with its defaults otherwise (flash attention off unless -d, f16 KV cache, n_batch 2048, n_ubatch
# 512).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TALLOW=${TALLOW:-$ROOT/build/tallow}
LLAMA_BIN=${LLAMA_BIN:-$ROOT/build-llamacpp/bin}
OUT=${OUT:-$ROOT/build-llamacpp/bench-logs}
P=512
N=128
R=1
K=3
D=0
THREADS="1 2"
MODELS=()
ALL=0
VARIANT_TYPES="Q5_0 Q5_1 Q4_K_M Q5_K_M Q6_K Q3_K_M Q2_K IQ4_NL IQ4_XS"
ALL_TYPES="Q4_1 Q8_0 F16 $VARIANT_TYPES"

die() { echo "cpu_vs_llamacpp: $*" >&2; exit 1; }

make_variants() {
    local src=$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf q=$LLAMA_BIN/llama-quantize
    mkdir -p "$OUT"
    [ -f "$src" ] || die "$src missing: run scripts/fetch_model.sh"
    [ -x "$q" ] || die "$q missing: run bench/build_llamacpp.sh"
    for t in Q8_0 F16; do
        local dst=$ROOT/models/SmolLM2-135M-Instruct.$t.gguf
        if [ -s "$dst" ]; then echo "cpu_vs_llamacpp: $dst exists"; continue; fi
        # requantizing from Q4_1 keeps Q4_1's rounding error, so these files only serve speed
        # measurements (same shapes and tensor types as a real Q8_0 / F16 SmolLM2).
        mkdir -p "$OUT"; local log=$OUT/quantize-$t.log
        "$q" --allow-requantize "$src" "$dst.tmp" "$t" 1 >"$log" 2>&1 \
            || { tail -5 "$log" >&2; die "llama-quantize $t failed (log: $log)"; }
        mv "$dst.tmp" "$dst"
        echo "cpu_vs_llamacpp: wrote $dst"
    done
    # the other weight types, from F16 (llama-quantize falls back to Q5_0/Q5_1/IQ4_NL/Q8_0 for
    # the 576-wide rows that 256-element K-quant blocks cannot cover, as for any such model)
    local f16=$ROOT/models/SmolLM2-135M-Instruct.F16.gguf
    for t in $VARIANT_TYPES; do
        local dst=$ROOT/models/SmolLM2-135M-Instruct.$t.gguf
        if [ -s "$dst" ]; then echo "cpu_vs_llamacpp: $dst exists"; continue; fi
        local log=$OUT/quantize-$t.log tmp=$dst.$$.tmp
        "$q" --allow-requantize "$f16" "$tmp" "$t" 1 >"$log" 2>&1 \
            || { rm -f "$tmp"; tail -5 "$log" >&2; die "llama-quantize $t failed (log: $log)"; }
        mv "$tmp" "$dst"
        echo "cpu_vs_llamacpp: wrote $dst"
    done
}

while [ $# -gt 0 ]; do
    case "$1" in
    -p) P=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    -r) R=$2; shift 2 ;;
    -k) K=$2; shift 2 ;;
    -d) D=$2; shift 2 ;;
    -t) THREADS=$2; shift 2 ;;
    --make-variants) make_variants; exit 0 ;;
    --all-types) ALL=1; shift ;;
    -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) MODELS+=("$1"); shift ;;
    esac
done

[ -x "$TALLOW" ] || die "tallow not found at $TALLOW (build it, or set TALLOW=...)"
[ -x "$LLAMA_BIN/llama-bench" ] || die "$LLAMA_BIN/llama-bench missing: run bench/build_llamacpp.sh"
if [ $ALL = 1 ]; then
    for t in $ALL_TYPES; do
        f=$ROOT/models/SmolLM2-135M-Instruct.$t.gguf
        if [ -f "$f" ]; then MODELS+=("$f"); else echo "# skipping $t: $f missing (--make-variants)" >&2; fi
    done
    f=$ROOT/models/gemma-3-270m-Q4_K_M.gguf
    if [ -f "$f" ]; then MODELS+=("$f"); else echo "# skipping $f: missing" >&2; fi
elif [ ${#MODELS[@]} -eq 0 ]; then
    for t in Q4_1 Q8_0 F16; do
        f=$ROOT/models/SmolLM2-135M-Instruct.$t.gguf
        [ -f "$f" ] && MODELS+=("$f")
    done
fi
[ ${#MODELS[@]} -gt 0 ] || die "no models: run scripts/fetch_model.sh"
mkdir -p "$OUT"

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
RES=$OUT/results-$STAMP.tsv
# run a snapshot of the binary, so a rebuild during the run cannot mix two versions
cp "$TALLOW" "$OUT/tallow-$STAMP"
TALLOW_SRC=$TALLOW
TALLOW=$OUT/tallow-$STAMP
: >"$RES"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -n), $(nproc) cores," \
    "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), load avg at start:" \
    "$(cut -d' ' -f1-3 /proc/loadavg)"
echo "# llama.cpp: $(cat "$ROOT/build-llamacpp/VERSION" 2>/dev/null || echo unknown)"
echo "# tallow:    $TALLOW_SRC ($(stat -c %y "$TALLOW_SRC" | cut -d. -f1))"
echo "# -p $P -n $N -d $D -r $R, $K interleaved rounds, threads: $THREADS"

FA=0
[ "$D" -gt 0 ] && FA=0,1
for k in $(seq 1 "$K"); do
    for m in "${MODELS[@]}"; do
        [ -f "$m" ] || die "model $m not found"
        base=$(basename "$m" .gguf)
        for t in $THREADS; do
            lj=$OUT/$base-t$t-d$D-k$k-llamacpp-$STAMP.json
            tl=$OUT/$base-t$t-d$D-k$k-tallow-$STAMP.txt
            echo "# round $k: llama-bench $base -t $t (load $(cut -d' ' -f1 /proc/loadavg)) ..." >&2
            "$LLAMA_BIN/llama-bench" -m "$m" -p "$P" -n "$N" -d "$D" -fa "$FA" -t "$t" -r "$R" -o json \
                >"$lj" 2>"$lj.err" || { tail -5 "$lj.err" >&2; die "llama-bench failed on $m"; }
            echo "# round $k: tallow bench $base -t $t ..." >&2
            "$TALLOW" bench -m "$m" -p "$P" -n "$N" -d "$D" -t "$t" -r "$R" >"$tl" 2>"$tl.err" \
                || { tail -5 "$tl.err" >&2; die "tallow bench failed on $m"; }
            python3 "$ROOT/bench/cpu_vs_llamacpp_parse.py" round "$lj" "$tl" "$base" "$t" >>"$RES"
        done
    done
done

echo
python3 "$ROOT/bench/cpu_vs_llamacpp_parse.py" table "$RES"
echo
echo "# load avg at end: $(cut -d' ' -f1-3 /proc/loadavg); raw logs in $OUT (*-$STAMP.*)"
