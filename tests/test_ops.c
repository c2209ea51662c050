/* Op tests: the threaded, blocked matmul (on every weight type the engine
 * runs) against a float64 product of the reference-dequantized weights and
 * the activations rounded as the vec_dot type rounds them; attention against
 * a float64 softmax(QK^T)V; the thread pool's coverage of every index.
 * The reference dequantizers are themselves checked against the gguf
 * package in test_quant_ref.py, so this chain ends outside our code. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "base/cpu.h"
#include "base/fp16.h"
#include "ops/ops.h"
#include "quant/quant.h"
#include "test_util.h"

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* extreme: weights +-1 (mostly +1, a -1 first) and activations all 1, so
 * most quants sit at their largest magnitude and every product has the
 * same sign: the worst case for the prefill kernels' int16 partial sums */
static void test_matmul_x(tl_threadpool *tp, tl_type type, int64_t k, int64_t n, int64_t m, bool extreme) {
    const quant_kernels *ref = quant_kernels_ref(type);
    CHECK(ref != NULL, "no kernels for %s", tl_type_name(type));
    if (!ref) return;
    float *wf = malloc(sizeof(float) * (size_t)(k * n));
    for (int64_t i = 0; i < k * n; i++) wf[i] = extreme ? (i % 7 == 0 ? -1.0f : 1.0f) : frand();
    size_t row = tl_row_bytes(type, k);
    uint8_t *wq = malloc(row * (size_t)n);
    for (int64_t r = 0; r < n; r++) ref->from_float(wf + r * k, wq + r * row, k);
    /* what the kernels see: dequantized weights, activations rounded to vec_dot_type */
    float *wd = malloc(sizeof(float) * (size_t)(k * n));
    for (int64_t r = 0; r < n; r++) ref->to_float(wq + r * row, wd + r * k, k);
    float *x = malloc(sizeof(float) * (size_t)(k * m)), *xr = malloc(sizeof(float) * (size_t)(k * m));
    for (int64_t i = 0; i < k * m; i++) x[i] = extreme ? 1.0f : frand();
    /* the activation quantizer the engine runs (the SIMD ones round ties to
     * even, the scalar one away from zero) */
    const quant_kernels *vt = quant_kernels_get(ref->vec_dot_type);
    uint8_t *xq = malloc(tl_row_bytes(ref->vec_dot_type, k) + 64);
    for (int64_t j = 0; j < m; j++) {
        if (ref->vec_dot_type == TL_TYPE_F32) {
            memcpy(xr + j * k, x + j * k, sizeof(float) * (size_t)k);
        } else {
            vt->from_float(x + j * k, xq, k);
            vt->to_float(xq, xr + j * k, k);
        }
    }
    tl_tensor w;
    int64_t ne[2] = {k, n};
    tl_tensor_view(&w, type, 2, ne, wq);
    ops_ctx c;
    CHECK(ops_ctx_init(&c, tp, m, k, 16) == TL_OK, "ops_ctx_init");
    float *y = malloc(sizeof(float) * (size_t)(n * m));
    for (int64_t i = 0; i < n * m; i++) y[i] = NAN; /* poison: every output must be written */
    CHECK(ops_matmul(&c, &w, x, m, y) == TL_OK, "ops_matmul %s: %s", tl_type_name(type), tl_last_error());
    double max_err = 0, max_ref = 0;
    for (int64_t j = 0; j < m; j++)
        for (int64_t r = 0; r < n; r++) {
            double acc = 0;
            for (int64_t i = 0; i < k; i++) acc += (double)wd[r * k + i] * xr[j * k + i];
            double e = fabs(acc - y[j * n + r]);
            if (!(e <= max_err)) max_err = isnan(e) ? INFINITY : e;
            if (fabs(acc) > max_ref) max_ref = fabs(acc);
        }
    /* float accumulation over k terms of size ~1: relative error ~ k * 2^-24, with margin;
     * Q8_1 activations keep their sum s = d*sum(q) in fp16, adding ~1e-3 relative to the min term */
    double tol = (type == TL_TYPE_Q4_1 || type == TL_TYPE_Q5_1 ? 2e-3 : 1e-4) * (max_ref + 1);
    CHECK(max_err <= tol, "matmul %s k=%lld n=%lld m=%lld%s: max err %g (tol %g)", tl_type_name(type), (long long)k,
          (long long)n, (long long)m, extreme ? " (extreme values)" : "", max_err, tol);
    ops_ctx_free(&c);
    free(wf), free(wq), free(wd), free(x), free(xr), free(xq), free(y);
}

static void test_matmul(tl_threadpool *tp, tl_type type, int64_t k, int64_t n, int64_t m) {
    test_matmul_x(tp, type, k, n, m, false);
}

/* window > 0: a query at position p sees keys at p - window < i <= p (gemma3's
 * sliding window, the reference engine's mask); 0: all keys up to p.
 * The cache is paged: each of two sequences holds its positions in blocks of
 * bs scattered over the pool in a shuffled order, and the batch interleaves
 * the two sequences' tokens; the reference reads the same values from plain
 * position-major arrays. */
static void test_attention_x(tl_threadpool *tp, int64_t m, int64_t pos0, int64_t n_head, int64_t n_head_kv,
                             int64_t hd, int64_t window, bool blocked) {
    const int64_t n_kv = pos0 + m, kvd = n_head_kv * hd, bs = 16, nseq = 2;
    const int64_t nblk = (n_kv + bs - 1) / bs, pool = nseq * nblk;
    float *q = malloc(sizeof(float) * (size_t)(nseq * m * n_head * hd));
    /* reference K/V per sequence, position-major */
    uint16_t *kc = malloc(2 * (size_t)(nseq * n_kv * kvd)), *vc = malloc(2 * (size_t)(nseq * n_kv * kvd));
    for (int64_t i = 0; i < nseq * m * n_head * hd; i++) q[i] = frand();
    for (int64_t i = 0; i < nseq * n_kv * kvd; i++) kc[i] = tl_fp32_to_fp16(frand()), vc[i] = tl_fp32_to_fp16(frand());
    /* pool [block][K rows | V rows], blocks handed out in a shuffled order */
    uint16_t *kvp = calloc((size_t)(pool * 2 * bs * kvd), 2);
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)pool), *table = malloc(sizeof(int32_t) * (size_t)pool);
    for (int64_t i = 0; i < pool; i++) perm[i] = (int32_t)i;
    for (int64_t i = pool - 1; i > 0; i--) {
        int64_t j = (int64_t)((frand() + 1.0f) * 0.5f * (float)(i + 1)) % (i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (int64_t s = 0; s < nseq; s++)
        for (int64_t b = 0; b < nblk; b++) table[s * nblk + b] = perm[s * nblk + b];
    for (int64_t s = 0; s < nseq; s++)
        for (int64_t p = 0; p < n_kv; p++) {
            uint16_t *blk = kvp + (size_t)table[s * nblk + p / bs] * (size_t)(2 * bs * kvd);
            memcpy(blk + (p % bs) * kvd, kc + (s * n_kv + p) * kvd, (size_t)kvd * 2);
            memcpy(blk + (bs + p % bs) * kvd, vc + (s * n_kv + p) * kvd, (size_t)kvd * 2);
        }
    /* batch rows: token j of sequence s at row 2 j + s, or (blocked, as a
     * prompt is laid out) at row s m + j */
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)(nseq * m)), *seq = malloc(sizeof(int32_t) * (size_t)(nseq * m));
    for (int64_t j = 0; j < m; j++)
        for (int64_t s = 0; s < nseq; s++) {
            const int64_t row = blocked ? s * m + j : 2 * j + s;
            pos[row] = (int32_t)(pos0 + j), seq[row] = (int32_t)s;
        }
    float *out = malloc(sizeof(float) * (size_t)(nseq * m * n_head * hd));
    ops_ctx c;
    ops_ctx_init(&c, tp, 1, 16, n_kv);
    const float scale = 1.0f / sqrtf((float)hd);
    ops_attn_args a = {.q = q, .q_stride = n_head * hd, .m = nseq * m, .pos = pos, .seq = seq,
                       .kv = {.k = kvp, .v = kvp + bs * kvd, .block_stride = 2 * bs * kvd, .row = kvd,
                              .block_shift = 4, .table = table, .table_stride = nblk},
                       .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = hd, .window = window, .scale = scale,
                       .out = out};
    CHECK(ops_attention_paged(&c, &a) == TL_OK, "attention: %s", tl_last_error());
    /* each row alone gives the same bits as in the batch (the batch test
     * of the engine relies on it) */
    float *one = malloc(sizeof(float) * (size_t)(n_head * hd));
    int n_diff = 0;
    for (int64_t row = 0; row < nseq * m; row++) {
        ops_attn_args a1 = a;
        a1.q = q + row * n_head * hd, a1.m = 1, a1.pos = pos + row, a1.seq = seq + row, a1.out = one;
        CHECK(ops_attention_paged(&c, &a1) == TL_OK, "attention alone: %s", tl_last_error());
        n_diff += memcmp(one, out + row * n_head * hd, sizeof(float) * (size_t)(n_head * hd)) != 0;
    }
    CHECK(n_diff == 0, "attention m=%lld pos0=%lld%s: %d rows differ alone and in the batch", (long long)m,
          (long long)pos0, blocked ? " blocked" : "", n_diff);
    free(one);
    double max_err = 0;
    double *sc = malloc(sizeof(double) * (size_t)n_kv);
    for (int64_t row = 0; row < nseq * m; row++)
        for (int64_t h = 0; h < n_head; h++) {
            const int64_t s = seq[row], j = pos[row] - pos0;
            const uint16_t *ks = kc + s * n_kv * kvd, *vs = vc + s * n_kv * kvd;
            int64_t hk = h / (n_head / n_head_kv), len = pos0 + j + 1;
            int64_t t0 = window > 0 && len > window ? len - window : 0;
            double mx = -INFINITY, sum = 0;
            for (int64_t t = t0; t < len; t++) {
                double d = 0;
                for (int64_t i = 0; i < hd; i++)
                    d += (double)tl_fp16_to_fp32(tl_fp32_to_fp16(q[(row * n_head + h) * hd + i])) *
                         tl_fp16_to_fp32(ks[t * kvd + hk * hd + i]);
                sc[t] = d * scale;
                if (sc[t] > mx) mx = sc[t];
            }
            for (int64_t t = t0; t < len; t++) sum += (sc[t] = exp(sc[t] - mx));
            for (int64_t i = 0; i < hd; i++) {
                double o = 0;
                for (int64_t t = t0; t < len; t++)
                    o += sc[t] / sum * tl_fp16_to_fp32(vs[t * kvd + hk * hd + i]);
                double e = fabs(o - out[(row * n_head + h) * hd + i]);
                if (!(e <= max_err)) max_err = isnan(e) ? INFINITY : e;
            }
        }
    CHECK(max_err < 1e-5, "paged attention m=%lld pos0=%lld%s heads %lld/%lld hd=%lld window %lld: max err %g",
          (long long)m, (long long)pos0, blocked ? " blocked" : "", (long long)n_head, (long long)n_head_kv,
          (long long)hd, (long long)window, max_err);
    ops_ctx_free(&c);
    free(q), free(kc), free(vc), free(kvp), free(perm), free(table), free(pos), free(seq), free(out), free(sc);
}

static void test_attention(tl_threadpool *tp, int64_t m, int64_t pos0, int64_t n_head, int64_t n_head_kv,
                           int64_t hd, int64_t window) {
    test_attention_x(tp, m, pos0, n_head, n_head_kv, hd, window, false);
}

/* Prompt attention in query tiles: each sequence's tokens in consecutive
 * rows (so a tile holds many rows of one sequence, and the tile boundary
 * falls inside a sequence), prompt lengths that are not multiples of the
 * 16-position KV tile or the 128-position span, GQA groups of 1, 3 and 4,
 * the sliding window, at 1 and 3 threads (whose splits differ). */
static void test_attention_prompt(void) {
    for (int nt = 1; nt <= 3; nt += 2) {
        tl_threadpool *tpn;
        CHECK(tl_threadpool_init(nt, &tpn) == TL_OK, "threadpool %d", nt);
        test_attention_x(tpn, 37, 0, 9, 3, 64, 0, true);    /* SmolLM2's heads */
        test_attention_x(tpn, 150, 0, 9, 3, 64, 0, true);   /* more than one query tile and span */
        test_attention_x(tpn, 45, 100, 4, 1, 256, 0, true); /* gemma3's heads, after 100 cached */
        test_attention_x(tpn, 70, 0, 4, 1, 256, 33, true);  /* gemma3's sliding window */
        test_attention_x(tpn, 29, 5, 2, 2, 32, 0, true);    /* no GQA */
        test_attention_x(tpn, 21, 0, 4, 2, 40, 0, true);    /* head_dim not a multiple of 16 (AVX2 / scalar) */
        test_attention_x(tpn, 3, 300, 8, 2, 80, 0, true);   /* 64 + 16 wide heads; a short batch at depth */
        tl_threadpool_free(tpn);
    }
}

typedef struct { int *hits; int n; } tp_arg;
/* The FFN activations (AVX2 exp/tanh where the CPU has it, libm on the tail)
 * against double precision: values over the whole useful range and past
 * the exp clamp, a length with a ragged tail, NaN propagated. */
static void test_activations(void) {
    enum { N = 4099 };
    static float x[N], u[N], a[N], b[N], c[N];
    uint64_t st = 12345;
    for (int i = 0; i < N; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        double r = (double)(st >> 11) / 9007199254740992.0; /* [0, 1) */
        /* most in [-12, 12], every 97th far out (the clamped exponent) */
        x[i] = (float)(i % 97 == 0 ? (r - 0.5) * 400.0 : (r - 0.5) * 24.0);
        u[i] = (float)(0.5 + r);
    }
    x[5] = NAN;
    memcpy(a, x, sizeof x);
    memcpy(b, x, sizeof x);
    memcpy(c, x, sizeof x);
    ops_silu_mul(a, u, N);
    ops_gelu_mul(b, u, N);
    ops_gelu(c, N);
    double es = 0, eg = 0, eg1 = 0, eglibm = 0;
    int nan_ok = 1;
    for (int i = 0; i < N; i++) {
        if (i == 5) {
            nan_ok = a[i] != a[i] && b[i] != b[i] && c[i] != c[i];
            continue;
        }
        double v = x[i], k = 0.7978845608028654;
        double rs = v / (1.0 + exp(-v)) * u[i];
        double rg1 = 0.5 * v * (1.0 + tanh(k * (v + 0.044715 * v * v * v)));
        /* relative where the value is not tiny; absolute 1e-30 below */
        es = fmax(es, fabs(a[i] - rs) / fmax(fabs(rs), 1e-30));
        /* GELU relative to max(|gelu|, |x|): for x << 0 the value is
         * x/2 (1 + tanh) with 1 + tanh cancelling, in libm's tanhf as in
         * ours, so an error of an ulp of tanh is an ulp of |x|/2 */
        eg = fmax(eg, fabs(b[i] - rg1 * u[i]) / fmax(fabs(rg1 * u[i]), fabs(v) * u[i]));
        eg1 = fmax(eg1, fabs(c[i] - rg1) / fmax(fabs(rg1), fabs(v)));
        float lf = 0.5f * x[i] * (1.0f + tanhf(0.7978845608028654f * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
        eglibm = fmax(eglibm, fabs(lf - rg1) / fmax(fabs(rg1), fabs(v)));
    }
    CHECK(nan_ok, "activations: NaN not propagated");
    CHECK(es < 1e-6, "silu*u: max rel err %g", es);
    CHECK(eg < 1e-6 && eg1 < 1e-6, "gelu*u / gelu: max err %g / %g (relative to max(|gelu|, |x|))", eg, eg1);
    printf("activations vs double: silu*u %.2e, gelu*u %.2e, gelu %.2e (libm tanhf formula %.2e)\n", es, eg, eg1,
           eglibm);
}

static void tp_mark(void *arg, int ith, int nth) {
    tp_arg *a = arg;
    for (int i = ith; i < a->n; i += nth) a->hits[i]++;
}

/* The few-token kernels (2..GEMM_FEW_MAX tokens) on every type that has
 * one at this level: each token count (so each group count and ragged last
 * group), rows past one 16-row pass, k past one pass of blocks (FEW_CHUNK),
 * and the extreme values. Returns whether they ran. */
static bool test_few(tl_threadpool *tp) {
    const tl_type types[] = {TL_TYPE_Q8_0, TL_TYPE_Q4_0, TL_TYPE_Q4_1, TL_TYPE_Q5_0, TL_TYPE_Q5_1, TL_TYPE_IQ4_NL};
    bool ran = false;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        if (!gemm_few_ok(types[t])) continue;
        ran = true;
        for (int m = 2; m <= GEMM_FEW_MAX; m++) test_matmul(tp, types[t], 96, 37, m);
        test_matmul(tp, types[t], 32 * 70, 19, 9);
        test_matmul_x(tp, types[t], 576, 18, GEMM_FEW_MAX, true);
    }
    return ran;
}

/* The matmul and attention cases under the kernel level in use. */
static void test_level(tl_threadpool *tp) {
    /* every weight type the engine runs, at 1..3 threads; token counts
     * 1 (decode) and 3 (the one-token kernels), 7 and 13 (4-token groups
     * plus a ragged tail), 40 (more than one token block); row counts not a
     * multiple of the row block */
    const tl_type types[] = {TL_TYPE_F32,  TL_TYPE_F16,  TL_TYPE_BF16, TL_TYPE_Q8_0,   TL_TYPE_Q4_0,
                             TL_TYPE_Q4_1, TL_TYPE_Q5_0, TL_TYPE_Q5_1, TL_TYPE_IQ4_NL, TL_TYPE_MXFP4,
                             TL_TYPE_Q2_K, TL_TYPE_Q3_K, TL_TYPE_Q4_K, TL_TYPE_Q5_K,   TL_TYPE_Q6_K,
                             TL_TYPE_IQ4_XS};
    /* which prefill path the quantized types take at this level */
    printf("%s: prefill (m >= 12) through the VNNI weight panel:", tl_cpu_level_name(tl_cpu_level()));
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        if (gemm_panel_ok(types[t])) printf(" %s", tl_type_name(types[t]));
    printf("\n");
    for (int nt = 1; nt <= 3; nt++) {
        tl_threadpool *tpn;
        CHECK(tl_threadpool_init(nt, &tpn) == TL_OK, "threadpool %d", nt);
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            const bool kq = tl_type_get(types[t])->blck == 256;
            test_matmul(tpn, types[t], kq ? 256 : 64, 37, 1);
            test_matmul(tpn, types[t], kq ? 512 : 576, 37, 1); /* decode: blocks in 4s and a tail */
            test_matmul(tpn, types[t], kq ? 256 : 160, 21, 3);
            test_matmul(tpn, types[t], 256, 50, 7);
            test_matmul(tpn, types[t], kq ? 512 : 576, 33, 13);
            if (nt == 3) test_matmul(tpn, types[t], kq ? 1536 : 576, 33, 40);
            if (tl_type_get(types[t])->blck == 1) {
                /* float rows of any length: k not a multiple of 8 or 16, row
                 * counts past a 32-row panel, token groups of 12 plus a tail */
                test_matmul(tpn, types[t], 203, 37, 13);
                test_matmul(tpn, types[t], 120, 70, 26);
            }
            if (nt == 2) {
                test_matmul_x(tpn, types[t], 512, 20, 8, true);
                test_matmul_x(tpn, types[t], 512, 20, 16, true); /* the panel kernels */
                test_matmul_x(tpn, types[t], 512, 20, 1, true);
            }
        }
        tl_threadpool_free(tpn);
    }
    test_attention(tp, 1, 0, 4, 2, 64, 0);
    test_attention(tp, 5, 0, 4, 4, 32, 0);
    test_attention(tp, 3, 17, 9, 3, 64, 0);
    test_attention(tp, 1, 300, 8, 1, 128, 0);
    test_attention(tp, 6, 10, 4, 2, 32, 8);   /* window inside the context */
    test_attention(tp, 1, 300, 4, 1, 64, 512); /* window wider than the context */
    test_attention(tp, 1, 63, 2, 1, 16, 64);  /* exactly at the boundary */
    test_attention(tp, 2, 1000, 4, 1, 64, 0); /* decode at depth: positions split over threads */
    test_attention_prompt();
}

int main(void) {
    test_activations();
    tl_threadpool *tp;
    CHECK(tl_threadpool_init(3, &tp) == TL_OK, "threadpool");
    int hits[1000] = {0};
    tp_arg a = {hits, 1000};
    for (int r = 0; r < 200; r++) tl_threadpool_run(tp, tp_mark, &a);
    int bad = 0;
    for (int i = 0; i < 1000; i++) bad += hits[i] != 200;
    CHECK(bad == 0, "thread pool: %d indices not visited exactly 200 times", bad);

    /* each kernel level this CPU runs (the scalar, AVX2 and AVX-512
     * kernels all take these cases; the ones it lacks are named) */
    for (int lv = TL_CPU_LEVEL_SCALAR; lv <= TL_CPU_LEVEL_AVX512; lv++) {
        if (lv > tl_cpu_detected_level()) {
            printf("SKIP %s kernels: this CPU lacks the ISA\n", tl_cpu_level_name(lv));
            continue;
        }
        tl_cpu_set_level(lv);
        const int before = test_n_fail;
        test_level(tp);
        printf("matmul + attention, %s kernels: ran, %s\n", tl_cpu_level_name(lv),
               test_n_fail == before ? "pass" : "FAIL");
        const int before_few = test_n_fail;
        if (test_few(tp))
            printf("few-token matmul kernels (2..%d tokens), %s: ran, %s\n", GEMM_FEW_MAX, tl_cpu_level_name(lv),
                   test_n_fail == before_few ? "pass" : "FAIL");
        else
            printf("SKIP few-token matmul kernels at %s: they need AVX-512 VNNI (the 1x4 / vec_dot kernels ran)\n",
                   tl_cpu_level_name(lv));
    }
    tl_cpu_set_level(tl_cpu_detected_level());
    tl_threadpool_free(tp);
    return test_finish();
}
