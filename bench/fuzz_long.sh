#!/usr/bin/env bash
# bench/fuzz_long.sh BIN_DIR CORPUS_ROOT SECONDS CORES OUT_DIR: the long fuzz run.
#
# Runs every fuzz_* harness in BIN_DIR (a TALLOW_FUZZ=ON build) at the same time
# for SECONDS, sharing CORES between them (slower harnesses get more: the
# weights below). Each core is one libFuzzer process on the harness's corpus
# (CORPUS_ROOT/NAME copied to OUT_DIR/corpus/NAME, shared by that harness's
# processes, which pick up each other's new inputs); a process that stops on
# a finding is started again until the time is up, so every finding is
# counted. Reproducers land in OUT_DIR/artifacts (crash-, leak-, timeout-,
# oom- prefixes; any sanitizer report is a crash). Then prints one row per
# harness: cores, executions, executions/s, final corpus and findings by
# kind, and a total line.
# Run from the source root (the Jinja and config harnesses read
# tests/fixtures); TALLOW_TOKENIZERS names the real vocabularies for
# fuzz_encode (default ../shared/tokenizers).
set -u
bin=${1:?usage: bench/fuzz_long.sh BIN_DIR CORPUS_ROOT SECONDS CORES OUT_DIR}
seeds=${2:?corpus root}
secs=${3:?seconds}
cores=${4:?cores}
out=${5:?output folder}
mkdir -p "$out/artifacts" "$out/logs"

# cores per harness: two for the slow ones per execution (real-vocabulary
# encode, a model's forward, tokenizer.json) and for the fast ones that reach
# 10^7 executions slowest (rates in tests/fuzz/README.md), one for the rest
weight() {
    case $1 in
    encode | model | tokenizer_json | gguf | gpt2_files | jinja_messages | jinja_template) echo 2 ;;
    *) echo 1 ;;
    esac
}
names=()
for f in "$bin"/fuzz_*; do [ -x "$f" ] && names+=("$(basename "$f")"); done
total_w=0
for h in "${names[@]}"; do total_w=$((total_w + $(weight "${h#fuzz_}"))); done
declare -A ncores
left=$cores
for h in "${names[@]}"; do # at least one core each, the rest by weight
    n=$(( cores * $(weight "${h#fuzz_}") / total_w )); [ "$n" -lt 1 ] && n=1
    ncores[$h]=$n; left=$((left - n))
done
while [ "$left" -gt 0 ]; do for h in "${names[@]}"; do [ "$left" -gt 0 ] && ncores[$h]=$((ncores[$h] + 1)) && left=$((left - 1)); done; done

worker() { # $1 harness, $2 worker index: fuzz until the deadline, restarting after findings
    local h=$1 name=${1#fuzz_} k=$2 rss=2048 left
    [ "$name" = encode ] && rss=4096
    while left=$((deadline - $(date +%s))); [ "$left" -gt 2 ]; do
        "$bin/$h" -max_total_time="$left" -timeout=10 -rss_limit_mb=$rss -print_final_stats=1 -reload=10 \
            -artifact_prefix="$out/artifacts/$name-" "$out/corpus/$name" >>"$out/logs/$name.$k.log" 2>&1
        [ $? -eq 77 ] && break # the harness lacks its data (fuzz_encode without vocabularies)
    done
}
deadline=$(( $(date +%s) + secs ))
pids=()
for h in "${names[@]}"; do
    name=${h#fuzz_}
    mkdir -p "$out/corpus/$name"
    [ -d "$seeds/$name" ] && cp -n "$seeds/$name"/* "$out/corpus/$name/" 2>/dev/null
    for ((k = 0; k < ncores[$h]; k++)); do
        worker "$h" "$k" &
        pids+=($!)
    done
done
for p in "${pids[@]}"; do wait "$p"; done

printf '%-16s %5s %12s %9s %7s %7s %5s %8s %5s\n' harness cores executions exec/s corpus crashes leaks timeouts ooms
tot=0; totf=0
for h in "${names[@]}"; do
    name=${h#fuzz_}
    execs=$(cat "$out/logs/$name".*.log | sed -n 's/^stat::number_of_executed_units: *\([0-9]*\)/\1/p' |
        awk '{s += $1} END {print s + 0}')
    rate=$((execs / secs))
    count() { ls "$out/artifacts" | grep -c "^$name-$1" ; }
    crash=$(count crash-); leak=$(count leak-); tmo=$(count timeout-); oom=$(count oom-)
    corp=$(ls "$out/corpus/$name" | wc -l)
    printf '%-16s %5s %12s %9s %7s %7s %5s %8s %5s\n' "$name" "${ncores[$h]}" "$execs" "$rate" "$corp" \
        "$crash" "$leak" "$tmo" "$oom"
    tot=$((tot + execs)); totf=$((totf + crash + leak + tmo + oom))
done
echo "total: $tot executions, $totf findings in $secs s on $cores cores"
