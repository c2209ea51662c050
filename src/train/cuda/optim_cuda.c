/* train/cuda/optim_cuda: AdamW for parameters on the CUDA device. The
 * parameter table (pointers to each weight, grad, m, v) lives on the device
 * and is re-sent only when a gradient buffer changes (the first step, or a
 * parameter that got no gradient before); the global norm stays on the
 * device and the update reads it there.
 * Owns: the table, the norm and its scratch (o->dev). Calls: tcu, train. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/cuda/tcu.h"
#include "train/tt_internal.h"

typedef struct cu_optim {
    tcu_ptab *host, *dev; /* [n_tab] */
    int n_tab, cap;
    int64_t n_chunks;
    float *norm;    /* device [1] */
    float *partial; /* device [n_chunks] */
    int64_t partial_cap;
    bool have_norm;
} cu_optim;

void tt__cu_optim_free(tt_optim *o) {
    cu_optim *d = o->dev;
    if (!d) return;
    free(d->host);
    tcu_free(d->dev);
    tcu_free(d->norm);
    tcu_free(d->partial);
    free(d);
    o->dev = NULL;
}

/* The table as it should be now; true if it differs from the device copy. */
static tl_status build(tt_optim *o, cu_optim *d) {
    tt_params *ps = o->params;
    if (d->cap < ps->n) {
        tcu_ptab *h = realloc(d->host, (size_t)ps->n * sizeof *h);
        if (!h) return tl_err(TL_ERR_NOMEM, "optim: out of memory");
        d->host = h;
        tcu_free(d->dev);
        d->dev = tcu_alloc((size_t)ps->n * sizeof *h);
        if (!d->dev) return tl_err(TL_ERR_NOMEM, "optim: out of cuda memory");
        d->cap = ps->n;
        d->n_tab = -1; /* force an upload */
    }
    tcu_ptab t[1];
    int n = 0;
    int64_t chunks = 0;
    bool changed = false;
    for (int i = 0; i < ps->n; i++) {
        tt_tensor *p = ps->p[i].t;
        if (!p->grad) continue; /* as torch: no grad, no update */
        if (tt__dev(p) != TT_CUDA || p->dtype != TT_F32 || !tt_is_contiguous(p) || tt__dev(p->grad) != TT_CUDA)
            return tl_err(TL_ERR_UNSUPPORTED, "optim: parameter '%s' must be contiguous f32 on cuda", ps->p[i].name);
        memset(t, 0, sizeof t);
        t->p = tt_data(p);
        t->g = tt_data(p->grad);
        t->m = tt_data(o->m[i]);
        t->v = tt_data(o->v[i]);
        t->n = tt_numel(p);
        t->chunk0 = chunks;
        t->wd = ps->p[i].decay ? (float)o->cfg.weight_decay : 0.0f;
        chunks += (t->n + TCU_CHUNK - 1) / TCU_CHUNK;
        if (n >= d->n_tab || memcmp(&d->host[n], t, sizeof *t)) changed = true;
        d->host[n++] = *t;
    }
    if (n != d->n_tab) changed = true;
    d->n_tab = n;
    d->n_chunks = chunks;
    if (d->partial_cap < chunks) {
        tcu_free(d->partial);
        d->partial = tcu_alloc((size_t)(chunks ? chunks : 1) * sizeof(float));
        if (!d->partial) return tl_err(TL_ERR_NOMEM, "optim: out of cuda memory");
        d->partial_cap = chunks;
    }
    return changed && n ? tcu_h2d(d->dev, d->host, (size_t)n * sizeof *d->host) : TL_OK;
}

tl_status tt__cu_optim_step(tt_optim *o, double lr, double max_norm) {
    if (o->cfg.kind != TT_OPT_ADAMW) return tl_err(TL_ERR_UNSUPPORTED, "optim: on cuda only AdamW has a kernel");
    cu_optim *d = o->dev;
    if (!d) {
        d = calloc(1, sizeof *d);
        if (!d) return tl_err(TL_ERR_NOMEM, "optim: out of memory");
        o->dev = d;
        d->n_tab = -1;
        d->norm = tcu_alloc(sizeof(float));
        if (!d->norm) return tl_err(TL_ERR_NOMEM, "optim: out of cuda memory");
    }
    tl_status s = build(o, d);
    if (s) return s;
    o->step++;
    const tt_optim_config *k = &o->cfg;
    double bc1 = 1.0 - pow(k->beta1, (double)o->step), bc2 = 1.0 - pow(k->beta2, (double)o->step);
    bool clip = max_norm > 0;
    if (clip && (s = tcu_grad_norm(d->norm, d->dev, d->n_tab, d->n_chunks, d->partial)) != TL_OK) return s;
    d->have_norm = clip;
    return tcu_adamw(d->dev, d->n_tab, d->n_chunks, (float)lr, (float)k->beta1, (float)k->beta2, (float)k->eps,
                     (float)(lr / bc1), (float)sqrt(bc2), clip ? d->norm : NULL, (float)max_norm);
}

double tt__cu_optim_norm(tt_optim *o) {
    cu_optim *d = o->dev;
    if (!d || !d->have_norm) return 0;
    float v = 0;
    return tcu_d2h(&v, d->norm, sizeof v) == TL_OK ? (double)v : NAN;
}
