/* test_train_export_gpt2: a GPT-2-style model from the training framework,
 * exported with tt_export_gguf as a "gpt2" GGUF (f32, f16, bf16 weights),
 * loaded by the engine and run with tl_session_eval_all gives the same
 * logits as the framework's own forward (tt_model_forward).
 * The engine's gpt2 (src/llm/arch_gpt2.c) is a separate implementation
 * (its own LayerNorm, GELU, fused-QKV split, KV cache, attention), itself
 * checked against llama.cpp by test_forward_gpt2_ref.py; agreement here
 * checks the export: tensor names, dims order, the QKV row order, biases,
 * position table, tied head and eps metadata.
 * Weights get std 0.3, LayerNorm gains 1 +- 0.2 and biases +- 0.2 so a
 * dropped or misplaced bias moves logits by O(1).
 * Tolerance: max abs diff <= 1e-2 * max |logit| (as test_train_export: the
 * engine rounds Q, K, V and attention probabilities to f16). For f16/bf16
 * exports the framework's 2-d weights are first rounded to that type, so the
 * comparison is of the same weights. bf16 gets 2.5e-2 * max |logit|: the
 * engine's bf16 matmul also rounds its activations to bf16 (8 significant
 * bits, 2^-9 relative, as llama.cpp's CPU path does), at each of the 9
 * matmul inputs on the way to the logits; measured 1.5e-2. Negative control: zeroing one layer's
 * QKV bias in the framework must move its logits by > 10x the tolerance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fp16.h"
#include "tallow.h"
#include "test_util.h"
#include "tallow_train.h"

#define V 256

static void perturb(tt_model *m) {
    tt_rng r;
    tt_rng_seed(&r, 5);
    for (int i = 0; i < m->params.n; i++) {
        tt_tensor *t = m->params.p[i].t;
        bool bias = strstr(m->params.p[i].name, ".bias") != NULL;
        if (t->ndim == 2) tt_init_normal(t, &r, 0.0, 0.3);
        else tt_init_normal(t, &r, bias ? 0.0 : 1.0, 0.2);
    }
}

/* Round the 2-d weights to f16 (type 1) or bf16 (type 2) values. */
static void round_weights(tt_model *m, int type) {
    for (int i = 0; i < m->params.n; i++) {
        tt_tensor *t = m->params.p[i].t;
        if (t->ndim != 2) continue;
        float *x = tt_data(t);
        for (int64_t j = 0; j < tt_numel(t); j++)
            x[j] = type == 1 ? tl_fp16_to_fp32(tl_fp32_to_fp16(x[j])) : tl_bf16_to_fp32(tl_fp32_to_bf16(x[j]));
    }
}

/* Engine logits [n][V] of the exported file, or NULL. */
static float *engine_logits(const char *path, const int32_t *ids, int32_t n) {
    tl_model *em = NULL;
    tl_model_params mp = tl_model_default_params();
    if (tl_model_load(path, &mp, &em) != TL_OK) {
        CHECK(0, "engine load: %s", tl_last_error());
        return NULL;
    }
    tl_model_info info;
    tl_model_get_info(em, &info);
    CHECK(!strcmp(info.arch, "gpt2"), "engine sees arch '%s'", info.arch);
    tl_session *sess = NULL;
    tl_session_params sp = tl_session_default_params();
    sp.n_ctx = 64;
    sp.n_threads = 2;
    float *el = malloc(sizeof(float) * (size_t)n * V);
    tl_status s = tl_session_init(em, &sp, &sess);
    if (!s) s = tl_session_eval_all(sess, ids, n, el);
    CHECK(s == TL_OK, "engine eval: %s", tl_last_error());
    tl_session_free(sess);
    tl_model_free(em);
    if (s) {
        free(el);
        return NULL;
    }
    return el;
}

static double max_diff(tt_tensor *lg, const float *el, int64_t n, double *maxv) {
    double d = 0;
    *maxv = 0;
    for (int64_t i = 0; i < n * V; i++) {
        double x = tt_get(lg, i);
        d = fmax(d, fabs(x - el[i]));
        *maxv = fmax(*maxv, fabs(x));
    }
    return d;
}

int main(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/tt_export_gpt2_%d.gguf", (int)getpid());
    tt_model_config cfg = tt_model_config_default(TT_ARCH_GPT2, V, 64, 64, 2, 4);
    cfg.ffn = 128;
    cfg.norm_eps = 1e-5;
    const char *text = "It is a truth universally acknowledged, that a single man in pos";
    int32_t n = (int32_t)strlen(text);
    int32_t ids[128];
    for (int i = 0; i < n; i++) ids[i] = (unsigned char)text[i];
    tt_ctx *c;
    CHECK(tt_ctx_init(2, &c) == TL_OK, "ctx");
    tt_set_grad_enabled(c, false);

    const char *types[3] = {"f32", "f16", "bf16"};
    for (int ty = 0; ty < 3; ty++) {
        tt_model m;
        CHECK(tt_model_init(&m, &cfg, 3) == TL_OK, "init");
        perturb(&m);
        if (ty) round_weights(&m, ty);
        m.training = false;
        tt_export_opts opts = {types[ty], NULL};
        CHECK(tt_export_gguf(&m, path, &opts) == TL_OK, "export %s: %s", types[ty], tl_last_error());
        float *el = engine_logits(path, ids, n);
        tt_tensor *lg = tt_model_forward(c, &m, ids, 1, n);
        CHECK(lg != NULL, "forward: %s", tl_last_error());
        if (el && lg) {
            double maxv, d = max_diff(lg, el, n, &maxv), rel = ty == 2 ? 2.5e-2 : 1e-2;
            printf("gpt2 %-4s: engine vs framework logits max abs diff %.3g (tol %.3g, max |logit| %.3g)\n", types[ty],
                   d, rel * maxv, maxv);
            CHECK(d <= rel * maxv, "%s: logits differ by %g (max |logit| %g)", types[ty], d, maxv);
            CHECK(maxv > 1.0, "logits too small (%g) for a meaningful comparison", maxv);
            if (ty == 0) { /* negative control: a dropped QKV bias must show */
                tt_ctx_reset(c);
                tt_fill(m.blocks[0].qkv_b, 0.0);
                tt_tensor *lg2 = tt_model_forward(c, &m, ids, 1, n);
                double mv2, d2 = lg2 ? max_diff(lg2, el, n, &mv2) : 0;
                printf("negative control (layer 0 QKV bias zeroed): max abs diff %.3g\n", d2);
                CHECK(d2 > 10 * 1e-2 * maxv, "negative control differs only by %g", d2);
            }
        }
        tt_ctx_reset(c);
        free(el);
        tt_model_free(&m);
    }

    /* bad input: a tokenizer whose size is not the model's vocab, an unknown type */
    {
        tt_model m;
        tt_model_init(&m, &cfg, 3);
        tt_export_opts bad = {"q4_0", NULL};
        CHECK(tt_export_gguf(&m, path, &bad) == TL_ERR_INVALID, "unknown type accepted");
        tt_model_config c2 = cfg;
        c2.vocab = 300;
        tt_model m2;
        tt_model_init(&m2, &c2, 3);
        CHECK(tt_export_gguf(&m2, path, NULL) == TL_ERR_INVALID, "vocab 300 without a tokenizer accepted");
        tt_model_free(&m);
        tt_model_free(&m2);
    }
    tt_ctx_free(c);
    remove(path);
    return test_finish();
}
