#!/usr/bin/env bash
# bench/train_gpu.sh [BUILD] [PART...]: one device call's checks and timings of
# training on CUDA (binaries from bench/train_gpu_pack.sh, or a build made
# there). Logs go to $OUT (or ./out). Parts (default: all, in this order):
#   test:    tests/gpu/test_train_cuda (every CUDA op vs its CPU twin, AdamW,
#            a GPT-2 step, the guard, bit-identical GPU resume)
#   oracle:  GPT-2 124M shape, B=4 T=1024: tallow fp32 on the GPU vs PyTorch fp32
#            (TF32 off): loss and every gradient after one step, 20 losses, tol 1e-4
#            (AdamW lr ORACLE_LR_E6 * 1e-6, default 300: at 1e-3 the random-token run diverges and amplifies fp32 rounding past 1e-4 after step 15)
#   bf16:    tallow --matmul bf16 vs PyTorch bf16 autocast, 50 losses, tol 1e-2
#   speed:   GPT-2 124M B=16 T=1024 steps/s: tallow f32/tf32/bf16, PyTorch eager
#            and torch.compile (bf16 autocast)
#   cli:     tallow train --device cuda --arch gpt2 on TEXT (bytes), checkpoint,
#            resume bit-identical, export, the engine runs the export on cpu and cuda
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
shift || true
PARTS=${*:-test oracle bf16 speed cli}
LOG=${OUT:-out}
TEXT=${TEXT:-corpus.txt}
mkdir -p "$LOG"
export LD_LIBRARY_PATH=$PWD/$B:$PWD/$B/devlibs:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader; lscpu | grep 'Model name'; } |
  tee "$LOG/summary.log"
note() { echo "$1" | tee -a "$LOG/summary.log"; }
G124="--layers 12 --dim 768 --heads 12 --vocab 50257 --ctx 1024"
for part in $PARTS; do
  case $part in
  test)
    timeout 120 "$B/test_train_cuda" > "$LOG/test.log" 2>&1; note "test_train_cuda rc=$? $(tail -1 "$LOG/test.log")" ;;
  oracle)
    rm -rf /tmp/or && mkdir -p /tmp/or
    { timeout 120 "$B/train_gpu_oracle" /tmp/or $G124 --batch 4 --steps 20 --lr-e6 "${ORACLE_LR_E6:-300}" &&
      timeout 120 python3 bench/train_gpu_torch.py --oracle /tmp/or; } > "$LOG/oracle.log" 2>&1
    note "oracle fp32 rc=$? $(grep -E '^oracle|worst gradient' "$LOG/oracle.log" | tr '\n' ' ')" ;;
  bf16)
    rm -rf /tmp/ob && mkdir -p /tmp/ob
    { timeout 120 "$B/train_gpu_oracle" /tmp/ob $G124 --batch 4 --steps 50 --matmul bf16 --lr-e6 "${ORACLE_LR_E6:-300}" &&
      timeout 120 python3 bench/train_gpu_torch.py --oracle /tmp/ob --autocast --tol 1e-2; } > "$LOG/bf16.log" 2>&1
    note "oracle bf16 rc=$? $(grep -E '^oracle' "$LOG/bf16.log")" ;;
  speed)
    for mm in f32 tf32 bf16; do
      timeout 100 "$B/train_gpu_oracle" /tmp $G124 --batch 16 --bench 10 --matmul $mm >> "$LOG/speed.log" 2>&1
    done
    [ -z "${NO_TORCH_BENCH:-}" ] && timeout 240 python3 bench/train_gpu_torch.py --bench >> "$LOG/speed.log" 2>&1
    note "$(grep -E '^(tallow|torch)' "$LOG/speed.log")" ;;
  cli)
    # constant lr (min-lr = lr, no warmup): the schedule does not depend on
    # --steps, so 100 steps + a resume to 200 must equal 200 straight
    T="$B/tallow train --device cuda --arch gpt2 --text $TEXT --layers 4 --dim 256 --heads 4 --ctx 256 --batch 16"
    T="$T --eval-every 100 --eval-batches 4 --sample-len 32 --lr 1e-3 --min-lr 1e-3 --warmup 0"
    rm -rf /tmp/r1 /tmp/r3
    timeout 150 $T --steps 200 --out /tmp/r1 > "$LOG/cli.log" 2>&1
    rc1=$?
    timeout 100 $T --steps 100 --out /tmp/r3 >> "$LOG/cli.log" 2>&1 &&
      timeout 100 $T --steps 200 --resume /tmp/r3/ckpt.safetensors --out /tmp/r3 >> "$LOG/cli.log" 2>&1
    rc2=$?
    same=no; cmp -s /tmp/r1/ckpt.safetensors /tmp/r3/ckpt.safetensors && same=yes
    $B/tallow export /tmp/r1/ckpt.safetensors /tmp/r1/m.gguf >> "$LOG/cli.log" 2>&1
    for dev in cpu cuda; do
      echo "== engine $dev" >> "$LOG/cli.log"
      timeout 60 $B/tallow run -m /tmp/r1/m.gguf -p "It is a truth" -n 48 --temp 0 --device $dev >> "$LOG/cli.log" 2>&1
      echo "rc=$?" >> "$LOG/cli.log"
    done
    note "cli train rc=$rc1 resume rc=$rc2 resumed ckpt == uninterrupted: $same; $(grep 'final val' "$LOG/cli.log" | head -1)" ;;
  esac
done
