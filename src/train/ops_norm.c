/* train/ops_norm: layernorm (saves per-row mean and rstd) and rmsnorm
 * (saves rstd) over the last dim, with backward. Rows are independent, so
 * both passes split the rows over the ctx's threads; the weight and bias
 * gradients, sums over rows, are summed per fixed chunk of NORM_CHUNK rows
 * and the chunks added in order, so results do not depend on the thread
 * count. Row kernels are written once per compute type via a macro.
 * Owns: nothing (chunk buffers per call). Calls: train internals. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/tt_internal.h"

#define ROWS(x) (tt_numel(x) / (x)->shape[(x)->ndim - 1])
#define COLS(x) ((x)->shape[(x)->ndim - 1])
#define NORM_CHUNK 64 /* rows per partial weight/bias gradient */

/* rms != 0: RMSNorm (no mean, no bias). stats: [R] mean (layernorm), [R] rstd.
 * Rows [r0, r1); the backward adds this range's weight/bias sums into gw/gb. */
#define DEF_NORM(T, SFX)                                                                  \
    static void norm_fwd_##SFX(const T *x, const T *w, const T *b, T *y, T *mean, T *rstd, \
                               int64_t r0, int64_t r1, int64_t C, double eps, int rms) {  \
        for (int64_t r = r0; r < r1; r++) {                                               \
            const T *xr = x + r * C;                                                      \
            T *yr = y + r * C;                                                            \
            double mu = 0, var = 0;                                                       \
            if (!rms) {                                                                   \
                for (int64_t j = 0; j < C; j++) mu += xr[j];                              \
                mu /= (double)C;                                                          \
            }                                                                             \
            for (int64_t j = 0; j < C; j++) var += ((double)xr[j] - mu) * ((double)xr[j] - mu); \
            var /= (double)C;                                                             \
            T rs = (T)(1.0 / sqrt(var + eps));                                            \
            T m = (T)mu;                                                                  \
            if (mean) mean[r] = m;                                                        \
            rstd[r] = rs;                                                                 \
            for (int64_t j = 0; j < C; j++) yr[j] = (xr[j] - m) * rs * w[j] + (b ? b[j] : 0); \
        }                                                                                 \
    }                                                                                     \
    static void norm_bwd_##SFX(const T *x, const T *w, const T *g, const T *mean, const T *rstd, \
                               T *gx, T *gw, T *gb, int64_t r0, int64_t r1, int64_t C) {  \
        for (int64_t r = r0; r < r1; r++) {                                               \
            const T *xr = x + r * C, *gr = g + r * C;                                     \
            T m = mean ? mean[r] : 0, rs = rstd[r];                                       \
            double s1 = 0, s2 = 0; /* mean(dxhat), mean(dxhat * xhat) */                  \
            for (int64_t j = 0; j < C; j++) {                                             \
                T xh = (xr[j] - m) * rs, dxh = gr[j] * w[j];                              \
                s1 += dxh;                                                                \
                s2 += (double)dxh * xh;                                                   \
                if (gw) gw[j] += gr[j] * xh;                                              \
                if (gb) gb[j] += gr[j];                                                   \
            }                                                                             \
            T a1 = mean ? (T)(s1 / (double)C) : 0, a2 = (T)(s2 / (double)C);              \
            if (gx) {                                                                     \
                T *o = gx + r * C;                                                        \
                for (int64_t j = 0; j < C; j++) {                                         \
                    T xh = (xr[j] - m) * rs;                                              \
                    o[j] += rs * (gr[j] * w[j] - a1 - xh * a2);                           \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
    }
DEF_NORM(float, f32)
DEF_NORM(double, f64)

typedef struct norm_job {
    bool f64, bwd;
    int rms;
    int64_t R, C;
    double eps;
    const void *x, *w, *b, *g;
    void *y, *mean, *rstd, *gx;
    char *pw, *pb; /* backward: [chunks][C] partial weight / bias gradients (NULL: not wanted) */
} norm_job;

static void norm_chunk(const norm_job *j, int64_t k) {
    int64_t r0 = k * NORM_CHUNK, r1 = r0 + NORM_CHUNK < j->R ? r0 + NORM_CHUNK : j->R;
    size_t es = j->f64 ? sizeof(double) : sizeof(float), off = (size_t)(k * j->C) * es;
    void *pw = j->pw ? j->pw + off : NULL, *pb = j->pb ? j->pb + off : NULL;
    if (!j->bwd && j->f64)
        norm_fwd_f64(j->x, j->w, j->b, j->y, j->mean, j->rstd, r0, r1, j->C, j->eps, j->rms);
    else if (!j->bwd)
        norm_fwd_f32(j->x, j->w, j->b, j->y, j->mean, j->rstd, r0, r1, j->C, j->eps, j->rms);
    else if (j->f64)
        norm_bwd_f64(j->x, j->w, j->g, j->mean, j->rstd, j->gx, pw, pb, r0, r1, j->C);
    else
        norm_bwd_f32(j->x, j->w, j->g, j->mean, j->rstd, j->gx, pw, pb, r0, r1, j->C);
}

static void norm_task(void *arg, int ith, int nth) {
    const norm_job *j = arg;
    int64_t k0, k1;
    tt__split((j->R + NORM_CHUNK - 1) / NORM_CHUNK, ith, nth, &k0, &k1);
    for (int64_t k = k0; k < k1; k++) norm_chunk(j, k);
}

static void norm_run(tt_ctx *c, const norm_job *j) {
    if (j->R > NORM_CHUNK && j->R * j->C >= TT_PAR_MIN) tl_threadpool_run(c->tp, norm_task, (void *)j);
    else norm_task((void *)j, 0, 1);
}

/* dst[C] += the chunks' partial sums, in chunk order */
static void add_chunks(bool f64, void *dst, const char *parts, int64_t chunks, int64_t C) {
    for (int64_t k = 0; k < chunks; k++)
        for (int64_t i = 0; i < C; i++) {
            if (f64) ((double *)dst)[i] += ((const double *)parts)[k * C + i];
            else ((float *)dst)[i] += ((const float *)parts)[k * C + i];
        }
}

static tl_status bw_norm(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    tt_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    tt_tensor *gx = tt__need(n, 0) ? tt__grad_buf(x) : NULL;
    tt_tensor *gw = tt__need(n, 1) ? tt__grad_buf(w) : NULL;
    tt_tensor *gb = (b && tt__need(n, 2)) ? tt__grad_buf(b) : NULL;
    if ((tt__need(n, 0) && !gx) || (tt__need(n, 1) && !gw) || (b && tt__need(n, 2) && !gb)) return TL_ERR_NOMEM;
    tt_tensor *mean = n->i[0] ? NULL : n->saved[0], *rstd = n->saved[1];
    norm_job j = {.f64 = x->dtype != TT_F32, .bwd = true, .R = ROWS(x), .C = COLS(x), .x = tt_data(x),
                  .w = tt_data(w), .g = tt_data(g), .mean = mean ? tt_data(mean) : NULL, .rstd = tt_data(rstd),
                  .gx = gx ? tt_data(gx) : NULL};
    int64_t chunks = (j.R + NORM_CHUNK - 1) / NORM_CHUNK;
    size_t es = tt__esize(x->dtype);
    if (gw) j.pw = calloc((size_t)(chunks * j.C), es);
    if (gb) j.pb = calloc((size_t)(chunks * j.C), es);
    if ((gw && !j.pw) || (gb && !j.pb)) {
        free(j.pw);
        free(j.pb);
        return tl_err(TL_ERR_NOMEM, "train: %s backward: out of memory", n->i[0] ? "rmsnorm" : "layernorm");
    }
    norm_run(c, &j);
    if (gw) add_chunks(j.f64, tt_data(gw), j.pw, chunks, j.C);
    if (gb) add_chunks(j.f64, tt_data(gb), j.pb, chunks, j.C);
    free(j.pw);
    free(j.pb);
    return TL_OK;
}

static tt_tensor *norm_op(tt_ctx *c, tt_tensor *x, tt_tensor *w, tt_tensor *b, double eps, int rms) {
#ifdef TALLOW_CUDA
    if (x && tt__dev(x) == TT_CUDA) return tt__cu_norm(c, x, w, b, eps, rms);
#endif
    tt_tensor *in3[3] = {x, w, b};
    const char *name = rms ? "rmsnorm" : "layernorm";
    if (!tt__check(in3, b ? 3 : 2, name)) return NULL;
    int64_t C = COLS(x), R = ROWS(x);
    if (tt_numel(w) != C || (b && tt_numel(b) != C) || !tt_is_contiguous(w) || (b && !tt_is_contiguous(b))) {
        tl_err(TL_ERR_INVALID, "train: %s: weight/bias must be contiguous with %lld elements", name, (long long)C);
        return NULL;
    }
    tt_tensor *xc = tt_contiguous(c, x);
    if (!xc) return NULL;
    tt_tensor *o = tt__temp(c, x->dtype, x->ndim, x->shape);
    tt_tensor *mean = rms ? NULL : tt_new(x->dtype, 1, &R), *rstd = tt_new(x->dtype, 1, &R);
    if (!o || (!rms && !mean) || !rstd) {
        tt_free(mean);
        tt_free(rstd);
        return NULL;
    }
    const norm_job j = {.f64 = x->dtype != TT_F32, .rms = rms, .R = R, .C = C, .eps = eps, .x = tt_data(xc),
                        .w = tt_data(w), .b = b ? tt_data(b) : NULL, .y = tt_data(o),
                        .mean = mean ? tt_data(mean) : NULL, .rstd = tt_data(rstd)};
    norm_run(c, &j);
    tt_tensor *in[3] = {xc, w, b};
    if (tt__needs_grad(c, in, 3)) {
        tt_node *n = tt__record(c, name, bw_norm, o, in, b ? 3 : 2);
        if (!n) {
            tt_free(mean);
            tt_free(rstd);
            return NULL;
        }
        n->i[0] = rms;
        n->saved[0] = mean;
        n->saved[1] = rstd;
        c->live_bytes += (size_t)R * 2 * tt__esize(x->dtype);
    } else {
        tt_free(mean);
        tt_free(rstd);
    }
    return o;
}

tt_tensor *tt_layernorm(tt_ctx *c, tt_tensor *x, tt_tensor *w, tt_tensor *b, double eps) {
    return norm_op(c, x, w, b, eps, 0);
}
tt_tensor *tt_rmsnorm(tt_ctx *c, tt_tensor *x, tt_tensor *w, double eps) { return norm_op(c, x, w, NULL, eps, 1); }
