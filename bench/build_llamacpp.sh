#!/usr/bin/env bash
# build_llamacpp.sh: builds the CPU-only llama.cpp that tallow is measured and tested against.
#
# Why: llama.cpp is the independent peer for CPU speed (bench/cpu_vs_llamacpp.sh) and the oracle
# for real-model fixtures (tests/fixtures/make_smollm2_ref.py). No git host is reachable, so the
# source comes from the llama.cpp tree vendored in the llama-cpp-python sdist on PyPI, pinned below.
# Nothing of llama.cpp is added to git: source and build live in the git-ignored build-llamacpp/.
#
# Usage: bench/build_llamacpp.sh [-j N] [--cuda]   (default -j2: the dev machine has 2 shared cores)
#   --cuda   also build ggml's CUDA backend (needs nvcc); it goes to build-llamacpp-cuda/ so the
#            CPU build stays as it is.
# Result: build-llamacpp/bin/{llama-bench,llama-batched-bench,llama-server,llama-perplexity,
#         llama-quantize,llama-cli,llama-simple,llama-tokenize}, build-llamacpp/bin/libllama.so
#         (+ libggml*.so), and
#         build-llamacpp/src/ (the extracted sdist; its llama_cpp/ python package can be used with
#         LLAMA_CPP_LIB_PATH=build-llamacpp/bin). Idempotent: re-running only rebuilds what changed.
set -euo pipefail

LCP_VERSION=0.3.36
# llama.cpp b11312, the commit vendored by llama-cpp-python 0.3.36 (its CHANGELOG.md says
# "update llama.cpp to ggml-org/llama.cpp@0c1e57098").
LLAMA_COMMIT=0c1e57098
LLAMA_BUILD=11312

JOBS=2
CUDA=OFF
while [ $# -gt 0 ]; do
    case "$1" in
        -j) [ -n "${2:-}" ] || { echo "build_llamacpp: -j needs a number" >&2; exit 2; }
            JOBS=$2; shift 2 ;;
        --cuda) CUDA=ON; shift ;;
        *) echo "build_llamacpp: unknown argument '$1' (usage: [-j N] [--cuda])" >&2; exit 2 ;;
    esac
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/build-llamacpp
[ "$CUDA" = ON ] && OUT=$ROOT/build-llamacpp-cuda
SRC=$OUT/src/llama_cpp_python-$LCP_VERSION
LSRC=$SRC/vendor/llama.cpp
BLD=$OUT/cmake

die() { echo "build_llamacpp: $*" >&2; exit 1; }

command -v cmake >/dev/null || die "cmake not found (apt-get install cmake)"
command -v c++ >/dev/null || command -v g++ >/dev/null || die "no C++ compiler (apt-get install g++)"
command -v pip >/dev/null || die "pip not found"
if [ "$CUDA" = ON ]; then command -v nvcc >/dev/null || die "--cuda: nvcc not found"; fi

mkdir -p "$OUT/src"
if [ ! -f "$LSRC/CMakeLists.txt" ]; then
    TARBALL=$OUT/src/llama_cpp_python-$LCP_VERSION.tar.gz
    if [ ! -f "$TARBALL" ]; then
        echo "build_llamacpp: downloading llama-cpp-python==$LCP_VERSION sdist from PyPI"
        pip download --no-deps --no-binary :all: "llama-cpp-python==$LCP_VERSION" -d "$OUT/src" \
            >"$OUT/src/pip.log" 2>&1 || die "pip download failed, see $OUT/src/pip.log"
    fi
    [ -f "$TARBALL" ] || die "expected $TARBALL after pip download"
    tar -xzf "$TARBALL" -C "$OUT/src" || die "could not extract $TARBALL"
    [ -f "$LSRC/CMakeLists.txt" ] || die "sdist has no vendor/llama.cpp/CMakeLists.txt"
fi

# Native ISA (same flags a user building llama.cpp on this machine gets), no tests, server
# without its web UI (the prebuilt one would be downloaded, and no network is reachable) and
# without OpenSSL. Build number/commit passed in because the vendored tree has no .git.
cmake -S "$LSRC" -B "$BLD" \
    -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=ON \
    -DGGML_NATIVE=ON -DGGML_CUDA="$CUDA" -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON \
    -DLLAMA_BUILD_COMMIT="$LLAMA_COMMIT" -DLLAMA_BUILD_NUMBER="$LLAMA_BUILD" \
    >"$OUT/cmake-configure.log" 2>&1 || die "cmake configure failed, see $OUT/cmake-configure.log"

# Only the targets we use (the full tree takes far longer on 2 cores).
TARGETS="llama llama-bench llama-batched-bench llama-server llama-perplexity llama-quantize
    llama-tokenize llama-simple llama-cli"
HELP=$(cmake --build "$BLD" --target help 2>/dev/null || true)
AVAIL=""
for t in $TARGETS; do
    if grep -q -- "\.\.\. $t\$" <<<"$HELP"; then AVAIL="$AVAIL $t"; fi
done
[ -n "$AVAIL" ] || AVAIL=" $TARGETS"
echo "build_llamacpp: building$AVAIL with -j$JOBS (log: $OUT/build.log)"
# shellcheck disable=SC2086
cmake --build "$BLD" -j"$JOBS" --target $AVAIL >"$OUT/build.log" 2>&1 \
    || { tail -30 "$OUT/build.log" >&2; die "build failed, see $OUT/build.log"; }

# llama.cpp's CMakeLists puts every binary and shared library in <build>/bin
[ -L "$OUT/bin" ] || rm -rf "$OUT/bin"
ln -sfn cmake/bin "$OUT/bin"
for b in llama-bench llama-batched-bench llama-server llama-perplexity llama-quantize; do
    [ -x "$OUT/bin/$b" ] || die "missing $OUT/bin/$b after build"
done
ls "$OUT"/bin/libllama.so* >/dev/null 2>&1 || die "missing libllama.so in $OUT/bin"
echo "llama-cpp-python $LCP_VERSION / llama.cpp b$LLAMA_BUILD ($LLAMA_COMMIT)$([ "$CUDA" = ON ] && echo ", CUDA")" >"$OUT/VERSION"
echo "build_llamacpp: done: $OUT/bin ($(cat "$OUT/VERSION"))"
