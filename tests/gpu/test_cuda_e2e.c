/* tests/gpu/test_cuda_e2e: the CUDA forward against the CPU engine on one
 * GGUF model: usage `test_cuda_e2e MODEL.gguf [n_prompt] [n_gen]`.
 *  1. prompt logits: tl_session_eval_all on both backends, relative L2
 *     error per token (tolerance 3e-2: the GPU prefill runs f16 tensor-core
 *     GEMMs, the CPU converts activations to the weight's vec_dot type);
 *  2. decode: n_gen greedy steps free-running on each backend (CPU argmax on
 *     the host, CUDA through tl_session_eval_greedy: argmax on the device);
 *     tokens must be identical; a divergence is reported with the CPU's
 *     top-1/top-2 margin at that step;
 *  3. decode logits of every step (CUDA graph path) vs CPU (same tolerance).
 * `test_cuda_e2e MODEL --depth N [--ctx C]`: CUDA only: prefill N random
 * tokens into a context of C (default N + 256), then time 64 greedy decode
 * steps at that depth; prints device memory held for weights and session.
 * Built only with TALLOW_CUDA=ON, not in ctest (CI has no GPU). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_llm.h"
#include "base/timer.h"
#include "tallow.h"

static double rel_l2(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1e-300));
}

static int32_t argmax(const float *x, int32_t n, float *margin) {
    int32_t b = 0, s = -1;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    for (int32_t i = 0; i < n; i++)
        if (i != b && (s < 0 || x[i] > x[s])) s = i;
    if (margin) *margin = x[b] - x[s];
    return b;
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        if ((x) != TL_OK) {                                                                        \
            fprintf(stderr, "FATAL %s: %s\n", #x, tl_last_error());                                 \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_cuda_e2e MODEL.gguf [n_prompt] [n_gen]\n");
        return 2;
    }
    if (argc > 3 && !strcmp(argv[2], "--depth")) {
        int depth = atoi(argv[3]);
        int ctx = argc > 5 && !strcmp(argv[4], "--ctx") ? atoi(argv[5]) : depth + 256;
        tl_model_params p = tl_model_default_params();
        p.backend = TL_BACKEND_CUDA;
        tl_model *m;
        TRY(tl_model_load(argv[1], &p, &m));
        tl_model_info info;
        tl_model_get_info(m, &info);
        tl_session_params sp = tl_session_default_params();
        sp.n_ctx = ctx;
        tl_session *s;
        TRY(tl_session_init(m, &sp, &s));
        int32_t *toks = malloc(sizeof(int32_t) * (size_t)(depth > 0 ? depth : 1));
        for (int i = 0; i < depth; i++) toks[i] = (int32_t)((i * 2654435761u) % (uint32_t)info.n_vocab);
        int64_t t0 = tl_time_us();
        int32_t next = 0;
        if (depth > 0) TRY(tl_session_eval_greedy(s, toks, depth, &next));
        int64_t t1 = tl_time_us();
        const int steps = 64;
        for (int i = 0; i < steps; i++) TRY(tl_session_eval_greedy(s, &next, 1, &next));
        int64_t t2 = tl_time_us();
        printf("depth %s: ctx %d, prefill %d tokens %.1f ms (%.0f t/s), decode at depth %d: %.1f t/s; device "
               "memory: weights %.1f MiB, session (KV + activations) %.1f MiB\n",
               info.ftype, ctx, depth, (t1 - t0) / 1e3, depth / ((t1 - t0) / 1e6 + 1e-12), depth,
               steps / ((t2 - t1) / 1e6), llm_cuda_weight_bytes(m) / 1048576.0, llm_cuda_session_bytes(s) / 1048576.0);
        free(toks);
        tl_session_free(s);
        tl_model_free(m);
        return 0;
    }
    int n_prompt = argc > 2 ? atoi(argv[2]) : 20, n_gen = argc > 3 ? atoi(argv[3]) : 32;
    const double tol = 3e-2;
    tl_model_params pc = tl_model_default_params(), pg = pc;
    pg.backend = TL_BACKEND_CUDA;
    tl_model *mc, *mg;
    TRY(tl_model_load(argv[1], &pc, &mc));
    TRY(tl_model_load(argv[1], &pg, &mg));
    tl_model_info info;
    tl_model_get_info(mc, &info);
    int32_t nv = info.n_vocab;
    tl_session_params sp = tl_session_default_params();
    sp.n_ctx = 1024;
    tl_session *sc, *sg, *sg2;
    TRY(tl_session_init(mc, &sp, &sc));
    TRY(tl_session_init(mg, &sp, &sg));
    TRY(tl_session_init(mg, &sp, &sg2));
    int32_t *prompt = malloc(sizeof(int32_t) * (size_t)n_prompt);
    uint32_t r = 12345;
    for (int i = 0; i < n_prompt; i++) {
        r = r * 1664525u + 1013904223u;
        prompt[i] = (int32_t)((r >> 8) % (uint32_t)(nv < 256 ? nv : 256));
    }
    float *lc = malloc(sizeof(float) * (size_t)nv * (size_t)n_prompt);
    float *lg = malloc(sizeof(float) * (size_t)nv * (size_t)n_prompt);
    TRY(tl_session_eval_all(sc, prompt, n_prompt, lc));
    TRY(tl_session_eval_all(sg, prompt, n_prompt, lg));
    double worst = 0;
    for (int t = 0; t < n_prompt; t++) {
        double e = rel_l2(lg + (size_t)t * nv, lc + (size_t)t * nv, nv);
        if (!(e <= worst)) worst = e;
    }
    int fails = 0;
    printf("e2e %s (%s, %s): prompt logits (%d tokens) worst rel L2 %.3e (tol %.0e)\n", info.name, info.arch,
           info.ftype, n_prompt, worst, tol);
    if (!(worst < tol)) fails++;

    /* greedy decode, free-running on each backend */
    int32_t tc, tg;
    float margin;
    tc = argmax(lc + (size_t)(n_prompt - 1) * nv, nv, NULL);
    TRY(tl_session_eval_greedy(sg2, prompt, n_prompt, &tg));
    int first_diff = -1;
    double worst_dec = 0;
    const float *pcl, *pgl;
    for (int i = 0; i < n_gen; i++) {
        if (tc != tg && first_diff < 0) {
            first_diff = i;
        }
        int32_t in_c = tc, in_g = tg;
        TRY(tl_session_eval(sc, &in_c, 1, &pcl));
        tc = argmax(pcl, nv, &margin);
        TRY(tl_session_eval_greedy(sg2, &in_g, 1, &tg));
        /* logits through the graph path, fed the CPU's token (teacher forced) */
        TRY(tl_session_eval(sg, &in_c, 1, &pgl));
        double e = rel_l2(pgl, pcl, nv);
        if (!(e <= worst_dec)) worst_dec = e;
        if (tc != tg && first_diff < 0)
            printf("  step %d: cpu %d gpu %d (cpu top-2 margin %.4g)\n", i + 1, tc, tg, margin);
    }
    if (tc != tg && first_diff < 0) first_diff = n_gen;
    printf("e2e greedy %d steps: %s (first difference at step %d)\n", n_gen, first_diff < 0 ? "identical" : "DIFFER",
           first_diff);
    printf("e2e decode logits worst rel L2 %.3e (tol %.0e)\n", worst_dec, tol);
    if (first_diff >= 0) fails++;
    if (!(worst_dec < tol)) fails++;
    tl_session_free(sc);
    tl_session_free(sg);
    tl_session_free(sg2);
    tl_model_free(mc);
    tl_model_free(mg);
    free(prompt);
    free(lc);
    free(lg);
    printf("e2e %s\n", fails ? "FAILED" : "passed");
    return fails ? 1 : 0;
}
