#!/usr/bin/env python3
"""bench/serve_bench.py: output tokens/s, TTFT and inter-token latency of
`tallow serve` and llama-server under N concurrent streaming clients.

Each server is started in turn on the same model with N parallel
sequences, warmed up with one request, then driven by N client threads
(http.client over loopback) that each send requests back to back until the
fixed total is done: POST /v1/completions, stream, temperature 0,
ignore_eos, a prompt of random token ids (seeded, a different prompt per
request so no prefix is reused) and max_tokens output tokens. --mixed
draws each request's prompt and output lengths from a seeded
distribution instead (uniform in [P/4, 2P] and [T/4, 2T]). Rounds
alternate the servers; medians are printed.

  bench/serve_bench.py -m models/SmolLM2-135M-Instruct.Q4_1.gguf --clients 4 \\
      --threads 2 --prompt 128 --gen 64 --requests 16 --rounds 3 \\
      --llama build-llamacpp/bin/llama-server
"""
import argparse
import http.client
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start(cmd, env=None, pattern=None, port=None):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 120
    if pattern:  # tallow prints its port
        while time.time() < deadline:
            line = p.stderr.readline()
            m = re.search(pattern, line)
            if m:
                port = int(m.group(1))
                break
            if not line and p.poll() is not None:
                sys.exit("server exited: %s" % cmd)
    threading.Thread(target=p.stderr.read, daemon=True).start()
    while time.time() < deadline:  # wait for /health
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return p, port
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("server did not come up: %s" % cmd)


def one_request(port, prompt, gen, out):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = {"prompt": prompt, "max_tokens": gen, "temperature": 0, "stream": True, "ignore_eos": True}
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    times = []
    for line in r:
        if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
            continue
        ch = json.loads(line[6:])
        if ch.get("choices") and ch["choices"][0].get("text"):
            times.append(time.perf_counter())
    c.close()
    if r.status != 200 or not times:
        out.append(None)
        return
    itl = [b - a for a, b in zip(times, times[1:])]
    out.append((times[0] - t0, itl, len(times)))


def drive(port, args, seed):
    rng = random.Random(seed)
    reqs = []
    for _ in range(args.requests):
        p, g = args.prompt, args.gen
        if args.mixed:
            p, g = rng.randint(max(1, p // 4), 2 * p), rng.randint(max(1, g // 4), 2 * g)
        reqs.append(([rng.randrange(1000, 30000) for _ in range(p)], g))
    lock = threading.Lock()
    results = []

    def client():
        while True:
            with lock:
                if not reqs:
                    return
                prompt, g = reqs.pop()
            one_request(port, prompt, g, results)
    t0 = time.perf_counter()
    ts = [threading.Thread(target=client) for _ in range(args.clients)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    wall = time.perf_counter() - t0
    ok = [r for r in results if r]
    toks = sum(r[2] for r in ok)
    ttft = sorted(r[0] for r in ok)
    itl = sorted(x for r in ok for x in r[1])
    pct = lambda v, q: v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")
    return {"tok_s": toks / wall, "ttft_p50": pct(ttft, 0.5), "ttft_p99": pct(ttft, 0.99),
            "itl_p50": pct(itl, 0.5), "itl_p99": pct(itl, 0.99), "failed": len(results) - len(ok), "tokens": toks}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--tallow", default=os.path.join(ROOT, "build", "tallow"))
    ap.add_argument("--llama", default="", help="llama-server binary (omit: tallow only)")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mixed", action="store_true")
    ap.add_argument("--omp-passive", action="store_true",
                    help="run llama-server with OMP_WAIT_POLICY=PASSIVE (its OpenMP threads sleep instead of "
                         "spinning: far faster when the cores are oversubscribed)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--ctx", type=int, default=0, help="total KV positions (0: clients x (2 prompt + 2 gen + 16))")
    args = ap.parse_args()
    ctx = args.ctx or args.clients * (2 * args.prompt + 2 * args.gen + 16)
    servers = [("tallow", [args.tallow, "serve", "-m", args.model, "--port", "0", "-np", str(args.clients),
                           "-c", str(ctx), "-t", str(args.threads), "--device", args.device], None)]
    if args.llama:
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(os.path.abspath(args.llama)))
        if args.omp_passive:
            env["OMP_WAIT_POLICY"] = "PASSIVE"
        # on the CPU -nr: its AMX repacked kernels die with SIGILL where the
        # kernel does not grant AMX tiles (this sandbox); Q4_1 has no other repack
        ngl = ["-ngl", "999"] if args.device == "cuda" else ["-nr"]
        servers.append(("llama-server", [args.llama, "-m", args.model, "--port", "18931", "-np", str(args.clients),
                                         "-c", str(ctx), "-t", str(args.threads), "-fa", "on", "--no-webui",
                                         *ngl], env))
    res = {name: [] for name, _, _ in servers}
    for rnd in range(args.rounds):
        for name, cmd, env in servers:
            if name == "tallow":
                p, port = start(cmd, pattern=r"listening on http://[0-9.:a-f]+:(\d+)")
            else:
                p, port = start(cmd, env=env, port=18931)
            one_request(port, [1000 + i for i in range(16)], 4, [])  # warm-up
            r = drive(port, args, seed=1234 + rnd)
            p.terminate()
            p.wait()
            res[name].append(r)
            print("round %d %-12s %8.1f tok/s  TTFT p50 %.3f s p99 %.3f s  ITL p50 %.1f ms p99 %.1f ms  failed %d" %
                  (rnd, name, r["tok_s"], r["ttft_p50"], r["ttft_p99"], 1e3 * r["itl_p50"], 1e3 * r["itl_p99"],
                   r["failed"]), flush=True)
    print("\nmedians over %d rounds: %d clients, prompt %d, gen %d, %d requests%s" %
          (args.rounds, args.clients, args.prompt, args.gen, args.requests, ", mixed lengths" if args.mixed else ""))
    for name in res:
        med = lambda k: statistics.median(r[k] for r in res[name])
        print("%-12s %8.1f tok/s  TTFT p50 %.3f s p99 %.3f s  ITL p50 %.1f ms p99 %.1f ms" %
              (name, med("tok_s"), med("ttft_p50"), med("ttft_p99"), 1e3 * med("itl_p50"), 1e3 * med("itl_p99")))
    if len(res) == 2:
        print("tallow / llama-server output tok/s: %.2fx" %
              (statistics.median(r["tok_s"] for r in res["tallow"]) /
               statistics.median(r["tok_s"] for r in res["llama-server"])))


if __name__ == "__main__":
    main()
