#!/usr/bin/env bash
# bench/gpu_check.sh BUILD [PART...]: one device call's checks and timings
# for the engine on the GPU machine (binaries from bench/gpu_pack.sh, or a
# build made there). Logs go to $OUT (or ./out); the last lines are a table.
# Parts (default: kernels tests speed):
#   kernels: test_cuda_kernels (the single-sequence decode kernels)
#   tests:   test_cuda_batch (the batched kernels), the HF tiny fixtures of every architecture
#            (test_cuda_e2e --hf), test_batch cuda (batched vs alone, forks,
#            full pool, occupancy)
#   speed:   synthetic Llama-3-8B Q4_0 (SPEED_TYPES): tg128, pp512, tg at
#            depth 4096, batched 128+128 at 1/4/16/64 sequences; llama.cpp
#            beside it when LLAMA=dir holds its CUDA build
#   sanitize: compute-sanitizer memcheck and racecheck over test_cuda_batch,
#            memcheck over test_batch cuda
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
shift || true
PARTS=${*:-kernels tests speed}
LOG=${OUT:-out}
mkdir -p "$LOG" /tmp/m
export LD_LIBRARY_PATH=$PWD/$B:$PWD/$B/devlibs:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv,noheader
summary=""
note() { summary="$summary$1"$'\n'; }
for part in $PARTS; do
  case $part in
  kernels)
    timeout 180 "$B/test_cuda_kernels" > "$LOG/kernels.log" 2>&1; note "test_cuda_kernels rc=$? $(tail -1 "$LOG/kernels.log")"
    ;;
  tests)
    timeout 180 "$B/test_cuda_batch" > "$LOG/cuda_batch.log" 2>&1; note "test_cuda_batch rc=$? $(tail -1 "$LOG/cuda_batch.log")"
    for n in llama llama_tied llama3rope qwen2 qwen3 gemma3; do
      timeout 60 "$B/test_cuda_e2e" tests/fixtures/tiny_$n.gguf --hf tests/fixtures/tiny_${n}_logits.bin tests/fixtures/tiny_$n.json \
        > "$LOG/hf_$n.log" 2>&1; note "hf $n rc=$? $(grep -E '^hf ' "$LOG/hf_$n.log" | cut -c1-150)"
    done
    "$B/test_cuda_e2e" tests/fixtures/gpt2_ref.gguf --hf tests/fixtures/gpt2_ref_logits.bin tests/fixtures/gpt2_ref.json \
      > "$LOG/hf_gpt2.log" 2>&1; note "gpt2 rc=$? $(grep -E '^hf ' "$LOG/hf_gpt2.log" | cut -c1-150)"
    timeout 240 "$B/test_batch" cuda > "$LOG/batch.log" 2>&1; note "test_batch cuda rc=$? $(tail -1 "$LOG/batch.log")"
    ;;
  speed)
    for t in ${SPEED_TYPES:-q4_0}; do
      f=/tmp/m/llama3-8b-$t.gguf
      [ -f $f ] || "$B/tallow" synth --shape llama3-8b --type $t -o $f > /dev/null 2>&1
      "$B/tallow" bench -m $f --device cuda -p 512 -n 128 -r 3 2>&1 | tee -a "$LOG/speed.log" | grep -E "^\| llama"
      [ $t = q4_0 ] && "$B/tallow" bench -m $f --device cuda -p 0 -n 128 -d 4096 -r 3 2>&1 | tee -a "$LOG/speed.log" | grep -E "^\| llama"
      "$B/tallow" bench -m $f --device cuda -npp 128 -ntg 128 -npl 1,4,16,64 2>&1 | tee -a "$LOG/speed.log" | grep -E "^\| +[0-9]"
      if [ -n "${LLAMA:-}" ]; then
        "$LLAMA/llama-bench" -m $f -ngl 99 -fa 1 -p 512 -n 128 -r 3 2>&1 | tee -a "$LOG/llama.log" | grep -E "^\| "
        "$LLAMA/llama-batched-bench" -m $f -ngl 99 -fa on -c 33792 -npp 128 -ntg 128 -npl 1,4,16,64 2>&1 |
          tee -a "$LOG/llama.log" | grep -E "^\| +[0-9]"
      fi
      rm -f $f
    done
    ;;
  sanitize)
    for tool in memcheck racecheck; do
      timeout 150 compute-sanitizer --tool $tool "$B/test_cuda_batch" > "$LOG/$tool.log" 2>&1
      note "$tool test_cuda_batch rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOG/$tool.log" | tail -1)"
    done
    timeout 150 compute-sanitizer --tool memcheck "$B/test_batch" cuda > "$LOG/memcheck_e2e.log" 2>&1
    note "memcheck test_batch cuda rc=$? $(grep -E 'ERROR SUMMARY' "$LOG/memcheck_e2e.log" | tail -1)"
    ;;
  esac
done
echo "== summary"
printf "%s" "$summary"
