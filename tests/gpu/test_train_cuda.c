/* tests/gpu/test_train_cuda: every CUDA op of the training framework against
 * its CPU twin (the CPU ops are verified against PyTorch and f64 finite
 * differences): the same random inputs and seed gradient on both devices,
 * outputs and every input gradient compared by relative L2 error. Then
 * AdamW with clipping, a whole GPT-2 step (loss and all parameter
 * gradients), the guard (an op without a CUDA kernel fails naming op and
 * device), and a checkpoint resume on the GPU that must be bit-identical.
 * Needs a CUDA device (ctest label gpu). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tallow_train.h"

static int n_pass, n_fail;
#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (cond) n_pass++;                                                      \
        else {                                                                   \
            n_fail++;                                                            \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                        \
            fprintf(stderr, "\n");                                               \
        }                                                                        \
    } while (0)

static tt_rng R;

static tt_tensor *rnd(int ndim, const int64_t *sh, double scale) {
    tt_tensor *t = tt_new(TT_F32, ndim, sh);
    tt_init_normal(t, &R, 0.0, scale);
    return t;
}

/* A CUDA copy of a CPU tensor (caller-owned, requires_grad as given). */
static tt_tensor *on_gpu(const tt_tensor *h, bool rg) {
    tt_tensor *d = tt_new_on(TT_CUDA, h->dtype, h->ndim, h->shape);
    if (!d || tt_copy_across(d, h) != TL_OK) {
        fprintf(stderr, "FATAL: upload: %s\n", tl_last_error());
        exit(1);
    }
    d->requires_grad = rg;
    return d;
}

/* Relative L2 error of a device tensor against a host one. */
static double rel_err(const tt_tensor *dev, const tt_tensor *host) {
    if (!dev || !host) return INFINITY;
    int64_t n = tt_numel(host);
    if (tt_numel(dev) != n) return INFINITY;
    tt_tensor *h = tt_new(TT_F32, host->ndim, host->shape);
    tt_ctx *c;
    tt_ctx_init(1, &c);
    tt_tensor *dc = tt_contiguous(c, (tt_tensor *)dev);
    if (tt_copy_across(h, dc) != TL_OK) return INFINITY;
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = tt_get(h, i), b = tt_get(host, i);
        if (!isfinite(a)) return INFINITY;
        num += (a - b) * (a - b);
        den += b * b;
    }
    tt_free(h);
    tt_ctx_free(c);
    return sqrt(num / (den > 0 ? den : 1e-30));
}

static bool bit_equal(const tt_tensor *a, const tt_tensor *b) {
    int64_t n = tt_numel(a);
    size_t nb = (size_t)n * 4;
    float *x = malloc(nb), *y = malloc(nb);
    tt_tensor *ha = tt_new(TT_F32, a->ndim, a->shape), *hb = tt_new(TT_F32, b->ndim, b->shape);
    bool ok = tt_copy_across(ha, a) == TL_OK && tt_copy_across(hb, b) == TL_OK &&
              !memcmp(tt_data(ha), tt_data(hb), nb);
    tt_free(ha);
    tt_free(hb);
    free(x);
    free(y);
    return ok;
}

typedef tt_tensor *(*op3)(tt_ctx *c, tt_tensor *const *in, void *arg);

static tt_matmul_prec g_prec = TT_MM_F32; /* the matmul precision twin runs the CUDA side in */

/* Run op on CPU inputs and on their GPU copies; backward with one random
 * seed on both; compare output and each input's gradient. */
static void twin(const char *name, op3 f, void *arg, int n_in, tt_tensor **hin, double tol) {
    tt_ctx *c;
    tt_ctx_init(2, &c);
    tt_ctx_set_matmul_prec(c, g_prec);
    tt_tensor *din[4] = {0};
    for (int i = 0; i < n_in; i++) {
        if (!hin[i]) continue;
        hin[i]->requires_grad = true;
        tt_free(hin[i]->grad); /* a fresh gradient on both sides */
        hin[i]->grad = NULL;
        din[i] = on_gpu(hin[i], true);
    }
    tt_tensor *ho = f(c, hin, arg);
    tt_tensor *dout = f(c, din, arg);
    CHECK(ho && dout, "%s: forward failed: %s", name, tl_last_error());
    if (!ho || !dout) goto out;
    double eo = rel_err(dout, ho);
    CHECK(eo <= tol, "%s: forward rel err %.3g > %.3g", name, eo, tol);
    {
        tt_tensor *seed = rnd(ho->ndim, ho->shape, 1.0);
        tt_tensor *dseed = on_gpu(seed, false);
        tl_status s1 = tt_backward_with(c, ho, seed);
        tl_status s2 = tt_backward_with(c, dout, dseed);
        CHECK(s1 == TL_OK && s2 == TL_OK, "%s: backward: %s", name, tl_last_error());
        double worst = 0;
        for (int i = 0; i < n_in; i++) {
            if (!hin[i]) continue;
            double e = rel_err(din[i]->grad, hin[i]->grad);
            CHECK(e <= tol, "%s: grad of input %d rel err %.3g > %.3g", name, i, e, tol);
            if (e > worst) worst = e;
        }
        printf("%-28s fwd %.2e  worst grad %.2e\n", name, eo, worst);
        tt_free(seed);
        tt_free(dseed);
    }
out:
    tt_ctx_free(c);
    for (int i = 0; i < n_in; i++) tt_free(din[i]);
}

static tt_tensor *f_add(tt_ctx *c, tt_tensor *const *in, void *a) { return tt_add(c, in[0], in[1]); }
static tt_tensor *f_gelu(tt_ctx *c, tt_tensor *const *in, void *a) { return tt_gelu_tanh(c, in[0]); }
static tt_tensor *f_ln(tt_ctx *c, tt_tensor *const *in, void *a) { return tt_layernorm(c, in[0], in[1], in[2], 1e-5); }
static tt_tensor *f_rms(tt_ctx *c, tt_tensor *const *in, void *a) { return tt_rmsnorm(c, in[0], in[1], 1e-5); }
static tt_tensor *f_silu(tt_ctx *c, tt_tensor *const *in, void *a) { return tt_silu(c, in[0]); }
static tt_tensor *f_scale(tt_ctx *c, tt_tensor *const *in, void *a) { return tt_scale(c, in[0], 0.37); }
static tt_tensor *f_mul(tt_ctx *c, tt_tensor *const *in, void *a) { return tt_mul(c, in[0], in[1]); }
static tt_tensor *f_rope(tt_ctx *c, tt_tensor *const *in, void *a) { return tt_rope(c, in[0], 3, 10000.0); }
static tt_tensor *f_lin(tt_ctx *c, tt_tensor *const *in, void *a) { return tt_linear(c, in[0], in[1], in[2]); }
/* one weight used twice: the second backward adds into the weight's and the input's gradients */
static tt_tensor *f_lin2(tt_ctx *c, tt_tensor *const *in, void *a) {
    return tt_add(c, tt_linear(c, in[0], in[1], in[2]), tt_linear(c, in[0], in[1], NULL));
}
static const int32_t *g_ids;
static int64_t g_ids_n;
static tt_tensor *f_emb(tt_ctx *c, tt_tensor *const *in, void *a) {
    return tt_embedding(c, in[0], g_ids, 1, &g_ids_n);
}
static tt_tensor *f_xent(tt_ctx *c, tt_tensor *const *in, void *a) { return tt_cross_entropy(c, in[0], g_ids, -100); }
/* GPT-2's attention path: qkv [B, T, 3C] narrowed, reshaped, permuted (strided views) */
static tt_tensor *f_attn(tt_ctx *c, tt_tensor *const *in, void *a) {
    const int64_t *d = a; /* B, T, H, D */
    int64_t B = d[0], T = d[1], H = d[2], D = d[3], C = H * D;
    int perm[4] = {0, 2, 1, 3};
    int64_t sh[4] = {B, T, H, D};
    tt_tensor *x[3];
    for (int i = 0; i < 3; i++) x[i] = tt_permute(c, tt_reshape(c, tt_narrow(c, in[0], 2, i * C, C), 4, sh), perm);
    tt_tensor *y = tt_attention(c, x[0], x[1], x[2], true, 0);
    int64_t osh[3] = {B, T, C};
    return tt_reshape(c, tt_permute(c, y, perm), 3, osh);
}
/* the fused form: dims B, T, H, D, Hkv */
static tt_tensor *f_attn_qkv(tt_ctx *c, tt_tensor *const *in, void *a) {
    const int64_t *d = a;
    return tt_attention_qkv(c, in[0], d[2], d[4], true, 0);
}
static tt_tensor *f_todev(tt_ctx *c, tt_tensor *const *in, void *a) {
    /* CPU tensor -> cuda -> gelu -> back: gradients cross both ways */
    tt_tensor *x = in[0];
    if (tt_device_of(x) == TT_CPU) return tt_gelu_tanh(c, x);
    tt_tensor *h = tt_to_device(c, x, TT_CPU);
    return tt_to_device(c, tt_gelu_tanh(c, h), TT_CUDA);
}

static void test_ops(void) {
    {
        int64_t a[3] = {4, 33, 40}, b[2] = {33, 40};
        tt_tensor *in[2] = {rnd(3, a, 1), rnd(3, a, 1)};
        twin("add same shape", f_add, NULL, 2, in, 1e-6);
        tt_free(in[1]);
        in[1] = rnd(2, b, 1);
        twin("add broadcast [T,C]", f_add, NULL, 2, in, 1e-6);
        tt_free(in[0]);
        tt_free(in[1]);
    }
    {
        int64_t a[2] = {37, 300};
        tt_tensor *in[1] = {rnd(2, a, 2)};
        twin("gelu_tanh", f_gelu, NULL, 1, in, 1e-5);
        twin("to_device round trip", f_todev, NULL, 1, in, 1e-5);
        tt_free(in[0]);
        int64_t odd[2] = {7, 13}; /* a count that leaves a tail after the float4s */
        in[0] = rnd(2, odd, 4);
        twin("gelu_tanh, 91 values", f_gelu, NULL, 1, in, 1e-5);
        tt_free(in[0]);
    }
    {
        int64_t a[3] = {3, 70, 96}, c1 = 96;
        tt_tensor *in[3] = {rnd(3, a, 3), rnd(1, &c1, 1), rnd(1, &c1, 1)};
        for (int64_t i = 0; i < 3 * 70 * 96; i++) tt_set(in[0], i, tt_get(in[0], i) + 0.5); /* nonzero mean */
        twin("layernorm", f_ln, NULL, 3, in, 1e-5);
        twin("rmsnorm", f_rms, NULL, 2, in, 1e-5);
        for (int i = 0; i < 3; i++) tt_free(in[i]);
    }
    {
        /* rows wider than 8 warps' partial sums fit in shared memory (Llama-3-8B's 4096) */
        int64_t a[2] = {37, 4096}, c1 = 4096;
        tt_tensor *in[2] = {rnd(2, a, 1), rnd(1, &c1, 1)};
        twin("rmsnorm, width 4096", f_rms, NULL, 2, in, 1e-5);
        for (int i = 0; i < 2; i++) tt_free(in[i]);
    }
    {
        int64_t a[3] = {3, 41, 50}, r[4] = {2, 19, 3, 16};
        tt_tensor *in[2] = {rnd(3, a, 2), rnd(3, a, 1)};
        twin("silu", f_silu, NULL, 1, in, 1e-5);
        twin("scale", f_scale, NULL, 1, in, 1e-6);
        twin("mul", f_mul, NULL, 2, in, 1e-6);
        tt_free(in[0]);
        tt_free(in[1]);
        in[0] = rnd(4, r, 1);
        twin("rope", f_rope, NULL, 1, in, 1e-5);
        tt_free(in[0]);
    }
    {
        int64_t x[3] = {2, 45, 64}, w[2] = {96, 64}, b = 96;
        tt_tensor *in[3] = {rnd(3, x, 1), rnd(2, w, 0.1), rnd(1, &b, 0.1)};
        twin("linear+bias f32", f_lin, NULL, 3, in, 1e-5);
        tt_free(in[2]);
        in[2] = NULL;
        twin("linear f32", f_lin, NULL, 3, in, 1e-5);
        tt_free(in[0]);
        tt_free(in[1]);
        /* an odd width (GPT-2's vocabulary is 50257): rows padded around the matmuls */
        int64_t wo[2] = {77, 64}, bo = 77;
        tt_tensor *io[3] = {rnd(3, x, 1), rnd(2, wo, 0.1), rnd(1, &bo, 0.1)};
        twin("linear+bias f32, 77 outputs", f_lin, NULL, 3, io, 1e-5);
        twin("linear twice f32, 77 outputs", f_lin2, NULL, 3, io, 1e-5);
        for (int i = 0; i < 3; i++) tt_free(io[i]);
    }
    {
        int64_t w[2] = {50, 48};
        int32_t ids[300];
        for (int i = 0; i < 300; i++) ids[i] = (int32_t)(tt_rng_next(&R) % 50); /* many repeats */
        g_ids = ids;
        g_ids_n = 300;
        tt_tensor *in[1] = {rnd(2, w, 1)};
        twin("embedding", f_emb, NULL, 1, in, 1e-6);
        tt_free(in[0]);
        int64_t l[2] = {300, 50};
        ids[3] = ids[77] = -100;
        in[0] = rnd(2, l, 3);
        twin("cross_entropy", f_xent, NULL, 1, in, 1e-5);
        tt_free(in[0]);
    }
    {
        int64_t dims[4] = {2, 50, 3, 16}, qkv[3] = {2, 50, 3 * 48};
        tt_tensor *in[1] = {rnd(3, qkv, 1)};
        twin("attention (strided qkv)", f_attn, dims, 1, in, 1e-5);
        tt_free(in[0]);
    }
}

static void test_prec(void) {
    /* TF32 / BF16 matmuls: the same twin with a looser bound, an aligned and
     * an odd output width (padded rows), forward and every gradient */
    int64_t x[2] = {64, 256}, w[2] = {128, 256}, b = 128;
    tt_tensor *in[3] = {rnd(2, x, 1), rnd(2, w, 0.05), rnd(1, &b, 0.1)};
    tt_matmul_prec ps[2] = {TT_MM_TF32, TT_MM_BF16};
    const char *nm[2] = {"linear tf32", "linear bf16"};
    double tol[2] = {3e-3, 1.5e-2};
    for (int k = 0; k < 2; k++) {
        int64_t wo[2] = {77, 256}, bo = 77;
        tt_tensor *io[3] = {rnd(2, x, 1), rnd(2, wo, 0.05), rnd(1, &bo, 0.1)};
        char label[64];
        snprintf(label, sizeof label, "%s, 77 outputs", nm[k]);
        g_prec = ps[k];
        twin(label, f_lin, NULL, 3, io, 2 * tol[k]);
        snprintf(label, sizeof label, "%s twice, 77 outputs", nm[k]);
        twin(label, f_lin2, NULL, 3, io, 2 * tol[k]);
        g_prec = TT_MM_F32;
        for (int i = 0; i < 3; i++) tt_free(io[i]);
    }
    for (int k = 0; k < 2; k++) {
        tt_ctx *c;
        tt_ctx_init(1, &c);
        tt_ctx_set_matmul_prec(c, ps[k]);
        tt_tensor *din[3];
        for (int i = 0; i < 3; i++) din[i] = on_gpu(in[i], true);
        tt_tensor *ho = tt_linear(c, in[0], in[1], in[2]), *dout = tt_linear(c, din[0], din[1], din[2]);
        double e = rel_err(dout, ho);
        CHECK(e < tol[k], "%s: rel err %.3g", nm[k], e);
        printf("%-28s fwd %.2e\n", nm[k], e);
        tt_ctx_free(c);
        for (int i = 0; i < 3; i++) tt_free(din[i]);
    }
    for (int i = 0; i < 3; i++) tt_free(in[i]);
    /* attention in each precision: forward and the qkv gradient; BF16 runs
     * the flash kernels (head sizes 32, 64, 128; a partial last tile) */
    const int64_t cfgs[][4] = {{2, 64, 2, 32}, {1, 50, 2, 64}, {1, 130, 1, 128}, {2, 200, 3, 64}};
    double atol[2] = {5e-3, 3e-2};
    for (int ci = 0; ci < 4; ci++) {
        int64_t dims[4] = {cfgs[ci][0], cfgs[ci][1], cfgs[ci][2], cfgs[ci][3]};
        int64_t qkv[3] = {dims[0], dims[1], 3 * dims[2] * dims[3]};
        tt_tensor *xa = rnd(3, qkv, 1);
        for (int k = ci ? 1 : 0; k < 2; k++) {
            tt_ctx *c;
            tt_ctx_init(1, &c);
            tt_ctx_set_matmul_prec(c, ps[k]);
            tt_free(xa->grad);
            xa->grad = NULL;
            xa->requires_grad = true;
            tt_tensor *dx = on_gpu(xa, true), *hin[1] = {xa}, *din[1] = {dx};
            tt_tensor *ho = f_attn(c, hin, dims), *dout = f_attn(c, din, dims);
            tt_tensor *seed = rnd(ho->ndim, ho->shape, 1), *dseed = on_gpu(seed, false);
            tt_backward_with(c, ho, seed);
            tt_backward_with(c, dout, dseed);
            double ef = rel_err(dout, ho), eg = rel_err(dx->grad, xa->grad);
            CHECK(ef < atol[k] && eg < atol[k], "attention %s T %lld D %lld: fwd %.3g grad %.3g", k ? "bf16" : "tf32",
                  (long long)dims[1], (long long)dims[3], ef, eg);
            printf("attention %s T %lld D %lld     fwd %.2e  grad %.2e\n", k ? "bf16" : "tf32", (long long)dims[1],
                   (long long)dims[3], ef, eg);
            if (k == 1) { /* the fused op runs the same kernels: the same bits */
                tt_tensor *dx2 = on_gpu(xa, true), *din2[1] = {dx2};
                int64_t d5[5] = {dims[0], dims[1], dims[2], dims[3], dims[2]};
                tt_tensor *dout2 = f_attn_qkv(c, din2, d5);
                tt_backward_with(c, dout2, dseed);
                CHECK(dout2 && bit_equal(dout2, tt_contiguous(c, dout)) && dx2->grad && bit_equal(dx2->grad, dx->grad),
                      "attention_qkv T %lld D %lld: not the bits of the strided path", (long long)dims[1],
                      (long long)dims[3]);
                tt_free(dx2);
            }
            tt_free(seed);
            tt_free(dseed);
            tt_free(dx);
            tt_ctx_free(c);
        }
        tt_free(xa);
    }
    /* grouped-query attention (BF16 flash) through the fused op, against the CPU */
    const int64_t gq[][5] = {{2, 96, 4, 64, 2}, {1, 70, 6, 32, 1}, {1, 129, 4, 128, 4}};
    for (int ci = 0; ci < 3; ci++) {
        const int64_t *d5 = gq[ci];
        int64_t qkv[3] = {d5[0], d5[1], (d5[2] + 2 * d5[4]) * d5[3]};
        tt_tensor *xa = rnd(3, qkv, 1);
        xa->requires_grad = true;
        tt_ctx *c;
        tt_ctx_init(1, &c);
        tt_ctx_set_matmul_prec(c, TT_MM_BF16);
        tt_tensor *dx = on_gpu(xa, true), *hin[1] = {xa}, *din[1] = {dx};
        tt_tensor *ho = f_attn_qkv(c, hin, (void *)d5), *dout = f_attn_qkv(c, din, (void *)d5);
        tt_tensor *seed = ho ? rnd(ho->ndim, ho->shape, 1) : NULL, *dseed = seed ? on_gpu(seed, false) : NULL;
        if (seed) {
            tt_backward_with(c, ho, seed);
            tt_backward_with(c, dout, dseed);
        }
        double ef = rel_err(dout, ho), eg = dx->grad ? rel_err(dx->grad, xa->grad) : INFINITY;
        CHECK(ef < 3e-2 && eg < 3e-2, "gqa attention H %lld Hkv %lld T %lld D %lld: fwd %.3g grad %.3g",
              (long long)d5[2], (long long)d5[4], (long long)d5[1], (long long)d5[3], ef, eg);
        printf("attention gqa H %lld/%lld T %lld D %lld fwd %.2e  grad %.2e\n", (long long)d5[2], (long long)d5[4],
               (long long)d5[1], (long long)d5[3], ef, eg);
        tt_free(seed);
        tt_free(dseed);
        tt_free(dx);
        tt_free(xa);
        tt_ctx_free(c);
    }
}

static void test_guard(void) {
    tt_ctx *c;
    tt_ctx_init(1, &c);
    int64_t sh[2] = {4, 8};
    tt_tensor *h = rnd(2, sh, 1), *d = on_gpu(h, false);
    tt_tensor *y = tt_softmax(c, d);
    CHECK(!y && strstr(tl_last_error(), "softmax") && strstr(tl_last_error(), "cuda"),
          "softmax on cuda should fail naming op and device: '%s'", tl_last_error());
    y = tt_add(c, d, h);
    CHECK(!y && strstr(tl_last_error(), "cpu"), "cuda + cpu should fail naming the devices: '%s'", tl_last_error());
    y = tt_exp(c, d);
    CHECK(!y && strstr(tl_last_error(), "exp"), "exp on cuda: '%s'", tl_last_error());
    y = tt_sum(c, d);
    CHECK(!y && strstr(tl_last_error(), "sum"), "sum on cuda: '%s'", tl_last_error());
    tt_free(h);
    tt_free(d);
    tt_ctx_free(c);
}

static void set_grad(tt_tensor *p, const tt_tensor *g) {
    if (!p->grad) p->grad = tt_new_on(tt_device_of(p), TT_F32, p->ndim, p->shape);
    tt_copy_across(p->grad, g);
}

static void test_adamw(void) {
    /* the same parameters and gradients on both devices, 3 clipped steps */
    tt_params hp = {0}, dp = {0};
    int64_t s1[2] = {300, 70}, s2 = 5000;
    tt_tensor *hw = tt_registry_add(&hp, "w", 2, s1, true, true), *hb = tt_registry_add(&hp, "b", 1, &s2, true, false);
    tt_init_normal(hw, &R, 0, 1);
    tt_init_normal(hb, &R, 0, 1);
    tt_tensor *dw = tt_registry_add(&dp, "w", 2, s1, true, true), *db = tt_registry_add(&dp, "b", 1, &s2, true, false);
    CHECK(tt_tensor_move(dw, TT_CUDA) == TL_OK && tt_tensor_move(db, TT_CUDA) == TL_OK, "move: %s", tl_last_error());
    tt_copy_across(dw, hw);
    tt_copy_across(db, hb);
    tt_optim ho, doo;
    tt_optim_config oc = tt_optim_default(TT_OPT_ADAMW, 1e-2);
    oc.weight_decay = 0.1;
    tt_optim_init(&ho, &oc, &hp);
    CHECK(tt_optim_init(&doo, &oc, &dp) == TL_OK, "optim init on cuda: %s", tl_last_error());
    double worst_norm = 0;
    for (int step = 0; step < 3; step++) {
        tt_tensor *g1 = rnd(2, s1, 0.3), *g2 = rnd(1, &s2, 0.3);
        set_grad(hw, g1);
        set_grad(hb, g2);
        set_grad(dw, g1);
        set_grad(db, g2);
        double clip = step == 1 ? 1e9 : 1.0; /* clipping active on steps 0 and 2 */
        CHECK(tt_optim_step_clipped(&ho, 1e-2, clip) == TL_OK, "cpu step");
        CHECK(tt_optim_step_clipped(&doo, 1e-2, clip) == TL_OK, "cuda step: %s", tl_last_error());
        double nh = tt_optim_last_norm(&ho), nd = tt_optim_last_norm(&doo);
        double e = fabs(nh - nd) / nh;
        if (e > worst_norm) worst_norm = e;
        tt_free(g1);
        tt_free(g2);
    }
    double ew = rel_err(dw, hw), eb = rel_err(db, hb);
    double em = rel_err(doo.m[0], ho.m[0]), ev = rel_err(doo.v[1], ho.v[1]);
    CHECK(ew < 1e-6 && eb < 1e-6 && em < 1e-6 && ev < 1e-6, "adamw: w %.3g b %.3g m %.3g v %.3g", ew, eb, em, ev);
    CHECK(worst_norm < 1e-6, "grad norm rel err %.3g", worst_norm);
    printf("%-28s params %.2e  norm %.2e\n", "adamw + clip (3 steps)", ew > eb ? ew : eb, worst_norm);
    tt_optim_free(&ho);
    tt_optim_free(&doo);
    tt_registry_free(&hp);
    tt_registry_free(&dp);
}

static tt_model_config tiny_cfg(void) {
    tt_model_config k = tt_model_config_default(TT_ARCH_GPT2, 96, 32, 48, 2, 3);
    return k;
}

/* The largest relative error over the parameter gradients of a device model
 * against its host twin, and the parameter's name. */
static double worst_grad(const tt_model *dm, const tt_model *hm, const char **name) {
    double worst = 0;
    *name = "";
    for (int i = 0; i < hm->params.n; i++) {
        double e = rel_err(dm->params.p[i].t->grad, hm->params.p[i].t->grad);
        if (e > worst) worst = e, *name = hm->params.p[i].name;
    }
    return worst;
}

/* One step's loss and every parameter gradient, CPU vs CUDA (GPT-2, Llama). */
static void test_model_grads(tt_arch arch) {
    tt_model_config k = tiny_cfg();
    if (arch == TT_ARCH_LLAMA) k = tt_model_config_default(TT_ARCH_LLAMA, 96, 32, 48, 2, 3);
    tt_model hm, dm;
    tt_model_init(&hm, &k, 7);
    tt_model_init(&dm, &k, 7);
    CHECK(tt_model_to(&dm, TT_CUDA) == TL_OK, "model to cuda: %s", tl_last_error());
    int64_t B = 3, T = 32;
    int32_t ids[96], tg[96];
    for (int i = 0; i < 96; i++) ids[i] = (int32_t)(tt_rng_next(&R) % 96), tg[i] = (int32_t)(tt_rng_next(&R) % 96);
    tg[5] = -100;
    tt_ctx *c;
    tt_ctx_init(2, &c);
    tt_tensor *lh = tt_model_loss(c, &hm, ids, tg, B, T, NULL);
    tt_tensor *ld = tt_model_loss(c, &dm, ids, tg, B, T, NULL);
    CHECK(lh && ld, "gpt2 loss: %s", tl_last_error());
    if (!lh || !ld) return;
    double vh = tt_get(lh, 0), vd = tt_get(ld, 0);
    CHECK(fabs(vh - vd) / vh < 1e-5, "gpt2 loss cpu %.7f cuda %.7f", vh, vd);
    CHECK(tt_backward(c, lh) == TL_OK && tt_backward(c, ld) == TL_OK, "gpt2 backward: %s", tl_last_error());
    const char *wn;
    double worst = worst_grad(&dm, &hm, &wn);
    CHECK(worst < 1e-4, "gpt2 worst grad rel err %.3g (%s)", worst, wn);
    printf("%-28s loss %.7f vs %.7f, worst grad %.2e (%s)\n",
           arch == TT_ARCH_GPT2 ? "gpt2 step cpu vs cuda" : "llama step cpu vs cuda", vh, vd, worst, wn);
    tt_ctx_free(c);
    tt_model_free(&hm);
    tt_model_free(&dm);
}

/* A grouped-query Llama (4 heads over 2, head size 32): in F32 mode (exact
 * attention, kv heads shared by strided batches) within f32 rounding of the
 * CPU; in BF16 mode (the flash kernels) within bf16 rounding. */
static void test_llama_gqa(tt_matmul_prec mm) {
    const bool bf = mm == TT_MM_BF16;
    const double tl_loss = bf ? 1e-2 : 1e-5, tl_grad = bf ? 5e-2 : 1e-4;
    tt_model_config k = tt_model_config_default(TT_ARCH_LLAMA, 96, 64, 128, 2, 4);
    k.kv_heads = 2;
    tt_model hm, dm;
    tt_model_init(&hm, &k, 5);
    tt_model_init(&dm, &k, 5);
    CHECK(tt_model_to(&dm, TT_CUDA) == TL_OK, "model to cuda: %s", tl_last_error());
    int64_t B = 2, T = 64;
    int32_t ids[128], tg[128];
    for (int i = 0; i < 128; i++) ids[i] = (int32_t)(tt_rng_next(&R) % 96), tg[i] = (int32_t)(tt_rng_next(&R) % 96);
    tt_ctx *c, *cd;
    tt_ctx_init(2, &c);
    tt_ctx_init(1, &cd);
    tt_ctx_set_matmul_prec(cd, mm);
    tt_tensor *lh = tt_model_loss(c, &hm, ids, tg, B, T, NULL), *ld = tt_model_loss(cd, &dm, ids, tg, B, T, NULL);
    CHECK(lh && ld, "gqa llama loss: %s", tl_last_error());
    if (lh && ld) {
        double vh = tt_get(lh, 0), vd = tt_get(ld, 0);
        CHECK(fabs(vh - vd) / vh < tl_loss, "gqa llama loss cpu %.7f cuda %s %.7f", vh, bf ? "bf16" : "f32", vd);
        CHECK(tt_backward(c, lh) == TL_OK && tt_backward(cd, ld) == TL_OK, "gqa backward: %s", tl_last_error());
        const char *wn;
        double worst = worst_grad(&dm, &hm, &wn);
        CHECK(worst < tl_grad, "gqa llama %s worst grad rel err %.3g (%s)", bf ? "bf16" : "f32", worst, wn);
        printf("llama gqa 4/2 %-4s step      loss %.7f vs %.7f, worst grad %.2e (%s)\n", bf ? "bf16" : "f32", vh, vd,
               worst, wn);
    }
    tt_ctx_free(c);
    tt_ctx_free(cd);
    tt_model_free(&hm);
    tt_model_free(&dm);
}

/* Train steps [from, to) on CUDA; resume from ckpt if given, save at save_at. */
static void run_gpu(tt_dataset *d, const char *resume, const char *save, int save_at, int to, tt_model *m,
                    tt_optim *o, double *losses) {
    tt_model_config k = tiny_cfg();
    tt_model_init(m, &k, 11);
    tt_model_to(m, TT_CUDA);
    tt_optim_config oc = tt_optim_default(TT_OPT_ADAMW, 3e-3);
    oc.weight_decay = 0.1;
    tt_optim_init(o, &oc, &m->params);
    tt_ctx *c;
    tt_ctx_init(1, &c);
    tt_trainer tr;
    tt_trainer_init(&tr, c, m, o, d, 4, 32, 5);
    if (resume) CHECK(tt_checkpoint_load(resume, m, o, &tr.step, &tr.rng) == TL_OK, "load: %s", tl_last_error());
    while (tr.step < to) {
        double l, gn;
        CHECK(tt_trainer_step(&tr, &l, &gn) == TL_OK, "gpu step: %s", tl_last_error());
        losses[tr.step - 1] = l;
        if (save && tr.step == save_at) {
            CHECK(tt_checkpoint_save(save, m, o, tr.step, &tr.rng) == TL_OK, "save: %s", tl_last_error());
            break;
        }
    }
    tt_trainer_free(&tr);
    tt_ctx_free(c);
}

static void test_resume(void) {
    tt_dataset d = {0};
    d.n = 4000;
    d.n_train = 3600;
    d.vocab = 96;
    d.tokens = malloc(sizeof(int32_t) * (size_t)d.n);
    for (int64_t i = 0; i < d.n; i++) d.tokens[i] = (int32_t)((i * 7 + i / 13) % 96);
    const char *ck = "/tmp/tallow_gpu_resume.safetensors";
    double la[8] = {0}, lb[8] = {0};
    tt_model ma, mb, mc;
    tt_optim oa, ob, oc;
    run_gpu(&d, NULL, NULL, 0, 6, &ma, &oa, la);
    run_gpu(&d, NULL, ck, 3, 6, &mb, &ob, lb);
    tt_optim_free(&ob);
    tt_model_free(&mb);
    run_gpu(&d, ck, NULL, 0, 6, &mc, &oc, lb);
    bool same = true;
    for (int i = 0; i < ma.params.n; i++) same &= bit_equal(ma.params.p[i].t, mc.params.p[i].t);
    for (int i = 0; i < ma.params.n; i++) same &= bit_equal(oa.v[i], oc.v[i]);
    CHECK(same, "resumed GPU run differs from the uninterrupted one");
    CHECK(!memcmp(la, lb, sizeof la), "losses differ after resume (%.9g vs %.9g)", la[5], lb[5]);
    CHECK(la[5] < la[0], "loss should fall: %.4f -> %.4f", la[0], la[5]);
    printf("%-28s bit-identical: %s, loss %.4f -> %.4f\n", "gpu checkpoint resume", same ? "yes" : "NO", la[0], la[5]);
    tt_optim_free(&oa);
    tt_optim_free(&oc);
    tt_model_free(&ma);
    tt_model_free(&mc);
    free(d.tokens);
    remove(ck);
}

int main(void) {
    if (!tt_device_available(TT_CUDA)) {
        fprintf(stderr, "no CUDA device: skipped\n");
        return 77;
    }
    tt_rng_seed(&R, 42);
    test_ops();
    test_prec();
    test_guard();
    test_adamw();
    test_model_grads(TT_ARCH_GPT2);
    test_model_grads(TT_ARCH_LLAMA);
    test_llama_gqa(TT_MM_F32);
    test_llama_gqa(TT_MM_BF16);
    test_resume();
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
