/* test_train_vision: the vision ops, modules and small CNN.
 * 1. Every op's backward against central finite differences in float64
 *    (conv2d over stride/padding/dilation/groups combos, 1x1 and
 *    non-contiguous inputs; max/avg/adaptive pooling; batch_norm in training
 *    and eval mode, 4-d and 2-d). Loss = sum(op(x) * R), h = 1e-5, tolerance
 *    1e-6 relative as in test_train_grad (truncation ~1e-10, rounding ~1e-11).
 * 2. conv2d forward against its definition (a direct 7-loop sum in double).
 * 3. Against PyTorch (fixture tests/fixtures/train_cnn_ref.safetensors made by
 *    make_train_cnn_ref.py with torch 1.13, committed): the CNN's logits,
 *    loss, every parameter gradient, BatchNorm running stats after one
 *    training forward, eval-mode logits, and the per-step losses, final
 *    parameters and running stats of 5 SGD (momentum, decay) training steps;
 *    and single ops (conv2d with stride/padding/dilation/groups, max/avg
 *    pools with padding, adaptive pool) forward and input/weight/bias
 *    gradients. Tolerances (float32 on
 *    both sides, different summation orders): values and gradients 2e-5
 *    relative to the largest |value| of that tensor (float32 eps 1.2e-7
 *    times sums of up to ~600 terms, with BatchNorm's 1/std amplifying);
 *    running stats 1e-5 relative; after 5 training steps 1e-5 (losses) and
 *    2e-5 (parameters, running stats) relative.
 * 4. Initialisation schemes: mean, std and bounds of 200k-sample draws
 *    against torch.nn.init's formulas (different RNGs, so statistics: the
 *    std of a sample std of n = 2e5 is ~std/630; tolerance 1% of std).
 * 5. Thread count does not change conv results (bit-identical), bad input
 *    gives errors, save/load round-trips parameters and buffers.
 * With --bench: times the CNN training step of docs/PERFORMANCE.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "test_util.h"
#include "tallow_train.h"
#include "train_gradcheck.h"

/* ---- op builders ----------------------------------------------------------- */
static tt_tensor *b_conv_basic(tt_ctx *c, tt_tensor **x) {
    tt_conv2d_opt o = tt_conv2d_opt_make(1, 1, 1, 1);
    return tt_conv2d(c, x[0], x[1], x[2], &o);
}
static tt_tensor *b_conv_stride_pad(tt_ctx *c, tt_tensor **x) {
    tt_conv2d_opt o = {{2, 3}, {1, 2}, {1, 1}, 1};
    return tt_conv2d(c, x[0], x[1], x[2], &o);
}
static tt_tensor *b_conv_dilation_groups(tt_ctx *c, tt_tensor **x) {
    tt_conv2d_opt o = {{1, 2}, {2, 0}, {2, 3}, 2};
    return tt_conv2d(c, x[0], x[1], x[2], &o);
}
static tt_tensor *b_conv_depthwise_nobias(tt_ctx *c, tt_tensor **x) {
    tt_conv2d_opt o = tt_conv2d_opt_make(2, 1, 1, 3);
    return tt_conv2d(c, x[0], x[1], NULL, &o);
}
static tt_tensor *b_conv_1x1(tt_ctx *c, tt_tensor **x) {
    tt_conv2d_opt o = tt_conv2d_opt_make(1, 0, 1, 2);
    return tt_conv2d(c, x[0], x[1], x[2], &o);
}
static tt_tensor *b_conv_noncontig(tt_ctx *c, tt_tensor **x) {
    /* x given as [N, H, C, W] and permuted; the weight read through a
     * transpose of its kernel dims */
    int perm[4] = {0, 2, 1, 3};
    tt_conv2d_opt o = {{1, 2}, {1, 1}, {1, 1}, 1};
    return tt_conv2d(c, tt_permute(c, x[0], perm), tt_transpose(c, x[1], 2, 3), x[2], &o);
}
static tt_tensor *b_conv_narrowed(tt_ctx *c, tt_tensor **x) {
    tt_conv2d_opt o = tt_conv2d_opt_make(1, 1, 2, 1);
    return tt_conv2d(c, tt_narrow(c, x[0], 3, 1, 6), x[1], NULL, &o);
}
static tt_tensor *b_maxpool(tt_ctx *c, tt_tensor **x) {
    tt_pool_opt o = tt_pool_opt_make(2, 0, 0);
    return tt_max_pool2d(c, x[0], &o);
}
static tt_tensor *b_maxpool_pad(tt_ctx *c, tt_tensor **x) {
    tt_pool_opt o = {{3, 2}, {2, 1}, {1, 1}};
    return tt_max_pool2d(c, tt_transpose(c, x[0], 2, 3), &o);
}
static tt_tensor *b_avgpool_inc(tt_ctx *c, tt_tensor **x) {
    tt_pool_opt o = {{3, 3}, {2, 2}, {1, 1}};
    return tt_avg_pool2d(c, x[0], &o, true);
}
static tt_tensor *b_avgpool_exc(tt_ctx *c, tt_tensor **x) {
    tt_pool_opt o = {{3, 2}, {2, 1}, {1, 1}};
    return tt_avg_pool2d(c, x[0], &o, false);
}
static tt_tensor *b_adaptive(tt_ctx *c, tt_tensor **x) { return tt_adaptive_avg_pool2d(c, x[0], 3, 4); }
static tt_tensor *b_global(tt_ctx *c, tt_tensor **x) { return tt_adaptive_avg_pool2d(c, x[0], 1, 1); }
static tt_tensor *b_bn_train(tt_ctx *c, tt_tensor **x) {
    return tt_batch_norm(c, x[0], x[1], x[2], NULL, NULL, true, 0.1, 1e-5);
}
static tt_tensor *b_bn_train_view(tt_ctx *c, tt_tensor **x) {
    /* x given as [N, H, W, C] (channels last) and permuted to NCHW */
    int perm[4] = {0, 3, 1, 2};
    return tt_batch_norm(c, tt_permute(c, x[0], perm), x[1], x[2], NULL, NULL, true, 0.1, 1e-5);
}
static tt_tensor *b_bn_train_2d(tt_ctx *c, tt_tensor **x) {
    return tt_batch_norm(c, x[0], x[1], NULL, NULL, NULL, true, 0.1, 1e-3);
}
static tt_tensor *g_rm, *g_rv; /* eval-mode running stats */
static tt_tensor *b_bn_eval(tt_ctx *c, tt_tensor **x) {
    return tt_batch_norm(c, x[0], x[1], x[2], g_rm, g_rv, false, 0.1, 1e-5);
}
static tt_tensor *b_conv_bn_relu_pool(tt_ctx *c, tt_tensor **x) {
    tt_conv2d_opt o = tt_conv2d_opt_make(1, 1, 1, 1);
    tt_pool_opt p = tt_pool_opt_make(2, 2, 0);
    tt_tensor *h = tt_batch_norm(c, tt_conv2d(c, x[0], x[1], NULL, &o), x[2], x[3], NULL, NULL, true, 0.1, 1e-5);
    return tt_avg_pool2d(c, tt_tanh(c, h), &p, true);
}

/* ---- conv2d forward against its definition ---------------------------------- */
static void conv_vs_definition(void) {
    tt_ctx *c;
    tt_ctx_init(2, &c);
    int64_t xs[4] = {2, 6, 9, 8}, ws[4] = {4, 3, 3, 2}, bs[1] = {4};
    tt_tensor *x = tt_new(TT_F32, 4, xs), *w = tt_new(TT_F32, 4, ws), *b = tt_new(TT_F32, 1, bs);
    tt_init_uniform(x, &g_rng, -1, 1);
    tt_init_uniform(w, &g_rng, -1, 1);
    tt_init_uniform(b, &g_rng, -1, 1);
    tt_conv2d_opt o = {{2, 1}, {1, 2}, {2, 3}, 2};
    tt_tensor *y = tt_conv2d(c, x, w, b, &o);
    CHECK(y && y->shape[2] == 4 && y->shape[3] == 9, "conv output shape");
    double e = 0;
    for (int64_t n = 0; y && n < 2; n++)
        for (int64_t co = 0; co < 4; co++)
            for (int64_t oh = 0; oh < y->shape[2]; oh++)
                for (int64_t ow = 0; ow < y->shape[3]; ow++) {
                    int64_t g = co / 2;
                    double s = tt_get(b, co);
                    for (int64_t ci = 0; ci < 3; ci++)
                        for (int64_t i = 0; i < 3; i++)
                            for (int64_t j = 0; j < 2; j++) {
                                int64_t ih = oh * 2 - 1 + i * 2, iw = ow * 1 - 2 + j * 3;
                                if (ih < 0 || ih >= 9 || iw < 0 || iw >= 8) continue;
                                s += tt_get(x, ((n * 6 + g * 3 + ci) * 9 + ih) * 8 + iw) *
                                     tt_get(w, ((co * 3 + ci) * 3 + i) * 2 + j);
                            }
                    e = fmax(e, fabs(s - tt_get(y, ((n * 4 + co) * 4 + oh) * 9 + ow)));
                }
    CHECK(e < 1e-5, "conv2d vs definition: max err %g", e);
    printf("conv2d f32 vs its definition (double sum): max abs err %.2e\n", e);
    /* 1 thread vs 2 threads: bit-identical forward and gradients */
    int64_t xs2[4] = {9, 5, 10, 11}, ws2[4] = {7, 5, 3, 3};
    tt_tensor *x2 = tt_new(TT_F32, 4, xs2), *w2 = tt_new(TT_F32, 4, ws2);
    tt_init_uniform(x2, &g_rng, -1, 1);
    tt_init_uniform(w2, &g_rng, -1, 1);
    x2->requires_grad = w2->requires_grad = true;
    float *res[2][3];
    for (int t = 0; t < 2; t++) {
        tt_ctx *ct;
        tt_ctx_init(t + 1, &ct);
        tt_zero_grad(x2);
        tt_zero_grad(w2);
        tt_conv2d_opt o2 = tt_conv2d_opt_make(1, 1, 1, 1);
        tt_tensor *y2 = tt_conv2d(ct, x2, w2, NULL, &o2);
        int64_t ny = tt_numel(y2);
        res[t][0] = malloc((size_t)ny * 4);
        memcpy(res[t][0], tt_data(y2), (size_t)ny * 4);
        tt_backward(ct, tt_sum(ct, tt_mul(ct, y2, y2)));
        res[t][1] = malloc((size_t)tt_numel(x2) * 4);
        memcpy(res[t][1], tt_data(x2->grad), (size_t)tt_numel(x2) * 4);
        res[t][2] = malloc((size_t)tt_numel(w2) * 4);
        memcpy(res[t][2], tt_data(w2->grad), (size_t)tt_numel(w2) * 4);
        CHECK(t == 0 || (!memcmp(res[0][0], res[1][0], (size_t)ny * 4) &&
                         !memcmp(res[0][1], res[1][1], (size_t)tt_numel(x2) * 4) &&
                         !memcmp(res[0][2], res[1][2], (size_t)tt_numel(w2) * 4)),
              "conv2d differs between 1 and 2 threads");
        tt_ctx_free(ct);
    }
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < 3; k++) free(res[t][k]);
    tt_free(x2);
    tt_free(w2);
    tt_free(x);
    tt_free(w);
    tt_free(b);
    tt_ctx_free(c);
}

/* Pooling and batch norm split planes / channels over the threads: the
 * results must not depend on the thread count (5 channels over 3 threads:
 * uneven splits; sizes past the 16384-value threshold in every pass). */
static void pool_bn_threads(void) {
    int64_t xs[4] = {4, 5, 64, 64}, cs = 5;
    tt_tensor *x = tt_new(TT_F32, 4, xs), *w = tt_new(TT_F32, 1, &cs), *b = tt_new(TT_F32, 1, &cs);
    tt_init_uniform(x, &g_rng, -2, 3);
    tt_init_uniform(w, &g_rng, 0.5, 1.5);
    tt_init_uniform(b, &g_rng, -1, 1);
    x->requires_grad = w->requires_grad = b->requires_grad = true;
    enum { NR = 6 };
    float *res[2][NR] = {{0}};
    size_t len[NR] = {0};
    for (int t = 0; t < 2; t++) {
        tt_ctx *ct;
        tt_ctx_init(t ? 3 : 1, &ct);
        tt_zero_grad(x);
        tt_zero_grad(w);
        tt_zero_grad(b);
        tt_tensor *rm = tt_new(TT_F32, 1, &cs), *rv = tt_new(TT_F32, 1, &cs);
        tt_fill(rm, 0.25);
        tt_fill(rv, 1.5);
        tt_pool_opt mo = tt_pool_opt_make(3, 2, 1), ao = tt_pool_opt_make(2, 2, 1);
        tt_tensor *y = tt_batch_norm(ct, x, w, b, rm, rv, true, 0.1, 1e-5);
        y = tt_avg_pool2d(ct, tt_max_pool2d(ct, y, &mo), &ao, false);
        CHECK(y != NULL, "pool/bn chain: %s", tl_last_error());
        if (!y) return;
        len[0] = (size_t)tt_numel(y) * 4; /* y is the context's: copied before the backward frees it */
        res[t][0] = malloc(len[0]);
        memcpy(res[t][0], tt_data(y), len[0]);
        tt_backward(ct, tt_sum(ct, tt_mul(ct, y, y)));
        tt_tensor *outs[NR] = {NULL, x->grad, w->grad, b->grad, rm, rv};
        for (int k = 1; k < NR; k++) {
            len[k] = (size_t)tt_numel(outs[k]) * 4;
            res[t][k] = malloc(len[k]);
            memcpy(res[t][k], tt_data(outs[k]), len[k]);
        }
        tt_free(rm);
        tt_free(rv);
        tt_ctx_free(ct);
    }
    int diff = 0;
    for (int k = 0; k < NR; k++) diff += memcmp(res[0][k], res[1][k], len[k]) != 0;
    CHECK(diff == 0, "batch_norm/max_pool/avg_pool: %d of %d results differ between 1 and 3 threads", diff, NR);
    printf("batch_norm -> max_pool2d -> avg_pool2d: output, 3 gradients, running stats bit-identical at 1 and 3 "
           "threads\n");
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < NR; k++) free(res[t][k]);
    tt_free(x);
    tt_free(w);
    tt_free(b);
}

/* ---- errors ------------------------------------------------------------------- */
static void bad_input(void) {
    tt_ctx *c;
    tt_ctx_init(1, &c);
    int64_t xs[4] = {1, 4, 5, 5}, ws[4] = {6, 3, 3, 3}, x3[3] = {4, 5, 5}, ws2[4] = {6, 2, 7, 7};
    tt_tensor *x = tt_zeros(c, TT_F32, 4, xs), *w = tt_zeros(c, TT_F32, 4, ws), *xb = tt_zeros(c, TT_F32, 3, x3);
    tt_tensor *w2 = tt_zeros(c, TT_F32, 4, ws2);
    tt_conv2d_opt o = tt_conv2d_opt_make(1, 0, 1, 1);
    CHECK(!tt_conv2d(c, x, w, NULL, &o) && strstr(tl_last_error(), "groups"), "channel mismatch: %s",
          tl_last_error());
    CHECK(!tt_conv2d(c, xb, w, NULL, &o) && strstr(tl_last_error(), "[N, C, H, W]"), "3-d input: %s",
          tl_last_error());
    tt_conv2d_opt o2 = tt_conv2d_opt_make(1, 0, 1, 2);
    CHECK(!tt_conv2d(c, x, w2, NULL, &o2) && strstr(tl_last_error(), "larger"), "kernel too big: %s",
          tl_last_error());
    tt_conv2d_opt o3 = tt_conv2d_opt_make(0, 0, 1, 1);
    CHECK(!tt_conv2d(c, x, w, NULL, &o3) && strstr(tl_last_error(), "stride"), "stride 0: %s", tl_last_error());
    tt_pool_opt p = tt_pool_opt_make(2, 2, 2);
    CHECK(!tt_max_pool2d(c, x, &p) && strstr(tl_last_error(), "padding"), "pool padding: %s", tl_last_error());
    int64_t one[4] = {1, 4, 1, 1};
    tt_tensor *x1 = tt_zeros(c, TT_F32, 4, one);
    CHECK(!tt_batch_norm(c, x1, NULL, NULL, NULL, NULL, true, 0.1, 1e-5) && strstr(tl_last_error(), "more than 1"),
          "bn single value: %s", tl_last_error());
    CHECK(!tt_batch_norm(c, x, NULL, NULL, NULL, NULL, false, 0.1, 1e-5) && strstr(tl_last_error(), "eval"),
          "bn eval without stats: %s", tl_last_error());
    int64_t five = 5;
    tt_tensor *w5 = tt_zeros(c, TT_F32, 1, &five);
    CHECK(!tt_batch_norm(c, x, w5, NULL, NULL, NULL, true, 0.1, 1e-5) && strstr(tl_last_error(), "[4]"),
          "bn weight size: %s", tl_last_error());
    CHECK(tt_conv2d(c, NULL, w, NULL, &o) == NULL, "NULL propagates");
    tt_cnn m;
    tt_cnn_config cc = tt_cnn_config_default(3, 3, 8, 10);
    CHECK(tt_cnn_init(&m, &cc, 1) == TL_ERR_INVALID, "cnn on a 3-pixel-high image must fail");
    cc = tt_cnn_config_default(3, 8, 8, 10);
    CHECK(tt_cnn_init(&m, &cc, 1) == TL_OK, "cnn init");
    CHECK(tt_cnn_forward(c, &m, x) == NULL && strstr(tl_last_error(), "cnn forward"), "cnn wrong input: %s",
          tl_last_error());
    tt_cnn_free(&m);
    int64_t v1[1] = {7};
    tt_tensor *vec = tt_new(TT_F32, 1, v1);
    CHECK(tt_init_kaiming(vec, &g_rng, true, false, TT_NL_RELU, 0) == TL_ERR_INVALID, "kaiming of a 1-d tensor");
    tt_free(vec);
    tt_ctx_free(c);
}

/* ---- init schemes --------------------------------------------------------------- */
static void init_stats(const char *name, const tt_tensor *t, double want_std, double bound) {
    int64_t n = tt_numel(t);
    double s = 0, q = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = tt_get(t, i);
        s += v;
        q += v * v;
        mx = fmax(mx, fabs(v));
    }
    double mean = s / (double)n, std = sqrt(q / (double)n - mean * mean);
    CHECK(fabs(mean) < 0.01 * want_std && fabs(std - want_std) < 0.01 * want_std,
          "%s: mean %g std %g, want 0 and %g", name, mean, std, want_std);
    if (bound > 0) CHECK(mx <= bound && mx > 0.999 * bound, "%s: max |v| %g, bound %g", name, mx, bound);
    printf("  %-34s std %.5f (formula %.5f), max |v| %.5f%s\n", name, std, want_std, mx, bound > 0 ? "" : " (normal)");
}

static void init_schemes(void) {
    /* conv weight [Cout 40, Cin 25, 5, 40]: fan_in 5000, fan_out 8000; 200k samples */
    int64_t sh[4] = {40, 25, 5, 40};
    tt_tensor *t = tt_new(TT_F32, 4, sh);
    int64_t fi, fo;
    CHECK(tt_init_fans(t, &fi, &fo) == TL_OK && fi == 5000 && fo == 8000, "fans %lld %lld", (long long)fi,
          (long long)fo);
    double s3 = sqrt(3.0);
    tt_init_kaiming(t, &g_rng, true, false, TT_NL_RELU, 0);
    init_stats("kaiming_uniform relu fan_in", t, sqrt(2.0 / 5000), s3 * sqrt(2.0 / 5000));
    tt_init_kaiming(t, &g_rng, false, true, TT_NL_RELU, 0);
    init_stats("kaiming_normal relu fan_out", t, sqrt(2.0 / 8000), 0);
    tt_init_kaiming(t, &g_rng, true, true, TT_NL_LEAKY_RELU, 0.2);
    init_stats("kaiming_uniform leaky 0.2 fan_out", t, sqrt(2.0 / 1.04 / 8000), s3 * sqrt(2.0 / 1.04 / 8000));
    tt_init_kaiming(t, &g_rng, false, false, TT_NL_LINEAR, 0);
    init_stats("kaiming_normal linear fan_in", t, sqrt(1.0 / 5000), 0);
    tt_init_xavier(t, &g_rng, true, 1.0);
    init_stats("xavier_uniform", t, sqrt(2.0 / 13000), s3 * sqrt(2.0 / 13000));
    tt_init_xavier(t, &g_rng, false, tt_init_gain(TT_NL_TANH, 0));
    init_stats("xavier_normal tanh gain", t, 5.0 / 3.0 * sqrt(2.0 / 13000), 0);
    int64_t bsh[1] = {200000};
    tt_tensor *b = tt_new(TT_F32, 1, bsh);
    tt_init_torch_default(t, b, &g_rng); /* U(+-1/sqrt(fan_in)): std bound/sqrt(3) */
    init_stats("torch default weight (a=sqrt 5)", t, 1.0 / sqrt(5000.0) / s3, 1.0 / sqrt(5000.0));
    init_stats("torch default bias", b, 1.0 / sqrt(5000.0) / s3, 1.0 / sqrt(5000.0));
    tt_free(b);
    tt_free(t);
    /* gains as torch.nn.init.calculate_gain */
    CHECK(fabs(tt_init_gain(TT_NL_LEAKY_RELU, 0.01) - sqrt(2.0 / 1.0001)) < 1e-15 &&
              fabs(tt_init_gain(TT_NL_TANH, 0) - 5.0 / 3.0) < 1e-15 && tt_init_gain(TT_NL_SIGMOID, 0) == 1.0,
          "gains");
    /* the LM picks a scheme from its config; the default stays normal(0.02) */
    tt_model_config cfg = tt_model_config_default(TT_ARCH_LLAMA, 64, 16, 256, 1, 4);
    cfg.init.kind = TT_INIT_XAVIER_NORMAL;
    tt_model m;
    CHECK(tt_model_init(&m, &cfg, 3) == TL_OK, "model init with xavier: %s", tl_last_error());
    tt_tensor *ff = tt_params_find(&m.params, "layers.0.mlp.gate_proj.weight");
    init_stats("llama gate_proj xavier_normal", ff, sqrt(2.0 / (double)(cfg.ffn + 256)), 0);
    tt_model_free(&m);
    cfg.init.kind = TT_INIT_DEFAULT;
    CHECK(tt_model_init(&m, &cfg, 3) == TL_OK, "model init default");
    ff = tt_params_find(&m.params, "layers.0.mlp.gate_proj.weight");
    init_stats("llama gate_proj default normal", ff, 0.02, 0);
    tt_model_free(&m);
    /* the CNN defaults to torch's default, and takes a scheme too */
    tt_cnn cnn;
    tt_cnn_config cc = tt_cnn_config_default(3, 32, 32, 10);
    cc.c1 = 64;
    cc.c2 = 256;
    CHECK(tt_cnn_init(&cnn, &cc, 5) == TL_OK, "cnn init");
    init_stats("cnn conv2.weight torch default", cnn.conv2.weight, 1.0 / sqrt(576.0) / s3, 1.0 / sqrt(576.0));
    tt_cnn_free(&cnn);
    cc.init.kind = TT_INIT_KAIMING_NORMAL;
    cc.init.nonlin = TT_NL_RELU;
    cc.init.fan_out = true;
    CHECK(tt_cnn_init(&cnn, &cc, 5) == TL_OK, "cnn init kaiming");
    init_stats("cnn conv2.weight kaiming fan_out", cnn.conv2.weight, sqrt(2.0 / (256 * 9)), 0);
    tt_cnn_free(&cnn);
}

/* ---- PyTorch fixture ----------------------------------------------------------- */
static double rel_err(const st_tensor *ref, const tt_tensor *x, double *refmax) {
    int64_t n = (int64_t)(ref->nbytes / 4);
    double e = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        float r;
        memcpy(&r, (const char *)ref->data + 4 * i, 4);
        e = fmax(e, fabs((double)r - tt_get(x, i)));
        mx = fmax(mx, fabs(r));
    }
    if (refmax) *refmax = mx;
    return e / (mx > 0 ? mx : 1);
}

static tt_tensor *from_st(const st_tensor *t, bool grad) {
    tt_tensor *x = tt_new(TT_F32, t->ndim, t->shape);
    memcpy(tt_data(x), t->data, t->nbytes);
    x->requires_grad = grad;
    return x;
}

typedef tt_tensor *(*op_fn)(tt_ctx *c, tt_tensor **in);
static tt_tensor *t_conv(tt_ctx *c, tt_tensor **in) {
    tt_conv2d_opt o = {{2, 1}, {1, 2}, {2, 1}, 2};
    return tt_conv2d(c, in[0], in[1], in[2], &o);
}
static tt_tensor *t_maxpool(tt_ctx *c, tt_tensor **in) {
    tt_pool_opt o = tt_pool_opt_make(3, 2, 1);
    return tt_max_pool2d(c, in[0], &o);
}
static tt_tensor *t_avg_inc(tt_ctx *c, tt_tensor **in) {
    tt_pool_opt o = tt_pool_opt_make(3, 2, 1);
    return tt_avg_pool2d(c, in[0], &o, true);
}
static tt_tensor *t_avg_exc(tt_ctx *c, tt_tensor **in) {
    tt_pool_opt o = tt_pool_opt_make(3, 2, 1);
    return tt_avg_pool2d(c, in[0], &o, false);
}
static tt_tensor *t_adaptive(tt_ctx *c, tt_tensor **in) { return tt_adaptive_avg_pool2d(c, in[0], 3, 4); }

static void torch_op(const st_file *f, const char *tag, op_fn fn, int nin) {
    char key[64];
    tt_tensor *in[3] = {0};
    for (int i = 0; i < nin; i++) {
        snprintf(key, sizeof key, "%s.in%d", tag, i);
        const st_tensor *t = st_find(f, key);
        CHECK(t != NULL, "%s missing", key);
        if (!t) return;
        in[i] = from_st(t, true);
    }
    tt_ctx *c;
    tt_ctx_init(2, &c);
    tt_tensor *y = fn(c, in);
    snprintf(key, sizeof key, "%s.y", tag);
    const st_tensor *ry = st_find(f, key);
    CHECK(y && ry && (size_t)tt_numel(y) * 4 == ry->nbytes, "%s forward: %s", tag, tl_last_error());
    double worst = 0;
    if (y && ry) {
        worst = rel_err(ry, y, NULL);
        snprintf(key, sizeof key, "%s.r", tag);
        tt_tensor *r = from_st(st_find(f, key), false);
        CHECK(tt_backward(c, tt_sum(c, tt_mul(c, y, r))) == TL_OK, "%s backward: %s", tag, tl_last_error());
        for (int i = 0; i < nin; i++) {
            snprintf(key, sizeof key, "%s.g%d", tag, i);
            const st_tensor *rg = st_find(f, key);
            CHECK(rg && in[i]->grad, "%s grad %d", tag, i);
            if (rg && in[i]->grad) worst = fmax(worst, rel_err(rg, in[i]->grad, NULL));
        }
        tt_free(r);
    }
    CHECK(worst < 2e-5, "%s vs torch: rel err %g", tag, worst);
    printf("  %-14s forward + grads vs torch: max rel err %.2e\n", tag, worst);
    for (int i = 0; i < nin; i++) tt_free(in[i]);
    tt_ctx_free(c);
}

static void cnn_vs_torch(void) {
    st_file *f;
    if (st_open("tests/fixtures/train_cnn_ref.safetensors", &f) != TL_OK) {
        CHECK(false, "fixture: %s", tl_last_error());
        return;
    }
    int64_t N = atoll(st_meta(f, "batch"));
    tt_cnn_config cfg = tt_cnn_config_default(atoll(st_meta(f, "in_ch")), atoll(st_meta(f, "height")),
                                              atoll(st_meta(f, "width")), atoll(st_meta(f, "classes")));
    cfg.c1 = atoll(st_meta(f, "c1"));
    cfg.c2 = atoll(st_meta(f, "c2"));
    tt_cnn m;
    CHECK(tt_cnn_init(&m, &cfg, 1) == TL_OK, "cnn init: %s", tl_last_error());
    {
        char names[1024] = "", bufs[1024] = "";
        for (int i = 0; i < m.params.n; i++) {
            if (i) strcat(names, ",");
            strcat(names, m.params.p[i].name);
        }
        for (int i = 0; i < m.buffers.n; i++) {
            if (strstr(m.buffers.p[i].name, "num_batches")) continue;
            if (*bufs) strcat(bufs, ",");
            strcat(bufs, m.buffers.p[i].name);
        }
        CHECK(!strcmp(names, st_meta(f, "params")), "param names: ours %s torch %s", names, st_meta(f, "params"));
        CHECK(!strcmp(bufs, st_meta(f, "buffers")), "buffer names: ours %s torch %s", bufs, st_meta(f, "buffers"));
        int n_decay = 0;
        for (int i = 0; i < m.params.n; i++) n_decay += m.params.p[i].decay;
        CHECK(n_decay == 3, "decay on conv1/conv2/fc weights only (got %d)", n_decay);
    }
    char key[160];
    for (int i = 0; i < m.params.n; i++) {
        snprintf(key, sizeof key, "w.%s", m.params.p[i].name);
        const st_tensor *t = st_find(f, key);
        CHECK(t && t->nbytes == (size_t)tt_numel(m.params.p[i].t) * 4, "%s", key);
        if (t) memcpy(tt_data(m.params.p[i].t), t->data, t->nbytes);
    }
    tt_tensor *x = from_st(st_find(f, "x"), false);
    int32_t labels[64];
    memcpy(labels, st_find(f, "labels")->data, (size_t)N * 4);
    tt_ctx *c;
    tt_ctx_init(2, &c);
    tt_tensor *logits;
    tt_tensor *loss = tt_cnn_loss(c, &m, x, labels, &logits);
    CHECK(loss != NULL, "cnn forward: %s", tl_last_error());
    if (loss) {
        double el = rel_err(st_find(f, "logits"), logits, NULL), ell = rel_err(st_find(f, "loss"), loss, NULL);
        CHECK(el < 2e-5 && ell < 2e-5, "logits rel err %g, loss %g", el, ell);
        printf("cnn logits rel err vs torch %.2e, loss %.6f rel err %.2e\n", el, tt_get(loss, 0), ell);
        CHECK(tt_backward(c, loss) == TL_OK, "backward: %s", tl_last_error());
        double worst = 0;
        for (int i = 0; i < m.params.n; i++) {
            snprintf(key, sizeof key, "g.%s", m.params.p[i].name);
            const st_tensor *r = st_find(f, key);
            CHECK(r && m.params.p[i].t->grad, "grad %s", key);
            if (!r || !m.params.p[i].t->grad) continue;
            double mx, e = rel_err(r, m.params.p[i].t->grad, &mx);
            CHECK(e < 2e-5, "%s: rel err %g (max |g| %g)", key, e, mx);
            worst = fmax(worst, e);
        }
        printf("cnn worst parameter-gradient rel err vs torch: %.2e\n", worst);
        double wb = 0;
        for (int i = 0; i < m.buffers.n; i++) {
            if (strstr(m.buffers.p[i].name, "num_batches")) {
                CHECK(tt_get(m.buffers.p[i].t, 0) == 1.0, "%s = %g", m.buffers.p[i].name, tt_get(m.buffers.p[i].t, 0));
                continue;
            }
            snprintf(key, sizeof key, "buffer.%s", m.buffers.p[i].name);
            const st_tensor *r = st_find(f, key);
            CHECK(r != NULL, "%s", key);
            if (r) wb = fmax(wb, rel_err(r, m.buffers.p[i].t, NULL));
            CHECK(!m.buffers.p[i].t->requires_grad && !m.buffers.p[i].t->grad, "buffer %s got a gradient",
                  m.buffers.p[i].name);
        }
        CHECK(wb < 1e-5, "running stats rel err %g", wb);
        printf("cnn BatchNorm running stats rel err vs torch: %.2e\n", wb);
    }
    tt_ctx_reset(c);
    m.training = false;
    bool prev = tt_set_grad_enabled(c, false);
    tt_tensor *ev = tt_cnn_forward(c, &m, x);
    double ee = ev ? rel_err(st_find(f, "eval_logits"), ev, NULL) : INFINITY;
    CHECK(ee < 2e-5, "eval logits rel err %g", ee);
    printf("cnn eval-mode logits rel err vs torch: %.2e\n", ee);
    tt_set_grad_enabled(c, prev);
    tt_ctx_reset(c);

    /* save/load round trip keeps parameters and buffers */
    char path[64];
    snprintf(path, sizeof path, "/tmp/tt_cnn_%d.safetensors", (int)getpid());
    CHECK(tt_cnn_save(&m, path) == TL_OK, "save: %s", tl_last_error());
    tt_cnn m2;
    tt_cnn_init(&m2, &cfg, 99);
    CHECK(tt_cnn_load(&m2, path) == TL_OK, "load: %s", tl_last_error());
    bool same = true;
    for (int i = 0; i < m.params.n; i++)
        same &= !memcmp(tt_data(m.params.p[i].t), tt_data(m2.params.p[i].t), (size_t)tt_numel(m.params.p[i].t) * 4);
    for (int i = 0; i < m.buffers.n; i++)
        same &= tt_get(m.buffers.p[i].t, 0) == tt_get(m2.buffers.p[i].t, 0) &&
                tt_get(m.buffers.p[i].t, tt_numel(m.buffers.p[i].t) - 1) ==
                    tt_get(m2.buffers.p[i].t, tt_numel(m2.buffers.p[i].t) - 1);
    CHECK(same, "save/load round trip changed values");
    tt_cnn_free(&m2);
    tt_cnn_config other = cfg;
    other.c2 += 1;
    tt_cnn_init(&m2, &other, 1);
    CHECK(tt_cnn_load(&m2, path) == TL_ERR_FORMAT && strstr(tl_last_error(), "conv2.weight"),
          "load into another shape: %s", tl_last_error());
    tt_cnn_free(&m2);
    remove(path);

    /* 5 SGD training steps, a new batch each, from the initial weights and
     * fresh buffers: per-step loss, final parameters and running stats */
    {
        tt_cnn mt;
        tt_cnn_init(&mt, &cfg, 2);
        for (int i = 0; i < mt.params.n; i++) {
            snprintf(key, sizeof key, "w.%s", mt.params.p[i].name);
            memcpy(tt_data(mt.params.p[i].t), st_find(f, key)->data, (size_t)tt_numel(mt.params.p[i].t) * 4);
        }
        tt_optim_config oc = tt_optim_default(TT_OPT_SGD, 0.05);
        oc.momentum = 0.9;
        oc.weight_decay = 5e-4;
        tt_optim o;
        CHECK(tt_optim_init(&o, &oc, &mt.params) == TL_OK, "sgd init");
        int steps = atoi(st_meta(f, "train_steps"));
        const st_tensor *rl = st_find(f, "train.loss");
        double wl = 0;
        for (int s = 0; s < steps; s++) {
            snprintf(key, sizeof key, "train.x%d", s);
            tt_tensor *xs = from_st(st_find(f, key), false);
            snprintf(key, sizeof key, "train.y%d", s);
            int32_t ys[64];
            memcpy(ys, st_find(f, key)->data, (size_t)N * 4);
            tt_params_zero_grad(&mt.params);
            tt_tensor *l = tt_cnn_loss(c, &mt, xs, ys, NULL);
            CHECK(l && tt_backward(c, l) == TL_OK, "train step %d: %s", s, tl_last_error());
            float r;
            memcpy(&r, (const char *)rl->data + 4 * s, 4);
            if (l) wl = fmax(wl, fabs(tt_get(l, 0) - r) / fabs(r));
            tt_optim_step(&o, 0.05);
            tt_ctx_reset(c);
            tt_free(xs);
        }
        CHECK(wl < 1e-5, "training losses rel err %g", wl);
        double wp = 0, wb2 = 0;
        for (int i = 0; i < mt.params.n; i++) {
            snprintf(key, sizeof key, "train.p.%s", mt.params.p[i].name);
            const st_tensor *r = st_find(f, key);
            CHECK(r != NULL, "%s", key);
            if (r) wp = fmax(wp, rel_err(r, mt.params.p[i].t, NULL));
        }
        for (int i = 0; i < mt.buffers.n; i++) {
            if (strstr(mt.buffers.p[i].name, "num_batches")) {
                CHECK(tt_get(mt.buffers.p[i].t, 0) == steps, "%s", mt.buffers.p[i].name);
                continue;
            }
            snprintf(key, sizeof key, "train.b.%s", mt.buffers.p[i].name);
            const st_tensor *r = st_find(f, key);
            CHECK(r != NULL, "%s", key);
            if (r) wb2 = fmax(wb2, rel_err(r, mt.buffers.p[i].t, NULL));
        }
        CHECK(wp < 2e-5 && wb2 < 2e-5, "after %d SGD steps: params rel err %g, buffers %g", steps, wp, wb2);
        printf("cnn %d SGD steps vs torch: loss rel err %.2e, params %.2e, running stats %.2e\n", steps, wl, wp,
               wb2);
        tt_optim_free(&o);
        tt_cnn_free(&mt);
    }

    torch_op(f, "conv", t_conv, 3);
    torch_op(f, "maxpool", t_maxpool, 1);
    torch_op(f, "avgpool_inc", t_avg_inc, 1);
    torch_op(f, "avgpool_exc", t_avg_exc, 1);
    torch_op(f, "adaptive", t_adaptive, 1);
    tt_free(x);
    tt_cnn_free(&m);
    tt_ctx_free(c);
    st_close(f);
}

/* ---- bench: the CNN training step of docs/PERFORMANCE.md ------------------------- */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the whole process (all threads): under a shared machine's
 * load it counts only the cycles this step ran */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int bench(int threads) {
    tt_cnn_config cfg = tt_cnn_config_default(3, 32, 32, 10);
    tt_cnn m;
    if (tt_cnn_init(&m, &cfg, 0) != TL_OK) return 1;
    tt_optim_config oc = tt_optim_default(TT_OPT_SGD, 0.01);
    oc.momentum = 0.9;
    tt_optim o;
    tt_optim_init(&o, &oc, &m.params);
    int64_t xs[4] = {64, 3, 32, 32};
    tt_tensor *x = tt_new(TT_F32, 4, xs);
    tt_init_normal(x, &g_rng, 0, 1);
    int32_t y[64];
    for (int i = 0; i < 64; i++) y[i] = (int32_t)(tt_rng_next(&g_rng) % 10);
    tt_ctx *c;
    tt_ctx_init(threads, &c);
    double best = 1e9, best_cpu = 1e9, loss = 0;
    for (int it = 0; it < 13; it++) {
        double t0 = now_s(), c0 = cpu_s();
        tt_params_zero_grad(&m.params);
        tt_tensor *l = tt_cnn_loss(c, &m, x, y, NULL);
        loss = tt_get(l, 0);
        tt_backward(c, l);
        tt_optim_step(&o, 0.01);
        tt_ctx_reset(c);
        double dt = now_s() - t0, dc = cpu_s() - c0;
        if (it >= 3) best = fmin(best, dt), best_cpu = fmin(best_cpu, dc);
    }
    printf("tallow %d thread(s): CNN train step (batch 64, 3x32x32): %.2f ms (best of 10), CPU %.2f ms (least of "
           "10), last loss %.4f\n",
           threads, best * 1e3, best_cpu * 1e3, loss);
    tt_ctx_free(c);
    tt_free(x);
    tt_optim_free(&o);
    tt_cnn_free(&m);
    return 0;
}

int main(int argc, char **argv) {
    tt_rng_seed(&g_rng, 7);
    if (argc > 1 && !strcmp(argv[1], "--bench")) return bench(argc > 2 ? atoi(argv[2]) : 1);
    conv_vs_definition();
    pool_bn_threads();
    bad_input();
    init_schemes();
    cnn_vs_torch();
    double worst = 0;
#define RUN(...) GC_RUN(worst, __VA_ARGS__)
    RUN("conv2d 3x3 pad 1 + bias", b_conv_basic, 3, -1, 1, {4, 2, 3, 5, 6}, {4, 4, 3, 3, 3}, {1, 4});
    RUN("conv2d stride (2,3) pad (1,2)", b_conv_stride_pad, 3, -1, 1, {4, 2, 2, 7, 8}, {4, 3, 2, 3, 2}, {1, 3});
    RUN("conv2d dilation (2,3) groups 2", b_conv_dilation_groups, 3, -1, 1, {4, 2, 4, 7, 9}, {4, 6, 2, 2, 3},
        {1, 6});
    RUN("conv2d depthwise stride 2, no bias", b_conv_depthwise_nobias, 2, -1, 1, {4, 3, 3, 6, 5}, {4, 6, 1, 3, 3});
    RUN("conv2d 1x1 groups 2", b_conv_1x1, 3, -1, 1, {4, 2, 4, 3, 5}, {4, 6, 2, 1, 1}, {1, 6});
    RUN("conv2d permuted x, transposed w", b_conv_noncontig, 3, -1, 1, {4, 2, 5, 3, 6}, {4, 4, 3, 2, 3}, {1, 4});
    RUN("conv2d narrowed x, dilation 2", b_conv_narrowed, 2, -1, 1, {4, 2, 2, 7, 8}, {4, 3, 2, 2, 2});
    RUN("max_pool2d 2x2", b_maxpool, 1, -1, 1, {4, 2, 3, 6, 8});
    RUN("max_pool2d k(3,2) s(2,1) p1 transposed", b_maxpool_pad, 1, -1, 1, {4, 2, 2, 6, 7});
    RUN("avg_pool2d k3 s2 p1 count_include_pad", b_avgpool_inc, 1, -1, 1, {4, 2, 2, 7, 6});
    RUN("avg_pool2d k(3,2) s(2,1) p1 exclude pad", b_avgpool_exc, 1, -1, 1, {4, 2, 2, 7, 6});
    RUN("adaptive_avg_pool2d 5x7 -> 3x4", b_adaptive, 1, -1, 1, {4, 2, 3, 5, 7});
    RUN("global average pool", b_global, 1, -1, 1, {4, 2, 3, 4, 5});
    RUN("batch_norm train", b_bn_train, 3, -1, 1, {4, 3, 4, 3, 2}, {1, 4}, {1, 4});
    RUN("batch_norm train, channels-last view", b_bn_train_view, 3, -1, 1, {4, 2, 3, 2, 5}, {1, 5}, {1, 5});
    RUN("batch_norm train 2-d, no bias", b_bn_train_2d, 2, -1, 1, {2, 6, 3}, {1, 3});
    {
        int64_t c3 = 3;
        g_rm = tt_new(TT_F64, 1, &c3);
        g_rv = tt_new(TT_F64, 1, &c3);
        tt_init_uniform(g_rm, &g_rng, -0.5, 0.5);
        tt_init_uniform(g_rv, &g_rng, 0.5, 2);
        RUN("batch_norm eval (running stats)", b_bn_eval, 3, -1, 1, {4, 2, 3, 3, 4}, {1, 3}, {1, 3});
        tt_free(g_rm);
        tt_free(g_rv);
    }
    RUN("conv -> batch_norm -> tanh -> avg_pool", b_conv_bn_relu_pool, 4, -1, 1, {4, 2, 2, 6, 6}, {4, 3, 2, 3, 3},
        {1, 3}, {1, 3});
    printf("worst relative grad error over the vision ops: %.3g\n", worst);
    return test_finish();
}
