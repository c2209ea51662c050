/* train/trainer: the training step and validation loop shared by `tallow
 * train` and the tests (so the resume test checks the code the CLI runs).
 * Owns: the batch buffers. Calls: train (ops, nn, optim, data). */
#include <stdlib.h>
#include <string.h>

#include "train/tt_internal.h"

tl_status tt_trainer_init(tt_trainer *t, tt_ctx *c, tt_model *m, tt_optim *o, const tt_dataset *d, int64_t batch,
                          int64_t seq, uint64_t seed) {
    memset(t, 0, sizeof *t);
    t->ctx = c;
    t->model = m;
    t->optim = o;
    t->data = d;
    t->batch = batch;
    t->seq = seq;
    t->clip = 1.0;
    t->accum = 1;
    t->sched.kind = TT_SCHED_CONSTANT;
    t->sched.lr_max = o ? o->cfg.lr : 0;
    tt_rng_seed(&t->rng, seed);
    t->ids = malloc((size_t)(batch * seq) * sizeof(int32_t));
    t->targets = malloc((size_t)(batch * seq) * sizeof(int32_t));
    if (!t->ids || !t->targets) {
        tt_trainer_free(t);
        return tl_err(TL_ERR_NOMEM, "trainer: out of memory");
    }
    return TL_OK;
}

void tt_trainer_free(tt_trainer *t) {
    free(t->ids);
    free(t->targets);
    t->ids = t->targets = NULL;
}

/* Backward of l scaled by 1/n: the seed is 1/n (a temporary on l's device). */
static tl_status backward_scaled(tt_ctx *c, tt_tensor *l, int64_t n) {
    if (n == 1) return tt_backward(c, l);
    tt_tensor *seed = tt__temp_on(c, tt_device_of(l), l->dtype, l->ndim, l->shape);
    if (!seed) return TL_ERR_NOMEM;
    if (tt_device_of(l) == TT_CPU) tt_fill(seed, 1.0 / (double)n);
    else if (tt__dev_fill(seed, 1.0 / (double)n) != TL_OK) return TL_ERR_BACKEND;
    return tt_backward_with(c, l, seed);
}

/* The last micro-batch's loss is read after the update: on a device that
 * is the step's one wait for the host (forward, backward, clip and update
 * are all queued first); earlier micro-batches' losses are read as they end. */
tl_status tt_trainer_step(tt_trainer *t, double *loss, double *grad_norm) {
    int64_t na = t->accum > 1 ? t->accum : 1;
    t->model->training = true;
    tt_params_zero_grad(&t->model->params);
    double lsum = 0;
    tt_tensor *l = NULL;
    tl_status s = TL_OK;
    for (int64_t k = 0; k < na; k++) {
        if (k) {
            lsum += tt_get(l, 0);
            tt_ctx_reset(t->ctx);
        }
        s = tt_dataset_batch(t->data, false, &t->rng, t->batch, t->seq, t->ids, t->targets);
        if (s) return s;
        l = tt_model_loss(t->ctx, t->model, t->ids, t->targets, t->batch, t->seq, NULL);
        if (!l) {
            tt_ctx_reset(t->ctx);
            return tl_err_prefix(TL_ERR_INVALID, "train step %lld: ", (long long)t->step);
        }
        s = backward_scaled(t->ctx, l, na);
        if (s) {
            tt_ctx_reset(t->ctx);
            return s;
        }
    }
    s = tt_optim_step_clipped(t->optim, tt_schedule_lr(&t->sched, t->step), t->clip);
    lsum += tt_get(l, 0);
    if (loss) *loss = lsum / (double)na;
    tt_ctx_reset(t->ctx);
    if (grad_norm) *grad_norm = t->clip > 0 ? tt_optim_last_norm(t->optim) : 0;
    t->step++;
    return s;
}

tl_status tt_trainer_eval(tt_trainer *t, int64_t n_batches, double *loss) {
    bool prev = tt_set_grad_enabled(t->ctx, false);
    bool tr = t->model->training;
    t->model->training = false;
    double sum = 0;
    tl_status s = TL_OK;
    for (int64_t k = 0; k < n_batches && !s; k++) {
        s = tt_dataset_batch_at(t->data, true, k, t->batch, t->seq, t->ids, t->targets);
        if (s) break;
        tt_tensor *l = tt_model_loss(t->ctx, t->model, t->ids, t->targets, t->batch, t->seq, NULL);
        if (!l) s = TL_ERR_INVALID;
        else sum += tt_get(l, 0);
        tt_ctx_reset(t->ctx);
    }
    t->model->training = tr;
    tt_set_grad_enabled(t->ctx, prev);
    if (!s) *loss = sum / (double)(n_batches > 0 ? n_batches : 1);
    return s;
}
