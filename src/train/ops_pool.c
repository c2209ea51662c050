/* train/ops_pool: 2-d max, average and adaptive-average pooling over
 * [N, C, H, W] with backward. Max pooling saves the flat in-plane index of
 * each output's argmax (the first maximum in row-major window order, as
 * torch's CPU kernel) and routes the gradient there; padding never wins.
 * Average pooling saves nothing: the backward recomputes each window.
 * Owns: nothing. Calls: train internals. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/tt_internal.h"

tt_pool_opt tt_pool_opt_make(int64_t kernel, int64_t stride, int64_t padding) {
    if (stride == 0) stride = kernel;
    tt_pool_opt o = {{kernel, kernel}, {stride, stride}, {padding, padding}};
    return o;
}

typedef struct pool_geom {
    int64_t NC, H, W, OH, OW, kH, kW, sh, sw, ph, pw;
} pool_geom;

static bool pool_setup(const tt_tensor *x, const tt_pool_opt *o, const char *op, pool_geom *g) {
    if (!x) return false;
    if (x->ndim != 4) {
        tl_err(TL_ERR_INVALID, "train: %s needs x [N, C, H, W] (got %d-d)", op, x->ndim);
        return false;
    }
    if (!o) {
        tl_err(TL_ERR_INVALID, "train: %s: no options", op);
        return false;
    }
    for (int a = 0; a < 2; a++)
        if (o->kernel[a] < 1 || o->stride[a] < 1 || o->padding[a] < 0 || 2 * o->padding[a] > o->kernel[a]) {
            tl_err(TL_ERR_INVALID,
                   "train: %s: kernel %lld and stride %lld must be >= 1, padding %lld in [0, kernel/2]", op,
                   (long long)o->kernel[a], (long long)o->stride[a], (long long)o->padding[a]);
            return false;
        }
    g->NC = x->shape[0] * x->shape[1];
    g->H = x->shape[2];
    g->W = x->shape[3];
    g->kH = o->kernel[0];
    g->kW = o->kernel[1];
    g->sh = o->stride[0];
    g->sw = o->stride[1];
    g->ph = o->padding[0];
    g->pw = o->padding[1];
    if (g->H + 2 * g->ph < g->kH || g->W + 2 * g->pw < g->kW) {
        tl_err(TL_ERR_INVALID, "train: %s: kernel %lldx%lld larger than the padded input %lldx%lld", op,
               (long long)g->kH, (long long)g->kW, (long long)(g->H + 2 * g->ph), (long long)(g->W + 2 * g->pw));
        return false;
    }
    g->OH = (g->H + 2 * g->ph - g->kH) / g->sh + 1;
    g->OW = (g->W + 2 * g->pw - g->kW) / g->sw + 1;
    return true;
}

static void geom_from_node(const tt_node *n, pool_geom *g) {
    const tt_tensor *x = n->in[0];
    g->NC = x->shape[0] * x->shape[1];
    g->H = x->shape[2];
    g->W = x->shape[3];
    g->OH = n->out->shape[2];
    g->OW = n->out->shape[3];
    g->kH = n->i[0];
    g->kW = n->i[1];
    g->sh = n->i[2];
    g->sw = n->i[3];
    g->ph = n->i[4];
    g->pw = n->i[5];
}

static void save_geom(tt_node *n, const pool_geom *g) {
    n->i[0] = g->kH;
    n->i[1] = g->kW;
    n->i[2] = g->sh;
    n->i[3] = g->sw;
    n->i[4] = g->ph;
    n->i[5] = g->pw;
}

/* ---- threads ------------------------------------------------------------- */
/* Every pooling pass works plane by plane ((n, c) pairs), and a plane's
 * outputs and input-gradient plane belong to it alone: threads split the
 * planes, and each value is computed in the same order as on one thread
 * (results do not depend on the thread count). */
enum { PJ_MAX, PJ_MAX_BW, PJ_AVG };
typedef struct pool_job {
    int kind;
    bool f64, inc;
    const pool_geom *g;
    const void *x;
    void *y;
    int32_t *arg;
    void *gx;
    const void *gy;
} pool_job;

static void pool_planes(const pool_job *j, int64_t p0, int64_t p1);

static void pool_task(void *a, int ith, int nth) {
    const pool_job *j = a;
    int64_t p0, p1;
    tt__split(j->g->NC, ith, nth, &p0, &p1);
    if (p0 < p1) pool_planes(j, p0, p1);
}

static void pool_run(tt_ctx *c, const pool_job *j) {
    if (j->g->NC > 1 && j->g->NC * j->g->H * j->g->W >= TT_PAR_MIN) tl_threadpool_run(c->tp, pool_task, (void *)j);
    else pool_planes(j, 0, j->g->NC);
}

/* ---- max pooling -------------------------------------------------------- */
/* Branch-free running max (the comparison's outcome is data-random, so a
 * branch would mispredict half the time); a window holding a NaN (rare) is
 * redone so the first NaN wins, as NaN propagates in torch. */
#define DEF_MAXPOOL(T, SFX)                                                                   \
    static void maxpool_fwd_##SFX(const pool_geom *g, int64_t p0, int64_t p1, const T *restrict x, \
                                  T *restrict y, int32_t *restrict arg) {                     \
        for (int64_t p = p0; p < p1; p++) {                                                   \
            const T *xp = x + p * g->H * g->W;                                                \
            for (int64_t oh = 0; oh < g->OH; oh++)                                            \
                for (int64_t ow = 0; ow < g->OW; ow++) {                                      \
                    int64_t h0 = oh * g->sh - g->ph, w0 = ow * g->sw - g->pw;                 \
                    int64_t h1 = h0 + g->kH < g->H ? h0 + g->kH : g->H;                       \
                    int64_t w1 = w0 + g->kW < g->W ? w0 + g->kW : g->W;                       \
                    if (h0 < 0) h0 = 0;                                                       \
                    if (w0 < 0) w0 = 0;                                                       \
                    T best = -INFINITY;                                                       \
                    int64_t bi = h0 * g->W + w0;                                              \
                    bool nan = false;                                                         \
                    for (int64_t h = h0; h < h1; h++)                                         \
                        for (int64_t w = w0; w < w1; w++) {                                   \
                            T v = xp[h * g->W + w];                                           \
                            bool up = v > best;                                               \
                            nan |= v != v;                                                    \
                            best = up ? v : best;                                             \
                            bi = up ? h * g->W + w : bi;                                      \
                        }                                                                     \
                    for (int64_t h = h0; nan && h < h1; h++)                                  \
                        for (int64_t w = w0; nan && w < w1; w++)                              \
                            if (xp[h * g->W + w] != xp[h * g->W + w]) {                       \
                                best = xp[h * g->W + w];                                      \
                                bi = h * g->W + w;                                            \
                                nan = false;                                                  \
                            }                                                                 \
                    y[(p * g->OH + oh) * g->OW + ow] = best;                                  \
                    if (arg) arg[(p * g->OH + oh) * g->OW + ow] = (int32_t)bi;                \
                }                                                                             \
        }                                                                                     \
    }
DEF_MAXPOOL(float, f32)
DEF_MAXPOOL(double, f64)

/* gradient of planes [p0, p1): each output's gradient to its argmax */
static void maxpool_bwd(const pool_job *j, int64_t p0, int64_t p1) {
    const pool_geom *g = j->g;
    const int64_t HW = g->H * g->W, P = g->OH * g->OW;
    for (int64_t p = p0; p < p1; p++)
        for (int64_t q = 0; q < P; q++) {
            int64_t src = p * P + q, dst = p * HW + j->arg[src];
            if (j->f64) ((double *)j->gx)[dst] += ((const double *)j->gy)[src];
            else ((float *)j->gx)[dst] += ((const float *)j->gy)[src];
        }
}

/* the backward of max (kind PJ_MAX_BW: through the saved argmax) or
 * average pooling (PJ_AVG: the windows recomputed) */
static tl_status pool_bw(tt_ctx *c, tt_node *n, const tt_tensor *gout, int kind) {
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *x = n->in[0];
    tt_tensor *gx = tt__grad_buf(x);
    if (!gx) return TL_ERR_NOMEM;
    pool_geom g;
    geom_from_node(n, &g);
    const pool_job j = {.kind = kind, .f64 = x->dtype != TT_F32, .inc = kind == PJ_AVG && n->i[6] != 0, .g = &g,
                        .arg = kind == PJ_MAX_BW ? n->extra : NULL, .gx = tt_data(gx), .gy = tt_data(gout)};
    pool_run(c, &j);
    return TL_OK;
}

static tl_status bw_maxpool(tt_ctx *c, tt_node *n, const tt_tensor *gout) { return pool_bw(c, n, gout, PJ_MAX_BW); }

tt_tensor *tt_max_pool2d(tt_ctx *c, tt_tensor *x, const tt_pool_opt *o) {
    TT__HOST_ONLY("max_pool2d", NULL, x);
    pool_geom g;
    if (!pool_setup(x, o, "max_pool2d", &g)) return NULL;
    if (g.H * g.W > INT32_MAX) {
        tl_err(TL_ERR_UNSUPPORTED, "train: max_pool2d: planes over 2^31 elements");
        return NULL;
    }
    tt_tensor *xc = tt_contiguous(c, x);
    if (!xc) return NULL;
    int64_t osh[4] = {x->shape[0], x->shape[1], g.OH, g.OW};
    tt_tensor *y = tt__temp(c, x->dtype, 4, osh);
    if (!y) return NULL;
    bool rec = tt__needs_grad(c, &xc, 1);
    int32_t *arg = rec ? malloc((size_t)(g.NC * g.OH * g.OW) * sizeof *arg) : NULL;
    if (rec && !arg) {
        tl_err(TL_ERR_NOMEM, "train: max_pool2d: out of memory");
        return NULL;
    }
    const pool_job j = {.kind = PJ_MAX, .f64 = x->dtype != TT_F32, .g = &g, .x = tt_data(xc), .y = tt_data(y),
                        .arg = arg};
    pool_run(c, &j);
    if (rec) {
        tt_node *n = tt__record(c, "max_pool2d", bw_maxpool, y, &xc, 1);
        if (!n) {
            free(arg);
            return NULL;
        }
        save_geom(n, &g);
        n->extra = arg;
        c->live_bytes += (size_t)(g.NC * g.OH * g.OW) * sizeof *arg;
    }
    return y;
}

/* ---- average pooling ---------------------------------------------------- */
/* Window of output (oh, ow) clipped to the image, and its divisor. */
static void avg_window(const pool_geom *g, int64_t oh, int64_t ow, bool include_pad, int64_t *h0, int64_t *h1,
                       int64_t *w0, int64_t *w1, double *div) {
    int64_t a0 = oh * g->sh - g->ph, b0 = ow * g->sw - g->pw;
    int64_t a1 = a0 + g->kH, b1 = b0 + g->kW;
    /* torch: the padded window is clipped to [-pad, size + pad) first */
    int64_t pa1 = a1 < g->H + g->ph ? a1 : g->H + g->ph, pb1 = b1 < g->W + g->pw ? b1 : g->W + g->pw;
    int64_t padded = (pa1 - a0) * (pb1 - b0);
    *h0 = a0 < 0 ? 0 : a0;
    *w0 = b0 < 0 ? 0 : b0;
    *h1 = a1 < g->H ? a1 : g->H;
    *w1 = b1 < g->W ? b1 : g->W;
    int64_t inside = (*h1 - *h0) * (*w1 - *w0);
    *div = (double)(include_pad ? padded : (inside > 0 ? inside : 1));
}

#define DEF_AVGPOOL(T, SFX)                                                                   \
    static void avgpool_##SFX(const pool_geom *g, int64_t p0, int64_t p1, bool inc, const T *x, T *y, T *gx, \
                              const T *gy) {                                                  \
        if (g->ph == 0 && g->pw == 0) { /* every window inside: one divisor, no clipping */    \
            T div = (T)(g->kH * g->kW);                                                       \
            for (int64_t p = p0; p < p1; p++)                                                 \
                for (int64_t oh = 0; oh < g->OH; oh++)                                        \
                    for (int64_t ow = 0; ow < g->OW; ow++) {                                  \
                        int64_t q = (p * g->OH + oh) * g->OW + ow;                            \
                        int64_t base = p * g->H * g->W + oh * g->sh * g->W + ow * g->sw;      \
                        if (y) {                                                              \
                            T s = 0;                                                          \
                            for (int64_t h = 0; h < g->kH; h++)                               \
                                for (int64_t w = 0; w < g->kW; w++) s += x[base + h * g->W + w]; \
                            y[q] = s / div;                                                   \
                        } else {                                                              \
                            T v = gy[q] / div;                                                \
                            for (int64_t h = 0; h < g->kH; h++)                               \
                                for (int64_t w = 0; w < g->kW; w++) gx[base + h * g->W + w] += v; \
                        }                                                                     \
                    }                                                                         \
            return;                                                                           \
        }                                                                                     \
        for (int64_t p = p0; p < p1; p++)                                                     \
            for (int64_t oh = 0; oh < g->OH; oh++)                                            \
                for (int64_t ow = 0; ow < g->OW; ow++) {                                      \
                    int64_t h0, h1, w0, w1;                                                   \
                    double div;                                                               \
                    avg_window(g, oh, ow, inc, &h0, &h1, &w0, &w1, &div);                     \
                    int64_t q = (p * g->OH + oh) * g->OW + ow;                                \
                    if (y) {                                                                  \
                        const T *xp = x + p * g->H * g->W;                                    \
                        T s = 0;                                                              \
                        for (int64_t h = h0; h < h1; h++)                                     \
                            for (int64_t w = w0; w < w1; w++) s += xp[h * g->W + w];          \
                        y[q] = s / (T)div;                                                    \
                    } else {                                                                  \
                        T *gp = gx + p * g->H * g->W, v = gy[q] / (T)div;                     \
                        for (int64_t h = h0; h < h1; h++)                                     \
                            for (int64_t w = w0; w < w1; w++) gp[h * g->W + w] += v;          \
                    }                                                                         \
                }                                                                             \
    }
DEF_AVGPOOL(float, f32)
DEF_AVGPOOL(double, f64)

static void pool_planes(const pool_job *j, int64_t p0, int64_t p1) {
    switch (j->kind) {
    case PJ_MAX:
        if (j->f64) maxpool_fwd_f64(j->g, p0, p1, j->x, j->y, j->arg);
        else maxpool_fwd_f32(j->g, p0, p1, j->x, j->y, j->arg);
        break;
    case PJ_MAX_BW: maxpool_bwd(j, p0, p1); break;
    case PJ_AVG: /* forward when y is set, else backward into gx */
        if (j->f64) avgpool_f64(j->g, p0, p1, j->inc, j->x, j->y, j->gx, j->gy);
        else avgpool_f32(j->g, p0, p1, j->inc, j->x, j->y, j->gx, j->gy);
        break;
    }
}

static tl_status bw_avgpool(tt_ctx *c, tt_node *n, const tt_tensor *gout) { return pool_bw(c, n, gout, PJ_AVG); }

tt_tensor *tt_avg_pool2d(tt_ctx *c, tt_tensor *x, const tt_pool_opt *o, bool count_include_pad) {
    TT__HOST_ONLY("avg_pool2d", NULL, x);
    pool_geom g;
    if (!pool_setup(x, o, "avg_pool2d", &g)) return NULL;
    tt_tensor *xc = tt_contiguous(c, x);
    if (!xc) return NULL;
    int64_t osh[4] = {x->shape[0], x->shape[1], g.OH, g.OW};
    tt_tensor *y = tt__temp(c, x->dtype, 4, osh);
    if (!y) return NULL;
    const pool_job j = {.kind = PJ_AVG, .f64 = x->dtype != TT_F32, .inc = count_include_pad, .g = &g,
                        .x = tt_data(xc), .y = tt_data(y)};
    pool_run(c, &j);
    if (tt__needs_grad(c, &xc, 1)) {
        tt_node *n = tt__record(c, "avg_pool2d", bw_avgpool, y, &xc, 1);
        if (!n) return NULL;
        save_geom(n, &g);
        n->i[6] = count_include_pad;
    }
    return y;
}

/* ---- adaptive average pooling ------------------------------------------- */
#define DEF_ADAPT(T, SFX)                                                                     \
    static void adapt_##SFX(int64_t NC, int64_t H, int64_t W, int64_t OH, int64_t OW, const T *x, T *y, \
                            T *gx, const T *gy) {                                             \
        for (int64_t p = 0; p < NC; p++)                                                      \
            for (int64_t oh = 0; oh < OH; oh++)                                               \
                for (int64_t ow = 0; ow < OW; ow++) {                                         \
                    int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;              \
                    int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;              \
                    T div = (T)((h1 - h0) * (w1 - w0));                                       \
                    int64_t q = (p * OH + oh) * OW + ow;                                      \
                    if (y) {                                                                  \
                        const T *xp = x + p * H * W;                                          \
                        T s = 0;                                                              \
                        for (int64_t h = h0; h < h1; h++)                                     \
                            for (int64_t w = w0; w < w1; w++) s += xp[h * W + w];             \
                        y[q] = s / div;                                                       \
                    } else {                                                                  \
                        T *gp = gx + p * H * W, v = gy[q] / div;                              \
                        for (int64_t h = h0; h < h1; h++)                                     \
                            for (int64_t w = w0; w < w1; w++) gp[h * W + w] += v;             \
                    }                                                                         \
                }                                                                             \
    }
DEF_ADAPT(float, f32)
DEF_ADAPT(double, f64)

static tl_status bw_adapt(tt_ctx *c, tt_node *n, const tt_tensor *gout) {
    (void)c;
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *x = n->in[0];
    tt_tensor *gx = tt__grad_buf(x);
    if (!gx) return TL_ERR_NOMEM;
    int64_t NC = x->shape[0] * x->shape[1];
    if (x->dtype == TT_F32)
        adapt_f32(NC, x->shape[2], x->shape[3], n->out->shape[2], n->out->shape[3], NULL, NULL, tt_data(gx),
                  tt_data(gout));
    else
        adapt_f64(NC, x->shape[2], x->shape[3], n->out->shape[2], n->out->shape[3], NULL, NULL, tt_data(gx),
                  tt_data(gout));
    return TL_OK;
}

tt_tensor *tt_adaptive_avg_pool2d(tt_ctx *c, tt_tensor *x, int64_t oh, int64_t ow) {
    TT__HOST_ONLY("adaptive_avg_pool2d", NULL, x);
    if (!x) return NULL;
    if (x->ndim != 4 || oh < 1 || ow < 1 || x->shape[2] < 1 || x->shape[3] < 1) {
        tl_err(TL_ERR_INVALID,
               "train: adaptive_avg_pool2d needs a non-empty x [N, C, H, W] (got %d-d) and an output size >= 1",
               x->ndim);
        return NULL;
    }
    tt_tensor *xc = tt_contiguous(c, x);
    if (!xc) return NULL;
    int64_t osh[4] = {x->shape[0], x->shape[1], oh, ow};
    tt_tensor *y = tt__temp(c, x->dtype, 4, osh);
    if (!y) return NULL;
    int64_t NC = x->shape[0] * x->shape[1];
    if (x->dtype == TT_F32) adapt_f32(NC, x->shape[2], x->shape[3], oh, ow, tt_data(xc), tt_data(y), NULL, NULL);
    else adapt_f64(NC, x->shape[2], x->shape[3], oh, ow, tt_data(xc), tt_data(y), NULL, NULL);
    if (tt__needs_grad(c, &xc, 1) && !tt__record(c, "adaptive_avg_pool2d", bw_adapt, y, &xc, 1)) return NULL;
    return y;
}
