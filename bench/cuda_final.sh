#!/usr/bin/env bash
# bench/cuda_final.sh BUILD PART: the GPU session behind docs/PERFORMANCE.md
# (CUDA), in parts that each fit one device call (10 minutes).
#   check:  kernel parity (test_cuda_kernels) + ceilings + matvec table; the
#           HF tiny fixtures vs transformers on the GPU; CPU-vs-CUDA parity on
#           synthetic tiny models of every type, Llama-3.2-1B f16/q4_0 (q4_0
#           also against its f32-dequantized weights on the CPU: --oracle)
#           and Qwen3-0.6B q8_0; then 8B Q4_0 speed + an op-by-op profile.
#   speed:  tallow bench tg128/pp512 on the other synthetic shapes/types.
#   all:    check, then speed.
#   smol:   SmolLM2-135M-Instruct Q4_1 (real weights) CPU vs CUDA, if
#           $SMOL names the file.
#   sanitize: compute-sanitizer memcheck + racecheck over a tiny e2e run.
#   probe:  test_cuda_kernels --probe: two dependent matvecs as separate
#           launches vs one kernel with a grid barrier (docs/PERFORMANCE.md).
#   stream: the shared-memory streaming matvec (cuda_mvstream.cu, opt-in):
#           its bit-identity checks, tg128 with TALLOW_CUDA_MV_STREAM=1 / 0
#           on STREAM_MODELS, and an ncu look at its first three launches.
#   tune:   kernel checks + matvec table of each build in TUNE_BUILDS, op
#           profiles (decode and prompt), tg128 of TUNE_MODELS under each
#           build and each TUNE_CFGS environment (see the part; TUNE_KEEP=1
#           keeps the synthetic files in /tmp/m for a later part).
# BUILD holds tallow, test_cuda_kernels and test_cuda_e2e (built here or
# carried; BUILD/devlibs: shared libraries a bare GPU machine lacks).
# The fraction of the decode floor uses the copy ceiling measured by
# test_cuda_kernels --bench in the same call (COPY_GBS).
set -uo pipefail
B=${1:-build-cuda}
PART=${2:-check}
LOG=${OUT:-out}
mkdir -p "$LOG"
[ -d "$B/devlibs" ] && export LD_LIBRARY_PATH=$PWD/$B/devlibs:${LD_LIBRARY_PATH:-}
export E2E_MODELS=/tmp/m
mkdir -p /tmp/m
ceiling() { # the copy ceiling in GB/s, measured now
  "$B/test_cuda_kernels" --bench > "$LOG/kernels.log" 2>&1
  echo "test_cuda_kernels exit $?" >> "$LOG/kernels.log"
  awk '/BENCH ceiling copy/ {print $4}' "$LOG/kernels.log"
}
case "$PART" in
check|all)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  export COPY_GBS=$(ceiling)
  grep -E "FAIL|passed|exit" "$LOG/kernels.log"
  grep -E "BENCH (ceiling|q4_0|q8_0|f16 |q4_k|gemm)" "$LOG/kernels.log"
  for n in llama llama_tied llama3rope qwen2 qwen3; do
    "$B/test_cuda_e2e" tests/fixtures/tiny_$n.gguf --hf tests/fixtures/tiny_${n}_logits.bin tests/fixtures/tiny_$n.json
  done
  SPEED=0 bench/cuda_e2e.sh "$B" 2>&1 | grep -E "^e2e|step|failures"
  f=/tmp/m/llama3.2-1b-q4_0.gguf
  "$B/tallow" synth --shape llama3.2-1b --type q4_0 -o $f >/dev/null 2>&1 &&
    "$B/tallow" quantize $f /tmp/m/l1b-f32.gguf f32 >/dev/null 2>&1 &&
    "$B/test_cuda_e2e" $f 24 8 --oracle /tmp/m/l1b-f32.gguf | grep -E "oracle|prompt"
  rm -f /tmp/m/*
  KEEP_MODELS=1 PARITY=0 SPEED_MODELS="llama3-8b:q4_0" bench/cuda_e2e.sh "$B" 2>&1 | grep -E "SPEED|rror"
  "$B/test_cuda_e2e" /tmp/m/llama3-8b-q4_0.gguf --depth 4096 | grep depth
  "$B/test_cuda_e2e" /tmp/m/llama3-8b-q4_0.gguf --depth 512 --ctx 32768 | grep depth
  TALLOW_CUDA_PROF=1 "$B/tallow" bench -m /tmp/m/llama3-8b-q4_0.gguf --device cuda -p 0 -n 32 -r 1 2>&1 |
    grep "cuda profile"
  rm -f /tmp/m/*
  ;;&
speed|all)
  export COPY_GBS=${COPY_GBS:-$(ceiling)}
  grep -E "BENCH ceiling" "$LOG/kernels.log"
  PARITY=0 SPEED_MODELS="${SPEED_MODELS:-llama3.2-1b:f16 llama3.2-1b:q4_0 llama3-8b:q8_0 llama3-8b:q4_k_m llama3-8b:f16 qwen3-8b:q4_0}" \
    bench/cuda_e2e.sh "$B" 2>&1 | grep -E "SPEED|rror"
  ;;
smol)
  [ -f "${SMOL:-}" ] && "$B/test_cuda_e2e" "$SMOL" 24 32
  ;;
sanitize)
  # compute-sanitizer (memcheck, then racecheck for shared memory) over a
  # whole CPU-vs-CUDA run of tiny synthetic models (head_dim 64: the flash
  # prompt path; decode graph with programmatic dependent launch; the down
  # projection quantizing its input in shared memory: TALLOW_CUDA_INQ=1;
  # the greedy argmax in the head's epilogue; qwen3: the attention with its
  # bias/norm/RoPE/KV prologue, then again with that prologue as its own
  # launch, TALLOW_CUDA_ATT_PRO=0)
  for spec in llama:q4_0 llama:q4_k_m qwen3:q4_0 qwen3:f16; do
    t=${spec#*:}
    "$B/tallow" synth --shape tiny --arch ${spec%%:*} --type $t -o /tmp/m/tiny.gguf >/dev/null 2>&1
    for tool in memcheck racecheck; do
      for pro in 1 0; do
        [ $pro = 0 ] && [ ${spec%%:*} != qwen3 ] && continue
        TALLOW_CUDA_ATT_PRO=$pro TALLOW_CUDA_INQ=1 compute-sanitizer --tool $tool --error-exitcode 9 \
          "$B/test_cuda_e2e" /tmp/m/tiny.gguf 20 16 > "$LOG/san-${spec/:/-}-$tool-$pro.log" 2>&1
        echo "compute-sanitizer $tool ($spec, prologue folded $pro): exit $?"
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|e2e passed|FAIL" "$LOG/san-${spec/:/-}-$tool-$pro.log"
      done
    done
    rm -f /tmp/m/tiny.gguf
  done
  ;;
probe)
  "$B/test_cuda_kernels" --probe
  ;;
stream)
  "$B/test_cuda_kernels" > "$LOG/kernels.log" 2>&1
  echo "test_cuda_kernels exit $?"
  grep -E "FAIL|passed" "$LOG/kernels.log"
  echo "bit-identical to the register kernel: $(grep -c 'identical to the register' "$LOG/kernels.log")"
  for spec in ${STREAM_MODELS:-llama3-8b:q4_0 llama3.2-1b:f16 llama3.2-1b:q4_0 llama3-8b:q8_0 llama3-8b:f16}; do
    f=/tmp/m/${spec/:/-}.gguf
    "$B/tallow" synth --shape ${spec%%:*} --type ${spec##*:} -o $f >/dev/null 2>&1
    for cfg in 1 0; do
      echo "== $spec TALLOW_CUDA_MV_STREAM=$cfg"
      TALLOW_CUDA_MV_STREAM=$cfg "$B/tallow" bench -m $f --device cuda -p 0 -n 128 -r 3 2>&1 | grep -E "tg128|rror"
    done
    rm -f $f
  done
  ncu --clock-control none --kernel-name regex:mvs_k --launch-count 3 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy "$B/test_cuda_kernels" \
    > "$LOG/ncu.txt" 2>&1
  grep -E "mvs_k|DRAM Throughput|Duration|Warp Cycles Per Issued|Achieved Active Warps|scoreboard" "$LOG/ncu.txt"
  ;;

tune)
  # decode/prompt tuning: kernel checks + matvec table of each build in
  # TUNE_BUILDS (default BUILD; TUNE_KERNELS=0 skips), op profiles of the
  # first model (TUNE_PROF=0 skips; first batch/step not counted), then
  # tg128 of each model in TUNE_MODELS (shape:type) under each build and
  # each configuration of TUNE_CFGS ("+"-separated VAR=VALUE, "-" for the
  # defaults), e.g. TALLOW_CUDA_ATT_WARPS=4+TALLOW_CUDA_EPI=2,2; the ablation
  # TALLOW_CUDA_SKIP=attention (or wo, qkv, gate, down, output: the head with
  # its argmax) gives what each decode op costs in place
  if [ "${TUNE_KERNELS:-1}" = 1 ]; then
    for b in ${TUNE_BUILDS:-$B}; do
      "$b/test_cuda_kernels" --bench > "$LOG/kernels-${b//\//_}.log" 2>&1
      echo "== $b: test_cuda_kernels exit $?"
      grep -E "FAIL|passed|BENCH (ceiling|q4_k|q6_k|q4_0|f16 ) " "$LOG/kernels-${b//\//_}.log"
    done
  fi
  first=
  for spec in ${TUNE_MODELS:-llama3-8b:q4_0 llama3.2-1b:q4_0}; do
    f=/tmp/m/${spec/:/-}.gguf
    [ -f $f ] || "$B/tallow" synth --shape ${spec%%:*} --type ${spec##*:} -o $f >/dev/null 2>&1
    [ -n "$first" ] || first=$f
  done
  [ "${TUNE_PROF:-1}" = 1 ] &&
    TALLOW_CUDA_PROF=1 "$B/tallow" bench -m $first --device cuda -p 512 -n 32 -r 2 2>&1 | grep -E "cuda profile|pp512|tg32"
  for spec in ${TUNE_MODELS:-llama3-8b:q4_0 llama3.2-1b:q4_0}; do
    for b in ${TUNE_BUILDS:-$B}; do
      for cfg in ${TUNE_CFGS:--}; do
        echo "== $spec $b $cfg"
        ( [ "$cfg" = - ] || export ${cfg//+/ }; "$b/tallow" bench -m /tmp/m/${spec/:/-}.gguf --device cuda \
            -p ${TUNE_P:-0} -n 128 -r 3 2>&1 | grep -E "^device|pp512|tg128" )
      done
    done
  done
  [ "${TUNE_KEEP:-0}" = 1 ] || rm -f /tmp/m/*
  ;;


esac
