/* tests/test_train_accum: gradient accumulation in the trainer. Two
 * micro-batches of 2 sequences give the same update as one batch of 4 (the
 * batches are drawn window by window from one RNG, so they hold the same
 * windows, and the mean of two equal-size means is the mean): parameters
 * after 3 steps agree within 1e-4 (a thousandth of an AdamW step of lr 1e-2:
 * float rounding, amplified where Adam divides by a tiny second moment) and
 * the reported losses within 1e-5. */
#include <math.h>
#include <stdlib.h>

#include "tallow_train.h"
#include "test_util.h"

static void run(int64_t batch, int64_t accum, tt_dataset *d, double *loss, tt_model *m) {
    tt_model_config k = tt_model_config_default(TT_ARCH_GPT2, 64, 16, 32, 2, 2);
    CHECK(tt_model_init(m, &k, 3) == TL_OK, "model");
    tt_optim o;
    tt_optim_config oc = tt_optim_default(TT_OPT_ADAMW, 1e-2);
    tt_optim_init(&o, &oc, &m->params);
    tt_ctx *c;
    tt_ctx_init(1, &c);
    tt_trainer t;
    tt_trainer_init(&t, c, m, &o, d, batch, 16, 9);
    t.accum = accum;
    for (int s = 0; s < 3; s++) CHECK(tt_trainer_step(&t, &loss[s], NULL) == TL_OK, "step");
    tt_trainer_free(&t);
    tt_ctx_free(c);
    tt_optim_free(&o);
}

int main(void) {
    tt_dataset d = {0};
    d.n = 3000;
    d.n_train = 2700;
    d.vocab = 64;
    d.tokens = malloc(sizeof(int32_t) * (size_t)d.n);
    for (int64_t i = 0; i < d.n; i++) d.tokens[i] = (int32_t)((i * 5 + i / 7) % 64);
    double la[3], lb[3];
    tt_model a, b;
    run(4, 1, &d, la, &a);
    run(2, 2, &d, lb, &b);
    double worst = 0;
    for (int i = 0; i < a.params.n; i++)
        for (int64_t j = 0; j < tt_numel(a.params.p[i].t); j++) {
            double e = fabs(tt_get(a.params.p[i].t, j) - tt_get(b.params.p[i].t, j));
            if (e > worst) worst = e;
        }
    CHECK(worst < 1e-4, "accum 2x2 vs batch 4: parameters differ by %.3g", worst);
    for (int s = 0; s < 3; s++) CHECK(fabs(la[s] - lb[s]) < 1e-5, "loss %d: %.7f vs %.7f", s, la[s], lb[s]);
    CHECK(la[2] < la[0], "loss falls: %.4f -> %.4f", la[0], la[2]);
    tt_model_free(&a);
    tt_model_free(&b);
    free(d.tokens);
    return test_finish();
}
