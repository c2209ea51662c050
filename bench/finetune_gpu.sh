#!/usr/bin/env bash
# bench/finetune_gpu.sh [BUILD]: one device call's checks and timings of LoRA
# fine-tuning on CUDA (binaries from bench/gpu_pack.sh with
# EXTRA_TARGETS="test_lora_train_cuda test_train_cuda"). Logs go to $OUT.
#   test:  tests/gpu/test_lora_train_cuda on tiny_llama f32 and its q8_0,
#          q4_0, q4_1 quantizations, and tests/gpu/test_train_cuda
#   cli:   tallow finetune --device cuda on a random-weight SmolLM2-135M
#          shape (q4_1), held-out loss, then tallow run --lora on cpu and cuda
#   speed: finetune step time, cpu (all cores) vs cuda f32/bf16, on the
#          135M shape and (cuda) the Llama-3-8B shape (q4_0); SPEED_135 (default
#          "cpu:f32 cuda:f32 cuda:bf16") and SPEED_8B (default "bf16 tf32 f32") pick the runs
set -uo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-gpu}
LOG=${OUT:-out}
mkdir -p "$LOG"
export LD_LIBRARY_PATH=$PWD/$B:$PWD/$B/devlibs:${LD_LIBRARY_PATH:-}
T=$B/tallow
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | grep 'Model name'; nproc; } |
  tee "$LOG/summary.log"
note() { echo "$1" | tee -a "$LOG/summary.log"; }
# the median of the per-step times of a finetune log (its cumulative "N.N s" column), skipping the first two
step_ms() { awk '/^step [0-9]+: loss/ {t=$(NF-1); if (n++ >= 2) print (t - p) * 1000; p=t}' "$1" | sort -n |
  awk '{a[NR]=$1} END {if (NR) printf "%.0f", a[int((NR+1)/2)]; else printf "nan"}'; }

for q in q8_0 q4_0 q4_1; do $T quantize tests/fixtures/tiny_llama.gguf /tmp/tiny_$q.gguf $q > /dev/null 2>&1; done
timeout 200 $B/test_lora_train_cuda tests/fixtures/tiny_llama.gguf /tmp/tiny_q8_0.gguf /tmp/tiny_q4_0.gguf \
  /tmp/tiny_q4_1.gguf > "$LOG/test_lora_train_cuda.log" 2>&1
note "test_lora_train_cuda rc=$? $(tail -1 "$LOG/test_lora_train_cuda.log")"
timeout 200 $B/test_train_cuda > "$LOG/test_train_cuda.log" 2>&1
note "test_train_cuda rc=$? $(tail -1 "$LOG/test_train_cuda.log")"
# the engine's weight upload and dequantization are shared with the frozen weights
timeout 200 $B/test_cuda_kernels > "$LOG/test_cuda_kernels.log" 2>&1
note "test_cuda_kernels rc=$? $(tail -1 "$LOG/test_cuda_kernels.log")"
timeout 200 $B/test_lora_batch cuda > "$LOG/test_lora_batch.log" 2>&1
note "test_lora_batch cuda rc=$? $(tail -1 "$LOG/test_lora_batch.log")"

cat README.md docs/*.md > /tmp/ft.txt
$T synth --shape smollm2-135m --type q4_1 -o /tmp/s135.gguf > /dev/null 2>&1
timeout 200 $T finetune --device cuda -m /tmp/s135.gguf --text /tmp/ft.txt --steps 40 --batch 4 --ctx 128 \
  --lr 3e-3 -o /tmp/a135.gguf > "$LOG/cli_finetune.log" 2>&1
note "finetune cuda rc=$? $(grep held-out "$LOG/cli_finetune.log" | tr '\n' ' ')"
for dev in cpu cuda; do
  ngl=0; [ $dev = cuda ] && ngl=99
  timeout 60 $T run -m /tmp/s135.gguf -ngl $ngl -p "The engine" -n 12 --temp 0 > "$LOG/run_base_$dev.log" 2>&1
  timeout 60 $T run -m /tmp/s135.gguf -ngl $ngl --lora /tmp/a135.gguf -p "The engine" -n 12 --temp 0 \
    > "$LOG/run_lora_$dev.log" 2>&1
  note "run $dev rc=$?: adapter changes the output: $(cmp -s "$LOG/run_base_$dev.log" "$LOG/run_lora_$dev.log" && echo no || echo yes)"
done

for cfg in ${SPEED_135:-cpu:f32 cuda:f32 cuda:bf16}; do
  set -- ${cfg/:/ } s135
  timeout 200 $T finetune --device $1 --matmul $2 -t "$(nproc)" -m /tmp/$3.gguf --text /tmp/ft.txt --steps 8 \
    --batch 4 --ctx 256 -o /tmp/x.gguf > "$LOG/speed_$1_$2_$3.log" 2>&1
  note "speed $1 $2 $3 B4 T256 rc=$?: median step $(step_ms "$LOG/speed_$1_$2_$3.log") ms"
done
timeout 150 $T synth --shape llama3-8b --type q4_0 -o /tmp/l8b.gguf > /dev/null 2>&1
for mm in ${SPEED_8B:-bf16 tf32 f32}; do
  timeout 150 $T finetune --device cuda --matmul $mm -m /tmp/l8b.gguf --text /tmp/ft.txt --steps 6 --batch 4 \
    --ctx 256 --eval-batches 1 --lora-rank 16 -o /tmp/x.gguf > "$LOG/speed_cuda_${mm}_l8b.log" 2>&1
  note "speed cuda $mm llama3-8b q4_0 r16 B4 T256 rc=$?: median step $(step_ms "$LOG/speed_cuda_${mm}_l8b.log") ms"
done
