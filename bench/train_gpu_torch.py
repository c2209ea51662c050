#!/usr/bin/env python3
"""PyTorch side of tallow's GPU training checks (docs/PERFORMANCE.md).

--oracle DIR: DIR holds what tests/gpu/train_gpu_oracle wrote (init weights,
  batches, the first step's gradients, 20 losses). The same GPT-2 (learned
  positions, pre-LN, fused QKV with bias, causal attention, GELU-tanh MLP,
  tied head) is built from those weights in fp32 with TF32 off, runs the same
  batches with the same AdamW (DIR/lr.txt's lr, betas 0.9/0.95, eps 1e-8, wd 0.1 on
  2-d weights, clip 1.0), and the script prints the relative error of the
  loss and of every gradient after one step, and of each of the losses.
  Exit 1 if any is over --tol (1e-4).
--bench: GPT-2 124M (vocab 50257, 12 layers, 768 wide, 12 heads), B=16,
  T=1024, bf16 autocast, fused AdamW, eager and torch.compile: tokens/s of the
  median step and peak memory.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, T, C, L, H):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C, eps=1e-5)

    def forward(self, ids, tgt):
        T = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(T, device=ids.device))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), tgt.view(-1), ignore_index=-100)


def tallow_name(n):
    """torch parameter name -> tallow's (HF GPT-2) name."""
    n = n.replace(".c_attn.", ".attn.c_attn.").replace(".c_fc.", ".mlp.c_fc.").replace(".mlp_proj.", ".mlp.c_proj.")
    if ".c_proj." in n and ".mlp." not in n:
        n = n.replace(".c_proj.", ".attn.c_proj.")
    return n


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        assert v["dtype"] == "F32", (k, v["dtype"])
        out[k] = torch.from_numpy(np.frombuffer(data[a:b], dtype=np.float32).reshape(v["shape"]).copy())
    return out, hdr.get("__metadata__", {})


def optimizer(m, fused=False, lr=1e-3):
    decay = [p for p in m.parameters() if p.dim() >= 2]
    nodecay = [p for p in m.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8, fused=fused)


def oracle(a):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    w, meta = read_safetensors(os.path.join(a.oracle, "init.safetensors"))
    V, T, C, L, H = (int(meta[k]) for k in ("vocab", "ctx", "dim", "layers", "heads"))
    m = GPT(V, T, C, L, H).cuda()
    with torch.no_grad():
        for n, p in m.named_parameters():
            p.copy_(w["model." + tallow_name(n)])
    g_tl, _ = read_safetensors(os.path.join(a.oracle, "grads1.safetensors"))
    losses_tl = [float(l.split()[0]) for l in open(os.path.join(a.oracle, "losses.txt"))]
    steps = len(losses_tl)
    raw = np.fromfile(os.path.join(a.oracle, "batches.bin"), dtype=np.int32)
    BT = raw.size // (2 * steps)
    B = BT // T
    bat = torch.from_numpy(raw.astype(np.int64)).view(steps, 2, B, T).cuda()
    lr_path = os.path.join(a.oracle, "lr.txt")
    lr = float(open(lr_path).read()) if os.path.exists(lr_path) else 1e-3
    opt = optimizer(m, lr=lr)
    worst = 0.0
    for s in range(steps):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.autocast):
            loss = m(bat[s, 0], bat[s, 1])
        loss.backward()
        if s == 0 and not a.autocast:
            print(f"step 1 loss: torch {loss.item():.7f} tallow {losses_tl[0]:.7f} "
                  f"rel {abs(loss.item() - losses_tl[0]) / abs(loss.item()):.2e}")
            gw = 0.0
            for n, p in m.named_parameters():
                gt = g_tl["g." + tallow_name(n)].cuda()
                e = ((gt - p.grad).norm() / p.grad.norm().clamp_min(1e-30)).item()
                emax = ((gt - p.grad).abs().max() / p.grad.abs().max().clamp_min(1e-30)).item()
                if a.verbose or e > a.tol:
                    print(f"  grad {tallow_name(n):32s} rel L2 {e:.2e}  max|d|/max|g| {emax:.2e}")
                gw = max(gw, e)
            print(f"step 1 worst gradient rel L2 error: {gw:.2e} over {len(list(m.parameters()))} tensors")
            worst = max(worst, gw)
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        e = abs(loss.item() - losses_tl[s]) / abs(loss.item())
        worst = max(worst, e)
        print(f"step {s + 1:2d}: torch {loss.item():.7f}  tallow {losses_tl[s]:.7f}  rel {e:.2e}")
    print(f"oracle {'PASS' if worst <= a.tol else 'FAIL'}: worst rel error {worst:.2e} (tol {a.tol:g})")
    return 0 if worst <= a.tol else 1


def bench(a):
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    V, T, C, L, H, B = 50257, 1024, 768, 12, 12, 16
    res = []
    for mode in a.modes.split(","):
        torch.manual_seed(0)
        torch.cuda.reset_peak_memory_stats()
        m = GPT(V, T, C, L, H).cuda()
        opt = optimizer(m, fused=True)
        f = torch.compile(m) if mode == "compile" else m
        ids = torch.randint(0, V, (B, T), device="cuda")
        tgt = torch.randint(0, V, (B, T), device="cuda")
        ts = []
        for s in range(a.warmup + a.steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = f(ids, tgt)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            loss.item()
            ts.append(time.perf_counter() - t0)
        ts = sorted(ts[a.warmup:])
        med = ts[len(ts) // 2]
        n = sum(p.numel() for p in m.parameters())
        flops = 6 * n * B * T + 12 * L * B * T * T * C
        peak = torch.cuda.max_memory_allocated() / 2**30
        print(f"torch {torch.__version__} gpt2-124M B{B} T{T} bf16 {mode}: {B * T / med:.0f} tok/s "
              f"(median step {med * 1e3:.1f} ms), MFU {100 * flops / med / 989e12:.1f}%, peak {peak:.1f} GiB")
        del m, opt, f
        torch.cuda.empty_cache()
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--autocast", action="store_true", help="oracle: torch in bf16 autocast, losses only")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    if a.oracle:
        return oracle(a)
    if a.bench:
        return bench(a)
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
