#!/usr/bin/python3
"""PyTorch CPU side of the training-speed comparison (docs/PERFORMANCE.md).

Same model as `tallow train --arch gpt2` (the GPT class of
tests/fixtures/make_train_ref.py: byte vocab 256, learned positions,
pre-LN, GELU-tanh, tied head), same batch shape, AdamW + grad clipping,
random byte batches from the same text file. Prints tokens/s of a full step
(forward + backward + clip + AdamW) averaged after warmup, and peak RSS.
    /usr/bin/python3 bench/train_speed_torch.py --text FILE --layers 4 --dim 128 --heads 4 --ctx 128 --batch 8 --steps 30 --threads 2
"""
import argparse
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
from make_train_ref import GPT  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", required=True)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    data = torch.frombuffer(bytearray(open(a.text, "rb").read()), dtype=torch.uint8).to(torch.int64)
    m = GPT(256, a.ctx, a.dim, a.layers, a.heads)
    decay = [p for p in m.parameters() if p.dim() >= 2]
    nodecay = [p for p in m.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99))
    times, cpus = [], []
    for step in range(a.warmup + a.steps):
        ix = torch.randint(0, len(data) - a.ctx - 1, (a.batch,))
        x = torch.stack([data[i:i + a.ctx] for i in ix])
        y = torch.stack([data[i + 1:i + 1 + a.ctx] for i in ix])
        t0, c0 = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(m(x).view(-1, 256), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
    tok = a.batch * a.ctx
    avg = sum(times) / len(times)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"torch {torch.__version__} threads {a.threads}: {tok / avg:.0f} tok/s (step {avg * 1e3:.1f} ms, "
          f"median {sorted(times)[len(times) // 2] * 1e3:.1f} ms), CPU {sum(cpus) / len(cpus) * 1e3:.1f} ms/step "
          f"({tok * len(cpus) / sum(cpus):.0f} tok per CPU-second), loss {loss.item():.4f}, peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
