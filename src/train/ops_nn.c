/* train/ops_nn: the neural-network ops of GPT-2/Llama-style LMs with their
 * backward: softmax, log_softmax, embedding, interleaved RoPE, cross-entropy (fused
 * log-softmax, ignore_index; saves per-row logsumexp), MSE, dropout (saves
 * its mask). Row kernels are written once per compute type via macros.
 * Owns: nothing. Calls: train internals. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/tt_internal.h"

#define ROWS(x) (tt_numel(x) / (x)->shape[(x)->ndim - 1])
#define COLS(x) ((x)->shape[(x)->ndim - 1])

/* ---- softmax / log_softmax over the last dim ----------------------------- */
#define DEF_SOFTMAX(T, SFX, EXP, LOG)                                                     \
    static void softmax_fwd_##SFX(const T *x, T *y, int64_t R, int64_t C, int logm) {    \
        for (int64_t r = 0; r < R; r++) {                                                 \
            const T *xr = x + r * C;                                                      \
            T *yr = y + r * C;                                                            \
            T mx = xr[0];                                                                 \
            for (int64_t j = 1; j < C; j++) mx = xr[j] > mx ? xr[j] : mx;                 \
            T s = 0;                                                                      \
            for (int64_t j = 0; j < C; j++) s += EXP(xr[j] - mx);                         \
            if (logm) {                                                                   \
                T l = mx + LOG(s);                                                        \
                for (int64_t j = 0; j < C; j++) yr[j] = xr[j] - l;                        \
            } else {                                                                      \
                T inv = 1 / s;                                                            \
                for (int64_t j = 0; j < C; j++) yr[j] = EXP(xr[j] - mx) * inv;            \
            }                                                                             \
        }                                                                                 \
    }                                                                                     \
    static void softmax_bwd_##SFX(const T *y, const T *g, T *gx, int64_t R, int64_t C, int logm) { \
        for (int64_t r = 0; r < R; r++) {                                                 \
            const T *yr = y + r * C, *gr = g + r * C;                                     \
            T *o = gx + r * C;                                                            \
            T s = 0;                                                                      \
            if (logm) {                                                                   \
                for (int64_t j = 0; j < C; j++) s += gr[j];                               \
                for (int64_t j = 0; j < C; j++) o[j] = gr[j] - EXP(yr[j]) * s;            \
            } else {                                                                      \
                for (int64_t j = 0; j < C; j++) s += gr[j] * yr[j];                       \
                for (int64_t j = 0; j < C; j++) o[j] = yr[j] * (gr[j] - s);               \
            }                                                                             \
        }                                                                                 \
    }
DEF_SOFTMAX(float, f32, expf, logf)
DEF_SOFTMAX(double, f64, exp, log)

static tl_status bw_softmax(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *x = n->in[0];
    tt_tensor *gx = tt_new(x->dtype, x->ndim, x->shape);
    if (!gx) return TL_ERR_NOMEM;
    if (x->dtype == TT_F32)
        softmax_bwd_f32(tt_data(n->out), tt_data(g), tt_data(gx), ROWS(x), COLS(x), (int)n->i[0]);
    else
        softmax_bwd_f64(tt_data(n->out), tt_data(g), tt_data(gx), ROWS(x), COLS(x), (int)n->i[0]);
    tl_status s = tt__acc_grad(x, gx);
    tt_free(gx);
    return s;
}

static tt_tensor *softmax_op(tt_ctx *c, tt_tensor *x, int logm) {
    if (!x) return NULL;
    TT__HOST_ONLY(logm ? "log_softmax" : "softmax", NULL, x);
    tt_tensor *xc = tt_contiguous(c, x);
    if (!xc) return NULL;
    tt_tensor *o = tt__temp(c, x->dtype, x->ndim, x->shape);
    if (!o) return NULL;
    if (x->dtype == TT_F32)
        softmax_fwd_f32(tt_data(xc), tt_data(o), ROWS(x), COLS(x), logm);
    else
        softmax_fwd_f64(tt_data(xc), tt_data(o), ROWS(x), COLS(x), logm);
    if (tt__needs_grad(c, &xc, 1)) {
        tt_node *n = tt__record(c, logm ? "log_softmax" : "softmax", bw_softmax, o, &xc, 1);
        if (!n) return NULL;
        n->i[0] = logm;
    }
    return o;
}

tt_tensor *tt_softmax(tt_ctx *c, tt_tensor *x) { return softmax_op(c, x, 0); }
tt_tensor *tt_log_softmax(tt_ctx *c, tt_tensor *x) { return softmax_op(c, x, 1); }

/* ---- embedding ------------------------------------------------------------ */
static tl_status bw_embedding(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *w = n->in[0];
    tt_tensor *gw = tt__grad_buf(w);
    if (!gw) return TL_ERR_NOMEM;
    const int32_t *ids = n->extra;
    int64_t C = w->shape[1], m = n->i[0];
    for (int64_t r = 0; r < m; r++) {
        if (w->dtype == TT_F32) {
            float *d = (float *)tt_data(gw) + (int64_t)ids[r] * C;
            const float *s = (const float *)tt_data(g) + r * C;
            for (int64_t j = 0; j < C; j++) d[j] += s[j];
        } else {
            double *d = (double *)tt_data(gw) + (int64_t)ids[r] * C;
            const double *s = (const double *)tt_data(g) + r * C;
            for (int64_t j = 0; j < C; j++) d[j] += s[j];
        }
    }
    return TL_OK;
}

tt_tensor *tt_embedding(tt_ctx *c, tt_tensor *w, const int32_t *ids, int ndim, const int64_t *shape) {
    if (!w) return NULL;
#ifdef TALLOW_CUDA
    if (tt__dev(w) == TT_CUDA) return tt__cu_embedding(c, w, ids, ndim, shape);
#endif
    if (w->ndim != 2 || !tt_is_contiguous(w) || ndim < 1 || ndim >= TT_MAX_DIMS) {
        tl_err(TL_ERR_INVALID, "train: embedding needs a contiguous [V, C] table and 1..%d index dims",
               TT_MAX_DIMS - 1);
        return NULL;
    }
    int64_t m = 1, sh[TT_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        m *= shape[i];
        sh[i] = shape[i];
    }
    int64_t V = w->shape[0], C = w->shape[1];
    for (int64_t r = 0; r < m; r++)
        if (ids[r] < 0 || ids[r] >= V) {
            tl_err(TL_ERR_INVALID, "train: embedding: index %d at position %lld outside [0, %lld)", ids[r],
                   (long long)r, (long long)V);
            return NULL;
        }
    sh[ndim] = C;
    tt_tensor *o = tt__temp(c, w->dtype, ndim + 1, sh);
    if (!o) return NULL;
    size_t es = tt__esize(w->dtype);
    for (int64_t r = 0; r < m; r++)
        memcpy((char *)tt_data(o) + (size_t)(r * C) * es, (char *)tt_data(w) + (size_t)((int64_t)ids[r] * C) * es,
               (size_t)C * es);
    if (tt__needs_grad(c, &w, 1)) {
        tt_node *n = tt__record(c, "embedding", bw_embedding, o, &w, 1);
        if (!n) return NULL;
        n->extra = malloc((size_t)m * sizeof(int32_t));
        if (!n->extra) {
            tl_err(TL_ERR_NOMEM, "train: out of memory");
            return NULL;
        }
        memcpy(n->extra, ids, (size_t)m * sizeof(int32_t));
        n->i[0] = m;
    }
    return o;
}

/* ---- RoPE (interleaved pairs) -------------------------------------------- */
/* dir = +1 forward rotation, -1 its inverse (the backward). */
#define DEF_ROPE(T, SFX)                                                                   \
    static void rope_##SFX(const T *x, T *y, int64_t B, int64_t Tn, int64_t H, int64_t D,  \
                           const double *cs, int dir) {                                    \
        for (int64_t b = 0; b < B; b++)                                                    \
            for (int64_t t = 0; t < Tn; t++)                                               \
                for (int64_t h = 0; h < H; h++) {                                          \
                    const T *xr = x + ((b * Tn + t) * H + h) * D;                          \
                    T *yr = y + ((b * Tn + t) * H + h) * D;                                \
                    const double *ct = cs + t * D; /* cos,sin pairs */                     \
                    for (int64_t i = 0; i < D / 2; i++) {                                  \
                        T co = (T)ct[2 * i], si = (T)(dir * ct[2 * i + 1]);                \
                        T x0 = xr[2 * i], x1 = xr[2 * i + 1];                              \
                        yr[2 * i] = x0 * co - x1 * si;                                     \
                        yr[2 * i + 1] = x0 * si + x1 * co;                                 \
                    }                                                                      \
                }                                                                          \
    }
DEF_ROPE(float, f32)
DEF_ROPE(double, f64)

static double *rope_table(int64_t Tn, int64_t D, int64_t pos0, double theta) {
    double *cs = malloc((size_t)(Tn * D) * sizeof(double));
    if (!cs) return NULL;
    for (int64_t t = 0; t < Tn; t++)
        for (int64_t i = 0; i < D / 2; i++) {
            double ang = (double)(pos0 + t) * pow(theta, -2.0 * (double)i / (double)D);
            cs[t * D + 2 * i] = cos(ang);
            cs[t * D + 2 * i + 1] = sin(ang);
        }
    return cs;
}

static tl_status bw_rope(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *x = n->in[0];
    tt_tensor *gx = tt_new(x->dtype, x->ndim, x->shape);
    if (!gx) return TL_ERR_NOMEM;
    if (x->dtype == TT_F32)
        rope_f32(tt_data(g), tt_data(gx), x->shape[0], x->shape[1], x->shape[2], x->shape[3], n->extra, -1);
    else
        rope_f64(tt_data(g), tt_data(gx), x->shape[0], x->shape[1], x->shape[2], x->shape[3], n->extra, -1);
    tl_status s = tt__acc_grad(x, gx);
    tt_free(gx);
    return s;
}

tt_tensor *tt_rope(tt_ctx *c, tt_tensor *x, int64_t pos0, double theta) {
#ifdef TALLOW_CUDA
    if (x && tt__dev(x) == TT_CUDA) return tt__cu_rope(c, x, pos0, theta);
#endif
    TT__HOST_ONLY("rope", NULL, x);
    if (!x) return NULL;
    if (x->ndim != 4 || x->shape[3] % 2) {
        tl_err(TL_ERR_INVALID, "train: rope needs [B, T, H, D] with even D");
        return NULL;
    }
    tt_tensor *xc = tt_contiguous(c, x);
    if (!xc) return NULL;
    tt_tensor *o = tt__temp(c, x->dtype, 4, x->shape);
    double *cs = rope_table(x->shape[1], x->shape[3], pos0, theta);
    if (!o || !cs) {
        free(cs);
        if (o) tl_err(TL_ERR_NOMEM, "train: out of memory");
        return NULL;
    }
    if (x->dtype == TT_F32)
        rope_f32(tt_data(xc), tt_data(o), x->shape[0], x->shape[1], x->shape[2], x->shape[3], cs, 1);
    else
        rope_f64(tt_data(xc), tt_data(o), x->shape[0], x->shape[1], x->shape[2], x->shape[3], cs, 1);
    if (tt__needs_grad(c, &xc, 1)) {
        tt_node *n = tt__record(c, "rope", bw_rope, o, &xc, 1);
        if (!n) {
            free(cs);
            return NULL;
        }
        n->extra = cs;
    } else {
        free(cs);
    }
    return o;
}

/* ---- cross-entropy -------------------------------------------------------- */
static tl_status bw_ce(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *x = n->in[0];
    tt_tensor *gx = tt__grad_buf(x);
    if (!gx) return TL_ERR_NOMEM;
    const int32_t *tg = n->extra;
    int64_t R = ROWS(x), C = COLS(x), ign = n->i[0], cnt = n->i[1];
    double gs = tt_get(g, 0) / (double)(cnt ? cnt : 1);
    const tt_tensor *lse = n->saved[0];
    for (int64_t r = 0; r < R; r++) {
        if (tg[r] == ign) continue;
        if (x->dtype == TT_F32) {
            const float *xr = (const float *)tt_data(x) + r * C;
            float *o = (float *)tt_data(gx) + r * C;
            float l = ((const float *)tt_data(lse))[r], s = (float)gs;
            for (int64_t j = 0; j < C; j++) o[j] += s * expf(xr[j] - l);
            o[tg[r]] -= s;
        } else {
            const double *xr = (const double *)tt_data(x) + r * C;
            double *o = (double *)tt_data(gx) + r * C;
            double l = ((const double *)tt_data(lse))[r];
            for (int64_t j = 0; j < C; j++) o[j] += gs * exp(xr[j] - l);
            o[tg[r]] -= gs;
        }
    }
    return TL_OK;
}

tt_tensor *tt_cross_entropy(tt_ctx *c, tt_tensor *logits, const int32_t *targets, int32_t ignore_index) {
    if (!logits) return NULL;
#ifdef TALLOW_CUDA
    if (tt__dev(logits) == TT_CUDA) return tt__cu_cross_entropy(c, logits, targets, ignore_index);
#endif
    tt_tensor *xc = tt_contiguous(c, logits);
    if (!xc) return NULL;
    int64_t R = ROWS(logits), C = COLS(logits), cnt = 0;
    for (int64_t r = 0; r < R; r++) {
        if (targets[r] == ignore_index) continue;
        if (targets[r] < 0 || targets[r] >= C) {
            tl_err(TL_ERR_INVALID, "train: cross_entropy: target %d at row %lld outside [0, %lld)", targets[r],
                   (long long)r, (long long)C);
            return NULL;
        }
        cnt++;
    }
    tt_tensor *lse = tt_new(logits->dtype, 1, &R);
    int64_t one = 1;
    tt_tensor *o = tt__temp(c, logits->dtype, 1, &one);
    if (!lse || !o) {
        tt_free(lse);
        return NULL;
    }
    double loss = 0;
    for (int64_t r = 0; r < R; r++) {
        double mx = -INFINITY, s = 0, l;
        if (logits->dtype == TT_F32) {
            const float *xr = (const float *)tt_data(xc) + r * C;
            float m = xr[0], sf = 0;
            for (int64_t j = 1; j < C; j++) m = xr[j] > m ? xr[j] : m;
            for (int64_t j = 0; j < C; j++) sf += expf(xr[j] - m);
            float lf = m + logf(sf);
            ((float *)tt_data(lse))[r] = lf;
            l = lf;
            if (targets[r] != ignore_index) loss += (double)(lf - xr[targets[r]]);
        } else {
            const double *xr = (const double *)tt_data(xc) + r * C;
            for (int64_t j = 0; j < C; j++) mx = xr[j] > mx ? xr[j] : mx;
            for (int64_t j = 0; j < C; j++) s += exp(xr[j] - mx);
            l = mx + log(s);
            ((double *)tt_data(lse))[r] = l;
            if (targets[r] != ignore_index) loss += l - xr[targets[r]];
        }
    }
    tt_set(o, 0, cnt ? loss / (double)cnt : 0.0);
    if (tt__needs_grad(c, &xc, 1)) {
        tt_node *n = tt__record(c, "cross_entropy", bw_ce, o, &xc, 1);
        if (!n) {
            tt_free(lse);
            return NULL;
        }
        n->saved[0] = lse;
        n->i[0] = ignore_index;
        n->i[1] = cnt;
        n->extra = malloc((size_t)R * sizeof(int32_t));
        if (!n->extra) {
            tl_err(TL_ERR_NOMEM, "train: out of memory");
            return NULL;
        }
        memcpy(n->extra, targets, (size_t)R * sizeof(int32_t));
    } else {
        tt_free(lse);
    }
    return o;
}

/* ---- MSE ------------------------------------------------------------------ */
tt_tensor *tt_mse(tt_ctx *c, tt_tensor *a, tt_tensor *b) {
    TT__HOST_ONLY("mse", NULL, a, b);
    tt_tensor *d = tt_sub(c, a, b);
    return tt_mean(c, tt_mul(c, d, d));
}

/* ---- dropout ---------------------------------------------------------------- */
static tl_status bw_dropout(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *gx = tt_new(g->dtype, g->ndim, g->shape);
    if (!gx) return TL_ERR_NOMEM;
    int64_t m = tt_numel(g);
    for (int64_t i = 0; i < m; i++) tt_set(gx, i, tt_get(g, i) * tt_get(n->saved[0], i));
    tl_status s = tt__acc_grad(n->in[0], gx);
    tt_free(gx);
    return s;
}

tt_tensor *tt_dropout(tt_ctx *c, tt_tensor *x, double p, uint64_t seed, bool training) {
    TT__HOST_ONLY("dropout", NULL, x);
    if (!x) return NULL;
    if (!training || p <= 0) return x;
    if (p >= 1) {
        tl_err(TL_ERR_INVALID, "train: dropout p=%g must be < 1", p);
        return NULL;
    }
    tt_tensor *xc = tt_contiguous(c, x);
    if (!xc) return NULL;
    tt_tensor *mask = tt_new(x->dtype, x->ndim, x->shape);
    tt_tensor *o = tt__temp(c, x->dtype, x->ndim, x->shape);
    if (!mask || !o) {
        tt_free(mask);
        return NULL;
    }
    tt_rng r;
    tt_rng_seed(&r, seed);
    int64_t m = tt_numel(x);
    double keep = 1.0 / (1.0 - p);
    for (int64_t i = 0; i < m; i++) {
        double mv = tt_rng_uniform(&r) >= p ? keep : 0.0;
        tt_set(mask, i, mv);
        tt_set(o, i, tt_get(xc, i) * mv);
    }
    if (tt__needs_grad(c, &xc, 1)) {
        tt_node *n = tt__record(c, "dropout", bw_dropout, o, &xc, 1);
        if (!n) {
            tt_free(mask);
            return NULL;
        }
        n->saved[0] = mask;
    } else {
        tt_free(mask);
    }
    return o;
}
