/* train/ops_index: joins (cat, stack), splits into views (split, chunk) and
 * indexed reads (gather, index_select) with their backward: cat hands each
 * input its slice of the gradient; gather/index_select scatter-add it back.
 * Owns: nothing. Calls: train internals. */
#include <stdio.h>
#include <stdlib.h>

#include "train/tt_internal.h"

/* ---- cat / stack ---------------------------------------------------------- */
static tl_status bw_cat(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    (void)c;
    int dim = (int)n->i[0];
    int64_t start = 0;
    for (int k = 0; k < n->n_in; k++) {
        tt_tensor *x = n->in[k];
        if (tt__need(n, k)) {
            tt_tensor v = *g; /* this input's slice of g (a strided view) */
            v.shape[dim] = x->shape[dim];
            v.offset = g->offset + start * g->stride[dim];
            tl_status s = tt__acc_grad(x, &v);
            if (s != TL_OK) return s;
        }
        start += x->shape[dim];
    }
    return TL_OK;
}

/* cat of at most TT_NODE_MAX_IN inputs (one tape node). */
static tt_tensor *cat_small(tt_ctx *c, int n, tt_tensor *const *xs, int d) {
    int64_t sh[TT_MAX_DIMS];
    memcpy(sh, xs[0]->shape, sizeof sh);
    sh[d] = 0;
    for (int k = 0; k < n; k++) sh[d] += xs[k]->shape[d];
    tt_tensor *o = tt__temp(c, xs[0]->dtype, xs[0]->ndim, sh);
    if (!o) return NULL;
    int64_t start = 0;
    for (int k = 0; k < n; k++) {
        tt_tensor v = *o; /* the output's slice for input k */
        v.shape[d] = xs[k]->shape[d];
        v.offset = start * o->stride[d];
        if (xs[k]->shape[d]) tt_copy_(&v, xs[k]);
        start += xs[k]->shape[d];
    }
    if (tt__needs_grad(c, xs, n)) {
        tt_node *nd = tt__record(c, "cat", bw_cat, o, xs, n);
        if (!nd) return NULL;
        nd->i[0] = d;
    }
    return o;
}

tt_tensor *tt_cat(tt_ctx *c, int n, tt_tensor *const *xs, int dim) {
    for (int i_ = 0; i_ < n; i_++) TT__HOST_ONLY("cat", NULL, xs[i_]);
    if (n < 1 || !xs) {
        tl_err(TL_ERR_INVALID, "train: cat of %d tensors", n);
        return NULL;
    }
    if (!tt__check(xs, n, "cat") || !tt__check_compute(xs[0], "cat")) return NULL;
    const tt_tensor *x0 = xs[0];
    int d = dim < 0 ? dim + x0->ndim : dim;
    char s0[64], sk[64];
    if (d < 0 || d >= x0->ndim) {
        tl_err(TL_ERR_INVALID, "train: cat: dim %d out of range for %s", dim, tt__shape_str(x0, s0, 64));
        return NULL;
    }
    for (int k = 1; k < n; k++) {
        bool ok = xs[k]->ndim == x0->ndim;
        for (int i = 0; ok && i < x0->ndim; i++) ok = i == d || xs[k]->shape[i] == x0->shape[i];
        if (!ok) {
            tl_err(TL_ERR_INVALID, "train: cat along dim %d: tensor %d is %s, tensor 0 is %s", dim, k,
                   tt__shape_str(xs[k], sk, 64), tt__shape_str(x0, s0, 64));
            return NULL;
        }
    }
    if (n <= TT_NODE_MAX_IN) return cat_small(c, n, xs, d);
    /* more inputs than a node holds: cat groups, then the groups */
    int ng = (n + TT_NODE_MAX_IN - 1) / TT_NODE_MAX_IN;
    tt_tensor **parts = malloc((size_t)ng * sizeof *parts);
    if (!parts) {
        tl_err(TL_ERR_NOMEM, "train: out of memory");
        return NULL;
    }
    for (int g = 0; g < ng; g++) {
        int k0 = g * TT_NODE_MAX_IN, m = n - k0 < TT_NODE_MAX_IN ? n - k0 : TT_NODE_MAX_IN;
        parts[g] = cat_small(c, m, xs + k0, d);
        if (!parts[g]) {
            free(parts);
            return NULL;
        }
    }
    tt_tensor *o = tt_cat(c, ng, parts, d);
    free(parts);
    return o;
}

tt_tensor *tt_stack(tt_ctx *c, int n, tt_tensor *const *xs, int dim) {
    for (int i_ = 0; i_ < n; i_++) TT__HOST_ONLY("stack", NULL, xs[i_]);
    if (n < 1 || !xs) {
        tl_err(TL_ERR_INVALID, "train: stack of %d tensors", n);
        return NULL;
    }
    if (!tt__check(xs, n, "stack") || !tt__check_compute(xs[0], "stack")) return NULL;
    char s0[64], sk[64];
    int nd = xs[0]->ndim + 1, d = dim < 0 ? dim + nd : dim;
    if (d < 0 || d >= nd || nd > TT_MAX_DIMS) {
        tl_err(TL_ERR_INVALID, "train: stack: dim %d out of range for %s inputs", dim, tt__shape_str(xs[0], s0, 64));
        return NULL;
    }
    for (int k = 1; k < n; k++) {
        bool ok = xs[k]->ndim == xs[0]->ndim;
        for (int i = 0; ok && i < xs[0]->ndim; i++) ok = xs[k]->shape[i] == xs[0]->shape[i];
        if (!ok) {
            tl_err(TL_ERR_INVALID, "train: stack: tensor %d is %s, tensor 0 is %s", k, tt__shape_str(xs[k], sk, 64),
                   tt__shape_str(xs[0], s0, 64));
            return NULL;
        }
    }
    tt_tensor **u = malloc((size_t)n * sizeof *u);
    if (!u) {
        tl_err(TL_ERR_NOMEM, "train: out of memory");
        return NULL;
    }
    for (int k = 0; k < n; k++)
        if (!(u[k] = tt_unsqueeze(c, xs[k], d))) {
            free(u);
            return NULL;
        }
    tt_tensor *o = tt_cat(c, n, u, d);
    free(u);
    return o;
}

/* ---- split / chunk ----------------------------------------------------------- */
int tt_split(tt_ctx *c, tt_tensor *x, int64_t size, int dim, tt_tensor **outs, int max_outs) {
    if (!x) return -1;
    char sb[64];
    int d = dim < 0 ? dim + x->ndim : dim;
    if (d < 0 || d >= x->ndim || size < 1) {
        tl_err(TL_ERR_INVALID, "train: split: size %lld along dim %d of %s", (long long)size, dim,
               tt__shape_str(x, sb, 64));
        return -1;
    }
    int64_t L = x->shape[d], cnt = L ? (L + size - 1) / size : 1; /* an empty dim gives one empty piece */
    if (cnt > max_outs) {
        tl_err(TL_ERR_INVALID, "train: split of %s into pieces of %lld along dim %d gives %lld, room for %d",
               tt__shape_str(x, sb, 64), (long long)size, dim, (long long)cnt, max_outs);
        return -1;
    }
    for (int64_t k = 0; k < cnt; k++) {
        int64_t st = k * size, len = L - st < size ? L - st : size;
        if (!(outs[k] = tt_narrow(c, x, d, st, len))) return -1;
    }
    return (int)cnt;
}

int tt_chunk(tt_ctx *c, tt_tensor *x, int chunks, int dim, tt_tensor **outs, int max_outs) {
    if (!x) return -1;
    if (chunks < 1) {
        tl_err(TL_ERR_INVALID, "train: chunk into %d pieces", chunks);
        return -1;
    }
    int d = dim < 0 ? dim + x->ndim : dim;
    int64_t L = (d >= 0 && d < x->ndim) ? x->shape[d] : 1;
    int64_t size = (L + chunks - 1) / chunks;
    return tt_split(c, x, size < 1 ? 1 : size, dim, outs, max_outs);
}

/* ---- gather / index_select ------------------------------------------------- */
/* out[k] = x[pos[k]] (pos: flat row-major positions in x); backward adds
 * g[k] into gx[pos[k]]. */
static tl_status bw_take(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    (void)c;
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *x = n->in[0];
    tt_tensor *gx = tt_new(x->dtype, x->ndim, x->shape);
    if (!gx) return TL_ERR_NOMEM;
    const int64_t *pos = n->extra;
    int64_t m = tt_numel(g);
    for (int64_t k = 0; k < m; k++) tt__st(gx, pos[k], tt__ld(gx, pos[k]) + tt_get(g, k));
    tl_status s = tt__acc_grad(x, gx);
    tt_free(gx);
    return s;
}

/* The output of positions pos (malloc'd, owned by the node or freed here). */
static tt_tensor *take(tt_ctx *c, tt_tensor *x, int ondim, const int64_t *osh, int64_t *pos, const char *op) {
    tt_tensor *o = tt__temp(c, x->dtype, ondim, osh);
    if (!o) {
        free(pos);
        return NULL;
    }
    int64_t m = tt_numel(o);
    for (int64_t k = 0; k < m; k++) tt__st(o, k, tt_get(x, pos[k]));
    if (tt__needs_grad(c, &x, 1)) {
        tt_node *n = tt__record(c, op, bw_take, o, &x, 1);
        if (!n) {
            free(pos);
            return NULL;
        }
        n->extra = pos;
        return o;
    }
    free(pos);
    return o;
}

/* Integral index value i of idx within [0, lim); false + error otherwise. */
static bool index_at(const tt_tensor *idx, int64_t i, int64_t lim, const char *op, int64_t *out) {
    double v = tt_get(idx, i);
    if (v != floor(v) || v < 0 || v >= (double)lim) {
        tl_err(TL_ERR_INVALID, "train: %s: index %g at position %lld outside [0, %lld)%s", op, v, (long long)i,
               (long long)lim, v == floor(v) ? "" : " (not an integer)");
        return false;
    }
    *out = (int64_t)v;
    return true;
}

tt_tensor *tt_gather(tt_ctx *c, tt_tensor *x, int dim, tt_tensor *index) {
    TT__HOST_ONLY("gather", NULL, x, index);
    if (!x || !index || !tt__check_compute(x, "gather")) return NULL;
    char sx[64], si[64];
    int d = dim < 0 ? dim + x->ndim : dim;
    bool ok = d >= 0 && d < x->ndim && index->ndim == x->ndim;
    for (int i = 0; ok && i < x->ndim; i++) ok = i == d || index->shape[i] <= x->shape[i];
    if (!ok) {
        tl_err(TL_ERR_INVALID, "train: gather: dim %d, x %s, index %s (index needs x's ndim and sizes <= x's "
               "off dim)", dim, tt__shape_str(x, sx, 64), tt__shape_str(index, si, 64));
        return NULL;
    }
    int64_t m = tt_numel(index), cs[TT_MAX_DIMS], s = 1;
    for (int i = x->ndim - 1; i >= 0; i--) {
        cs[i] = s;
        s *= x->shape[i];
    }
    int64_t *pos = malloc((size_t)(m ? m : 1) * sizeof *pos);
    if (!pos) {
        tl_err(TL_ERR_NOMEM, "train: out of memory");
        return NULL;
    }
    for (int64_t k = 0; k < m; k++) {
        int64_t r = k, p = 0, iv;
        if (!index_at(index, k, x->shape[d], "gather", &iv)) {
            free(pos);
            return NULL;
        }
        for (int i = x->ndim - 1; i >= 0; i--) {
            int64_t ci = r % index->shape[i];
            r /= index->shape[i];
            p += (i == d ? iv : ci) * cs[i];
        }
        pos[k] = p;
    }
    return take(c, x, index->ndim, index->shape, pos, "gather");
}

static tt_tensor *index_select_vals(tt_ctx *c, tt_tensor *x, int dim, const tt_tensor *idx, const int32_t *ids,
                                    int64_t n) {
    char sx[64];
    int d = dim < 0 ? dim + x->ndim : dim;
    if (d < 0 || d >= x->ndim) {
        tl_err(TL_ERR_INVALID, "train: index_select: dim %d out of range for %s", dim, tt__shape_str(x, sx, 64));
        return NULL;
    }
    int64_t osh[TT_MAX_DIMS], cs[TT_MAX_DIMS], s = 1;
    for (int i = x->ndim - 1; i >= 0; i--) {
        cs[i] = s;
        s *= x->shape[i];
        osh[i] = i == d ? n : x->shape[i];
    }
    int64_t *sel = malloc((size_t)(n ? n : 1) * sizeof *sel);
    if (!sel) {
        tl_err(TL_ERR_NOMEM, "train: out of memory");
        return NULL;
    }
    for (int64_t k = 0; k < n; k++) {
        if (idx) {
            if (!index_at(idx, k, x->shape[d], "index_select", &sel[k])) {
                free(sel);
                return NULL;
            }
        } else if (ids[k] < 0 || ids[k] >= x->shape[d]) {
            tl_err(TL_ERR_INVALID, "train: index_select: index %d at position %lld outside [0, %lld)", ids[k],
                   (long long)k, (long long)x->shape[d]);
            free(sel);
            return NULL;
        } else {
            sel[k] = ids[k];
        }
    }
    int64_t m = 1;
    for (int i = 0; i < x->ndim; i++) m *= osh[i];
    int64_t *pos = malloc((size_t)(m ? m : 1) * sizeof *pos);
    if (!pos) {
        free(sel);
        tl_err(TL_ERR_NOMEM, "train: out of memory");
        return NULL;
    }
    for (int64_t k = 0; k < m; k++) {
        int64_t r = k, p = 0;
        for (int i = x->ndim - 1; i >= 0; i--) {
            int64_t ci = r % osh[i];
            r /= osh[i];
            p += (i == d ? sel[ci] : ci) * cs[i];
        }
        pos[k] = p;
    }
    free(sel);
    return take(c, x, x->ndim, osh, pos, "index_select");
}

tt_tensor *tt_index_select(tt_ctx *c, tt_tensor *x, int dim, tt_tensor *index) {
    TT__HOST_ONLY("index_select", NULL, x, index);
    if (!x || !index || !tt__check_compute(x, "index_select")) return NULL;
    if (index->ndim != 1) {
        char si[64];
        tl_err(TL_ERR_INVALID, "train: index_select: index must be 1-d, got %s", tt__shape_str(index, si, 64));
        return NULL;
    }
    return index_select_vals(c, x, dim, index, NULL, index->shape[0]);
}

tt_tensor *tt_index_select_ids(tt_ctx *c, tt_tensor *x, int dim, const int32_t *ids, int64_t n) {
    TT__HOST_ONLY("index_select_ids", NULL, x);
    if (!x || !tt__check_compute(x, "index_select")) return NULL;
    if (n < 0 || (n > 0 && !ids)) {
        tl_err(TL_ERR_INVALID, "train: index_select: %lld ids", (long long)n);
        return NULL;
    }
    return index_select_vals(c, x, dim, NULL, ids, n);
}
