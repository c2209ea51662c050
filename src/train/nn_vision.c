/* train/nn_vision: Conv2d, Linear and BatchNorm2d modules, the small CNN
 * classifier built from them, and its safetensors save/load (parameters and
 * buffers). See nn_vision.h for names, defaults and the architecture.
 * Owns: module tensors through the registries. Calls: train ops, train/init,
 * io/safetensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "tallow_train.h"
#include "train/tt_internal.h"

tt_tensor *tt_registry_add(tt_params *ps, const char *name, int ndim, const int64_t *shape, bool requires_grad,
                           bool decay) {
    if (strlen(name) >= sizeof ps->p[0].name) {
        tl_err(TL_ERR_INVALID, "train: parameter name '%s' longer than %zu bytes", name, sizeof ps->p[0].name - 1);
        return NULL;
    }
    if (ps->n == ps->cap) {
        int cap = ps->cap ? ps->cap * 2 : 16;
        tt_param *p = realloc(ps->p, (size_t)cap * sizeof *p);
        if (!p) {
            tl_err(TL_ERR_NOMEM, "train: out of memory");
            return NULL;
        }
        ps->p = p;
        ps->cap = cap;
    }
    tt_tensor *t = tt_new(TT_F32, ndim, shape);
    if (!t) return NULL;
    t->requires_grad = requires_grad;
    tt_param *p = &ps->p[ps->n++];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->t = t;
    p->decay = decay;
    t->name = p->name;
    return t;
}

void tt_registry_free(tt_params *ps) {
    for (int i = 0; i < ps->n; i++) tt_free(ps->p[i].t);
    free(ps->p);
    memset(ps, 0, sizeof *ps);
}

static const char *join(char *buf, size_t n, const char *prefix, const char *leaf) {
    snprintf(buf, n, "%s.%s", prefix, leaf);
    return buf;
}

/* Initialise a weight (and bias) with a scheme, DEFAULT meaning torch's. */
static tl_status init_layer(const tt_init_scheme *init, tt_tensor *w, tt_tensor *b, tt_rng *r) {
    tt_init_scheme torch_default = {0};
    torch_default.kind = TT_INIT_TORCH_DEFAULT;
    if (!init || init->kind == TT_INIT_DEFAULT) init = &torch_default;
    return tt_init_apply(init, w, b, r);
}

tl_status tt_conv2d_layer_init(tt_conv2d_layer *l, tt_params *ps, const char *prefix, int64_t cin, int64_t cout,
                               int64_t k, const tt_conv2d_opt *opt, bool bias, const tt_init_scheme *init,
                               tt_rng *r) {
    memset(l, 0, sizeof *l);
    l->opt = opt ? *opt : tt_conv2d_opt_make(1, 0, 1, 1);
    int64_t G = l->opt.groups;
    if (cin < 1 || cout < 1 || k < 1 || G < 1 || cin % G || cout % G)
        return tl_err(TL_ERR_INVALID, "train: Conv2d %s: %lld -> %lld channels, kernel %lld, groups %lld", prefix,
                      (long long)cin, (long long)cout, (long long)k, (long long)G);
    char nm[128];
    int64_t ws[4] = {cout, cin / G, k, k};
    l->weight = tt_registry_add(ps, join(nm, sizeof nm, prefix, "weight"), 4, ws, true, true);
    if (!l->weight) return TL_ERR_NOMEM;
    if (bias && !(l->bias = tt_registry_add(ps, join(nm, sizeof nm, prefix, "bias"), 1, &cout, true, false)))
        return TL_ERR_NOMEM;
    return init_layer(init, l->weight, l->bias, r);
}

tt_tensor *tt_conv2d_layer_forward(tt_ctx *c, const tt_conv2d_layer *l, tt_tensor *x) {
    return tt_conv2d(c, x, l->weight, l->bias, &l->opt);
}

tl_status tt_linear_layer_init(tt_linear_layer *l, tt_params *ps, const char *prefix, int64_t in, int64_t out,
                               bool bias, const tt_init_scheme *init, tt_rng *r) {
    memset(l, 0, sizeof *l);
    if (in < 1 || out < 1)
        return tl_err(TL_ERR_INVALID, "train: Linear %s: %lld -> %lld features", prefix, (long long)in,
                      (long long)out);
    char nm[128];
    int64_t ws[2] = {out, in};
    l->weight = tt_registry_add(ps, join(nm, sizeof nm, prefix, "weight"), 2, ws, true, true);
    if (!l->weight) return TL_ERR_NOMEM;
    if (bias && !(l->bias = tt_registry_add(ps, join(nm, sizeof nm, prefix, "bias"), 1, &out, true, false)))
        return TL_ERR_NOMEM;
    return init_layer(init, l->weight, l->bias, r);
}

tt_tensor *tt_linear_layer_forward(tt_ctx *c, const tt_linear_layer *l, tt_tensor *x) {
    return tt_linear(c, x, l->weight, l->bias);
}

tl_status tt_batchnorm2d_init(tt_batchnorm2d *l, tt_params *ps, tt_params *bufs, const char *prefix, int64_t C) {
    memset(l, 0, sizeof *l);
    if (C < 1) return tl_err(TL_ERR_INVALID, "train: BatchNorm2d %s: %lld channels", prefix, (long long)C);
    char nm[128];
    int64_t one = 1;
    if (!(l->weight = tt_registry_add(ps, join(nm, sizeof nm, prefix, "weight"), 1, &C, true, false)) ||
        !(l->bias = tt_registry_add(ps, join(nm, sizeof nm, prefix, "bias"), 1, &C, true, false)) ||
        !(l->running_mean = tt_registry_add(bufs, join(nm, sizeof nm, prefix, "running_mean"), 1, &C, false, false)) ||
        !(l->running_var = tt_registry_add(bufs, join(nm, sizeof nm, prefix, "running_var"), 1, &C, false, false)))
        return TL_ERR_NOMEM;
    /* an integer count: f64 holds it exactly up to 2^53 batches */
    l->num_batches_tracked = tt_new(TT_F64, 1, &one);
    if (!l->num_batches_tracked) return TL_ERR_NOMEM;
    if (bufs->n == bufs->cap) {
        tt_param *p = realloc(bufs->p, (size_t)(bufs->cap * 2) * sizeof *p);
        if (!p) {
            tt_free(l->num_batches_tracked);
            return tl_err(TL_ERR_NOMEM, "train: out of memory");
        }
        bufs->p = p;
        bufs->cap *= 2;
    }
    tt_param *p = &bufs->p[bufs->n++];
    snprintf(p->name, sizeof p->name, "%s.num_batches_tracked", prefix);
    p->t = l->num_batches_tracked;
    p->decay = false;
    l->num_batches_tracked->name = p->name;
    tt_fill(l->weight, 1.0);
    tt_fill(l->bias, 0.0);
    tt_fill(l->running_mean, 0.0);
    tt_fill(l->running_var, 1.0);
    l->eps = 1e-5;
    l->momentum = 0.1;
    return TL_OK;
}

tt_tensor *tt_batchnorm2d_forward(tt_ctx *c, tt_batchnorm2d *l, tt_tensor *x, bool training) {
    tt_tensor *y = tt_batch_norm(c, x, l->weight, l->bias, l->running_mean, l->running_var, training, l->momentum,
                                 l->eps);
    if (y && training) tt_set(l->num_batches_tracked, 0, tt_get(l->num_batches_tracked, 0) + 1);
    return y;
}

/* ---- the small CNN ---------------------------------------------------------- */
tt_cnn_config tt_cnn_config_default(int64_t in_ch, int64_t height, int64_t width, int64_t classes) {
    tt_cnn_config c = {0};
    c.in_ch = in_ch;
    c.height = height;
    c.width = width;
    c.c1 = 16;
    c.c2 = 32;
    c.classes = classes;
    c.bn_eps = 1e-5;
    c.bn_momentum = 0.1;
    return c;
}

void tt_cnn_free(tt_cnn *m) {
    if (!m) return;
    tt_registry_free(&m->params);
    tt_registry_free(&m->buffers);
    memset(m, 0, sizeof *m);
}

/* Spatial size after the two 2x2 pools (floor mode). */
static int64_t pooled(int64_t s) { return s / 2 / 2; }

tl_status tt_cnn_init(tt_cnn *m, const tt_cnn_config *cfg, uint64_t seed) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    const tt_cnn_config *k = cfg;
    if (k->in_ch < 1 || k->c1 < 1 || k->c2 < 1 || k->classes < 1 || pooled(k->height) < 1 || pooled(k->width) < 1 ||
        !(k->bn_eps > 0) || k->bn_momentum < 0 || k->bn_momentum > 1)
        return tl_err(TL_ERR_INVALID,
                      "train: cnn config: channels %lld/%lld/%lld and classes %lld must be >= 1, the image "
                      "(%lldx%lld) at least 4x4, bn eps > 0, momentum in [0, 1]",
                      (long long)k->in_ch, (long long)k->c1, (long long)k->c2, (long long)k->classes,
                      (long long)k->height, (long long)k->width);
    tt_rng r;
    tt_rng_seed(&r, seed);
    tt_conv2d_opt same = tt_conv2d_opt_make(1, 1, 1, 1);
    tl_status s = tt_conv2d_layer_init(&m->conv1, &m->params, "conv1", k->in_ch, k->c1, 3, &same, k->conv_bias,
                                       &k->init, &r);
    if (s == TL_OK) s = tt_batchnorm2d_init(&m->bn1, &m->params, &m->buffers, "bn1", k->c1);
    if (s == TL_OK)
        s = tt_conv2d_layer_init(&m->conv2, &m->params, "conv2", k->c1, k->c2, 3, &same, k->conv_bias, &k->init, &r);
    if (s == TL_OK) s = tt_batchnorm2d_init(&m->bn2, &m->params, &m->buffers, "bn2", k->c2);
    if (s == TL_OK)
        s = tt_linear_layer_init(&m->fc, &m->params, "fc", k->c2 * pooled(k->height) * pooled(k->width), k->classes,
                                 true, &k->init, &r);
    if (s != TL_OK) {
        tt_cnn_free(m);
        return s;
    }
    m->bn1.eps = m->bn2.eps = k->bn_eps;
    m->bn1.momentum = m->bn2.momentum = k->bn_momentum;
    m->training = true;
    return TL_OK;
}

tt_tensor *tt_cnn_forward(tt_ctx *c, tt_cnn *m, tt_tensor *x) {
    if (!x) return NULL;
    const tt_cnn_config *k = &m->cfg;
    if (x->ndim != 4 || x->shape[1] != k->in_ch || x->shape[2] != k->height || x->shape[3] != k->width ||
        x->dtype != TT_F32) {
        tl_err(TL_ERR_INVALID, "train: cnn forward needs f32 x [N, %lld, %lld, %lld]", (long long)k->in_ch,
               (long long)k->height, (long long)k->width);
        return NULL;
    }
    tt_pool_opt p2 = tt_pool_opt_make(2, 2, 0);
    tt_tensor *h = tt_conv2d_layer_forward(c, &m->conv1, x);
    h = tt_max_pool2d(c, tt_relu(c, tt_batchnorm2d_forward(c, &m->bn1, h, m->training)), &p2);
    h = tt_conv2d_layer_forward(c, &m->conv2, h);
    h = tt_avg_pool2d(c, tt_relu(c, tt_batchnorm2d_forward(c, &m->bn2, h, m->training)), &p2, true);
    int64_t sh[2] = {x->shape[0], -1};
    return tt_linear_layer_forward(c, &m->fc, tt_reshape(c, h, 2, sh));
}

tt_tensor *tt_cnn_loss(tt_ctx *c, tt_cnn *m, tt_tensor *x, const int32_t *labels, tt_tensor **logits) {
    tt_tensor *lg = tt_cnn_forward(c, m, x);
    if (logits) *logits = lg;
    return tt_cross_entropy(c, lg, labels, -100);
}

/* ---- save / load ---------------------------------------------------------------- */
static const char *st_dt(const tt_tensor *t) { return t->dtype == TT_F64 ? "F64" : "F32"; }

tl_status tt_cnn_save(const tt_cnn *m, const char *path) {
    st_writer *w;
    tl_status s = st_writer_init(&w);
    if (s != TL_OK) return s;
    char nm[160];
    const tt_params *regs[2] = {&m->params, &m->buffers};
    const char *pre[2] = {"model", "buffer"};
    for (int g = 0; g < 2 && s == TL_OK; g++)
        for (int i = 0; i < regs[g]->n && s == TL_OK; i++) {
            const tt_tensor *t = regs[g]->p[i].t;
            snprintf(nm, sizeof nm, "%s.%s", pre[g], regs[g]->p[i].name);
            s = st_writer_add(w, nm, st_dt(t), t->ndim, t->shape, tt_data(t),
                              (size_t)tt_numel(t) * tt__esize(t->dtype));
        }
    if (s == TL_OK) s = st_writer_meta(w, "format", "tallow-cnn");
    if (s == TL_OK) s = st_writer_write(w, path);
    st_writer_free(w);
    return s;
}

tl_status tt_cnn_load(tt_cnn *m, const char *path) {
    st_file *f;
    tl_status s = st_open(path, &f);
    if (s != TL_OK) return s;
    char nm[160];
    tt_params *regs[2] = {&m->params, &m->buffers};
    const char *pre[2] = {"model", "buffer"};
    for (int g = 0; g < 2 && s == TL_OK; g++)
        for (int i = 0; i < regs[g]->n && s == TL_OK; i++) {
            tt_tensor *t = regs[g]->p[i].t;
            snprintf(nm, sizeof nm, "%s.%s", pre[g], regs[g]->p[i].name);
            const st_tensor *st = st_find(f, nm);
            size_t nb = (size_t)tt_numel(t) * tt__esize(t->dtype);
            if (!st || strcmp(st->dtype, st_dt(t)) || st->nbytes != nb)
                s = tl_err(TL_ERR_FORMAT, "train: cnn load %s: tensor '%s' %s (want %s, %zu bytes)", path, nm,
                           st ? "has another dtype or size" : "missing", st_dt(t), nb);
            else
                memcpy(tt_data(t), st->data, nb);
        }
    st_close(f);
    return s;
}
