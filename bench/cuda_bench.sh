#!/usr/bin/env bash
# bench/cuda_bench.sh: the CUDA backend's check-and-time cycle in one call.
#   1. build with -DTALLOW_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a (skipped when
#      $BUILD already holds the binaries, e.g. built elsewhere and carried)
#   2. run tests/gpu/test_cuda_kernels (every kernel vs its CPU twin)
#   3. --bench: copy-bandwidth and GEMM ceilings, matvec GB/s per type on
#      Llama-3-8B shapes as a fraction of the copy ceiling, prefill GEMM
#   4. optional end-to-end (E2E=1): synth models, CPU vs CUDA logits/greedy,
#      tallow bench tg128/pp512 (see bench/cuda_e2e.sh)
# Usage: bench/cuda_bench.sh [BUILD_DIR]; logs go to $OUT (if set) or ./out.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-${BUILD:-build-cuda}}
LOG=${OUT:-out}
mkdir -p "$LOG"
if [ ! -x "$BUILD/test_cuda_kernels" ] || [ ! -x "$BUILD/tallow" ]; then
  cmake -S . -B "$BUILD" -DTALLOW_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DTALLOW_WERROR=OFF \
    > "$LOG/configure.log" 2>&1 || { tail -30 "$LOG/configure.log"; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" > "$LOG/build.log" 2>&1 || { grep -E "error" "$LOG/build.log" | head -30; exit 1; }
fi
# libraries the build machine had and a bare GPU machine may lack (copied by hand)
[ -d "$BUILD/devlibs" ] && export LD_LIBRARY_PATH=$PWD/$BUILD/devlibs:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used,memory.total --format=csv | tee "$LOG/gpu.txt"
"$BUILD/test_cuda_kernels" --bench 2>&1 | tee "$LOG/kernels.log"
rc=${PIPESTATUS[0]}
echo "test_cuda_kernels exit code: $rc"
if [ "${E2E:-0}" = 1 ] && [ -x bench/cuda_e2e.sh ]; then
  bench/cuda_e2e.sh "$BUILD" 2>&1 | tee "$LOG/e2e.log"
fi
grep BENCH "$LOG/kernels.log"
grep -E "passed|FAIL" "$LOG/kernels.log" | tail -20
exit $rc
