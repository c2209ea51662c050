/* train/ops_bn: batch normalisation over x [N, C, spatial...] per channel,
 * with backward. Training mode normalises with the batch mean and biased
 * variance over N and the spatial dims (statistics summed in double), saves
 * the per-channel mean and inverse std for the backward, and updates the
 * running stats in place with torch's rule (momentum, unbiased variance).
 * Eval mode normalises with the running stats (an affine map per channel).
 * Every pass splits the channels over the context's threads.
 * Owns: nothing. Calls: train internals. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/tt_internal.h"

/* x viewed as [N, C, S]: element (n, c, s) at (n*C + c)*S + s. Each plane
 * (n, c) is summed with 8 independent accumulators of T (vectorisable, and
 * shorter rounding chains), planes are added in double. */
#define DEF_BN(T, SFX)                                                                        \
    /* sum of p[i] - m and of (p[i] - m)^2 over one plane */                                  \
    static void plane_sums_##SFX(const T *restrict p, int64_t S, T m, double *s1, double *s2) { \
        T a[8] = {0}, q[8] = {0};                                                             \
        int64_t i = 0;                                                                        \
        for (; i + 8 <= S; i += 8)                                                            \
            for (int k = 0; k < 8; k++) {                                                     \
                T d = p[i + k] - m;                                                           \
                a[k] += d;                                                                    \
                q[k] += d * d;                                                                \
            }                                                                                 \
        double ra = 0, rq = 0;                                                                \
        for (; i < S; i++) {                                                                  \
            ra += (double)(p[i] - m);                                                         \
            rq += (double)(p[i] - m) * (double)(p[i] - m);                                    \
        }                                                                                     \
        for (int k = 0; k < 8; k++) {                                                         \
            ra += a[k];                                                                       \
            rq += q[k];                                                                       \
        }                                                                                     \
        *s1 += ra;                                                                            \
        *s2 += rq;                                                                            \
    }                                                                                         \
    static void bn_stats_##SFX(const T *x, int64_t N, int64_t C, int64_t S, int64_t c0, int64_t c1, double *mean, \
                               double *var) {                                                 \
        for (int64_t c = c0; c < c1; c++) {                                                   \
            double s = 0, q = 0, M = (double)(N * S);                                         \
            for (int64_t n = 0; n < N; n++) plane_sums_##SFX(x + (n * C + c) * S, S, 0, &s, &q); \
            /* second pass about the mean: no cancellation in the variance */                 \
            T m = (T)(s / M);                                                                 \
            s = q = 0;                                                                        \
            for (int64_t n = 0; n < N; n++) plane_sums_##SFX(x + (n * C + c) * S, S, m, &s, &q); \
            mean[c] = (double)m + s / M;                                                      \
            var[c] = q / M - (s / M) * (s / M);                                               \
        }                                                                                     \
    }                                                                                         \
    static void bn_apply_##SFX(const T *restrict x, T *restrict y, int64_t N, int64_t C, int64_t S, int64_t c0, \
                               int64_t c1, const T *mean, const T *rstd, const T *w, const T *b) { \
        for (int64_t n = 0; n < N; n++)                                                       \
            for (int64_t c = c0; c < c1; c++) {                                               \
                T sc = rstd[c] * (w ? w[c] : 1), sh = (b ? b[c] : 0) - mean[c] * sc;          \
                const T *p = x + (n * C + c) * S;                                             \
                T *o = y + (n * C + c) * S;                                                   \
                int64_t i = 0;                                                                \
                for (; i + 8 <= S; i += 8) /* blocks of 8: vectorised even at -O2 */          \
                    for (int k = 0; k < 8; k++) o[i + k] = p[i + k] * sc + sh;                \
                for (; i < S; i++) o[i] = p[i] * sc + sh;                                     \
            }                                                                                 \
    }                                                                                         \
    /* sum(g) and sum(g * (x - m)) over one plane */                                          \
    static void plane_gsums_##SFX(const T *restrict p, const T *restrict g, int64_t S, T m, double *sg, \
                                  double *sgd) {                                              \
        T a[8] = {0}, q[8] = {0};                                                             \
        int64_t i = 0;                                                                        \
        for (; i + 8 <= S; i += 8)                                                            \
            for (int k = 0; k < 8; k++) {                                                     \
                a[k] += g[i + k];                                                             \
                q[k] += g[i + k] * (p[i + k] - m);                                            \
            }                                                                                 \
        double ra = 0, rq = 0;                                                                \
        for (; i < S; i++) {                                                                  \
            ra += g[i];                                                                       \
            rq += (double)g[i] * (double)(p[i] - m);                                          \
        }                                                                                     \
        for (int k = 0; k < 8; k++) {                                                         \
            ra += a[k];                                                                       \
            rq += q[k];                                                                       \
        }                                                                                     \
        *sg += ra;                                                                            \
        *sgd += rq;                                                                           \
    }                                                                                         \
    /* train != 0: the batch-statistics backward; else the affine one */                     \
    static void bn_bwd_##SFX(const T *x, const T *g, int64_t N, int64_t C, int64_t S, int64_t c0, int64_t c1, \
                             const T *mean, const T *rstd, const T *w, T *gx, T *gw, T *gb, int train) { \
        double M = (double)(N * S);                                                           \
        for (int64_t c = c0; c < c1; c++) {                                                   \
            T m = mean[c], rs = rstd[c], wc = w ? w[c] : 1;                                   \
            double sg = 0, sgx = 0; /* sum(g), sum(g * xhat) */                               \
            for (int64_t n = 0; n < N; n++)                                                   \
                plane_gsums_##SFX(x + (n * C + c) * S, g + (n * C + c) * S, S, m, &sg, &sgx);  \
            sgx *= (double)rs;                                                                \
            if (gw) gw[c] += (T)sgx;                                                          \
            if (gb) gb[c] += (T)sg;                                                           \
            if (!gx) continue;                                                                \
            /* dx = rstd*w*(g - mean(g) - xhat*mean(g*xhat)) in training: an                  \
             * affine map of g and x per channel, k*g + kx*x + k0 */                          \
            T a1 = train ? (T)(sg / M) : 0, a2 = train ? (T)(sgx / M) : 0, k = rs * wc;       \
            T kx = -k * rs * a2, k0 = -k * a1 + k * rs * a2 * m;                              \
            for (int64_t n = 0; n < N; n++) {                                                 \
                const T *restrict p = x + (n * C + c) * S, *restrict gp = g + (n * C + c) * S; \
                T *restrict o = gx + (n * C + c) * S;                                         \
                int64_t i = 0;                                                                \
                for (; i + 8 <= S; i += 8)                                                    \
                    for (int q = 0; q < 8; q++) o[i + q] += k * gp[i + q] + kx * p[i + q] + k0; \
                for (; i < S; i++) o[i] += k * gp[i] + kx * p[i] + k0;                        \
            }                                                                                 \
        }                                                                                     \
    }
DEF_BN(float, f32)
DEF_BN(double, f64)

/* ---- threads: channels are independent in every pass, so threads split
 * the channels and each channel is summed in the same order as on one
 * thread (results do not depend on the thread count) ---- */
enum { BJ_STATS, BJ_APPLY, BJ_BWD };
typedef struct bn_job {
    int kind, train;
    bool f64;
    int64_t N, C, S;
    const void *x, *g, *mean, *rstd, *w, *b;
    void *y, *gx, *gw, *gb;
    double *dm, *dv;
} bn_job;

static void bn_channels(const bn_job *j, int64_t c0, int64_t c1) {
    switch (j->kind) {
    case BJ_STATS:
        if (j->f64) bn_stats_f64(j->x, j->N, j->C, j->S, c0, c1, j->dm, j->dv);
        else bn_stats_f32(j->x, j->N, j->C, j->S, c0, c1, j->dm, j->dv);
        break;
    case BJ_APPLY:
        if (j->f64) bn_apply_f64(j->x, j->y, j->N, j->C, j->S, c0, c1, j->mean, j->rstd, j->w, j->b);
        else bn_apply_f32(j->x, j->y, j->N, j->C, j->S, c0, c1, j->mean, j->rstd, j->w, j->b);
        break;
    case BJ_BWD:
        if (j->f64)
            bn_bwd_f64(j->x, j->g, j->N, j->C, j->S, c0, c1, j->mean, j->rstd, j->w, j->gx, j->gw, j->gb, j->train);
        else
            bn_bwd_f32(j->x, j->g, j->N, j->C, j->S, c0, c1, j->mean, j->rstd, j->w, j->gx, j->gw, j->gb, j->train);
        break;
    }
}

static void bn_task(void *a, int ith, int nth) {
    const bn_job *j = a;
    int64_t c0, c1;
    tt__split(j->C, ith, nth, &c0, &c1);
    if (c0 < c1) bn_channels(j, c0, c1);
}

static void bn_run(tt_ctx *c, const bn_job *j) {
    if (j->C > 1 && j->N * j->C * j->S >= TT_PAR_MIN) tl_threadpool_run(c->tp, bn_task, (void *)j);
    else bn_channels(j, 0, j->C);
}

static tl_status bw_bn(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    tt_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    tt_tensor *gx = tt__need(n, 0) ? tt__grad_buf(x) : NULL;
    tt_tensor *gw = (w && tt__need(n, 1)) ? tt__grad_buf(w) : NULL;
    tt_tensor *gb = (b && tt__need(n, 2)) ? tt__grad_buf(b) : NULL;
    if ((tt__need(n, 0) && !gx) || (w && tt__need(n, 1) && !gw) || (b && tt__need(n, 2) && !gb))
        return TL_ERR_NOMEM;
    int64_t N = n->i[0], C = n->i[1], S = n->i[2];
    int train = (int)n->i[3];
    const bn_job j = {.kind = BJ_BWD, .train = train, .f64 = x->dtype != TT_F32, .N = N, .C = C, .S = S,
                      .x = tt_data(x), .g = tt_data(g), .mean = tt_data(n->saved[0]), .rstd = tt_data(n->saved[1]),
                      .w = w ? tt_data(w) : NULL, .gx = gx ? tt_data(gx) : NULL, .gw = gw ? tt_data(gw) : NULL,
                      .gb = gb ? tt_data(gb) : NULL};
    bn_run(c, &j);
    return TL_OK;
}

static bool chan_ok(const tt_tensor *t, int64_t C, tt_dtype dt) {
    return !t || (t->ndim == 1 && t->shape[0] == C && t->dtype == dt && tt_is_contiguous(t));
}

tt_tensor *tt_batch_norm(tt_ctx *c, tt_tensor *x, tt_tensor *w, tt_tensor *b, tt_tensor *running_mean,
                         tt_tensor *running_var, bool training, double momentum, double eps) {
    TT__HOST_ONLY("batch_norm", NULL, x, w, b, running_mean, running_var);
    if (!x) return NULL;
    if (x->ndim < 2) {
        tl_err(TL_ERR_INVALID, "train: batch_norm needs x [N, C, ...] (got %d-d)", x->ndim);
        return NULL;
    }
    int64_t N = x->shape[0], C = x->shape[1], S = 1;
    for (int i = 2; i < x->ndim; i++) S *= x->shape[i];
    if (!chan_ok(w, C, x->dtype) || !chan_ok(b, C, x->dtype) || !chan_ok(running_mean, C, x->dtype) ||
        !chan_ok(running_var, C, x->dtype) || (!running_mean) != (!running_var)) {
        tl_err(TL_ERR_INVALID,
               "train: batch_norm: weight, bias and running mean/var must be contiguous [%lld] of x's dtype "
               "(running stats both or neither)",
               (long long)C);
        return NULL;
    }
    if (!training && !running_mean) {
        tl_err(TL_ERR_INVALID, "train: batch_norm in eval mode needs running mean and variance");
        return NULL;
    }
    if (training && N * S < 2) {
        tl_err(TL_ERR_INVALID, "train: batch_norm: training needs more than 1 value per channel (got %lld)",
               (long long)(N * S));
        return NULL;
    }
    if (eps <= 0 || momentum < 0 || momentum > 1) {
        tl_err(TL_ERR_INVALID, "train: batch_norm: eps %g must be > 0 and momentum %g in [0, 1]", eps, momentum);
        return NULL;
    }
    tt_tensor *xc = tt_contiguous(c, x);
    if (!xc) return NULL;
    tt_tensor *y = tt__temp(c, x->dtype, x->ndim, x->shape);
    tt_tensor *mean = tt_new(x->dtype, 1, &C), *rstd = tt_new(x->dtype, 1, &C);
    double *dm = malloc((size_t)C * sizeof *dm), *dv = malloc((size_t)C * sizeof *dv);
    if (!y || !mean || !rstd || !dm || !dv) {
        tt_free(mean);
        tt_free(rstd);
        free(dm);
        free(dv);
        if (y) tl_err(TL_ERR_NOMEM, "train: batch_norm: out of memory");
        return NULL;
    }
    if (training) {
        const bn_job js = {.kind = BJ_STATS, .f64 = x->dtype != TT_F32, .N = N, .C = C, .S = S, .x = tt_data(xc),
                           .dm = dm, .dv = dv};
        bn_run(c, &js);
        double unb = (double)(N * S) / (double)(N * S - 1);
        for (int64_t i = 0; i < C; i++) {
            tt_set(mean, i, dm[i]);
            tt_set(rstd, i, 1.0 / sqrt(dv[i] + eps));
            if (running_mean) {
                tt_set(running_mean, i, (1 - momentum) * tt_get(running_mean, i) + momentum * dm[i]);
                tt_set(running_var, i, (1 - momentum) * tt_get(running_var, i) + momentum * dv[i] * unb);
            }
        }
    } else {
        for (int64_t i = 0; i < C; i++) {
            tt_set(mean, i, tt_get(running_mean, i));
            tt_set(rstd, i, 1.0 / sqrt(tt_get(running_var, i) + eps));
        }
    }
    free(dm);
    free(dv);
    const bn_job ja = {.kind = BJ_APPLY, .f64 = x->dtype != TT_F32, .N = N, .C = C, .S = S, .x = tt_data(xc),
                       .y = tt_data(y), .mean = tt_data(mean), .rstd = tt_data(rstd), .w = w ? tt_data(w) : NULL,
                       .b = b ? tt_data(b) : NULL};
    bn_run(c, &ja);
    tt_tensor *in[3] = {xc, w, b};
    if (tt__needs_grad(c, in, 3)) {
        tt_node *n = tt__record(c, "batch_norm", bw_bn, y, in, 3);
        if (!n) {
            tt_free(mean);
            tt_free(rstd);
            return NULL;
        }
        n->saved[0] = mean;
        n->saved[1] = rstd;
        n->i[0] = N;
        n->i[1] = C;
        n->i[2] = S;
        n->i[3] = training;
        c->live_bytes += (size_t)C * 2 * tt__esize(x->dtype);
    } else {
        tt_free(mean);
        tt_free(rstd);
    }
    return y;
}
