/* test_train_grad: every training op's backward against central finite
 * differences in float64, on random inputs of several shapes, with
 * broadcasting and non-contiguous (transposed, narrowed, expanded) inputs.
 * Loss = sum(op(x...) * R) for a fixed random R, so every output element's
 * gradient path is exercised. Tolerance: |analytic - numeric| <= 1e-6 *
 * max(1, |numeric|): with h = 1e-5 the central difference's truncation error
 * is O(h^2 * f''') ~ 1e-10 and rounding ~ 1e-16/h ~ 1e-11, so 1e-6 leaves a
 * wide margin while any wrong formula is off by O(1). Also checks autograd
 * behaviour: accumulation, no_grad, freed-graph error, grads only where
 * needed. Oracle: finite differences (nobody's code). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_util.h"
#include "base/cpu.h"
#include "base/threadpool.h"
#include "tallow_train.h"
#include "train_gradcheck.h"

static int32_t g_ids[64];
static int32_t g_tg[64];

/* ---- op builders ------------------------------------------------------------ */
static tt_tensor *b_add_bcast(tt_ctx *c, tt_tensor **x) { return tt_add(c, x[0], x[1]); }
static tt_tensor *b_sub_bcast(tt_ctx *c, tt_tensor **x) { return tt_sub(c, x[0], x[1]); }
static tt_tensor *b_mul_bcast(tt_ctx *c, tt_tensor **x) { return tt_mul(c, x[0], x[1]); }
static tt_tensor *b_div_bcast(tt_ctx *c, tt_tensor **x) { return tt_div(c, x[0], x[1]); }
static tt_tensor *b_mul_transposed(tt_ctx *c, tt_tensor **x) {
    return tt_mul(c, tt_transpose(c, x[0], 0, 1), x[1]);
}
static tt_tensor *b_neg(tt_ctx *c, tt_tensor **x) { return tt_neg(c, x[0]); }
static tt_tensor *b_scale(tt_ctx *c, tt_tensor **x) { return tt_scale(c, x[0], -1.7); }
static tt_tensor *b_exp(tt_ctx *c, tt_tensor **x) { return tt_exp(c, x[0]); }
static tt_tensor *b_log(tt_ctx *c, tt_tensor **x) { return tt_log(c, x[0]); }
static tt_tensor *b_sqrt(tt_ctx *c, tt_tensor **x) { return tt_sqrt(c, x[0]); }
static tt_tensor *b_pow(tt_ctx *c, tt_tensor **x) { return tt_pow(c, x[0], 2.5); }
static tt_tensor *b_relu(tt_ctx *c, tt_tensor **x) { return tt_relu(c, x[0]); }
static tt_tensor *b_gelu_tanh(tt_ctx *c, tt_tensor **x) { return tt_gelu_tanh(c, tt_transpose(c, x[0], 0, 2)); }
static tt_tensor *b_gelu_erf(tt_ctx *c, tt_tensor **x) { return tt_gelu_erf(c, x[0]); }
static tt_tensor *b_silu(tt_ctx *c, tt_tensor **x) { return tt_silu(c, x[0]); }
static tt_tensor *b_sigmoid(tt_ctx *c, tt_tensor **x) { return tt_sigmoid(c, x[0]); }
static tt_tensor *b_tanh(tt_ctx *c, tt_tensor **x) { return tt_tanh(c, x[0]); }
static tt_tensor *b_sum(tt_ctx *c, tt_tensor **x) { return tt_sum(c, x[0]); }
static tt_tensor *b_mean(tt_ctx *c, tt_tensor **x) { return tt_mean(c, tt_transpose(c, x[0], 0, 1)); }
static tt_tensor *b_sum_dim(tt_ctx *c, tt_tensor **x) { return tt_sum_dim(c, x[0], 1, false); }
static tt_tensor *b_mean_dim_keep(tt_ctx *c, tt_tensor **x) { return tt_mean_dim(c, x[0], -1, true); }
static tt_tensor *b_matmul(tt_ctx *c, tt_tensor **x) { return tt_matmul(c, x[0], x[1]); }
static tt_tensor *b_matmul_bcast(tt_ctx *c, tt_tensor **x) { return tt_matmul(c, x[0], x[1]); }
static tt_tensor *b_matmul_t(tt_ctx *c, tt_tensor **x) {
    return tt_matmul(c, x[0], tt_transpose(c, x[1], -1, -2));
}
static tt_tensor *b_linear(tt_ctx *c, tt_tensor **x) { return tt_linear(c, x[0], x[1], x[2]); }
static tt_tensor *b_linear_view(tt_ctx *c, tt_tensor **x) {
    return tt_linear(c, tt_narrow(c, x[0], 2, 1, 5), x[1], NULL);
}
static tt_tensor *b_softmax(tt_ctx *c, tt_tensor **x) { return tt_softmax(c, x[0]); }
static tt_tensor *b_log_softmax(tt_ctx *c, tt_tensor **x) { return tt_log_softmax(c, tt_transpose(c, x[0], 0, 1)); }
static tt_tensor *b_embedding(tt_ctx *c, tt_tensor **x) {
    int64_t sh[2] = {2, 5};
    return tt_embedding(c, x[0], g_ids, 2, sh);
}
static tt_tensor *b_layernorm(tt_ctx *c, tt_tensor **x) { return tt_layernorm(c, x[0], x[1], x[2], 1e-5); }
static tt_tensor *b_layernorm_view(tt_ctx *c, tt_tensor **x) {
    return tt_layernorm(c, tt_transpose(c, x[0], 0, 1), x[1], x[2], 1e-5);
}
static tt_tensor *b_rmsnorm(tt_ctx *c, tt_tensor **x) { return tt_rmsnorm(c, x[0], x[1], 1e-6); }
static tt_tensor *b_rope(tt_ctx *c, tt_tensor **x) { return tt_rope(c, x[0], 3, 10000.0); }
static tt_tensor *b_attn_causal(tt_ctx *c, tt_tensor **x) { return tt_attention(c, x[0], x[1], x[2], true, 0); }
static tt_tensor *b_attn_gqa(tt_ctx *c, tt_tensor **x) { return tt_attention(c, x[0], x[1], x[2], true, 0.3); }
static tt_tensor *b_attn_full_view(tt_ctx *c, tt_tensor **x) {
    int perm[4] = {0, 2, 1, 3}; /* q given as [B, T, H, D] */
    return tt_attention(c, tt_permute(c, x[0], perm), x[1], x[2], false, 0);
}
static tt_tensor *b_attn_fused_qkv(tt_ctx *c, tt_tensor **x) {
    /* GPT-2 layout: one [B, T, 3*H*D] tensor, q/k/v narrowed, reshaped to
     * heads without copies, k given transposed in its last two dims */
    int perm[4] = {0, 2, 1, 3};
    int64_t sh[4] = {2, 5, 2, 4};
    tt_tensor *q = tt_permute(c, tt_reshape(c, tt_narrow(c, x[0], 2, 0, 8), 4, sh), perm);
    tt_tensor *k = tt_permute(c, tt_reshape(c, tt_narrow(c, x[0], 2, 8, 8), 4, sh), perm);
    tt_tensor *v = tt_permute(c, tt_reshape(c, tt_narrow(c, x[0], 2, 16, 8), 4, sh), perm);
    tt_tensor *kt = tt_transpose(c, tt_contiguous(c, tt_transpose(c, k, 2, 3)), 2, 3); /* last-dim stride != 1 */
    return tt_attention(c, q, kt, v, true, 0);
}
/* the fused form, grouped-query: H 4 over Hkv 2, D 4 */
static tt_tensor *b_attn_qkv_gqa(tt_ctx *c, tt_tensor **x) { return tt_attention_qkv(c, x[0], 4, 2, true, 0); }
static void attention_qkv_errors(void) {
    tt_ctx *c;
    tt_ctx_init(1, &c);
    int64_t sh[3] = {2, 5, 30}; /* 30 is not (4 + 2 * 2) * D */
    tt_tensor *x = tt_new(TT_F32, 3, sh);
    CHECK(!tt_attention_qkv(c, x, 4, 2, true, 0) && strstr(tl_last_error(), "attention_qkv"),
          "a qkv width that is no multiple of H + 2 Hkv is refused (%s)", tl_last_error());
    CHECK(!tt_attention_qkv(c, x, 3, 2, true, 0), "H %% Hkv != 0 is refused");
    tt_free(x);
    tt_ctx_free(c);
}
static tt_tensor *b_reshape_views(tt_ctx *c, tt_tensor **x) {
    int64_t a[4] = {2, 3, 2, 2}, b[2] = {6, 4};
    tt_tensor *n = tt_narrow(c, x[0], 2, 2, 4); /* [2,3,4] of [2,3,8] */
    return tt_add(c, tt_reshape(c, tt_reshape(c, n, 4, a), 2, b), tt_reshape(c, n, 2, b));
}
static tt_tensor *b_reshape_same_ndim(tt_ctx *c, tt_tensor **x) {
    int64_t a[2] = {6, 4}, b[3] = {3, 2, 4};
    tt_tensor *r = tt_reshape(c, x[0], 2, a); /* [4,6] -> [6,4], twice so the grad accumulates */
    tt_tensor *r2 = tt_reshape(c, tt_transpose(c, x[1], 0, 2), 3, b); /* [4,2,3] -> [3,2,4] through a copy */
    return tt_add(c, tt_mul(c, r, r), tt_reshape(c, tt_add(c, r2, tt_reshape(c, x[0], 3, b)), 2, a));
}
static tt_tensor *b_ce(tt_ctx *c, tt_tensor **x) { return tt_cross_entropy(c, x[0], g_tg, -100); }
static tt_tensor *b_mse(tt_ctx *c, tt_tensor **x) { return tt_mse(c, x[0], x[1]); }
static tt_tensor *b_dropout(tt_ctx *c, tt_tensor **x) { return tt_dropout(c, x[0], 0.3, 1234, true); }
static tt_tensor *b_views(tt_ctx *c, tt_tensor **x) {
    int64_t sh[3] = {3, 4, 2};
    int64_t ex[3] = {2, 3, 4};
    int perm[3] = {2, 0, 1};
    tt_tensor *r = tt_reshape(c, x[0], 3, sh);      /* [3,4,2] */
    tt_tensor *p = tt_permute(c, r, perm);          /* [2,3,4] */
    tt_tensor *n = tt_narrow(c, x[1], 0, 1, 1);     /* [1,3,4] of [3,3,4] */
    tt_tensor *e = tt_expand(c, n, 3, ex);          /* [2,3,4] */
    tt_tensor *u = tt_unsqueeze(c, tt_narrow(c, x[1], 2, 0, 1), 0); /* [1,3,3,1] */
    tt_tensor *s = tt_mul(c, p, e);
    return tt_add(c, tt_unsqueeze(c, s, 0), tt_narrow(c, tt_sum_dim(c, u, 3, true), 1, 0, 1));
}

static void autograd_behaviour(void) {
    tt_ctx *c;
    tt_ctx_init(1, &c);
    int64_t sh[1] = {3};
    double v[3] = {1, 2, 3};
    tt_tensor *a = tt_new_from(TT_F64, 1, sh, v), *b = tt_new_from(TT_F64, 1, sh, v);
    a->requires_grad = true;
    /* accumulation across two backward passes */
    for (int it = 0; it < 2; it++) {
        tt_tensor *l = tt_sum(c, tt_mul(c, a, b));
        CHECK(tt_backward(c, l) == TL_OK, "backward: %s", tl_last_error());
        /* freed graph: a second backward must fail cleanly */
        if (it == 0) CHECK(tt_backward(c, l) == TL_ERR_STATE, "second backward should be TL_ERR_STATE");
        tt_ctx_reset(c);
    }
    CHECK(a->grad && tt_get(a->grad, 2) == 6.0, "accumulated grad %g (want 6)", a->grad ? tt_get(a->grad, 2) : -1);
    CHECK(b->grad == NULL, "grad computed for a tensor that does not need it");
    tt_zero_grad(a);
    CHECK(tt_get(a->grad, 0) == 0.0, "zero_grad");
    /* no_grad: nothing recorded, backward refuses */
    bool prev = tt_set_grad_enabled(c, false);
    tt_tensor *l = tt_sum(c, tt_mul(c, a, b));
    CHECK(l && !l->requires_grad, "no_grad output requires grad");
    CHECK(tt_backward(c, l) == TL_ERR_STATE, "backward of a no-grad tensor should fail");
    tt_set_grad_enabled(c, prev);
    /* shape mismatch: a clear error, not a crash */
    int64_t sh2[1] = {4};
    tt_tensor *d = tt_zeros(c, TT_F64, 1, sh2);
    CHECK(tt_add(c, a, d) == NULL && strstr(tl_last_error(), "broadcast"), "mismatch error: %s", tl_last_error());
    CHECK(tt_sum(c, tt_add(c, a, d)) == NULL, "NULL must propagate");
    /* retain_grad on a non-leaf */
    tt_tensor *m = tt_mul(c, a, b);
    m->retain_grad = true;
    CHECK(tt_backward(c, tt_sum(c, m)) == TL_OK, "backward");
    CHECK(m->grad && tt_get(m->grad, 1) == 1.0, "retained non-leaf grad");
    tt_ctx_reset(c);
    /* two losses sharing an activation t: the first backward frees the
     * shared part of the graph (as PyTorch does without retain_graph) but
     * must keep t's data, which the second graph's mul still reads (ASan
     * would flag a use after free); the second backward then reports the
     * freed graph instead of crashing or silently dropping gradient. */
    tt_zero_grad(a);
    tt_tensor *t = tt_exp(c, a);
    tt_tensor *l1 = tt_sum(c, tt_scale(c, t, 2.0));
    tt_tensor *l2 = tt_sum(c, tt_mul(c, t, t));
    CHECK(tt_backward(c, l1) == TL_OK, "l1 backward");
    CHECK(t->st->data != NULL && fabs(tt_get(t, 2) - exp(3.0)) < 1e-12, "shared activation released too early");
    CHECK(tt_backward(c, l2) == TL_ERR_STATE && strstr(tl_last_error(), "freed graph"), "l2 backward: %s",
          tl_last_error());
    CHECK(fabs(tt_get(a->grad, 2) - 2 * exp(3.0)) < 1e-9, "l1 grad %.12g", tt_get(a->grad, 2));
    tt_ctx_reset(c);
    tt_free(a);
    tt_free(b);
    tt_ctx_free(c);
}

static void f32_paths_vs_f64(void) {
    /* the f32 fast paths (AVX2 GELU, polynomial exp/tanh, threaded chunks with
     * tails) against the f64 kernels on the same inputs, forward and backward */
    tt_ctx *c;
    tt_ctx_init(2, &c);
    for (int64_t n = 37; n <= 40000; n += 39963) {
        tt_tensor *x32 = tt_new(TT_F32, 1, &n), *x64 = tt_new(TT_F64, 1, &n);
        tt_init_uniform(x64, &g_rng, -6, 6);
        tt_copy_(x32, x64);
        tt_copy_(x64, x32);
        x32->requires_grad = x64->requires_grad = true;
        tt_tensor *(*fns[3])(tt_ctx *, tt_tensor *) = {tt_gelu_tanh, tt_silu, tt_sigmoid};
        for (int f = 0; f < 3; f++) {
            tt_zero_grad(x32);
            tt_zero_grad(x64);
            tt_tensor *y32 = fns[f](c, x32), *y64 = fns[f](c, x64);
            double e = 0;
            for (int64_t i = 0; i < n; i++) e = fmax(e, fabs(tt_get(y32, i) - tt_get(y64, i)));
            tt_backward(c, tt_sum(c, y32));
            tt_backward(c, tt_sum(c, y64));
            double eg = 0;
            for (int64_t i = 0; i < n; i++) eg = fmax(eg, fabs(tt_get(x32->grad, i) - tt_get(x64->grad, i)));
            CHECK(e < 5e-6 && eg < 5e-6, "f32 fast path %d n=%lld: fwd err %g, grad err %g", f, (long long)n, e, eg);
            tt_ctx_reset(c);
        }
        tt_free(x32);
        tt_free(x64);
    }
    tt_ctx_free(c);
}

/* f32 attention (the AVX2 softmax rows where the CPU has AVX2, the scalar
 * rows elsewhere) against the f64 path on the same inputs: causal and not,
 * rows whose length is no multiple of 8, forward and all three gradients
 * of sum(o * R). */
static void attention_f32_vs_f64(void) {
    int64_t shapes[][2] = {{13, 13}, {5, 21}, {16, 16}};
    for (int t = 0; t < 3; t++)
        for (int causal = 0; causal < 2; causal++) {
            tt_ctx *c;
            tt_ctx_init(2, &c);
            int64_t T = shapes[t][0], S = shapes[t][1];
            int64_t qs[4] = {2, 2, T, 8}, ks[4] = {2, 2, S, 8};
            tt_tensor *x64[4], *x32[4];
            for (int i = 0; i < 4; i++) {
                x64[i] = tt_new(TT_F64, 4, i == 0 || i == 3 ? qs : ks);
                x32[i] = tt_new(TT_F32, 4, i == 0 || i == 3 ? qs : ks);
                tt_init_uniform(x64[i], &g_rng, -2, 2);
                tt_copy_(x32[i], x64[i]);
                tt_copy_(x64[i], x32[i]);
                x64[i]->requires_grad = x32[i]->requires_grad = i < 3;
            }
            tt_tensor *o64 = tt_attention(c, x64[0], x64[1], x64[2], causal, 0);
            tt_tensor *o32 = tt_attention(c, x32[0], x32[1], x32[2], causal, 0);
            double e = 0;
            for (int64_t i = 0; i < tt_numel(o64); i++) e = fmax(e, fabs(tt_get(o32, i) - tt_get(o64, i)));
            tt_backward(c, tt_sum(c, tt_mul(c, o64, x64[3])));
            tt_backward(c, tt_sum(c, tt_mul(c, o32, x32[3])));
            double eg = 0;
            for (int i = 0; i < 3; i++)
                for (int64_t k = 0; k < tt_numel(x64[i]); k++)
                    eg = fmax(eg, fabs(tt_get(x32[i]->grad, k) - tt_get(x64[i]->grad, k)));
            CHECK(e < 2e-6 && eg < 1e-5, "f32 attention T=%lld S=%lld causal=%d: fwd err %g, grad err %g",
                  (long long)T, (long long)S, causal, e, eg);
            for (int i = 0; i < 4; i++) {
                tt_free(x64[i]);
                tt_free(x32[i]);
            }
            tt_ctx_free(c);
        }
}

/* layernorm over more rows than one weight-gradient chunk: f32 gradients
 * bit-identical at 1 and 3 threads, and within 1e-5 of the f64 path. */
static void layernorm_threads(void) {
    int64_t xs[2] = {200, 40}, ws = 40;
    tt_tensor *x64 = tt_new(TT_F64, 2, xs), *r64 = tt_new(TT_F64, 2, xs), *w64 = tt_new(TT_F64, 1, &ws);
    tt_tensor *b64 = tt_new(TT_F64, 1, &ws);
    tt_init_uniform(x64, &g_rng, -2, 2);
    tt_init_uniform(r64, &g_rng, -1, 1);
    tt_init_uniform(w64, &g_rng, 0.5, 1.5);
    tt_init_uniform(b64, &g_rng, -1, 1);
    tt_tensor *src[4] = {x64, r64, w64, b64}, *grads[3][3] = {{0}};
    for (int run = 0; run < 3; run++) { /* f32 at 1 thread, f32 at 3 threads, f64 */
        tt_ctx *c;
        tt_ctx_init(run == 1 ? 3 : 1, &c);
        tt_dtype dt = run == 2 ? TT_F64 : TT_F32;
        tt_tensor *t[4];
        for (int i = 0; i < 4; i++) {
            t[i] = tt_new(dt, src[i]->ndim, src[i]->shape);
            tt_copy_(t[i], src[i]);
            t[i]->requires_grad = i != 1;
        }
        tt_backward(c, tt_sum(c, tt_mul(c, tt_layernorm(c, t[0], t[2], t[3], 1e-5), t[1])));
        int gi[3] = {0, 2, 3};
        for (int k = 0; k < 3; k++) {
            grads[run][k] = tt_new(TT_F64, t[gi[k]]->ndim, t[gi[k]]->shape);
            tt_copy_(grads[run][k], t[gi[k]]->grad);
        }
        for (int i = 0; i < 4; i++) tt_free(t[i]);
        tt_ctx_free(c);
    }
    for (int k = 0; k < 3; k++) {
        int64_t n = tt_numel(grads[0][k]), same = 0;
        double e = 0;
        for (int64_t i = 0; i < n; i++) {
            same += tt_get(grads[0][k], i) == tt_get(grads[1][k], i);
            e = fmax(e, fabs(tt_get(grads[0][k], i) - tt_get(grads[2][k], i)));
        }
        CHECK(same == n, "layernorm grad %d: %lld of %lld values differ between 1 and 3 threads", k,
              (long long)(n - same), (long long)n);
        CHECK(e < 1e-5, "layernorm grad %d: f32 off f64 by %g", k, e);
        for (int r = 0; r < 3; r++) tt_free(grads[r][k]);
    }
    for (int i = 0; i < 4; i++) tt_free(src[i]);
}

static void gemm_vs_naive(void) {
    /* the blocked/threaded f32 gemm against a double-accumulated naive loop */
    int64_t dims[][3] = {{1, 1, 1}, {7, 19, 5}, {97, 130, 300}, {200, 33, 513}};
    tl_threadpool *tp;
    tl_threadpool_init(2, &tp);
    for (int t = 0; t < 4; t++) {
        int64_t M = dims[t][0], N = dims[t][1], K = dims[t][2];
        float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
        float *C = malloc(sizeof(float) * (size_t)(M * N));
        for (int64_t i = 0; i < M * K; i++) A[i] = (float)(tt_rng_uniform(&g_rng) - 0.5);
        for (int64_t i = 0; i < K * N; i++) B[i] = (float)(tt_rng_uniform(&g_rng) - 0.5);
        float *At = malloc(sizeof(float) * (size_t)(M * K)); /* A^T stored [K, M] */
        for (int64_t m = 0; m < M; m++)
            for (int64_t k = 0; k < K; k++) At[k * M + m] = A[m * K + k];
        for (int tr = 0; tr < 3; tr++) { /* B as given, B through a transpose, A through a transpose */
            if (tr == 1) tt_gemm_f32(tp, M, N, K, A, K, 1, B, 1, K, C, N, false);
            else if (tr == 2) tt_gemm_f32(tp, M, N, K, At, 1, M, B, N, 1, C, N, false);
            else tt_gemm_f32(tp, M, N, K, A, K, 1, B, N, 1, C, N, false);
            double maxe = 0;
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++) {
                    double s = 0;
                    for (int64_t k = 0; k < K; k++) s += (double)A[m * K + k] * (tr == 1 ? B[n * K + k] : B[k * N + n]);
                    double e = fabs(s - C[m * N + n]);
                    if (e > maxe) maxe = e;
                }
            CHECK(maxe < 1e-4, "gemm %lldx%lldx%lld tr=%d: max err %g", (long long)M, (long long)N, (long long)K, tr,
                  maxe);
        }
        free(A);
        free(At);
        free(B);
        free(C);
    }
    tl_threadpool_free(tp);
}

/* The f32 gemm at each kernel level this CPU runs against its scalar twin:
 * the documented summation order (tallow_train.h) written with fmaf, which
 * the AVX2 and AVX-512 kernels must match bit for bit, for every A/B
 * layout the ops use (plain, B through a transpose, A through a transpose),
 * with accumulate, edges that fill no whole tile, K over several slices,
 * and 1 vs 3 threads. The scalar level (no FMA) is held to 1e-5. */
static void gemm_fma_twin(void) {
    int64_t dims[][3] = {{13, 45, 300}, {96, 64, 128}, {25, 33, 7}, {130, 97, 520}, {1, 32, 9}};
    tl_threadpool *tp;
    tl_threadpool_init(3, &tp);
    int top = tl_cpu_detected_level();
    for (int lv = TL_CPU_LEVEL_SCALAR; lv <= top; lv++) {
        tl_cpu_set_level(lv);
        for (int t = 0; t < 5; t++) {
            int64_t M = dims[t][0], N = dims[t][1], K = dims[t][2];
            float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
            float *C0 = malloc(sizeof(float) * (size_t)(M * N)), *C1 = malloc(sizeof(float) * (size_t)(M * N));
            float *R = malloc(sizeof(float) * (size_t)(M * N)), *Ci = malloc(sizeof(float) * (size_t)(M * N));
            for (int64_t i = 0; i < M * K; i++) A[i] = (float)(tt_rng_uniform(&g_rng) - 0.5);
            for (int64_t i = 0; i < K * N; i++) B[i] = (float)(tt_rng_uniform(&g_rng) - 0.5);
            for (int64_t i = 0; i < M * N; i++) Ci[i] = (float)(tt_rng_uniform(&g_rng) - 0.5);
            for (int tr = 0; tr < 3; tr++)
                for (int acc = 0; acc < 2; acc++) {
                    /* the same values read through each layout: A [M,K] or stored [K,M]; B [K,N] or [N,K] */
                    int64_t rsa = tr == 2 ? 1 : K, csa = tr == 2 ? M : 1;
                    int64_t rsb = tr == 1 ? 1 : N, csb = tr == 1 ? K : 1;
                    for (int64_t i = 0; i < M * N; i++) C0[i] = C1[i] = R[i] = Ci[i];
                    tt_gemm_f32(NULL, M, N, K, A, rsa, csa, B, rsb, csb, C0, N, acc);
                    tt_gemm_f32(tp, M, N, K, A, rsa, csa, B, rsb, csb, C1, N, acc);
                    for (int64_t m = 0; m < M; m++)
                        for (int64_t n = 0; n < N; n++) {
                            float *r = &R[m * N + n];
                            for (int64_t k0 = 0; k0 < K; k0 += TT_GEMM_KC) {
                                float s = 0;
                                for (int64_t k = k0; k < K && k < k0 + TT_GEMM_KC; k++)
                                    s = fmaf(A[m * rsa + k * csa], B[k * rsb + n * csb], s);
                                *r = (acc || k0 > 0) ? *r + s : s;
                            }
                        }
                    int64_t bad = 0, diff13 = 0;
                    double maxe = 0;
                    for (int64_t i = 0; i < M * N; i++) {
                        double e = fabs((double)C0[i] - R[i]);
                        maxe = e > maxe ? e : maxe;
                        bad += lv > TL_CPU_LEVEL_SCALAR ? C0[i] != R[i] : e > 1e-5;
                        diff13 += memcmp(&C0[i], &C1[i], sizeof(float)) != 0;
                    }
                    CHECK(bad == 0, "gemm %s %lldx%lldx%lld tr=%d acc=%d: %lld of %lld values off the fmaf twin (max %g)",
                          tl_cpu_level_name(lv), (long long)M, (long long)N, (long long)K, tr, acc, (long long)bad,
                          (long long)(M * N), maxe);
                    CHECK(diff13 == 0, "gemm %s %lldx%lldx%lld tr=%d: %lld values differ between 1 and 3 threads",
                          tl_cpu_level_name(lv), (long long)M, (long long)N, (long long)K, tr, (long long)diff13);
                }
            free(A);
            free(B);
            free(C0);
            free(C1);
            free(R);
            free(Ci);
        }
    }
    tl_cpu_set_level(top);
    tl_threadpool_free(tp);
}

int main(void) {
    tt_rng_seed(&g_rng, 42);
    for (int i = 0; i < 64; i++) {
        g_ids[i] = (int32_t)(tt_rng_next(&g_rng) % 7);
        g_tg[i] = (int32_t)(tt_rng_next(&g_rng) % 6);
    }
    g_tg[2] = -100; /* an ignored row */
    g_tg[5] = -100;
    autograd_behaviour();
    gemm_vs_naive();
    gemm_fma_twin();
    f32_paths_vs_f64();
    attention_f32_vs_f64();
    layernorm_threads();
    double worst = 0;
#define RUN(...) GC_RUN(worst, __VA_ARGS__)
    RUN("add broadcast", b_add_bcast, 2, -1, 1, {3, 2, 3, 4}, {2, 3, 1});
    RUN("sub broadcast", b_sub_bcast, 2, -1, 1, {2, 2, 1}, {3, 3, 1, 5});
    RUN("mul broadcast", b_mul_bcast, 2, -1, 1, {3, 2, 3, 4}, {1, 4});
    RUN("div broadcast", b_div_bcast, 2, 0.5, 2, {2, 3, 4}, {2, 1, 4});
    RUN("mul transposed view", b_mul_transposed, 2, -1, 1, {2, 4, 3}, {2, 3, 4});
    RUN("neg", b_neg, 1, -1, 1, {2, 3, 4});
    RUN("scale", b_scale, 1, -1, 1, {2, 3, 4});
    RUN("exp", b_exp, 1, -1, 1, {2, 3, 4});
    RUN("log", b_log, 1, 0.5, 2, {2, 3, 4});
    RUN("sqrt", b_sqrt, 1, 0.5, 2, {2, 3, 4});
    RUN("pow 2.5", b_pow, 1, 0.5, 2, {2, 3, 4});
    RUN("relu", b_relu, 1, -1, 1, {2, 3, 4});
    RUN("gelu tanh (transposed)", b_gelu_tanh, 1, -3, 3, {3, 2, 3, 4});
    RUN("gelu erf", b_gelu_erf, 1, -3, 3, {2, 3, 4});
    RUN("silu", b_silu, 1, -3, 3, {2, 3, 4});
    RUN("sigmoid", b_sigmoid, 1, -3, 3, {2, 3, 4});
    RUN("tanh", b_tanh, 1, -2, 2, {2, 3, 4});
    RUN("sum", b_sum, 1, -1, 1, {2, 3, 4});
    RUN("mean (transposed)", b_mean, 1, -1, 1, {2, 3, 4});
    RUN("sum dim", b_sum_dim, 1, -1, 1, {3, 2, 3, 4});
    RUN("mean dim keepdim", b_mean_dim_keep, 1, -1, 1, {2, 3, 4});
    RUN("matmul", b_matmul, 2, -1, 1, {2, 5, 7}, {2, 7, 3});
    RUN("batched matmul broadcast", b_matmul_bcast, 2, -1, 1, {4, 2, 3, 4, 5}, {2, 5, 6});
    RUN("matmul transposed b", b_matmul_t, 2, -1, 1, {3, 2, 4, 5}, {3, 2, 3, 5});
    RUN("linear + bias", b_linear, 3, -1, 1, {3, 2, 3, 6}, {2, 4, 6}, {1, 4});
    RUN("linear of narrowed view", b_linear_view, 2, -1, 1, {3, 2, 3, 7}, {2, 4, 5});
    RUN("softmax", b_softmax, 1, -2, 2, {3, 2, 3, 5});
    RUN("log_softmax (transposed)", b_log_softmax, 1, -2, 2, {3, 4, 3, 5});
    RUN("embedding", b_embedding, 1, -1, 1, {2, 7, 4});
    RUN("layernorm", b_layernorm, 3, -1, 1, {3, 2, 3, 8}, {1, 8}, {1, 8});
    RUN("layernorm (transposed)", b_layernorm_view, 3, -1, 1, {3, 5, 2, 6}, {1, 6}, {1, 6});
    RUN("rmsnorm", b_rmsnorm, 2, -1, 1, {3, 2, 3, 8}, {1, 8});
    RUN("rope interleaved", b_rope, 1, -1, 1, {4, 2, 3, 2, 8});
    RUN("attention causal", b_attn_causal, 3, -1, 1, {4, 2, 2, 5, 4}, {4, 2, 2, 5, 4}, {4, 2, 2, 5, 4});
    RUN("attention causal GQA S>T", b_attn_gqa, 3, -1, 1, {4, 1, 4, 3, 4}, {4, 1, 2, 6, 4}, {4, 1, 2, 6, 4});
    RUN("attention full, permuted q", b_attn_full_view, 3, -1, 1, {4, 2, 5, 2, 4}, {4, 2, 2, 6, 4},
        {4, 2, 2, 6, 4});
    RUN("attention fused qkv views", b_attn_fused_qkv, 1, -1, 1, {3, 2, 5, 24});
    RUN("attention_qkv gqa", b_attn_qkv_gqa, 1, -1, 1, {3, 2, 5, 32});
    attention_qkv_errors();
    RUN("reshape of narrowed views", b_reshape_views, 1, -1, 1, {3, 2, 3, 8});
    RUN("reshape, same ndim", b_reshape_same_ndim, 2, -1, 1, {2, 4, 6}, {3, 3, 2, 4});
    RUN("cross-entropy ignore_index", b_ce, 1, -2, 2, {2, 8, 6});
    RUN("mse", b_mse, 2, -1, 1, {2, 3, 4}, {2, 3, 4});
    RUN("dropout p=0.3 seeded", b_dropout, 1, -1, 1, {2, 5, 6});
    RUN("views chain", b_views, 2, -1, 1, {2, 4, 6}, {3, 3, 3, 4});
    printf("worst relative grad error over all ops: %.3g\n", worst);
    return test_finish();
}
