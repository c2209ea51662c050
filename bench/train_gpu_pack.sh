#!/usr/bin/env bash
# bench/train_gpu_pack.sh DEST: builds the CUDA training binaries here (no
# GPU needed) and packs into DEST (a git-ignored folder of the checkout the
# device tool sends; name it in `carry`):
#   DEST/src.tar.xz: this worktree's tracked files (the source the run uses)
#   DEST/bin.tar.xz: build-gpu/{tallow, test_train_cuda, train_gpu_oracle,
#                    libtallow.so*, devlibs/}
#   DEST/corpus.txt: the text bench/train_gpu.sh's cli part trains on
# On the GPU machine: unpack both into one folder, then bench/train_gpu.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:?usage: bench/train_gpu_pack.sh DEST}
B=build-gpu
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DTALLOW_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DTALLOW_WERROR=ON \
  -DTALLOW_SHARED_TOOLS=ON >/dev/null
cmake --build $B -j"${JOBS:-2}" --target tallow test_train_cuda train_gpu_oracle
mkdir -p $B/devlibs "$DEST"
for lib in libpcre2-8.so.0 libutf8proc.so.2 libcjson.so.1; do
  p=$(ldconfig -p | awk -v l="$lib" '$1 == l && !f {print $NF; f = 1}') # no early exit: pipefail
  [ -n "$p" ] && cp -L "$p" $B/devlibs/
done
strip --strip-unneeded $B/libtallow.so.0.1.0 $B/tallow $B/test_train_cuda $B/train_gpu_oracle 2>/dev/null || true
tar -cJf "$DEST/bin.tar.xz" $B/tallow $B/test_train_cuda $B/train_gpu_oracle $B/libtallow.so* $B/devlibs
git ls-files -z | tar --null -T - -cJf "$DEST/src.tar.xz"
head -c 1500000 "${CORPUS:-../shared/corpora/austen.txt}" > "$DEST/corpus.txt"
ls -la "$DEST"
