/* LoRA fine-tuning (src/lora/lora_train.c) against PyTorch + PEFT, and the
 * pieces it stands on.
 *
 *  1. One step's gradients: the tiny llama (tests/fixtures/tiny_llama.gguf,
 *     f32) with the PEFT adapter lora_llama_r8 (random non-zero A and B) on
 *     the fixed batch of lora_grad_ref.json: the loss and the gradient of
 *     every lora_A / lora_B equal PEFT's (make_lora_ref.py grad; B's q/k rows
 *     in the GGUF order, permuted there by numpy). Tolerance: both sides
 *     compute in f32 through 2 layers and a 260-way softmax; each gradient
 *     within 2e-4 of its tensor's largest entry, the loss within 1e-5
 *     relative.
 *  2. tt_linear_frozen on quantized weights (Q4_1, Q8_0, Q4_K, F16): the
 *     forward equals x W^T with W dequantized by the gguf-format reference
 *     (quant_kernels_ref), and dx equals central finite differences (y is
 *     linear in x, so the difference is exact up to rounding).
 *  3. Exact resume: 3 steps, checkpoint, 2 steps vs. restore + 2 steps:
 *     bit-identical adapter and optimizer state (AdamW, cosine schedule).
 *  4. Export: the trained adapter written as GGUF loads with tl_lora_load,
 *     and the engine's logits with it merged (tl_lora_merge) equal the
 *     training forward's (the engine's f16 KV cache: 2e-2 * std). */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "llm/model.h"
#include "lora/lora_train.h"
#include "quant/quant.h"
#include "test_util.h"

#define FIX "tests/fixtures/"

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

static void grads_vs_peft(tl_model *m, tl_lora *l) {
    char *js = read_all(FIX "lora_grad_ref.json");
    cJSON *j = js ? cJSON_Parse(js) : NULL;
    st_file *ref = NULL;
    CHECK(j && st_open(FIX "lora_grad_ref.safetensors", &ref) == TL_OK, "grad fixtures: %s", tl_last_error());
    if (!j || !ref) goto out;
    int B = cJSON_GetObjectItem(j, "B")->valueint, T = cJSON_GetObjectItem(j, "T")->valueint;
    int32_t ids[64], tg[64];
    for (int i = 0; i < B * T; i++) {
        ids[i] = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "ids"), i)->valueint;
        tg[i] = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "targets"), i)->valueint;
    }
    lora_trainee t;
    tt_ctx *c;
    CHECK(tt_ctx_init(2, &c) == TL_OK, "ctx");
    CHECK(lora_train_init_from(&t, m, l) == TL_OK, "init from adapter: %s", tl_last_error());
    tt_tensor *loss = lora_train_loss(c, &t, ids, tg, B, T);
    CHECK(loss != NULL, "loss: %s", tl_last_error());
    double want = cJSON_GetObjectItem(j, "loss")->valuedouble;
    if (loss) {
        double got = tt_get(loss, 0);
        CHECK(fabs(got - want) <= 1e-5 * fabs(want), "loss %.7f vs PEFT %.7f", got, want);
        CHECK(tt_backward(c, loss) == TL_OK, "backward: %s", tl_last_error());
    }
    int n_cmp = 0;
    for (int i = 0; i < t.reg.params.n; i++) {
        const tt_param *p = &t.reg.params.p[i];
        const st_tensor *e = st_find(ref, p->name);
        CHECK(e && !strcmp(e->dtype, "F64") && p->t->grad, "gradient of %s in the fixture and computed", p->name);
        if (!e || !p->t->grad || (int64_t)e->nbytes != tt_numel(p->t) * 8) continue;
        const double *r = e->data;
        double mx = 0, err = 0;
        for (int64_t k = 0; k < tt_numel(p->t); k++) {
            mx = fmax(mx, fabs(r[k]));
            err = fmax(err, fabs(tt_get(p->t->grad, k) - r[k]));
        }
        CHECK(mx > 0 && err <= 2e-4 * mx, "%s: max|grad - PEFT| %.3e of max %.3e", p->name, err, mx);
        n_cmp++;
    }
    CHECK(n_cmp == cJSON_GetObjectItem(j, "n_grads")->valueint, "compared %d of the fixture's gradients", n_cmp);
    printf("one step vs PEFT: loss %.6f, %d gradients compared\n", loss ? tt_get(loss, 0) : NAN, n_cmp);
    lora_train_free(&t);
    tt_ctx_free(c);
out:
    st_close(ref);
    cJSON_Delete(j);
    free(js);
}

static void frozen_op(void) {
    const tl_type types[] = {TL_TYPE_Q4_1, TL_TYPE_Q8_0, TL_TYPE_Q4_K, TL_TYPE_F16};
    const int64_t n_in = 256, n_out = 40, rows = 3;
    tt_ctx *c;
    tt_ctx_init(2, &c);
    tt_rng r;
    tt_rng_seed(&r, 11);
    float *wf = malloc(sizeof(float) * n_in * n_out), *wd = malloc(sizeof(float) * n_in * n_out);
    uint8_t *wq = malloc(tl_row_bytes(TL_TYPE_F32, n_in) * n_out);
    for (int64_t i = 0; i < n_in * n_out; i++) wf[i] = (float)tt_rng_normal(&r);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        tl_type ty = types[ti];
        size_t rb = tl_row_bytes(ty, n_in);
        const quant_kernels *ref = quant_kernels_ref(ty);
        for (int64_t o = 0; o < n_out; o++) {
            ref->from_float(wf + o * n_in, wq + o * rb, n_in);
            ref->to_float(wq + o * rb, wd + o * n_in, n_in);
        }
        int64_t sh[2] = {rows, n_in};
        tt_tensor *x = tt_new(TT_F32, 2, sh);
        tt_init_normal(x, &r, 0, 1);
        x->requires_grad = true;
        tt_frozen *fw;
        CHECK(tt_frozen_init(&fw, TT_CPU, wq, ty, n_in, n_out) == TL_OK, "%s frozen weight", tl_type_name(ty));
        tt_tensor *y = tt_linear_frozen(c, x, fw);
        double ferr = 0;
        for (int64_t i = 0; y && i < rows; i++)
            for (int64_t o = 0; o < n_out; o++) {
                double acc = 0;
                for (int64_t k = 0; k < n_in; k++) acc += (double)tt_get(x, i * n_in + k) * wd[o * n_in + k];
                ferr = fmax(ferr, fabs(acc - tt_get(y, i * n_out + o)));
            }
        CHECK(y && ferr < 1e-3, "%s forward vs dequantized reference: %.2e", tl_type_name(ty), ferr);
        /* loss = sum(y * g) with fixed g: dx = g W; finite differences per x element */
        tt_tensor *g = tt_zeros(c, TT_F32, 2, (int64_t[]){rows, n_out});
        tt_init_normal(g, &r, 0, 1);
        tt_tensor *l = tt_sum(c, tt_mul(c, y, g));
        CHECK(l && tt_backward(c, l) == TL_OK, "%s backward", tl_type_name(ty));
        double gerr = 0, gmax = 0;
        bool prev = tt_set_grad_enabled(c, false);
        for (int64_t k = 0; k < rows * n_in && x->grad; k += 7) {
            double x0 = tt_get(x, k), e = 0.25;
            tt_set(x, k, x0 + e);
            double lp = tt_get(tt_sum(c, tt_mul(c, tt_linear_frozen(c, x, fw), g)), 0);
            tt_set(x, k, x0 - e);
            double lm = tt_get(tt_sum(c, tt_mul(c, tt_linear_frozen(c, x, fw), g)), 0);
            tt_set(x, k, x0);
            double fd = (lp - lm) / (2 * e);
            gerr = fmax(gerr, fabs(fd - tt_get(x->grad, k)));
            gmax = fmax(gmax, fabs(fd));
        }
        tt_set_grad_enabled(c, prev);
        CHECK(x->grad && gerr <= 1e-3 * gmax, "%s dx vs finite differences: %.2e of %.2e", tl_type_name(ty), gerr, gmax);
        tt_ctx_reset(c);
        tt_free(x);
        tt_frozen_free(fw);
    }
    tt_frozen *bad = NULL;
    CHECK(tt_frozen_init(&bad, TT_CPU, wq, 9999, n_in, n_out) != TL_OK && !bad && strstr(tl_last_error(), "unknown"),
          "an unknown weight type is refused by name: %s", tl_last_error());
    CHECK(tt_frozen_init(&bad, TT_CPU, wq, TL_TYPE_Q4_K, 100, n_out) != TL_OK && !bad,
          "a Q4_K row of 100 values is refused: %s", tl_last_error());
    if (!tt_device_available(TT_CUDA))
        CHECK(tt_frozen_init(&bad, TT_CUDA, wq, TL_TYPE_Q4_K, n_in, n_out) != TL_OK && !bad &&
                  strstr(tl_last_error(), "cuda"),
              "a frozen weight on an absent device is refused: %s", tl_last_error());
    free(wf);
    free(wd);
    free(wq);
    tt_ctx_free(c);
}

/* n steps of AdamW on random windows of ids; the trainee, optimizer and rng continue. */
static void steps(tt_ctx *c, lora_trainee *t, tt_optim *o, tt_rng *r, int64_t *step, int n) {
    tt_schedule sch = {.kind = TT_SCHED_COSINE, .lr_max = 1e-2, .lr_min = 1e-3, .warmup = 2, .total = 10};
    int32_t ids[32], tg[32];
    for (int s = 0; s < n; s++, (*step)++) {
        for (int i = 0; i < 32; i++) {
            ids[i] = (int32_t)(tt_rng_next(r) % 260);
            tg[i] = (int32_t)(tt_rng_next(r) % 260);
        }
        tt_params_zero_grad(&t->reg.params);
        tt_tensor *l = lora_train_loss(c, t, ids, tg, 2, 16);
        CHECK(l && tt_backward(c, l) == TL_OK, "step %lld: %s", (long long)*step, tl_last_error());
        tt_ctx_reset(c);
        tt_clip_grad_norm(&t->reg.params, 1.0);
        tt_optim_step(o, tt_schedule_lr(&sch, *step));
    }
}

static void resume_and_export(tl_model *m) {
    char ck[64], ad[64], mg[64];
    snprintf(ck, sizeof ck, "/tmp/tl_lora_ck_%d.safetensors", (int)getpid());
    snprintf(ad, sizeof ad, "/tmp/tl_lora_ad_%d.gguf", (int)getpid());
    snprintf(mg, sizeof mg, "/tmp/tl_lora_mg_%d.gguf", (int)getpid());
    lora_train_config cfg = {.rank = 4, .alpha = 8, .rslora = true, .seed = 3};
    CHECK(lora_parse_targets("q,k,v,o,gate,up,down", &cfg.targets) && cfg.targets == 0x7f, "targets");
    uint32_t bad;
    CHECK(!lora_parse_targets("q,x", &bad), "unknown target refused");
    tt_ctx *c;
    tt_ctx_init(2, &c);
    lora_trainee a, b;
    tt_optim oa, ob;
    tt_optim_config oc = tt_optim_default(TT_OPT_ADAMW, 1e-2);
    CHECK(lora_train_init(&a, m, &cfg) == TL_OK && lora_train_init(&b, m, &cfg) == TL_OK, "init: %s", tl_last_error());
    tt_optim_init(&oa, &oc, &a.reg.params);
    tt_optim_init(&ob, &oc, &b.reg.params);
    tt_rng ra, rb;
    tt_rng_seed(&ra, 99);
    int64_t sa = 0, sb = 0;
    steps(c, &a, &oa, &ra, &sa, 3);
    CHECK(tt_checkpoint_save(ck, &a.reg, &oa, sa, &ra) == TL_OK, "checkpoint: %s", tl_last_error());
    steps(c, &a, &oa, &ra, &sa, 2);
    CHECK(tt_checkpoint_load(ck, &b.reg, &ob, &sb, &rb) == TL_OK, "restore: %s", tl_last_error());
    steps(c, &b, &ob, &rb, &sb, 2);
    bool same = sa == sb && oa.step == ob.step;
    for (int i = 0; same && i < a.reg.params.n; i++) {
        same = !memcmp(tt_data(a.reg.params.p[i].t), tt_data(b.reg.params.p[i].t), (size_t)tt_numel(a.reg.params.p[i].t) * 4) &&
               !memcmp(tt_data(oa.v[i]), tt_data(ob.v[i]), (size_t)tt_numel(oa.v[i]) * 4);
    }
    CHECK(same, "resumed run is bit-identical to the uninterrupted one");
    int nonzero_b = 0;
    for (int i = 0; i < a.reg.params.n; i++)
        if (strstr(a.reg.params.p[i].name, "lora_b"))
            for (int64_t k = 0; k < tt_numel(a.reg.params.p[i].t); k++) nonzero_b += tt_get(a.reg.params.p[i].t, k) != 0;
    CHECK(nonzero_b > 0, "training moved B off zero (%d entries)", nonzero_b);

    /* export -> engine */
    CHECK(lora_train_export(&a, ad, "test") == TL_OK, "export: %s", tl_last_error());
    tl_lora *l = NULL;
    CHECK(tl_lora_load(m, ad, &l) == TL_OK, "exported adapter loads: %s", tl_last_error());
    tl_lora_use u = {l, 1.0f};
    CHECK(l && tl_lora_merge(m, &u, 1, mg, "f32", 1) == TL_OK, "merge: %s", tl_last_error());
    int32_t ids[12] = {259, 84, 104, 101, 256, 97, 258, 32, 46, 200, 17, 257};
    bool prev = tt_set_grad_enabled(c, false);
    tt_tensor *lg = lora_train_forward(c, &a, ids, 1, 12);
    tt_set_grad_enabled(c, prev);
    tl_model *mm = NULL;
    tl_session *s = NULL;
    tl_model_params mp = tl_model_default_params();
    float *eng = malloc(sizeof(float) * 12 * 260);
    CHECK(tl_model_load(mg, &mp, &mm) == TL_OK && tl_session_init(mm, NULL, &s) == TL_OK &&
              tl_session_eval_all(s, ids, 12, eng) == TL_OK, "engine on the merged model: %s", tl_last_error());
    double mean = 0, var = 0, err = 0;
    for (int k = 0; lg && k < 12 * 260; k++) mean += tt_get(lg, k) / (12 * 260);
    for (int k = 0; lg && k < 12 * 260; k++) {
        var += pow(tt_get(lg, k) - mean, 2) / (12 * 260);
        err = fmax(err, fabs(tt_get(lg, k) - eng[k]));
    }
    CHECK(lg && err <= 2e-2 * sqrt(var), "engine with the exported adapter vs training forward: %.2e (std %.2f)", err,
          sqrt(var));
    free(eng);
    tl_session_free(s);
    tl_model_free(mm);
    tl_lora_free(l);
    tt_optim_free(&oa);
    tt_optim_free(&ob);
    lora_train_free(&a);
    lora_train_free(&b);
    tt_ctx_free(c);
    remove(ck);
    remove(ad);
    remove(mg);
}

int main(void) {
    if (access(FIX "lora_grad_ref.json", R_OK) || access(FIX "tiny_llama.gguf", R_OK)) {
        printf("SKIP: tests/fixtures/lora_grad_ref.json or tiny_llama.gguf missing (make_lora_ref.py grad)\n");
        return TEST_SKIP;
    }
    tl_model *m = NULL;
    tl_model_params mp = tl_model_default_params();
    tl_lora *l = NULL;
    CHECK(tl_model_load(FIX "tiny_llama.gguf", &mp, &m) == TL_OK, "load: %s", tl_last_error());
    CHECK(m && tl_lora_load(m, FIX "lora_llama_r8", &l) == TL_OK, "adapter: %s", tl_last_error());
    if (m && l) grads_vs_peft(m, l);
    frozen_op();
    if (m) resume_and_export(m);
    tl_lora_free(l);
    tl_model_free(m);
    return test_finish();
}
