/* bench/cpu_kernels: one matmul (ops_matmul) per weight type and kernel set,
 * timed in process CPU time so that a machine shared with other jobs
 * disturbs the figure less than wall time would (cache and core sharing
 * still do). Prints the CPU model and, per type and token count, the best
 * of 9 runs of 5 calls under each SIMD kernel set this CPU runs.
 * Usage: build/bench_cpu_kernels [M [K [N]]]   (tokens, inputs, outputs;
 * default 512 576 1536: SmolLM2-135M's gate/up projection for a 512-token
 * prompt; K-quant types only when 256 divides K). Single thread. Not a test: speed is not asserted anywhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cpu.h"
#include "ops/ops.h"
#include "quant/quant.h"

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float frand(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f - 0.5f;
}

static void cpu_name(char *out, size_t n) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(out, n, "unknown CPU");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(out, n, "%s", strchr(line, ':') + 2);
            out[strcspn(out, "\n")] = 0;
            break;
        }
    if (f) fclose(f);
}

int main(int argc, char **argv) {
    const int64_t m = argc > 1 ? atoll(argv[1]) : 512, k = argc > 2 ? atoll(argv[2]) : 576,
                  n = argc > 3 ? atoll(argv[3]) : 1536;
    if (m < 1 || k < 32 || k % 32 || n < 1) {
        fprintf(stderr, "usage: bench_cpu_kernels [M [K (multiple of 32) [N]]]\n");
        return 2;
    }
    const tl_type ts[] = {TL_TYPE_Q4_0, TL_TYPE_Q4_1, TL_TYPE_Q5_0, TL_TYPE_Q5_1, TL_TYPE_Q8_0, TL_TYPE_IQ4_NL,
                          TL_TYPE_Q2_K, TL_TYPE_Q3_K, TL_TYPE_Q4_K, TL_TYPE_Q5_K, TL_TYPE_Q6_K, TL_TYPE_IQ4_XS,
                          TL_TYPE_F16, TL_TYPE_BF16};
    char name[256];
    cpu_name(name, sizeof name);
    printf("%s; kernel sets up to %s; one thread; m=%lld tokens, k=%lld, n=%lld; process CPU time, best of 9\n", name,
           tl_cpu_level_name(tl_cpu_detected_level()), (long long)m, (long long)k, (long long)n);
    tl_threadpool *tp;
    ops_ctx c;
    if (tl_threadpool_init(1, &tp) || ops_ctx_init(&c, tp, m, k, 16)) return fprintf(stderr, "%s\n", tl_last_error()), 1;
    float *x = malloc(sizeof(float) * (size_t)(k * m)), *y = malloc(sizeof(float) * (size_t)(n * m));
    float *row = malloc(sizeof(float) * (size_t)k);
    unsigned seed = 1;
    for (int64_t i = 0; i < k * m; i++) x[i] = frand(&seed);
    for (size_t ti = 0; ti < sizeof ts / sizeof ts[0]; ti++) {
        const quant_kernels *kr = quant_kernels_ref(ts[ti]);
        if (k % tl_type_get(ts[ti])->blck) continue; /* K-quants need k % 256 == 0 */
        const size_t rb = tl_row_bytes(ts[ti], k);
        uint8_t *w = malloc(rb * (size_t)n);
        for (int64_t r = 0; r < n; r++) {
            for (int64_t i = 0; i < k; i++) row[i] = frand(&seed);
            kr->from_float(row, w + rb * (size_t)r, k);
        }
        tl_tensor wt;
        int64_t ne[2] = {k, n};
        tl_tensor_view(&wt, ts[ti], 2, ne, w);
        printf("%-7s", tl_type_name(ts[ti]));
        double base = 0;
        /* the scalar set only where nothing else runs (it is ~20x slower) */
        const int lv0 = tl_cpu_detected_level() >= TL_CPU_LEVEL_AVX2 ? TL_CPU_LEVEL_AVX2 : TL_CPU_LEVEL_SCALAR;
        for (int lv = lv0; lv <= tl_cpu_detected_level(); lv++) {
            tl_cpu_set_level(lv);
            double best = 1e30;
            for (int rep = 0; rep < 9; rep++) {
                const double t0 = cpu_s();
                for (int it = 0; it < 5; it++)
                    if (ops_matmul(&c, &wt, x, m, y)) return fprintf(stderr, "%s\n", tl_last_error()), 1;
                const double e = (cpu_s() - t0) / 5;
                best = e < best ? e : best;
            }
            if (lv == TL_CPU_LEVEL_AVX2) base = best;
            printf("  %s %8.3f ms %6.1f GMAC/s", tl_cpu_level_name(lv), best * 1e3, (double)(k * n * m) / best / 1e9);
            if (lv == TL_CPU_LEVEL_AVX512 && base > 0) printf(" (%.2fx avx2)", base / best);
        }
        printf("\n");
        fflush(stdout);
        free(w);
    }
    tl_cpu_set_level(tl_cpu_detected_level());
    ops_ctx_free(&c);
    tl_threadpool_free(tp);
    free(x), free(y), free(row);
    return 0;
}
