/* train/optim: SGD (momentum, dampening, Nesterov, weight decay), Adam,
 * AdamW, global-norm gradient clipping and learning-rate schedules. The
 * update formulas follow torch.optim's documented algorithms step for step
 * (the parity test compares against PyTorch), in float32 like PyTorch.
 * Owns: optimizer state tensors. Calls: train/tensor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "train/tt_internal.h"

int64_t tt__adam_avx2(float *w, const float *g, float *m, float *v, int64_t n, float decay, float b1, float b2,
                      float step_size, float bc2s, float eps);

tt_optim_config tt_optim_default(tt_optim_kind kind, double lr) {
    tt_optim_config c = {0};
    c.kind = kind;
    c.lr = lr;
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.eps = 1e-8;
    c.weight_decay = kind == TT_OPT_ADAMW ? 0.01 : 0.0;
    return c;
}

tl_status tt_optim_init(tt_optim *o, const tt_optim_config *cfg, tt_params *params) {
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->params = params;
    o->m = calloc((size_t)(params->n ? params->n : 1), sizeof *o->m);
    o->v = calloc((size_t)(params->n ? params->n : 1), sizeof *o->v);
    if (!o->m || !o->v) {
        tt_optim_free(o);
        return tl_err(TL_ERR_NOMEM, "optim: out of memory");
    }
    for (int i = 0; i < params->n; i++) {
        tt_tensor *p = params->p[i].t;
        bool adam = cfg->kind != TT_OPT_SGD;
        tt_device dev = tt__dev(p);
        if (dev != TT_CPU && cfg->kind != TT_OPT_ADAMW) {
            tt_optim_free(o);
            return tl_err(TL_ERR_UNSUPPORTED, "optim: on %s only AdamW has a kernel", tt_device_name(dev));
        }
        if (adam || cfg->momentum != 0) o->m[i] = tt_new_on(dev, TT_F32, p->ndim, p->shape);
        if (adam) o->v[i] = tt_new_on(dev, TT_F32, p->ndim, p->shape);
        if ((adam || cfg->momentum != 0) && !o->m[i]) {
            tt_optim_free(o);
            return tl_err(TL_ERR_NOMEM, "optim: out of memory");
        }
        if (adam && !o->v[i]) {
            tt_optim_free(o);
            return tl_err(TL_ERR_NOMEM, "optim: out of memory");
        }
    }
    return TL_OK;
}

void tt_optim_free(tt_optim *o) {
    if (!o) return;
#ifdef TALLOW_CUDA
    tt__cu_optim_free(o);
#endif
    if (o->params)
        for (int i = 0; i < o->params->n; i++) {
            if (o->m) tt_free(o->m[i]);
            if (o->v) tt_free(o->v[i]);
        }
    free(o->m);
    free(o->v);
    memset(o, 0, sizeof *o);
}

#ifdef TALLOW_CUDA
static bool on_device(const tt_optim *o) { return o->params->n && tt__dev(o->params->p[0].t) != TT_CPU; }
#endif

tl_status tt_optim_step_clipped(tt_optim *o, double lr, double max_norm) {
#ifdef TALLOW_CUDA
    if (on_device(o)) return tt__cu_optim_step(o, lr, max_norm);
#endif
    o->last_norm = max_norm > 0 ? tt_clip_grad_norm(o->params, max_norm) : 0;
    return tt_optim_step(o, lr);
}

double tt_optim_last_norm(tt_optim *o) {
#ifdef TALLOW_CUDA
    if (on_device(o)) return tt__cu_optim_norm(o);
#endif
    return o->last_norm;
}

tl_status tt_optim_step(tt_optim *o, double lr) {
#ifdef TALLOW_CUDA
    if (on_device(o)) return tt__cu_optim_step(o, lr, 0);
#endif
    const tt_optim_config *k = &o->cfg;
    o->step++;
    float b1 = (float)k->beta1, b2 = (float)k->beta2;
    double bc1 = 1.0 - pow(k->beta1, (double)o->step), bc2 = 1.0 - pow(k->beta2, (double)o->step);
    float step_size = (float)(lr / bc1), bc2s = (float)sqrt(bc2), eps = (float)k->eps;
    for (int i = 0; i < o->params->n; i++) {
        tt_param *pp = &o->params->p[i];
        tt_tensor *p = pp->t;
        if (!p->grad) continue; /* torch skips params whose grad is None */
        if (p->dtype != TT_F32 || !tt_is_contiguous(p))
            return tl_err(TL_ERR_UNSUPPORTED, "optim: parameter '%s' must be contiguous f32", pp->name);
        float *w = tt_data(p);
        const float *g = tt_data(p->grad);
        int64_t n = tt_numel(p);
        float wd = pp->decay ? (float)k->weight_decay : 0.0f;
        if (k->kind == TT_OPT_SGD) {
            float mom = (float)k->momentum, damp = (float)k->dampening;
            float *buf = o->m[i] ? tt_data(o->m[i]) : NULL;
            for (int64_t j = 0; j < n; j++) {
                float d = g[j];
                if (wd != 0) d += wd * w[j];
                if (buf) {
                    buf[j] = o->step == 1 ? d : buf[j] * mom + (1 - damp) * d;
                    d = k->nesterov ? d + mom * buf[j] : buf[j];
                }
                w[j] -= (float)lr * d;
            }
            continue;
        }
        float *m = tt_data(o->m[i]), *v = tt_data(o->v[i]);
        float decay = k->kind == TT_OPT_ADAMW ? 1.0f - (float)lr * wd : 1.0f;
        int64_t j0 = 0;
        if (tl_cpu_use_avx2() && !(k->kind == TT_OPT_ADAM && wd != 0))
            j0 = tt__adam_avx2(w, g, m, v, n, decay, b1, b2, step_size, bc2s, eps);
        for (int64_t j = j0; j < n; j++) {
            float gj = g[j];
            if (k->kind == TT_OPT_ADAM && wd != 0) gj += wd * w[j];
            if (k->kind == TT_OPT_ADAMW) w[j] *= decay;
            m[j] = m[j] * b1 + gj * (1 - b1);
            v[j] = v[j] * b2 + (1 - b2) * gj * gj;
            float denom = sqrtf(v[j]) / bc2s + eps;
            w[j] -= step_size * (m[j] / denom);
        }
    }
    return TL_OK;
}

double tt_clip_grad_norm(tt_params *ps, double max_norm) {
    for (int i = 0; i < ps->n; i++)
        if (tt__dev(ps->p[i].t) != TT_CPU) {
            tl_err(TL_ERR_UNSUPPORTED, "train: clip_grad_norm of %s parameters: use tt_optim_step_clipped",
                   tt_device_name(tt__dev(ps->p[i].t)));
            return NAN;
        }
    double tot = 0;
    for (int i = 0; i < ps->n; i++) {
        tt_tensor *g = ps->p[i].t->grad;
        if (!g) continue;
        const float *d = tt_data(g);
        int64_t n = tt_numel(g);
        double s = 0;
        for (int64_t j = 0; j < n; j++) s += (double)d[j] * d[j];
        tot += s;
    }
    tot = sqrt(tot);
    double coef = max_norm / (tot + 1e-6);
    if (coef < 1.0) {
        float cf = (float)coef;
        for (int i = 0; i < ps->n; i++) {
            tt_tensor *g = ps->p[i].t->grad;
            if (!g) continue;
            float *d = tt_data(g);
            int64_t n = tt_numel(g);
            for (int64_t j = 0; j < n; j++) d[j] *= cf;
        }
    }
    return tot;
}

double tt_schedule_lr(const tt_schedule *s, int64_t step) {
    switch (s->kind) {
    case TT_SCHED_COSINE:
        if (step < s->warmup) return s->lr_max * (double)(step + 1) / (double)s->warmup;
        if (step >= s->total) return s->lr_min;
        {
            double prog = (double)(step - s->warmup) / (double)(s->total - s->warmup > 0 ? s->total - s->warmup : 1);
            return s->lr_min + 0.5 * (s->lr_max - s->lr_min) * (1.0 + cos(M_PI * prog));
        }
    case TT_SCHED_STEP:
        return s->lr_max * pow(s->gamma, (double)(step / (s->step_size > 0 ? s->step_size : 1)));
    default:
        return s->lr_max;
    }
}
