#!/usr/bin/env bash
# bench/cuda_final.sh BUILD: the one-call GPU session used for the numbers in
# docs/PERFORMANCE.md (CUDA): kernel tests + ceilings + matvec bench, CPU/CUDA
# parity on synthetic models (PDL on, and off for two), tallow bench speeds,
# an op-by-op decode profile (8B Q4_0) and decode at 4k depth / a 32k context.
set -uo pipefail
B=${1:-build-cuda}
[ -d "$B/devlibs" ] && export LD_LIBRARY_PATH=$PWD/$B/devlibs:${LD_LIBRARY_PATH:-}
export E2E_MODELS=/tmp/m
"$B/test_cuda_kernels" --bench 2>&1 | grep -E "FAIL|passed|BENCH"
SPEED=0 bench/cuda_e2e.sh "$B" 2>&1 | grep -E "^e2e|step|failures"
for f in tiny-f16 llama3.2-1b-f16; do TALLOW_CUDA_PDL=0 "$B/test_cuda_e2e" /tmp/m/$f.gguf 24 32 | sed "s/^/PDL=0 /" | grep -E "PDL=0 e2e"; done
rm -f /tmp/m/*
KEEP_MODELS=1 PARITY=0 SPEED_MODELS="llama3-8b:q4_0" bench/cuda_e2e.sh "$B" 2>&1 | grep -E "SPEED"
TALLOW_CUDA_PDL=0 "$B/tallow" bench -m /tmp/m/llama3-8b-q4_0.gguf --device cuda -p 0 -n 128 -r 3 | grep tg128 | sed 's/^/PDL=0 /'
TALLOW_CUDA_PROF=1 TALLOW_CUDA_PDL=0 "$B/tallow" bench -m /tmp/m/llama3-8b-q4_0.gguf --device cuda -p 0 -n 32 -r 1 2>&1 | grep "cuda profile"
"$B/test_cuda_e2e" /tmp/m/llama3-8b-q4_0.gguf --depth 4096 2>&1 | grep depth
"$B/test_cuda_e2e" /tmp/m/llama3-8b-q4_0.gguf --depth 512 --ctx 32768 2>&1 | grep depth
rm -f /tmp/m/*
PARITY=0 SPEED_MODELS="llama3.2-1b:f16 llama3.2-1b:q4_0 llama3-8b:q8_0 llama3-8b:q4_k_m llama3-8b:f16" bench/cuda_e2e.sh "$B" 2>&1 | grep -E "SPEED|rror"
