#!/usr/bin/env bash
# bench/gpu_pack.sh: builds the CUDA tallow here (no GPU needed) and packs what
# a GPU machine needs to run the GPU tests and benchmarks into .gpucarry/
# (git-ignored; name it in the device tool's `carry`):
#   .gpucarry/tallow-gpu.tar.xz: build-gpu/{tallow, test_*, libtallow.so*, devlibs/}
#     (tools and tests linked against one shared libtallow: one copy of the kernels)
#   .gpucarry/llamacpp-cuda.tar.xz: llama.cpp b11312's CUDA build, when
#     bench/build_llamacpp.sh --cuda has made it
# On the GPU machine: tar -xJf .gpucarry/tallow-gpu.tar.xz, then bench/gpu_check.sh build-gpu
# (a build made there instead runs the same tests with `ctest -L gpu`).
set -euo pipefail
cd "$(dirname "$0")/.."
B=build-gpu
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DTALLOW_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DTALLOW_WERROR=ON \
  -DTALLOW_SHARED_TOOLS=ON >/dev/null
cmake --build $B -j"${JOBS:-2}" --target tallow test_batch test_cuda_kernels test_cuda_e2e ${EXTRA_TARGETS:-}
mkdir -p $B/devlibs .gpucarry
# the shared libraries tallow links beyond the C runtime and CUDA's (the GPU
# machine may lack them: libmicrohttpd and its TLS stack, PCRE2, utf8proc, cJSON)
ldd $B/tallow | awk '$3 ~ /^\// {print $3}' |
  grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*|libtallow|libcuda|libcudart|libcublas[^/]*|libnvidia[^/]*)\.so' |
  while read -r p; do cp -L "$p" $B/devlibs/; done
strip --strip-unneeded $B/libtallow.so.0.1.0 $B/tallow $B/test_batch $B/test_cuda_e2e $B/test_cuda_kernels 2>/dev/null || true
tar -cJf .gpucarry/tallow-gpu.tar.xz $B/tallow $B/test_batch $B/test_cuda_kernels $B/test_cuda_e2e $B/libtallow.so* \
  $B/devlibs ${EXTRA_FILES:-}
if [ -f build-llamacpp-cuda/llamacpp-cuda.tar.xz ]; then cp build-llamacpp-cuda/llamacpp-cuda.tar.xz .gpucarry/; fi
ls -la .gpucarry
