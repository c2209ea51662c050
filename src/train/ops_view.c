/* train/ops_view: views without copies (reshape, permute, transpose, narrow,
 * expand, unsqueeze, squeeze, flatten, strided slice) and contiguous(), each recorded with a backward that
 * maps the output gradient back onto the input's layout.
 * Owns: nothing. Calls: train internals. */
#include <string.h>

#include "train/tt_internal.h"

static int norm_dim(int d, int ndim) { return d < 0 ? d + ndim : d; }

/* dst (strided) += src (strided, same shape). */
#define ADDINTO4(T)                                                                      \
    do {                                                                                 \
        T *d = (T *)dst->st->data;                                                       \
        const T *s = (const T *)src->st->data;                                           \
        for (int64_t i0 = 0; i0 < sh[0]; i0++)                                           \
            for (int64_t i1 = 0; i1 < sh[1]; i1++)                                       \
                for (int64_t i2 = 0; i2 < sh[2]; i2++) {                                 \
                    int64_t od = dst->offset + i0 * sd[0] + i1 * sd[1] + i2 * sd[2];     \
                    int64_t os = src->offset + i0 * ss[0] + i1 * ss[1] + i2 * ss[2];     \
                    for (int64_t i3 = 0; i3 < sh[3]; i3++) d[od + i3 * sd[3]] += s[os + i3 * ss[3]]; \
                }                                                                        \
    } while (0)

static tl_status add_into(tt_tensor *dst, const tt_tensor *src) {
    if (tt__dev(dst) != TT_CPU || tt__dev(src) != TT_CPU) return tt__dev_copy(dst, src, true);
    int64_t sh[4], sd[4], ss[4];
    tt__shape4(dst->ndim, dst->shape, sh);
    tt__bstrides4(dst, dst->ndim, dst->shape, sd);
    tt__bstrides4(src, dst->ndim, dst->shape, ss);
    if (dst->dtype == TT_F32) ADDINTO4(float);
    else ADDINTO4(double);
    return TL_OK;
}

static tl_status bw_passthrough(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    return tt__need(n, 0) ? tt__acc_grad(n->in[0], g) : TL_OK;
}

tt_tensor *tt_contiguous(tt_ctx *c, tt_tensor *x) {
    if (!x) return NULL;
    if (tt_is_contiguous(x)) return x;
    if (!tt__grad_dtype_ok(c, x, "contiguous")) return NULL;
    tt_tensor *o = tt__temp_on(c, tt__dev(x), x->dtype, x->ndim, x->shape); /* storage dtypes too: a copy */
    if (!o) return NULL;
    if (tt__dev(x) != TT_CPU) {
        if (tt__dev_copy(o, x, false) != TL_OK) return NULL;
    } else {
        tt_copy_(o, x);
    }
    if (tt__needs_grad(c, &x, 1) && !tt__record(c, "contiguous", bw_passthrough, o, &x, 1)) return NULL;
    return o;
}

/* Strides that let shape ns view x's memory, if any. Walk x's dims from the
 * innermost, grouping runs of dims that are contiguous with each other
 * (stride[d-1] == stride[d] * shape[d]); each run must be covered exactly by
 * a run of new dims, which then get strides inside that run. */
static bool view_strides(const tt_tensor *x, int nn, const int64_t *ns, int64_t *nst) {
    if (tt_numel(x) == 0) return false;
    int nd = nn - 1;
    int64_t base = x->ndim ? x->stride[x->ndim - 1] : 1, run = 1, vrun = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        run *= x->shape[d];
        bool run_ends = d == 0 || (x->shape[d - 1] != 1 && x->stride[d - 1] != run * base);
        if (!run_ends) continue;
        while (nd >= 0 && (vrun < run || ns[nd] == 1)) {
            nst[nd] = vrun * base;
            vrun *= ns[nd];
            nd--;
        }
        if (vrun != run) return false;
        if (d > 0) {
            base = x->stride[d - 1];
            run = 1;
            vrun = 1;
        }
    }
    while (nd >= 0 && ns[nd] == 1) nst[nd--] = 1;
    return nd < 0;
}

tt_tensor *tt_reshape(tt_ctx *c, tt_tensor *x, int ndim, const int64_t *shape) {
    if (!x || !tt__grad_dtype_ok(c, x, "reshape")) return NULL;
    if (ndim < 1 || ndim > TT_MAX_DIMS) {
        tl_err(TL_ERR_INVALID, "train: reshape to %d dims (1..%d)", ndim, TT_MAX_DIMS);
        return NULL;
    }
    int64_t sh[TT_MAX_DIMS], known = 1;
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        sh[i] = shape[i];
        if (sh[i] == -1) {
            if (infer >= 0) {
                tl_err(TL_ERR_INVALID, "train: reshape: more than one -1");
                return NULL;
            }
            infer = i;
        } else {
            known *= sh[i];
        }
    }
    int64_t n = tt_numel(x);
    if (infer >= 0) sh[infer] = known ? n / known : 0;
    int64_t m = 1;
    for (int i = 0; i < ndim; i++) m *= sh[i];
    if (m != n) {
        tl_err(TL_ERR_INVALID, "train: reshape of %lld elements to a shape of %lld", (long long)n, (long long)m);
        return NULL;
    }
    int64_t st[TT_MAX_DIMS];
    tt_tensor *src = x;
    if (!view_strides(x, ndim, sh, st)) { /* not expressible as a view: copy first */
        src = tt_contiguous(c, x);
        if (!src) return NULL;
        int64_t s = 1;
        for (int i = ndim - 1; i >= 0; i--) {
            st[i] = s;
            s *= sh[i];
        }
    }
    tt_tensor *o = tt__view(c, src, ndim, sh, st, src->offset);
    if (!o) return NULL;
    if (tt__needs_grad(c, &src, 1) && !tt__record(c, "reshape", bw_passthrough, o, &src, 1)) return NULL;
    return o;
}

tt_tensor *tt_unsqueeze(tt_ctx *c, tt_tensor *x, int dim) {
    if (!x) return NULL;
    dim = norm_dim(dim, x->ndim + 1);
    if (dim < 0 || dim > x->ndim || x->ndim >= TT_MAX_DIMS) {
        tl_err(TL_ERR_INVALID, "train: unsqueeze dim %d of a %d-d tensor", dim, x->ndim);
        return NULL;
    }
    int64_t sh[TT_MAX_DIMS];
    for (int i = 0, j = 0; i <= x->ndim; i++) sh[i] = i == dim ? 1 : x->shape[j++];
    return tt_reshape(c, x, x->ndim + 1, sh);
}

static tl_status bw_permute(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *in = n->in[0];
    tt_tensor v = *g; /* g viewed in the input's dim order */
    for (int j = 0; j < in->ndim; j++) {
        int p = (int)n->i[j];
        v.shape[p] = g->shape[j];
        v.stride[p] = g->stride[j];
    }
    return tt__acc_grad(in, &v);
}

tt_tensor *tt_permute(tt_ctx *c, tt_tensor *x, const int *perm) {
    if (!x || !tt__grad_dtype_ok(c, x, "permute")) return NULL;
    int64_t sh[TT_MAX_DIMS], st[TT_MAX_DIMS];
    bool seen[TT_MAX_DIMS] = {0};
    for (int j = 0; j < x->ndim; j++) {
        int p = perm[j];
        if (p < 0 || p >= x->ndim || seen[p]) {
            tl_err(TL_ERR_INVALID, "train: permute: bad permutation");
            return NULL;
        }
        seen[p] = true;
        sh[j] = x->shape[p];
        st[j] = x->stride[p];
    }
    tt_tensor *o = tt__view(c, x, x->ndim, sh, st, x->offset);
    if (!o) return NULL;
    if (tt__needs_grad(c, &x, 1)) {
        tt_node *n = tt__record(c, "permute", bw_permute, o, &x, 1);
        if (!n) return NULL;
        for (int j = 0; j < x->ndim; j++) n->i[j] = perm[j];
    }
    return o;
}

tt_tensor *tt_transpose(tt_ctx *c, tt_tensor *x, int d0, int d1) {
    if (!x) return NULL;
    d0 = norm_dim(d0, x->ndim);
    d1 = norm_dim(d1, x->ndim);
    if (d0 < 0 || d1 < 0 || d0 >= x->ndim || d1 >= x->ndim) {
        tl_err(TL_ERR_INVALID, "train: transpose dims %d,%d of a %d-d tensor", d0, d1, x->ndim);
        return NULL;
    }
    int perm[TT_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) perm[i] = i;
    perm[d0] = d1;
    perm[d1] = d0;
    return tt_permute(c, x, perm);
}

static tl_status bw_narrow(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *in = n->in[0];
    tt_tensor *gb = tt__grad_buf(in);
    if (!gb) return TL_ERR_NOMEM;
    tt_tensor v = *gb;
    int dim = (int)n->i[0];
    v.offset = gb->offset + n->i[1] * gb->stride[dim];
    v.shape[dim] = n->i[2];
    return add_into(&v, g);
}

tt_tensor *tt_narrow(tt_ctx *c, tt_tensor *x, int dim, int64_t start, int64_t len) {
    if (!x || !tt__grad_dtype_ok(c, x, "narrow")) return NULL;
    dim = norm_dim(dim, x->ndim);
    if (dim < 0 || dim >= x->ndim || start < 0 || len < 0 || start + len > x->shape[dim]) {
        tl_err(TL_ERR_INVALID, "train: narrow dim %d [%lld, +%lld) out of range", dim, (long long)start,
               (long long)len);
        return NULL;
    }
    int64_t sh[TT_MAX_DIMS];
    memcpy(sh, x->shape, sizeof sh);
    sh[dim] = len;
    tt_tensor *o = tt__view(c, x, x->ndim, sh, x->stride, x->offset + start * x->stride[dim]);
    if (!o) return NULL;
    if (tt__needs_grad(c, &x, 1)) {
        tt_node *n = tt__record(c, "narrow", bw_narrow, o, &x, 1);
        if (!n) return NULL;
        n->i[0] = dim;
        n->i[1] = start;
        n->i[2] = len;
    }
    return o;
}

static tl_status bw_expand(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *r = tt__reduce_to(g, n->in[0]->ndim, n->in[0]->shape);
    tl_status s = tt__acc_grad(n->in[0], r);
    tt_free(r);
    return s;
}

tt_tensor *tt_expand(tt_ctx *c, tt_tensor *x, int ndim, const int64_t *shape) {
    TT__HOST_ONLY("expand", NULL, x);
    if (!x || !tt__grad_dtype_ok(c, x, "expand")) return NULL;
    if (ndim < x->ndim || ndim > TT_MAX_DIMS) {
        tl_err(TL_ERR_INVALID, "train: expand of a %d-d tensor to %d dims", x->ndim, ndim);
        return NULL;
    }
    int64_t sh[TT_MAX_DIMS], st[TT_MAX_DIMS];
    for (int j = 0; j < ndim; j++) {
        int i = j - (ndim - x->ndim);
        int64_t xs = i >= 0 ? x->shape[i] : 1;
        sh[j] = shape[j] == -1 ? xs : shape[j];
        if (i >= 0 && xs != 1 && xs != sh[j]) {
            tl_err(TL_ERR_INVALID, "train: expand: dim %d of size %lld cannot become %lld", j, (long long)xs,
                   (long long)sh[j]);
            return NULL;
        }
        st[j] = (i >= 0 && xs == sh[j]) ? x->stride[i] : 0;
    }
    tt_tensor *o = tt__view(c, x, ndim, sh, st, x->offset);
    if (!o) return NULL;
    if (tt__needs_grad(c, &x, 1) && !tt__record(c, "expand", bw_expand, o, &x, 1)) return NULL;
    return o;
}

tt_tensor *tt_squeeze(tt_ctx *c, tt_tensor *x, int dim) {
    if (!x) return NULL;
    int d = norm_dim(dim, x->ndim);
    if (d < 0 || d >= x->ndim) {
        tl_err(TL_ERR_INVALID, "train: squeeze dim %d of a %d-d tensor", dim, x->ndim);
        return NULL;
    }
    if (x->shape[d] != 1 || x->ndim == 1) return x; /* as PyTorch: nothing to drop (no 0-d tensors here) */
    int64_t sh[TT_MAX_DIMS];
    for (int i = 0, j = 0; i < x->ndim; i++)
        if (i != d) sh[j++] = x->shape[i];
    return tt_reshape(c, x, x->ndim - 1, sh);
}

tt_tensor *tt_squeeze_all(tt_ctx *c, tt_tensor *x) {
    if (!x) return NULL;
    int64_t sh[TT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < x->ndim; i++)
        if (x->shape[i] != 1) sh[n++] = x->shape[i];
    if (n == x->ndim) return x;
    if (n == 0) sh[n++] = 1; /* all ones: [1] */
    return tt_reshape(c, x, n, sh);
}

tt_tensor *tt_flatten(tt_ctx *c, tt_tensor *x, int start, int end) {
    if (!x) return NULL;
    int s = norm_dim(start, x->ndim), e = norm_dim(end, x->ndim);
    if (s < 0 || e < 0 || s >= x->ndim || e >= x->ndim || s > e) {
        tl_err(TL_ERR_INVALID, "train: flatten dims %d..%d of a %d-d tensor", start, end, x->ndim);
        return NULL;
    }
    int64_t sh[TT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i <= s || i > e) sh[n++] = x->shape[i];
        else sh[n - 1] *= x->shape[i];
    }
    return tt_reshape(c, x, n, sh);
}

static tl_status bw_slice(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *in = n->in[0];
    tt_tensor *gb = tt__grad_buf(in);
    if (!gb) return TL_ERR_NOMEM;
    tt_tensor v = *gb; /* the sliced positions of the input's gradient */
    int dim = (int)n->i[0];
    v.offset = gb->offset + n->i[1] * gb->stride[dim];
    v.shape[dim] = n->i[2];
    v.stride[dim] = gb->stride[dim] * n->i[3];
    return add_into(&v, g);
}

tt_tensor *tt_slice(tt_ctx *c, tt_tensor *x, int dim, int64_t start, int64_t end, int64_t step) {
    if (!x || !tt__grad_dtype_ok(c, x, "slice")) return NULL;
    int d = norm_dim(dim, x->ndim);
    if (d < 0 || d >= x->ndim || step < 1) {
        tl_err(TL_ERR_INVALID, "train: slice dim %d step %lld of a %d-d tensor (step must be >= 1)", dim,
               (long long)step, x->ndim);
        return NULL;
    }
    int64_t L = x->shape[d];
    /* Python slice rules: negative counts from the end, then clamp */
    if (start < 0) start += L;
    if (end < 0) end += L;
    start = start < 0 ? 0 : start > L ? L : start;
    end = end < start ? start : end > L ? L : end;
    int64_t len = (end - start + step - 1) / step;
    int64_t sh[TT_MAX_DIMS], st[TT_MAX_DIMS];
    memcpy(sh, x->shape, sizeof sh);
    memcpy(st, x->stride, sizeof st);
    sh[d] = len;
    st[d] = x->stride[d] * step;
    tt_tensor *o = tt__view(c, x, x->ndim, sh, st, x->offset + (len ? start * x->stride[d] : 0));
    if (!o) return NULL;
    if (tt__needs_grad(c, &x, 1)) {
        tt_node *n = tt__record(c, "slice", bw_slice, o, &x, 1);
        if (!n) return NULL;
        n->i[0] = d;
        n->i[1] = start;
        n->i[2] = len;
        n->i[3] = step;
    }
    return o;
}
