/* bench/cpu_depth: a model's prefill of P tokens and its decode of N tokens
 * after a context of D tokens, in process CPU time as well as wall time
 * (on a machine shared with other jobs, wall time at 1 thread measures the
 * load more than the code; CPU time at 1 thread is the steadier figure).
 * Random token ids, as `tallow bench` uses. Per run: the context is
 * evaluated (untimed for the decode), then the timed part; best of R runs
 * after one untimed run.
 * Usage: build/bench_cpu_depth MODEL.gguf THREADS [P [D [N [R]]]]
 * (default P 2048, D 2048, N 64, R 3). Not a test. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tallow.h"

static double clock_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_cpu_depth MODEL.gguf THREADS [P [D [N [R]]]]\n");
        return 2;
    }
    const int nt = atoi(argv[2]), np = argc > 3 ? atoi(argv[3]) : 2048, nd = argc > 4 ? atoi(argv[4]) : 2048;
    const int ng = argc > 5 ? atoi(argv[5]) : 64, reps = argc > 6 ? atoi(argv[6]) : 3;
    tl_model *m;
    tl_session *s;
    if (tl_model_load(argv[1], NULL, &m)) return fprintf(stderr, "%s\n", tl_last_error()), 1;
    tl_model_info info;
    tl_model_get_info(m, &info);
    tl_session_params sp = tl_session_default_params();
    sp.n_threads = nt;
    sp.n_ctx = (np > nd + ng ? np : nd + ng) + 16;
    sp.n_batch = np > nd ? np : nd;
    if (tl_session_init(m, &sp, &s)) return fprintf(stderr, "%s\n", tl_last_error()), 1;
    const int n_toks = np + nd + ng;
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)n_toks);
    uint64_t x = 0x243f6a8885a308d3ull;
    for (int i = 0; i < n_toks; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        toks[i] = (int32_t)(x % (uint64_t)info.n_vocab);
    }
    double best[2][2] = {{1e30, 1e30}, {1e30, 1e30}}; /* [prefill, decode][cpu, wall] */
    for (int r = 0; r <= reps; r++) {
        for (int test = 0; test < 2; test++) {
            if (tl_session_rewind(s, 0)) return fprintf(stderr, "%s\n", tl_last_error()), 1;
            if (test == 1 && nd > 0 && tl_session_eval(s, toks + np, nd, NULL))
                return fprintf(stderr, "%s\n", tl_last_error()), 1;
            const double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
            tl_status st = TL_OK;
            if (test == 0)
                st = tl_session_eval(s, toks, np, NULL);
            else
                for (int i = 0; i < ng && !st; i++) st = tl_session_eval(s, toks + np + nd + i, 1, NULL);
            if (st) return fprintf(stderr, "%s\n", tl_last_error()), 1;
            const double dc = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0, dw = clock_s(CLOCK_MONOTONIC) - w0;
            if (r == 0) continue; /* warm-up */
            best[test][0] = dc < best[test][0] ? dc : best[test][0];
            best[test][1] = dw < best[test][1] ? dw : best[test][1];
        }
    }
    printf("%s threads %d: pp%d %.1f t/s (CPU time) %.1f t/s (wall) | tg%d @ d%d %.1f t/s (CPU time) %.1f t/s (wall)\n",
           argv[1], nt, np, np / best[0][0], np / best[0][1], ng, nd, ng / best[1][0], ng / best[1][1]);
    free(toks);
    tl_session_free(s);
    tl_model_free(m);
    return 0;
}
