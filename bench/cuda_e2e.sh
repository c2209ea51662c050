#!/usr/bin/env bash
# bench/cuda_e2e.sh BUILD_DIR: end-to-end CUDA checks and speed on synthetic
# models (tallow synth), run on a GPU machine (bench/cuda_bench.sh calls it
# with E2E=1).
#   parity: test_cuda_e2e (CPU engine vs CUDA: prompt logits, 32 greedy
#           steps, decode logits) on tiny models of several types, a synth
#           Llama-3.2-1B and a Qwen3-0.6B; quantized files also against
#           their f32-dequantized copy on the CPU (--oracle);
#   speed:  tallow bench --device cuda, pp512 + tg128, on Llama-3.2-1B F16/Q4_0
#           and Llama-3-8B Q4_0/Q8_0/F16/Q4_K_M; the fraction of the decode
#           floor = t/s * file bytes / copy bandwidth (COPY_GBS, measured by
#           test_cuda_kernels --bench in the same call), and beside it tallow
#           bench's own fractions (its "frac" column).
# Env: E2E_MODELS=dir for the synthetic files (default /tmp/tl-synth),
#      COPY_GBS (default 4222, the H200 copy ceiling measured 2026-11-30),
#      SPEED=0 to skip the speed part, PARITY=0 to skip parity.
set -uo pipefail
B=${1:-build-cuda}
D=${E2E_MODELS:-/tmp/tl-synth}
BW=${COPY_GBS:-4222}
mkdir -p "$D"
synth() { # shape type -> path
  local f="$D/$1-$2.gguf"
  [ -f "$f" ] || "$B/tallow" synth --shape "$1" --type "$2" -o "$f" >&2 || return 1
  echo "$f"
}
fails=0
if [ "${PARITY:-1}" = 1 ]; then
  # quantized types: also against the same weights dequantized to f32 (oracle)
  oracle() { # model -> "--oracle F32_COPY" for quantized files
    case "$1" in *-f32.gguf|*-f16.gguf|*-bf16.gguf) return ;; esac
    "$B/tallow" quantize "$1" "${1%.gguf}.f32ref.gguf" f32 >/dev/null 2>&1 && echo "--oracle ${1%.gguf}.f32ref.gguf"
  }
  for t in f32 f16 bf16 q8_0 q4_0 q4_1 q4_k_m; do
    f=$(synth tiny $t) && "$B/test_cuda_e2e" "$f" 20 32 $(oracle "$f") || fails=$((fails + 1))
  done
  # decode across the switch between the short- and long-context graphs (128 positions)
  f=$(synth tiny q4_0) && "$B/test_cuda_e2e" "$f" 100 64 $(oracle "$f") || fails=$((fails + 1))
  for spec in "llama3.2-1b f16" "llama3.2-1b q4_0" "qwen3-0.6b q8_0"; do
    set -- $spec
    f=$(synth "$1" "$2") && "$B/test_cuda_e2e" "$f" 24 32 $(oracle "$f") || fails=$((fails + 1))
    rm -f "${f%.gguf}.f32ref.gguf"
  done
  echo "E2E parity failures: $fails"
fi
if [ "${SPEED:-1}" = 1 ]; then
  for spec in ${SPEED_MODELS:-"llama3.2-1b:f16" "llama3.2-1b:q4_0" "llama3-8b:q4_0" "llama3-8b:q8_0" "llama3-8b:f16" "llama3-8b:q4_k_m"}; do
    shape=${spec%%:*}; type=${spec##*:}
    f=$(synth "$shape" "$type") || continue
    bytes=$(stat -c %s "$f")
    out=$("$B/tallow" bench -m "$f" --device cuda -p 512 -n 128 -r 3 2>&1)
    echo "$out"
    tg=$(echo "$out" | awk -F'|' '/tg128/ {gsub(/ /,"",$9); print $9}')
    pp=$(echo "$out" | awk -F'|' '/pp512/ {gsub(/ /,"",$9); print $9}')
    # tallow bench's own floor fractions (its ceilings, decode bytes without
    # the embedding table, + KV; prompt FLOPs at the GEMM rate)
    tgf=$(echo "$out" | awk -F'|' '/tg128/ {gsub(/ /,"",$11); print $11}')
    ppf=$(echo "$out" | awk -F'|' '/pp512/ {gsub(/ /,"",$11); print $11}')
    awk -v s="$shape" -v t="$type" -v b="$bytes" -v bw="$BW" -v tg="$tg" -v pp="$pp" -v tgf="$tgf" -v ppf="$ppf" 'BEGIN {
      floor = bw * 1e9 / b;
      printf "SPEED %-12s %-7s file %.2f GiB  tg128 %8.1f t/s  floor %7.1f  frac %.3f  pp512 %9.1f t/s  bench frac tg %s pp %s\n",
             s, t, b / 1073741824, tg, floor, (tg > 0 ? tg / floor : 0), pp, tgf, ppf }'
    [ "${KEEP_MODELS:-0}" = 1 ] || rm -f "$f"
  done
fi
exit $fails
