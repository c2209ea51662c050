/* tests/gpu/test_lora_train_cuda: LoRA fine-tuning on CUDA against the CPU
 * (whose ops tests/test_lora_train.c checks against PEFT, a dequantized
 * reference and finite differences).
 *  1. tt_linear_frozen for each GGUF type the CUDA backend runs: output and
 *     dx against the CPU op, in F32 matmul mode (1e-5) and BF16 (2e-2); a
 *     type it does not run is refused naming the type.
 *  2. For each model given (default tests/fixtures/tiny_llama.gguf: f32,
 *     grouped-query 4 heads over 2; the device run adds its Q8_0 and Q4_0
 *     quantizations): one step's loss and every adapter gradient, then three
 *     clipped AdamW steps, CPU vs CUDA; the CUDA trainee's export reloads
 *     with the CPU trainee's values.
 * Needs a CUDA device (ctest label gpu). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/model.h"
#include "lora/lora_train.h"
#include "quant/quant.h"
#include "tallow_train.h"
#include "../test_util.h"

/* ||a - b|| / ||b|| with a on any device, b on the host */
static double rel_err(const tt_tensor *a, const tt_tensor *b) {
    if (!a || !b || tt_numel(a) != tt_numel(b)) return INFINITY;
    tt_tensor *h = tt_new(TT_F32, a->ndim, a->shape);
    if (!h || tt_copy_across(h, a)) {
        tt_free(h);
        return INFINITY;
    }
    double num = 0, den = 0;
    const float *x = tt_data(h), *y = tt_data(b);
    for (int64_t i = 0; i < tt_numel(b); i++) num += (x[i] - y[i]) * (double)(x[i] - y[i]), den += (double)y[i] * y[i];
    tt_free(h);
    return sqrt(num / (den > 0 ? den : 1));
}

static void frozen_type(tl_type ty, tt_matmul_prec mm, double tol, tt_rng *r) {
    const int64_t n_in = 512, n_out = 72, rows = 6; /* 72: not a multiple of the gemm's 16 */
    float *wf = malloc(sizeof(float) * n_in * n_out);
    uint8_t *wq = malloc(tl_row_bytes(TL_TYPE_F32, n_in) * n_out);
    for (int64_t i = 0; i < n_in * n_out; i++) wf[i] = (float)tt_rng_normal(r) * 0.05f;
    CHECK(quant_quantize(ty, wf, wq, n_in * n_out) == TL_OK, "%s quantize: %s", tl_type_name(ty), tl_last_error());
    /* the CUDA weight is made from a copy that is gone before it is used */
    const size_t nb = tl_row_bytes(ty, n_in) * (size_t)n_out;
    uint8_t *tmp = malloc(nb);
    memcpy(tmp, wq, nb);
    tt_frozen *fc = NULL, *fg = NULL;
    CHECK(tt_frozen_init(&fc, TT_CPU, wq, ty, n_in, n_out) == TL_OK, "cpu %s: %s", tl_type_name(ty), tl_last_error());
    CHECK(tt_frozen_init(&fg, TT_CUDA, tmp, ty, n_in, n_out) == TL_OK, "cuda %s: %s", tl_type_name(ty),
          tl_last_error());
    memset(tmp, 0x7f, nb);
    free(tmp);
    int64_t sh[3] = {2, rows / 2, n_in}, gsh[3] = {2, rows / 2, n_out};
    tt_tensor *x = tt_new(TT_F32, 3, sh), *g = tt_new(TT_F32, 3, gsh);
    tt_init_normal(x, r, 0, 1);
    tt_init_normal(g, r, 0, 1);
    tt_tensor *xd = tt_new_on(TT_CUDA, TT_F32, 3, sh), *gd = tt_new_on(TT_CUDA, TT_F32, 3, gsh);
    tt_copy_across(xd, x);
    tt_copy_across(gd, g);
    x->requires_grad = xd->requires_grad = true;
    tt_ctx *c;
    tt_ctx_init(2, &c);
    tt_ctx_set_matmul_prec(c, mm);
    tt_tensor *yc = fc ? tt_linear_frozen(c, x, fc) : NULL, *yg = fg ? tt_linear_frozen(c, xd, fg) : NULL;
    CHECK(yc && yg, "%s forward: %s", tl_type_name(ty), tl_last_error());
    if (yc && yg) {
        double ey = rel_err(yg, yc);
        CHECK(tt_backward_with(c, yc, g) == TL_OK && tt_backward_with(c, yg, gd) == TL_OK, "%s backward: %s",
              tl_type_name(ty), tl_last_error());
        double ex = rel_err(xd->grad, x->grad);
        CHECK(ey < tol && ex < tol, "%s %s: y rel err %.3g, dx %.3g (tol %.g)", tl_type_name(ty),
              mm == TT_MM_BF16 ? "bf16" : "f32", ey, ex, tol);
        printf("frozen %-5s %-4s y %.2e  dx %.2e\n", tl_type_name(ty), mm == TT_MM_BF16 ? "bf16" : "f32", ey, ex);
    }
    tt_ctx_free(c);
    tt_frozen_free(fc);
    tt_frozen_free(fg);
    tt_free(x);
    tt_free(g);
    tt_free(xd);
    tt_free(gd);
    free(wf);
    free(wq);
}

static void test_frozen(void) {
    const tl_type types[] = {TL_TYPE_F32, TL_TYPE_F16, TL_TYPE_BF16, TL_TYPE_Q4_0,
                             TL_TYPE_Q4_1, TL_TYPE_Q8_0, TL_TYPE_Q4_K, TL_TYPE_Q6_K};
    tt_rng r;
    tt_rng_seed(&r, 3);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        frozen_type(types[i], TT_MM_F32, 1e-5, &r);
        frozen_type(types[i], TT_MM_BF16, 2e-2, &r);
    }
    const tl_type refused[] = {TL_TYPE_Q5_K, TL_TYPE_IQ4_NL};
    for (size_t i = 0; i < 2; i++) {
        uint8_t *w = calloc(1, tl_row_bytes(refused[i], 256) * 8);
        tt_frozen *f = NULL;
        tl_status s = tt_frozen_init(&f, TT_CUDA, w, refused[i], 256, 8);
        CHECK(s != TL_OK && !f && strstr(tl_last_error(), tl_type_name(refused[i])),
              "%s on cuda is refused by name: '%s'", tl_type_name(refused[i]), tl_last_error());
        free(w);
    }
}

/* B random (it starts at 0, which leaves dA 0 and hides A's gradient). */
static void randomize_b(lora_trainee *t, uint64_t seed) {
    tt_rng r;
    tt_rng_seed(&r, seed);
    for (size_t i = 0; i < (size_t)t->m->hp.n_layer * LORA_W_COUNT; i++)
        if (t->b[i]) tt_init_normal(t->b[i], &r, 0, 0.05);
}

/* worst relative error over the adapters' values (grad: their gradients) */
static double worst_param(const lora_trainee *d, const lora_trainee *h, bool grad, const char **name) {
    double worst = 0;
    *name = "";
    for (int i = 0; i < h->reg.params.n; i++) {
        const tt_tensor *a = d->reg.params.p[i].t, *b = h->reg.params.p[i].t;
        double e = grad ? rel_err(a->grad, b->grad) : rel_err(a, b);
        if (e > worst) worst = e, *name = h->reg.params.p[i].name;
    }
    return worst;
}

static void test_trainee(const char *path) {
    tl_model *m = NULL;
    tl_model_params mp = tl_model_default_params();
    if (tl_model_load(path, &mp, &m) != TL_OK) {
        CHECK(0, "load %s: %s", path, tl_last_error());
        return;
    }
    lora_train_config cfg = {.rank = 4, .alpha = 8, .targets = 0x7f, .seed = 9};
    lora_trainee h, d;
    CHECK(lora_train_init(&h, m, &cfg) == TL_OK && lora_train_init(&d, m, &cfg) == TL_OK, "init: %s",
          tl_last_error());
    randomize_b(&h, 4);
    randomize_b(&d, 4);
    CHECK(lora_train_to(&d, TT_CUDA) == TL_OK, "to cuda: %s", tl_last_error());
    const int64_t B = 2, T = 48;
    int32_t ids[96], tg[96];
    tt_rng r;
    tt_rng_seed(&r, 5);
    for (int i = 0; i < 96; i++) ids[i] = (int32_t)(tt_rng_next(&r) % (uint64_t)m->hp.n_vocab);
    for (int i = 0; i < 96; i++) tg[i] = i % 7 ? ids[(i + 1) % 96] : -100;
    tt_optim_config oc = tt_optim_default(TT_OPT_ADAMW, 1e-2);
    tt_optim oh, od;
    CHECK(tt_optim_init(&oh, &oc, &h.reg.params) == TL_OK && tt_optim_init(&od, &oc, &d.reg.params) == TL_OK,
          "optim: %s", tl_last_error());
    tt_ctx *c;
    tt_ctx_init(2, &c);
    const char *wn;
    int steps = 0;
    for (int step = 0; step < 4; step++, steps++) {
        tt_params_zero_grad(&h.reg.params);
        tt_params_zero_grad(&d.reg.params);
        tt_tensor *lh = lora_train_loss(c, &h, ids, tg, B, T), *ld = lora_train_loss(c, &d, ids, tg, B, T);
        CHECK(lh && ld, "%s loss: %s", path, tl_last_error());
        if (!lh || !ld) break;
        double vh = tt_get(lh, 0), vd = tt_get(ld, 0);
        CHECK(fabs(vh - vd) < 1e-5 * fabs(vh), "%s step %d loss cpu %.7f cuda %.7f", path, step, vh, vd);
        CHECK(tt_backward(c, lh) == TL_OK && tt_backward(c, ld) == TL_OK, "backward: %s", tl_last_error());
        tt_ctx_reset(c);
        if (step == 0) {
            double eg = worst_param(&d, &h, true, &wn);
            CHECK(eg < 1e-4, "%s worst adapter grad rel err %.3g (%s)", path, eg, wn);
            printf("%s: loss %.7f vs %.7f, worst grad %.2e (%s)\n", path, vh, vd, eg, wn);
        }
        CHECK(tt_optim_step_clipped(&oh, 1e-2, 0.5) == TL_OK && tt_optim_step_clipped(&od, 1e-2, 0.5) == TL_OK,
              "step: %s", tl_last_error());
        if (step == 3) printf("%s: loss after 3 steps %.7f vs %.7f\n", path, vh, vd);
    }
    /* AdamW divides by sqrt(v): where a gradient is small its update is
     * near lr * sign, so the grads' 1e-6 agreement can grow to 1e-4 here */
    double ep = worst_param(&d, &h, false, &wn);
    CHECK(steps == 4, "%s: %d of 4 steps ran", path, steps);
    CHECK(ep < 1e-3, "%s adapters after 4 steps rel err %.3g (%s)", path, ep, wn);
    printf("%s: adapters after 4 steps rel err %.2e (%s)\n", path, ep, wn);
    const char *out = "/tmp/tallow_lora_cuda_export.gguf";
    tl_lora *l = NULL;
    lora_trainee back;
    const bool reloaded = lora_train_export(&d, out, "cuda test") == TL_OK && tl_lora_load(m, out, &l) == TL_OK &&
                          lora_train_init_from(&back, m, l) == TL_OK;
    CHECK(reloaded, "export from cuda and reload: %s", tl_last_error());
    if (reloaded) {
        double ee = worst_param(&back, &h, false, &wn);
        CHECK(ee < 1e-3, "%s reloaded export vs cpu rel err %.3g (%s)", path, ee, wn);
        lora_train_free(&back);
    }
    tl_lora_free(l);
    remove(out);
    tt_ctx_free(c);
    tt_optim_free(&oh);
    tt_optim_free(&od);
    lora_train_free(&h);
    lora_train_free(&d);
    tl_model_free(m);
}

int main(int argc, char **argv) {
    if (!tt_device_available(TT_CUDA)) {
        fprintf(stderr, "no CUDA device: skipped\n");
        return TEST_SKIP;
    }
    test_frozen();
    if (argc < 2) test_trainee("tests/fixtures/tiny_llama.gguf");
    for (int i = 1; i < argc; i++) test_trainee(argv[i]);
    return test_finish();
}
