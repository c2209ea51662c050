#!/usr/bin/env bash
# bench/lora_decode_profile.sh: after bench/finetune_gpu.sh (its /tmp/l8b.gguf), on the GPU machine:
# tg128 of Llama-3-8B Q4_0 with and without a random rank-16 adapter on all projections, and the
# per-op profile of both (issue 25's batch-1 goal). Logs to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/build-gpu:$PWD/build-gpu/devlibs:${LD_LIBRARY_PATH:-}
T=build-gpu/tallow
timeout 100 $T synth --shape llama3-8b --lora-rank 16 -o /tmp/l8b_r16.gguf > $OUT/synth_lora.log 2>&1
timeout 100 $T bench -m /tmp/l8b.gguf -ngl 99 -p 0 -n 128 -r 3 > $OUT/tg_base.log 2>&1
timeout 100 $T bench -m /tmp/l8b.gguf -ngl 99 -p 0 -n 128 -r 3 --lora /tmp/l8b_r16.gguf > $OUT/tg_lora.log 2>&1
timeout 100 $T bench -m /tmp/l8b.gguf -ngl 99 -npp 16 -ntg 32 -npl 1 --profile --lora /tmp/l8b_r16.gguf > $OUT/prof_lora.log 2>&1
grep -h -E "t/s|tg128" $OUT/tg_base.log $OUT/tg_lora.log | tee -a $OUT/summary.log
timeout 100 $T bench -m /tmp/l8b.gguf -ngl 99 -npp 16 -ntg 32 -npl 1 --profile > $OUT/prof_base.log 2>&1
