#!/usr/bin/env bash
# Builds and runs every test, then prints one closing line "N passed, N failed".
#  1. release build (warnings are errors) + every ctest entry (C and Python)
#  2. ASan+UBSan build + the C tests (parsers, kernels, ops) under sanitizers
#  3. compile-only check of the CUDA backend when nvcc is present (no GPU needed)
#  4. every libFuzzer harness (tests/fuzz) for a short fixed time under ASan+UBSan
#     when clang is present; its own counts open the summary line
set -u
cd "$(dirname "$0")/.."
JOBS=$(nproc)
pass=0; fail=0; fuzz_note=""
FUZZ_SECONDS=20 # per harness; 10 harnesses, $JOBS at a time
summary() { echo "${fuzz_note}$pass passed, $fail failed"; }

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
    # the server's bounded load test (and its error cases) against the sanitizer build; a
    # small quarantine, or ASan's 256 MB of held frees would read as RSS growth
    TALLOW_BIN=build-asan/tallow ASAN_OPTIONS=detect_leaks=1:quarantine_size_mb=4:thread_local_quarantine_size_kb=64 \
        UBSAN_OPTIONS=print_stacktrace=1 \
        timeout 900 python3 tests/test_serve.py --sanitized > build-asan/serve.log 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        pass=$((pass + 1)); echo "serve load under ASan+UBSan: ok ($(tail -1 build-asan/serve.log))"
    elif [ $rc -eq 77 ]; then
        echo "serve load under ASan+UBSan: skipped ($(tail -1 build-asan/serve.log))"
    else
        tail -30 build-asan/serve.log; fail=$((fail + 1)); echo "serve load under ASan+UBSan: FAILED (rc $rc)"
    fi
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

if command -v clang >/dev/null; then
    echo "== fuzz: libFuzzer + ASan/UBSan, $FUZZ_SECONDS s per harness"
    if CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DTALLOW_FUZZ=ON -DTALLOW_WERROR=ON >/dev/null &&
       cmake --build build-fuzz -j"$JOBS" --target fuzz >build-fuzz/build.log 2>&1; then
        bash tests/fuzz/run.sh build-fuzz "$FUZZ_SECONDS" "$JOBS" | tee build-fuzz/fuzz.log
        fp=$(sed -n 's/^fuzz: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' build-fuzz/fuzz.log)
        ff=$(sed -n 's/^fuzz: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p' build-fuzz/fuzz.log)
        fp=${fp:-0}; ff=${ff:-1}
        pass=$((pass + fp)); fail=$((fail + ff)); fuzz_note="fuzz: $fp passed, $ff failed; all: "
    else
        tail -40 build-fuzz/build.log; fail=$((fail + 1)); echo "fuzz build: FAILED"
        fuzz_note="fuzz: build failed; all: "
    fi
else
    echo "== fuzz skipped: clang not found (scripts/setup.sh installs it)"
fi

summary
[ "$fail" -eq 0 ]
