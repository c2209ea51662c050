/* train/ops_reduce: reductions over any set of dims (sum, mean, var, std),
 * max/min over a dim with indices, amax/amin over all, argmax/argmin, each
 * with its backward. One plan splits x's dims into kept (outer) and reduced
 * (inner) ones, so any dims of any strided x reduce without a copy; sums
 * accumulate in double. Not a hot path in training (those use sum/mean of
 * ops_elem and the fused nn ops), so clarity over speed.
 * Owns: nothing. Calls: train internals. */
#include <stdio.h>
#include <stdlib.h>

#include "train/tt_internal.h"

typedef struct rplan {
    int no, ni;
    int64_t osh[TT_MAX_DIMS], ost[TT_MAX_DIMS], ocs[TT_MAX_DIMS]; /* kept dims: shape, x strides, contiguous strides */
    int64_t *ioff, *icoff;                                        /* [nin] inner offsets in x / contiguous x */
    int64_t nout, nin;
} rplan;

static int64_t offs(const int64_t *sh, const int64_t *st, int nd, int64_t flat) {
    int64_t o = 0;
    for (int d = nd - 1; d >= 0; d--) {
        o += (flat % sh[d]) * st[d];
        flat /= sh[d];
    }
    return o;
}

static void plan_free(rplan *p) {
    free(p->ioff);
    free(p->icoff);
}

/* Reduced-dim bitmask from a dims list (n == 0: all); false + error on bad dims. */
static bool dims_mask(const tt_tensor *x, int n, const int *dims, const char *op, unsigned *mask) {
    char sb[64];
    *mask = 0;
    if (n == 0) {
        *mask = (1u << x->ndim) - 1;
        return true;
    }
    if (n < 0 || n > x->ndim || !dims) {
        tl_err(TL_ERR_INVALID, "train: %s: %d dims for a %d-d tensor %s", op, n, x->ndim, tt__shape_str(x, sb, 64));
        return false;
    }
    for (int i = 0; i < n; i++) {
        int d = dims[i] < 0 ? dims[i] + x->ndim : dims[i];
        if (d < 0 || d >= x->ndim || (*mask & (1u << d))) {
            tl_err(TL_ERR_INVALID, "train: %s: dim %d %s for a %d-d tensor %s", op, dims[i],
                   (d >= 0 && d < x->ndim) ? "repeated" : "out of range", x->ndim, tt__shape_str(x, sb, 64));
            return false;
        }
        *mask |= 1u << d;
    }
    return true;
}

/* Plan for reducing x over mask; out shape (keepdim or not; [1] if empty). */
static bool make_plan(const tt_tensor *x, unsigned mask, bool keepdim, rplan *p, int *ondim, int64_t *oshape) {
    memset(p, 0, sizeof *p);
    int64_t cst[TT_MAX_DIMS], ish[TT_MAX_DIMS], ist[TT_MAX_DIMS], ics[TT_MAX_DIMS], s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        cst[d] = s;
        s *= x->shape[d];
    }
    *ondim = 0;
    p->nout = p->nin = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (mask & (1u << d)) {
            ish[p->ni] = x->shape[d];
            ist[p->ni] = x->stride[d];
            ics[p->ni++] = cst[d];
            p->nin *= x->shape[d];
            if (keepdim) oshape[(*ondim)++] = 1;
        } else {
            p->osh[p->no] = x->shape[d];
            p->ost[p->no] = x->stride[d];
            p->ocs[p->no++] = cst[d];
            p->nout *= x->shape[d];
            oshape[(*ondim)++] = x->shape[d];
        }
    }
    if (*ondim == 0) oshape[(*ondim)++] = 1;
    p->ioff = malloc((size_t)(p->nin ? p->nin : 1) * sizeof(int64_t));
    p->icoff = malloc((size_t)(p->nin ? p->nin : 1) * sizeof(int64_t));
    if (!p->ioff || !p->icoff) {
        plan_free(p);
        tl_err(TL_ERR_NOMEM, "train: out of memory");
        return false;
    }
    for (int64_t k = 0; k < p->nin; k++) {
        p->ioff[k] = offs(ish, ist, p->ni, k);
        p->icoff[k] = offs(ish, ics, p->ni, k);
    }
    return true;
}

static inline int64_t xbase(const rplan *p, const tt_tensor *x, int64_t o) {
    return x->offset + offs(p->osh, p->ost, p->no, o);
}
static inline int64_t cbase(const rplan *p, int64_t o) { return offs(p->osh, p->ocs, p->no, o); }

/* ---- sum / mean / var / std over dims ------------------------------------ */
enum { R_SUM, R_MEAN, R_VAR, R_STD };
static const char *r_names[] = {"sum_dims", "mean_dims", "var", "std"};

static tl_status bw_moments(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    (void)c;
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *x = n->in[0];
    int kind = (int)n->i[0];
    rplan p;
    int ondim;
    int64_t osh[TT_MAX_DIMS];
    if (!make_plan(x, (unsigned)n->i[1], false, &p, &ondim, osh)) return TL_ERR_NOMEM;
    tt_tensor *gx = tt_new(x->dtype, x->ndim, x->shape);
    if (!gx) {
        plan_free(&p);
        return TL_ERR_NOMEM;
    }
    double den = n->f[0];
    for (int64_t o = 0; o < p.nout; o++) {
        int64_t b = xbase(&p, x, o), cb = cbase(&p, o);
        double go = tt_get(g, o);
        if (kind == R_SUM || kind == R_MEAN) {
            double v = kind == R_MEAN ? go / (double)p.nin : go;
            for (int64_t k = 0; k < p.nin; k++) tt__st(gx, cb + p.icoff[k], v);
            continue;
        }
        double mean = 0;
        for (int64_t k = 0; k < p.nin; k++) mean += tt__ld(x, b + p.ioff[k]);
        mean /= (double)p.nin;
        /* d var/dx = 2 (x - mean) / den; d std/dx = (x - mean) / (den * std) */
        double f = kind == R_VAR ? 2.0 * go / den : go / (den * tt_get(n->out, o));
        for (int64_t k = 0; k < p.nin; k++) tt__st(gx, cb + p.icoff[k], f * (tt__ld(x, b + p.ioff[k]) - mean));
    }
    plan_free(&p);
    tl_status s = tt__acc_grad(x, gx);
    tt_free(gx);
    return s;
}

static tt_tensor *moments(tt_ctx *c, int kind, tt_tensor *x, int nd, const int *dims, bool unbiased, bool keepdim) {
    const char *op = r_names[kind];
    if (!tt__check_compute(x, op)) return NULL;
    unsigned mask;
    if (!dims_mask(x, nd, dims, op, &mask)) return NULL;
    rplan p;
    int ondim;
    int64_t osh[TT_MAX_DIMS];
    if (!make_plan(x, mask, keepdim, &p, &ondim, osh)) return NULL;
    tt_tensor *o = tt__temp(c, x->dtype, ondim, osh);
    if (!o) {
        plan_free(&p);
        return NULL;
    }
    /* var/std divisor N - correction; 0 or less gives inf/NaN as PyTorch */
    double den = kind >= R_VAR ? (double)p.nin - (unbiased ? 1.0 : 0.0) : 1.0;
    if (den < 0) den = 0;
    for (int64_t i = 0; i < p.nout; i++) {
        int64_t b = xbase(&p, x, i);
        double s = 0;
        for (int64_t k = 0; k < p.nin; k++) s += tt__ld(x, b + p.ioff[k]);
        double v = s;
        if (kind == R_MEAN) v = s / (double)p.nin;
        if (kind >= R_VAR) {
            double mean = s / (double)p.nin, q = 0; /* two passes: no cancellation */
            for (int64_t k = 0; k < p.nin; k++) {
                double d = tt__ld(x, b + p.ioff[k]) - mean;
                q += d * d;
            }
            v = q / den;
            if (kind == R_STD) v = sqrt(v);
        }
        tt__st(o, i, v);
    }
    plan_free(&p);
    if (tt__needs_grad(c, &x, 1)) {
        tt_node *n = tt__record(c, op, bw_moments, o, &x, 1);
        if (!n) return NULL;
        n->i[0] = kind;
        n->i[1] = mask;
        n->f[0] = den;
    }
    return o;
}

tt_tensor *tt_sum_dims(tt_ctx *c, tt_tensor *x, int n, const int *dims, bool keepdim) {
    TT__HOST_ONLY("sum_dims", NULL, x);
    return moments(c, R_SUM, x, n, dims, false, keepdim);
}
tt_tensor *tt_mean_dims(tt_ctx *c, tt_tensor *x, int n, const int *dims, bool keepdim) {
    TT__HOST_ONLY("mean_dims", NULL, x);
    return moments(c, R_MEAN, x, n, dims, false, keepdim);
}
tt_tensor *tt_var_dims(tt_ctx *c, tt_tensor *x, int n, const int *dims, bool unbiased, bool keepdim) {
    TT__HOST_ONLY("var_dims", NULL, x);
    return moments(c, R_VAR, x, n, dims, unbiased, keepdim);
}
tt_tensor *tt_std_dims(tt_ctx *c, tt_tensor *x, int n, const int *dims, bool unbiased, bool keepdim) {
    TT__HOST_ONLY("std_dims", NULL, x);
    return moments(c, R_STD, x, n, dims, unbiased, keepdim);
}
tt_tensor *tt_var(tt_ctx *c, tt_tensor *x, int dim, bool unbiased, bool keepdim) {
    TT__HOST_ONLY("var", NULL, x);
    return moments(c, R_VAR, x, 1, &dim, unbiased, keepdim);
}
tt_tensor *tt_std(tt_ctx *c, tt_tensor *x, int dim, bool unbiased, bool keepdim) {
    TT__HOST_ONLY("std", NULL, x);
    return moments(c, R_STD, x, 1, &dim, unbiased, keepdim);
}

/* ---- max / min ------------------------------------------------------------ */
/* v beats best: larger (smaller for min), and NaN beats any number. */
static inline bool beats(double v, double best, bool is_max) {
    if (v != v) return best == best;
    return is_max ? v > best : v < best;
}

static tl_status bw_pick(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    (void)c;
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *x = n->in[0];
    tt_tensor *gx = tt_new(x->dtype, x->ndim, x->shape);
    if (!gx) return TL_ERR_NOMEM;
    const int64_t *pos = n->extra; /* [numel(out)] positions in contiguous x */
    int64_t m = tt_numel(g);
    for (int64_t o = 0; o < m; o++) tt__st(gx, pos[o], tt__ld(gx, pos[o]) + tt_get(g, o));
    tl_status s = tt__acc_grad(x, gx);
    tt_free(gx);
    return s;
}

/* values (x's dtype, may be NULL) and/or indices (I32, may be NULL) of the
 * max/min along dim. */
static bool pick_dim(tt_ctx *c, tt_tensor *x, int dim, bool keepdim, bool is_max, const char *op, tt_tensor **vals,
                     tt_tensor **idx) {
    if (!tt__check_compute(x, op)) return false;
    unsigned mask;
    if (!dims_mask(x, 1, &dim, op, &mask)) return false;
    char sb[64];
    int d = dim < 0 ? dim + x->ndim : dim;
    if (x->shape[d] == 0) {
        tl_err(TL_ERR_INVALID, "train: %s: dim %d of %s is empty", op, dim, tt__shape_str(x, sb, 64));
        return false;
    }
    rplan p;
    int ondim;
    int64_t osh[TT_MAX_DIMS];
    if (!make_plan(x, mask, keepdim, &p, &ondim, osh)) return false;
    tt_tensor *o = vals ? tt__temp(c, x->dtype, ondim, osh) : NULL;
    tt_tensor *ix = idx ? tt__temp_any(c, TT_I32, ondim, osh) : NULL;
    int64_t *pos = vals ? malloc((size_t)(p.nout ? p.nout : 1) * sizeof(int64_t)) : NULL;
    if ((vals && (!o || !pos)) || (idx && !ix)) {
        free(pos);
        plan_free(&p);
        if (vals && o && !pos) tl_err(TL_ERR_NOMEM, "train: out of memory");
        return false;
    }
    for (int64_t i = 0; i < p.nout; i++) {
        int64_t b = xbase(&p, x, i), best_k = 0;
        double best = tt__ld(x, b + p.ioff[0]);
        for (int64_t k = 1; k < p.nin; k++) {
            double v = tt__ld(x, b + p.ioff[k]);
            if (beats(v, best, is_max)) {
                best = v;
                best_k = k;
            }
        }
        if (o) {
            tt__st(o, i, best);
            pos[i] = cbase(&p, i) + p.icoff[best_k];
        }
        if (ix) tt__st(ix, i, (double)best_k);
    }
    plan_free(&p);
    if (o && tt__needs_grad(c, &x, 1)) {
        tt_node *n = tt__record(c, op, bw_pick, o, &x, 1);
        if (!n) {
            free(pos);
            return false;
        }
        n->extra = pos;
        pos = NULL;
    }
    free(pos);
    if (vals) *vals = o;
    if (idx) *idx = ix;
    return true;
}

tt_tensor *tt_max_dim(tt_ctx *c, tt_tensor *x, int dim, bool keepdim, tt_tensor **indices) {
    TT__HOST_ONLY("max_dim", NULL, x);
    tt_tensor *v = NULL;
    if (indices) *indices = NULL;
    return pick_dim(c, x, dim, keepdim, true, "max", &v, indices) ? v : NULL;
}
tt_tensor *tt_min_dim(tt_ctx *c, tt_tensor *x, int dim, bool keepdim, tt_tensor **indices) {
    TT__HOST_ONLY("min_dim", NULL, x);
    tt_tensor *v = NULL;
    if (indices) *indices = NULL;
    return pick_dim(c, x, dim, keepdim, false, "min", &v, indices) ? v : NULL;
}
tt_tensor *tt_argmax(tt_ctx *c, tt_tensor *x, int dim, bool keepdim) {
    TT__HOST_ONLY("argmax", NULL, x);
    tt_tensor *i = NULL;
    return pick_dim(c, x, dim, keepdim, true, "argmax", NULL, &i) ? i : NULL;
}
tt_tensor *tt_argmin(tt_ctx *c, tt_tensor *x, int dim, bool keepdim) {
    TT__HOST_ONLY("argmin", NULL, x);
    tt_tensor *i = NULL;
    return pick_dim(c, x, dim, keepdim, false, "argmin", NULL, &i) ? i : NULL;
}

/* amax/amin backward: g split evenly among the elements equal to the result. */
static tl_status bw_aext(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    (void)c;
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *x = n->in[0];
    double r = tt_get(n->out, 0), go = tt_get(g, 0);
    int64_t m = tt_numel(x), cnt = 0;
    bool nan = r != r;
    for (int64_t i = 0; i < m; i++) {
        double v = tt_get(x, i);
        cnt += nan ? v != v : v == r;
    }
    tt_tensor *gx = tt_new(x->dtype, x->ndim, x->shape);
    if (!gx) return TL_ERR_NOMEM;
    for (int64_t i = 0; i < m; i++) {
        double v = tt_get(x, i);
        if (nan ? v != v : v == r) tt__st(gx, i, go / (double)cnt);
    }
    tl_status s = tt__acc_grad(x, gx);
    tt_free(gx);
    return s;
}

static tt_tensor *aext(tt_ctx *c, tt_tensor *x, bool is_max) {
    const char *op = is_max ? "amax" : "amin";
    if (!tt__check_compute(x, op)) return NULL;
    int64_t m = tt_numel(x), one = 1;
    if (m == 0) {
        tl_err(TL_ERR_INVALID, "train: %s of an empty tensor", op);
        return NULL;
    }
    tt_tensor *o = tt__temp(c, x->dtype, 1, &one);
    if (!o) return NULL;
    double best = tt_get(x, 0);
    for (int64_t i = 1; i < m; i++) {
        double v = tt_get(x, i);
        if (beats(v, best, is_max)) best = v;
    }
    tt__st(o, 0, best);
    if (tt__needs_grad(c, &x, 1) && !tt__record(c, op, bw_aext, o, &x, 1)) return NULL;
    return o;
}

tt_tensor *tt_amax(tt_ctx *c, tt_tensor *x) { return aext(c, x, true); }
tt_tensor *tt_amin(tt_ctx *c, tt_tensor *x) { return aext(c, x, false); }
