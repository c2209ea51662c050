#!/usr/bin/env bash
# bench/gpu_check.sh BUILD [PART...]: one device call's checks and timings
# for the engine on the GPU machine (binaries from bench/gpu_pack.sh, or a
# build made there). Logs go to $OUT (or ./out); the last lines are a table.
# Parts (default: tests speed):
#   tests:   test_cuda_kernels, the HF tiny fixtures of every architecture
#            (test_cuda_e2e --hf), test_batch cuda (batched vs alone, forks,
#            full pool, occupancy)
#   speed:   synthetic Llama-3-8B Q4_0 (SPEED_TYPES): tg128, pp512, tg at
#            depth 4096, batched 128+128 at 1/4/16/64 sequences; llama.cpp
#            beside it when LLAMA=dir holds its CUDA build
#   sanitize: compute-sanitizer memcheck and racecheck over test_batch cuda
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
shift || true
PARTS=${*:-tests speed}
LOG=${OUT:-out}
mkdir -p "$LOG" /tmp/m
export LD_LIBRARY_PATH=$PWD/$B:$PWD/$B/devlibs:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv,noheader
summary=""
note() { summary="$summary$1"$'\n'; }
for part in $PARTS; do
  case $part in
  tests)
    "$B/test_cuda_kernels" > "$LOG/kernels.log" 2>&1; note "test_cuda_kernels rc=$? $(tail -1 "$LOG/kernels.log")"
    for n in llama llama_tied llama3rope qwen2 qwen3 gemma3; do
      "$B/test_cuda_e2e" tests/fixtures/tiny_$n.gguf --hf tests/fixtures/tiny_${n}_logits.bin tests/fixtures/tiny_$n.json \
        > "$LOG/hf_$n.log" 2>&1; note "hf $n rc=$? $(grep -E '^hf ' "$LOG/hf_$n.log" | cut -c1-150)"
    done
    "$B/test_cuda_e2e" tests/fixtures/gpt2_ref.gguf --hf tests/fixtures/gpt2_ref_logits.bin tests/fixtures/gpt2_ref.json \
      > "$LOG/hf_gpt2.log" 2>&1; note "gpt2 rc=$? $(grep -E '^hf ' "$LOG/hf_gpt2.log" | cut -c1-150)"
    "$B/test_batch" cuda > "$LOG/batch.log" 2>&1; note "test_batch cuda rc=$? $(tail -1 "$LOG/batch.log")"
    ;;
  speed)
    for t in ${SPEED_TYPES:-q4_0}; do
      f=/tmp/m/llama3-8b-$t.gguf
      [ -f $f ] || "$B/tallow" synth --shape llama3-8b --type $t -o $f > /dev/null 2>&1
      "$B/tallow" bench -m $f --device cuda -p 512 -n 128 -r 3 2>&1 | tee -a "$LOG/speed.log" | grep -E "^\| llama"
      "$B/tallow" bench -m $f --device cuda -p 0 -n 128 -d 4096 -r 3 2>&1 | tee -a "$LOG/speed.log" | grep -E "^\| llama"
      "$B/tallow" bench -m $f --device cuda -npp 128 -ntg 128 -npl 1,4,16,64 2>&1 | tee -a "$LOG/speed.log" | grep -E "^\| +[0-9]"
      if [ -n "${LLAMA:-}" ]; then
        "$LLAMA/llama-bench" -m $f -ngl 99 -fa 1 -p 512 -n 128 -r 3 2>&1 | tee -a "$LOG/llama.log" | grep -E "^\| "
        "$LLAMA/llama-batched-bench" -m $f -ngl 99 -fa on -c 33792 -npp 128 -ntg 128 -npl 1,4,16,64 2>&1 |
          tee -a "$LOG/llama.log" | grep -E "^\| +[0-9]"
      fi
    done
    ;;
  sanitize)
    compute-sanitizer --tool memcheck --leak-check full "$B/test_batch" cuda > "$LOG/memcheck.log" 2>&1
    note "memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$LOG/memcheck.log" | tail -1)"
    compute-sanitizer --tool racecheck "$B/test_batch" cuda > "$LOG/racecheck.log" 2>&1
    note "racecheck rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$LOG/racecheck.log" | tail -1)"
    ;;
  esac
done
echo "== summary"
printf "%s" "$summary"
