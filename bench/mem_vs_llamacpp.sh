#!/usr/bin/env bash
# mem_vs_llamacpp.sh: peak resident memory of `tallow run` vs llama.cpp's llama-cli, same file,
# same context size, same prompt and token count.
#
# Why: issue 1/5 asks that tallow's peak RSS at a 2048-token context be no more than llama.cpp's
# for the same file (weights mmapped, KV cache sized from the context). GNU time's "Maximum
# resident set size" is measured the same way for both programs.
#
# Usage: bench/mem_vs_llamacpp.sh [-c 2048] [-n 64] [-t 1] [MODEL.gguf]
#   env: TALLOW (default build/tallow), LLAMA_BIN (default build-llamacpp/bin)
# Note: mmapped weight pages count in RSS once touched, in both programs alike.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TALLOW=${TALLOW:-$ROOT/build/tallow}
LLAMA_BIN=${LLAMA_BIN:-$ROOT/build-llamacpp/bin}
C=2048
N=64
T=1
MODEL=$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf
PROMPT="The history of the printing press begins in"

die() { echo "mem_vs_llamacpp: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
    -c) C=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    -t) T=$2; shift 2 ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1" ;;
    *) MODEL=$1; shift ;;
    esac
done

[ -x /usr/bin/time ] || die "/usr/bin/time (GNU time) not found: apt-get install time"
[ -x "$TALLOW" ] || die "tallow not found at $TALLOW (build it, or set TALLOW=...)"
[ -x "$LLAMA_BIN/llama-cli" ] || die "$LLAMA_BIN/llama-cli missing: run bench/build_llamacpp.sh"
[ -f "$MODEL" ] || die "$MODEL not found: run scripts/fetch_model.sh"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# peak RSS in KiB of a command (its stdout/stderr go to files in $TMP)
peak() {
    local name=$1
    shift
    /usr/bin/time -v -o "$TMP/$name.time" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null \
        || { tail -5 "$TMP/$name.err" >&2; die "$name failed"; }
    sed -n 's/.*Maximum resident set size (kbytes): *//p' "$TMP/$name.time"
}

L=$(peak llama.cpp "$LLAMA_BIN/llama-cli" -m "$MODEL" -p "$PROMPT" -n "$N" -c "$C" -t "$T" \
    -no-cnv --temp 0 --no-warmup)
A=$(peak tallow "$TALLOW" run -m "$MODEL" -p "$PROMPT" -n "$N" -c "$C" -t "$T" --temp 0)

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(basename "$MODEL"), context $C, $N tokens, $T thread(s)"
echo "# llama.cpp: $(cat "$ROOT/build-llamacpp/VERSION" 2>/dev/null || echo unknown)"
printf '| %-10s | %14s |\n' program "peak RSS (MiB)"
printf '|%s|%s|\n' "------------" "---------------:"
awk -v l="$L" -v a="$A" 'BEGIN {
    printf "| %-10s | %14.1f |\n", "llama.cpp", l / 1024
    printf "| %-10s | %14.1f |\n", "tallow", a / 1024
    printf "# tallow / llama.cpp = %.3f\n", a / l }'
