#!/usr/bin/env bash
# bench/gpu_profile.sh BUILD [PART...]: op-level timing tables on the GPU
# machine, which has no Nsight Systems (binaries from bench/gpu_pack.sh with
# EXTRA_TARGETS="train_gpu_oracle ..."). Logs go to $OUT (or ./out).
# Parts (default: decode train):
#   decode: synthetic Llama-3-8B (PROFILE_TYPES, default q4_0 f16), `tallow
#           bench --profile` of batched decode (128 + 32 tokens) at 1 sequence in
#           a 64-sequence context and at 4 and 64 sequences: time per op and
#           tokens in the step (steps run eagerly, so totals exceed the
#           captured steps' time)
#   train:  GPT-2 124M, B=16, T=1024: train_gpu_oracle --profile, time per
#           kernel call (tcu_*) over 3 steps, in tf32 and bf16 modes
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
shift || true
PARTS=${*:-decode train}
LOG=${OUT:-out}
mkdir -p "$LOG" /tmp/m
export LD_LIBRARY_PATH=$PWD/$B:$PWD/$B/devlibs:${LD_LIBRARY_PATH:-}
for part in $PARTS; do
  case $part in
  decode)
    for t in ${PROFILE_TYPES:-q4_0 f16}; do
      f=/tmp/m/llama3-8b-$t.gguf
      [ -f $f ] || "$B/tallow" synth --shape llama3-8b --type $t -o $f > /dev/null 2>&1
      timeout 150 "$B/tallow" bench -m $f --device cuda -npp 128 -ntg 32 -npl 1,4,64 --profile \
        > "$LOG/profile_decode_$t.log" 2>&1
      echo "profile decode $t rc=$?"
    done
    ;;
  train)
    G124="--layers 12 --dim 768 --heads 12 --vocab 50257 --ctx 1024"
    for mm in tf32 bf16; do
      timeout 120 "$B/train_gpu_oracle" /tmp $G124 --batch 16 --bench 3 --profile 1 --matmul $mm \
        > "$LOG/profile_train_$mm.log" 2>&1
      echo "profile train $mm rc=$?"
    done
    ;;
  esac
done
