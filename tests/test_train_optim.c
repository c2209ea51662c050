/* test_train_optim: the optimizers and learning-rate schedules step for step
 * against torch.optim on fixed gradients (fixture
 * tests/fixtures/train_optim_ref.safetensors, made by
 * make_train_optim_ref.py with torch 1.13; committed, so no torch needed):
 * Adam with (non-decoupled) weight decay under a StepLR schedule, AdamW, SGD
 * with momentum + dampening + weight decay under StepLR, plain SGD with
 * weight decay; decay applied to the decay group only. Parameters are
 * compared after every one of 6 steps. Then StepLR, CosineAnnealingLR and
 * LinearLR-warmup -> cosine (SequentialLR) against tt_schedule_lr.
 * Tolerances: parameters (values up to ~4, float32 on both sides, same
 * formula order) 2e-6 absolute for Adam/AdamW (a few ulps; per-step moves
 * are ~lr = 1e-2, so a wrong bias correction or decay is off by > 1e-4) and
 * 1e-6 for SGD;
 * learning rates 1e-9 relative (double on both sides; torch's chainable
 * cosine form accumulates rounding over the steps). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "test_util.h"
#include "tallow_train.h"

#define NP 3
static const int64_t SH[NP][2] = {{37, 0}, {5, 7}, {13, 0}};
static const int ND[NP] = {1, 2, 1};
static const bool DECAY[NP] = {true, true, false};

static void load(const st_file *f, const char *key, tt_tensor *t) {
    const st_tensor *s = st_find(f, key);
    CHECK(s && !strcmp(s->dtype, "F32") && s->nbytes == (size_t)tt_numel(t) * 4, "fixture tensor %s", key);
    if (s && s->nbytes == (size_t)tt_numel(t) * 4) memcpy(tt_data(t), s->data, s->nbytes);
}

static double max_err(const st_file *f, const char *key, const tt_tensor *t) {
    const st_tensor *s = st_find(f, key);
    if (!s || s->nbytes != (size_t)tt_numel(t) * 4) return INFINITY;
    double e = 0;
    for (int64_t i = 0; i < tt_numel(t); i++) {
        float r;
        memcpy(&r, (const char *)s->data + 4 * i, 4);
        e = fmax(e, fabs((double)r - tt_get(t, i)));
    }
    return e;
}

/* Run one optimizer from the fixture's start for its steps; lr per step from
 * sched (NULL: constant cfg.lr); returns the worst parameter error. */
static double run(const st_file *f, const char *tag, const tt_optim_config *cfg, const tt_schedule *sched,
                  double tol) {
    int steps = atoi(st_meta(f, "steps"));
    tt_params ps = {0};
    tt_param pa[NP];
    ps.p = pa;
    ps.n = ps.cap = NP;
    char key[64];
    for (int i = 0; i < NP; i++) {
        snprintf(pa[i].name, sizeof pa[i].name, "p%d", i);
        pa[i].t = tt_new(TT_F32, ND[i], SH[i]);
        pa[i].t->requires_grad = true;
        pa[i].decay = DECAY[i];
        snprintf(key, sizeof key, "w.%d", i);
        load(f, key, pa[i].t);
    }
    tt_optim o;
    CHECK(tt_optim_init(&o, cfg, &ps) == TL_OK, "%s init: %s", tag, tl_last_error());
    double worst = 0;
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < NP; i++) {
            if (!pa[i].t->grad) pa[i].t->grad = tt_new(TT_F32, ND[i], SH[i]);
            snprintf(key, sizeof key, "g.%d.%d", s, i);
            load(f, key, pa[i].t->grad);
        }
        double lr = sched ? tt_schedule_lr(sched, s) : cfg->lr;
        CHECK(tt_optim_step(&o, lr) == TL_OK, "%s step %d: %s", tag, s, tl_last_error());
        for (int i = 0; i < NP; i++) {
            snprintf(key, sizeof key, "%s.%d.%d", tag, s, i);
            double e = max_err(f, key, pa[i].t);
            CHECK(e < tol, "%s step %d param %d: max abs err %g", tag, s, i, e);
            worst = fmax(worst, e);
        }
    }
    printf("%-6s %d steps vs torch: worst parameter abs error %.3g\n", tag, steps, worst);
    tt_optim_free(&o);
    for (int i = 0; i < NP; i++) tt_free(pa[i].t);
    return worst;
}

static void sched_check(const st_file *f, const char *key, const tt_schedule *s) {
    const st_tensor *t = st_find(f, key);
    CHECK(t && !strcmp(t->dtype, "F64"), "%s missing", key);
    if (!t) return;
    int n = (int)(t->nbytes / 8);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double r;
        memcpy(&r, (const char *)t->data + 8 * i, 8);
        double e = fabs(tt_schedule_lr(s, i) - r) / fmax(fabs(r), 1e-30);
        CHECK(e < 1e-9, "%s step %d: %.12g vs torch %.12g", key, i, tt_schedule_lr(s, i), r);
        worst = fmax(worst, e);
    }
    printf("%-12s %d steps vs torch: max rel err %.3g\n", key, n, worst);
}

int main(void) {
    st_file *f;
    if (st_open("tests/fixtures/train_optim_ref.safetensors", &f) != TL_OK) {
        printf("FAIL: fixture: %s\n", tl_last_error());
        return 1;
    }
    tt_optim_config adam = tt_optim_default(TT_OPT_ADAM, 1e-2);
    adam.beta2 = 0.99;
    adam.weight_decay = 0.05;
    tt_schedule adam_sched = {TT_SCHED_STEP, 1e-2, 0, 0, 0, 2, 0.5};
    run(f, "adam", &adam, &adam_sched, 2e-6);

    tt_optim_config adamw = tt_optim_default(TT_OPT_ADAMW, 1e-2);
    adamw.weight_decay = 0.1;
    run(f, "adamw", &adamw, NULL, 2e-6);

    tt_optim_config sgdm = tt_optim_default(TT_OPT_SGD, 0.1);
    sgdm.momentum = 0.9;
    sgdm.dampening = 0.1;
    sgdm.weight_decay = 0.01;
    tt_schedule sgdm_sched = {TT_SCHED_STEP, 0.1, 0, 0, 0, 3, 0.1};
    run(f, "sgdm", &sgdm, &sgdm_sched, 1e-6);

    tt_optim_config sgd = tt_optim_default(TT_OPT_SGD, 0.1);
    sgd.weight_decay = 0.02;
    run(f, "sgd", &sgd, NULL, 1e-6);

    tt_schedule st = {TT_SCHED_STEP, 0.3, 0, 0, 0, 7, 0.3};
    sched_check(f, "lrs.step", &st);
    tt_schedule cs = {TT_SCHED_COSINE, 1e-3, 1e-5, 0, 20, 0, 0};
    sched_check(f, "lrs.cosine", &cs);
    tt_schedule wc = {TT_SCHED_COSINE, 2e-3, 0.0, 4, 25, 0, 0};
    sched_check(f, "lrs.warmcos", &wc);
    st_close(f);
    return test_finish();
}
