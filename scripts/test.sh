#!/usr/bin/env bash
# Builds and runs every test, then prints one closing line "N passed, N failed".
#  1. release build (warnings are errors) + every ctest entry (C and Python)
#  2. ASan+UBSan build + the C tests (parsers, kernels, ops) under sanitizers
#  3. compile-only check of the CUDA backend when nvcc is present (no GPU needed)
set -u
cd "$(dirname "$0")/.."
JOBS=$(nproc)
pass=0; fail=0
summary() { echo "$pass passed, $fail failed"; }

count_ctest() { # $1 = ctest log
    local p f
    p=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed' "$1")
    f=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Exception|\*\*\*Timeout|Not Run)' "$1")
    pass=$((pass + p)); fail=$((fail + f))
}

# fetch the real models so end-to-end tests can run (they skip, saying so, if absent)
bash scripts/fetch_model.sh || echo "test: SmolLM2 fetch failed; its tests will skip"
bash scripts/fetch_model.sh --gemma || echo "test: Gemma-3 fetch failed; its tests will skip"

echo "== release build"
if cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTALLOW_WERROR=ON >/dev/null && cmake --build build -j"$JOBS"; then
    (cd build && ctest --output-on-failure -j"$JOBS" 2>&1) | tee build/ctest.log
    count_ctest build/ctest.log
else
    echo "test: release build FAILED"; fail=$((fail + 1))
fi

echo "== ASan+UBSan build"
if cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTALLOW_SANITIZE=ON -DTALLOW_WERROR=ON >/dev/null &&
   cmake --build build-asan -j"$JOBS"; then
    (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        ctest --output-on-failure -j"$JOBS" -E '^py_' 2>&1) | tee build-asan/ctest.log
    count_ctest build-asan/ctest.log
else
    echo "test: sanitizer build FAILED"; fail=$((fail + 1))
fi

if command -v nvcc >/dev/null; then
    echo "== CUDA compile check (nvcc $(nvcc --version | grep -o 'release [0-9.]*'))"
    if cmake -S . -B build-cuda-ci -DTALLOW_CUDA=ON -DTALLOW_WERROR=ON >/dev/null && cmake --build build-cuda-ci -j"$JOBS" >build-cuda-ci/build.log 2>&1; then
        pass=$((pass + 1)); echo "CUDA build: ok"
    else
        tail -40 build-cuda-ci/build.log; fail=$((fail + 1)); echo "CUDA build: FAILED"
    fi
else
    echo "== CUDA compile check skipped: nvcc not found"
fi

summary
[ "$fail" -eq 0 ]
