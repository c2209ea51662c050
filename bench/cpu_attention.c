/* bench/cpu_attention: the CPU attention op (ops_attention_paged) on the
 * shapes of SmolLM2-135M (9 query heads, 3 KV heads, head_dim 64) and
 * Gemma-3-270M (4 / 1, head_dim 256, sliding window 512): one decode token
 * at depth D through 30 layers (30 calls, each against its own layer's
 * cache, so that the caches together outgrow the last-level cache as a
 * model's do) and a whole prompt of T tokens (one call), against paged
 * f16 caches of random values (blocks of 256 positions, the engine's
 * default layout).
 * Per case and kernel set: the best of 7 runs in process CPU time at 1
 * thread, and in wall time at each thread count given (wall time is what
 * a second thread shortens; on a shared machine it is the noisier one).
 * Usage: build/bench_cpu_attention [DEPTH [PROMPT [THREADS [KERNELS]]]]
 * (default 2048 2048 2 all; KERNELS avx2 or avx512 runs that set alone).
 * Not a test: speed is not asserted anywhere. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cpu.h"
#include "base/fp16.h"
#include "ops/ops.h"

static double clock_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct shape {
    const char *name;
    int64_t n_head, n_head_kv, hd, window;
} shape;

/* runs the op 7 times over m tokens at positions pos0.. ; best seconds per
 * call in process CPU time (cpu) and wall time (wall) */
static int run_case(tl_threadpool *tp, const shape *sh, uint16_t *kv, int32_t *table, int64_t nblk, int64_t m,
                    int64_t pos0, float *q, float *out, double *cpu, double *wall) {
    const size_t layer = (size_t)(nblk * 2 * 256 * sh->n_head_kv * sh->hd); /* f16 per layer's cache */
    const int64_t kvd = sh->n_head_kv * sh->hd, bs = 256;
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)m), *seq = calloc((size_t)m, sizeof(int32_t));
    for (int64_t j = 0; j < m; j++) pos[j] = (int32_t)(pos0 + j);
    ops_ctx c;
    if (ops_ctx_init(&c, tp, m, 64, pos0 + m)) return 1;
    ops_attn_args a = {.q = q,
                       .q_stride = sh->n_head * sh->hd,
                       .m = m,
                       .pos = pos,
                       .seq = seq,
                       .kv = {.k = kv,
                              .v = kv + bs * kvd,
                              .block_stride = 2 * bs * kvd,
                              .row = kvd,
                              .block_shift = 8,
                              .table = table,
                              .table_stride = nblk},
                       .n_head = sh->n_head,
                       .n_head_kv = sh->n_head_kv,
                       .head_dim = sh->hd,
                       .window = sh->window,
                       .scale = 1.0f / sqrtf((float)sh->hd),
                       .out = out};
    *cpu = *wall = 1e30;
    const int reps = m == 1 ? 30 : 1; /* decode: 30 calls (one per layer of a 30-layer model) per run */
    for (int r = 0; r < 8; r++) {
        const double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
        for (int i = 0; i < reps; i++) {
            a.kv.k = kv + (size_t)i * layer, a.kv.v = a.kv.k + bs * kvd;
            if (ops_attention_paged(&c, &a)) return fprintf(stderr, "%s\n", tl_last_error()), 1;
        }
        const double dc = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0, dw = clock_s(CLOCK_MONOTONIC) - w0;
        if (r == 0) continue; /* warm-up */
        *cpu = dc < *cpu ? dc : *cpu;
        *wall = dw < *wall ? dw : *wall;
    }
    ops_ctx_free(&c);
    free(pos), free(seq);
    return 0;
}

int main(int argc, char **argv) {
    const int64_t depth = argc > 1 ? atoll(argv[1]) : 2048, prompt = argc > 2 ? atoll(argv[2]) : 2048;
    const int nth = argc > 3 ? atoi(argv[3]) : 2;
    int lv0 = TL_CPU_LEVEL_SCALAR + 1, lv1 = tl_cpu_detected_level();
    for (int lv = lv0; argc > 4 && lv <= lv1; lv++)
        if (!strcmp(argv[4], tl_cpu_level_name(lv))) lv0 = lv1 = lv;
    if (depth < 1 || prompt < 1 || nth < 1) {
        fprintf(stderr, "usage: bench_cpu_attention [DEPTH [PROMPT [THREADS]]]\n");
        return 2;
    }
    const shape shapes[] = {
        {"smollm2-135m", 9, 3, 64, 0}, {"gemma3-270m global", 4, 1, 256, 0}, {"gemma3-270m window", 4, 1, 256, 512}};
    tl_threadpool *tp1, *tpn;
    if (tl_threadpool_init(1, &tp1) || tl_threadpool_init(nth, &tpn))
        return fprintf(stderr, "%s\n", tl_last_error()), 1;
    printf(
        "kernel sets up to %s; decode: 30 calls (one token, 30 layers' caches) at depth %lld; prompt: one call of %lld "
        "tokens; best of 7\n",
        tl_cpu_level_name(tl_cpu_detected_level()), (long long)depth, (long long)prompt);
    printf("%-20s %-7s %-14s %12s %12s %12s %8s\n", "shape", "kernels", "case", "1t cpu ms", "1t wall ms", "Nt wall ms",
           "1t/Nt");
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape *sh = &shapes[si];
        const int64_t n_kv = (depth + 1 > prompt ? depth + 1 : prompt), kvd = sh->n_head_kv * sh->hd, bs = 256;
        const int64_t nblk = (n_kv + bs - 1) / bs;
        uint16_t *kv = malloc(sizeof(uint16_t) * (size_t)(30 * nblk * 2 * bs * kvd));
        int32_t *table = malloc(sizeof(int32_t) * (size_t)nblk);
        unsigned s = 1;
        for (int64_t i = 0; i < 30 * nblk * 2 * bs * kvd; i++) {
            s = s * 1664525u + 1013904223u;
            kv[i] = tl_fp32_to_fp16((float)(s >> 8) / 16777216.0f - 0.5f);
        }
        for (int64_t b = 0; b < nblk; b++) table[b] = (int32_t)(nblk - 1 - b); /* blocks in reverse order */
        float *q = malloc(sizeof(float) * (size_t)(prompt * sh->n_head * sh->hd));
        float *out = malloc(sizeof(float) * (size_t)(prompt * sh->n_head * sh->hd));
        for (int64_t i = 0; i < prompt * sh->n_head * sh->hd; i++) {
            s = s * 1664525u + 1013904223u;
            q[i] = 4.0f * ((float)(s >> 8) / 16777216.0f - 0.5f);
        }
        for (int lv = lv0; lv <= lv1; lv++) {
            tl_cpu_set_level(lv);
            for (int cs = 0; cs < 2; cs++) {
                const int64_t m = cs == 0 ? 1 : prompt, pos0 = cs == 0 ? depth : 0;
                double c1, w1, cn, wn;
                if (run_case(tp1, sh, kv, table, nblk, m, pos0, q, out, &c1, &w1) ||
                    run_case(tpn, sh, kv, table, nblk, m, pos0, q, out, &cn, &wn))
                    return 1;
                char name[32];
                snprintf(name, sizeof name, cs == 0 ? "decode d%lld" : "prompt %lld", (long long)(cs ? m : pos0));
                printf("%-20s %-7s %-14s %12.3f %12.3f %12.3f %8.2f\n", sh->name, tl_cpu_level_name(lv), name, 1e3 * c1,
                       1e3 * w1, 1e3 * wn, w1 / wn);
            }
        }
        free(kv), free(table), free(q), free(out);
    }
    tl_threadpool_free(tp1), tl_threadpool_free(tpn);
    return 0;
}
