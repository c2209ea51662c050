#!/usr/bin/env bash
# tests/fuzz/run.sh BIN_DIR SECONDS [JOBS]: the short fuzz step of scripts/test.sh.
# Runs every fuzz_* harness in BIN_DIR (a TALLOW_FUZZ=ON build: libFuzzer + ASan
# + UBSan) for SECONDS, JOBS harnesses at a time, each from its committed seeds
# (tests/fuzz/corpus/NAME, read only; new inputs go to BIN_DIR/fuzz-out). A
# harness passes when libFuzzer ends without a finding (crash, sanitizer report,
# leak, a single input over 10 s or 2 GiB); its reproducer is kept under
# BIN_DIR/fuzz-out/artifacts. Run from the source root. Prints a line per
# harness and last "fuzz: N passed, N failed"; exits 1 on any failure.
set -u
bin=${1:?usage: tests/fuzz/run.sh BIN_DIR SECONDS [JOBS]}
secs=${2:?seconds per harness}
jobs=${3:-$(nproc)}
out=$bin/fuzz-out
rm -rf "$out"
mkdir -p "$out/artifacts"

run_one() { # $1 = harness name (fuzz_x); prints "name: PASS|FAIL|SKIP ..."
    local h=$1 name=${1#fuzz_} rss=2048
    local seeds=tests/fuzz/corpus/$name log=$out/$name.log
    if [ "$name" = encode ] && [ ! -d "${TALLOW_TOKENIZERS:-../shared/tokenizers}" ]; then
        echo "$h: SKIP (no ${TALLOW_TOKENIZERS:-../shared/tokenizers} with real vocabularies)"
        return
    fi
    [ "$name" = encode ] && rss=4096 # five real vocabularies, loaded once
    mkdir -p "$out/corpus/$name"
    "$bin/$h" -max_total_time="$secs" -timeout=10 -rss_limit_mb=$rss -print_final_stats=1 \
        -artifact_prefix="$out/artifacts/$name-" "$out/corpus/$name" "$seeds" >"$log" 2>&1
    local rc=$? runs
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
    if [ $rc -eq 0 ]; then
        echo "$h: PASS (${runs:-?} runs in ${secs} s)"
    else
        echo "$h: FAIL (exit $rc; log $log, reproducer under $out/artifacts)"
        grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$log" | head -5 | sed 's/^/    /'
    fi
}
export -f run_one
export out secs bin

ls "$bin"/fuzz_* >/dev/null 2>&1 || { echo "fuzz: no harnesses in $bin"; echo "fuzz: 0 passed, 1 failed"; exit 1; }
results=$(for f in "$bin"/fuzz_*; do [ -x "$f" ] && basename "$f"; done |
    xargs -P "$jobs" -I{} bash -c 'run_one {}')
echo "$results"
p=$(grep -c ': PASS' <<<"$results")
f=$(grep -c ': FAIL' <<<"$results")
echo "fuzz: $p passed, $f failed"
[ "$f" -eq 0 ]
