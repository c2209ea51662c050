/* train/ops_mm: matmul (batched, broadcasting) and linear (x W^T + b), the
 * ops that carry nearly all of a training step's FLOPs, with backward.
 * Linear writes dW and dx straight into the grad buffers through the gemm's
 * accumulate flag: no temporaries for the biggest gradients.
 * Owns: nothing. Calls: train/gemm, train internals. */
#include <string.h>

#include "train/tt_internal.h"

static void gemm_any(tt_ctx *c, tt_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, int64_t rsa,
                     int64_t csa, const void *B, int64_t rsb, int64_t csb, void *C, int64_t ldc, bool acc) {
    if (dt == TT_F32)
        tt_gemm_f32(c ? c->tp : NULL, M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, acc);
    else
        tt_gemm_f64(M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, acc);
}

/* Batch layout shared by forward and backward. */
typedef struct mm_shape {
    int nb;                    /* batch dims of the output (0..2) */
    int64_t bsh[2];            /* output batch sizes */
    int64_t sa[2], sb[2];      /* batch strides of a and b (0 where broadcast) */
    int64_t M, K, N;
} mm_shape;

static bool mm_plan(const tt_tensor *a, const tt_tensor *b, mm_shape *p, int *ondim, int64_t *oshape) {
    if (a->ndim < 2 || b->ndim < 2) return false;
    p->M = a->shape[a->ndim - 2];
    p->K = a->shape[a->ndim - 1];
    p->N = b->shape[b->ndim - 1];
    if (b->shape[b->ndim - 2] != p->K) return false;
    int na = a->ndim - 2, nbd = b->ndim - 2;
    p->nb = na > nbd ? na : nbd;
    for (int i = 0; i < p->nb; i++) {
        int ia = na - p->nb + i, ib = nbd - p->nb + i;
        int64_t xa = ia >= 0 ? a->shape[ia] : 1, xb = ib >= 0 ? b->shape[ib] : 1;
        if (xa != xb && xa != 1 && xb != 1) return false;
        p->bsh[i] = xa == 1 ? xb : xa;
        p->sa[i] = (ia >= 0 && xa != 1) ? a->stride[ia] : 0;
        p->sb[i] = (ib >= 0 && xb != 1) ? b->stride[ib] : 0;
    }
    *ondim = p->nb + 2;
    for (int i = 0; i < p->nb; i++) oshape[i] = p->bsh[i];
    oshape[p->nb] = p->M;
    oshape[p->nb + 1] = p->N;
    return true;
}

static int64_t mm_nbatch(const mm_shape *p) {
    int64_t n = 1;
    for (int i = 0; i < p->nb; i++) n *= p->bsh[i];
    return n;
}

static void mm_batch_off(const mm_shape *p, int64_t bi, int64_t *oa, int64_t *ob) {
    *oa = *ob = 0;
    for (int i = p->nb - 1; i >= 0; i--) {
        int64_t k = bi % p->bsh[i];
        bi /= p->bsh[i];
        *oa += k * p->sa[i];
        *ob += k * p->sb[i];
    }
}

static tl_status bw_matmul(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    tt_tensor *a = n->in[0], *b = n->in[1];
    mm_shape p;
    int ondim;
    int64_t oshape[TT_MAX_DIMS];
    mm_plan(a, b, &p, &ondim, oshape);
    size_t es = tt__esize(a->dtype);
    int64_t nbat = mm_nbatch(&p);
    const char *G = tt_data(g), *A = tt_data(a), *B = tt_data(b);
    int64_t ars = a->stride[a->ndim - 2], acs = a->stride[a->ndim - 1];
    int64_t brs = b->stride[b->ndim - 2], bcs = b->stride[b->ndim - 1];
    tl_status s = TL_OK;
    if (tt__need(n, 0)) { /* ga[bi] = g[bi] @ b[bi]^T, full batch shape then reduced */
        int64_t sh[TT_MAX_DIMS];
        memcpy(sh, oshape, sizeof sh);
        sh[p.nb + 1] = p.K;
        tt_tensor *ga = tt_new(a->dtype, ondim, sh);
        if (!ga) return TL_ERR_NOMEM;
        for (int64_t bi = 0; bi < nbat; bi++) {
            int64_t oa, ob;
            mm_batch_off(&p, bi, &oa, &ob);
            gemm_any(c, a->dtype, p.M, p.K, p.N, G + (size_t)(bi * p.M * p.N) * es, p.N, 1, B + (size_t)ob * es,
                     bcs, brs, (char *)tt_data(ga) + (size_t)(bi * p.M * p.K) * es, p.K, false);
        }
        tt_tensor *r = ga;
        if (ga->ndim != a->ndim || nbat != (a->ndim > 2 ? tt_numel(a) / (p.M * p.K) : 1)) {
            r = tt__reduce_to(ga, a->ndim, a->shape);
            tt_free(ga);
        }
        s = tt__acc_grad(a, r);
        tt_free(r);
        if (s != TL_OK) return s;
    }
    if (tt__need(n, 1)) { /* gb[bi] = a[bi]^T @ g[bi] */
        int64_t sh[TT_MAX_DIMS];
        memcpy(sh, oshape, sizeof sh);
        sh[p.nb] = p.K;
        tt_tensor *gb = tt_new(b->dtype, ondim, sh);
        if (!gb) return TL_ERR_NOMEM;
        for (int64_t bi = 0; bi < nbat; bi++) {
            int64_t oa, ob;
            mm_batch_off(&p, bi, &oa, &ob);
            gemm_any(c, a->dtype, p.K, p.N, p.M, A + (size_t)oa * es, acs, ars, G + (size_t)(bi * p.M * p.N) * es,
                     p.N, 1, (char *)tt_data(gb) + (size_t)(bi * p.K * p.N) * es, p.N, false);
        }
        tt_tensor *r = gb;
        if (gb->ndim != b->ndim || nbat != (b->ndim > 2 ? tt_numel(b) / (p.K * p.N) : 1)) {
            r = tt__reduce_to(gb, b->ndim, b->shape);
            tt_free(gb);
        }
        s = tt__acc_grad(b, r);
        tt_free(r);
    }
    return s;
}

tt_tensor *tt_matmul(tt_ctx *c, tt_tensor *a, tt_tensor *b) {
    TT__HOST_ONLY("matmul", NULL, a, b);
    tt_tensor *in[2] = {a, b};
    if (!tt__check(in, 2, "matmul")) return NULL;
    mm_shape p;
    int ondim;
    int64_t oshape[TT_MAX_DIMS];
    if (!mm_plan(a, b, &p, &ondim, oshape)) {
        tl_err(TL_ERR_INVALID, "train: matmul: shapes [..%lld x %lld] @ [..%lld x %lld] do not fit",
               (long long)a->shape[a->ndim > 1 ? a->ndim - 2 : 0], (long long)a->shape[a->ndim - 1],
               (long long)b->shape[b->ndim > 1 ? b->ndim - 2 : 0], (long long)b->shape[b->ndim - 1]);
        return NULL;
    }
    tt_tensor *o = tt__temp(c, a->dtype, ondim, oshape);
    if (!o) return NULL;
    size_t es = tt__esize(a->dtype);
    int64_t nbat = mm_nbatch(&p);
    for (int64_t bi = 0; bi < nbat; bi++) {
        int64_t oa, ob;
        mm_batch_off(&p, bi, &oa, &ob);
        gemm_any(c, a->dtype, p.M, p.N, p.K, (const char *)tt_data(a) + (size_t)oa * es, a->stride[a->ndim - 2],
                 a->stride[a->ndim - 1], (const char *)tt_data(b) + (size_t)ob * es, b->stride[b->ndim - 2],
                 b->stride[b->ndim - 1], (char *)tt_data(o) + (size_t)(bi * p.M * p.N) * es, p.N, false);
    }
    if (tt__needs_grad(c, in, 2) && !tt__record(c, "matmul", bw_matmul, o, in, 2)) return NULL;
    return o;
}

/* ---- linear -------------------------------------------------------------- */
/* y [rows, out] += b [out]. Blocks of 8 (and restrict) let -O2 vectorise:
 * its cheap cost model takes no loop that needs a runtime alias check or a
 * remainder. */
static void bias_add_f32(float *restrict y, const float *restrict b, int64_t rows, int64_t out) {
    for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * out;
        int64_t j = 0;
        for (; j + 8 <= out; j += 8)
            for (int k = 0; k < 8; k++) yr[j + k] += b[j + k];
        for (; j < out; j++) yr[j] += b[j];
    }
}

/* gb [out] += sum over rows of g [rows, out], row by row */
static void bias_grad_f32(float *restrict gb, const float *restrict g, int64_t rows, int64_t out) {
    for (int64_t r = 0; r < rows; r++) {
        const float *gr = g + r * out;
        int64_t o = 0;
        for (; o + 8 <= out; o += 8)
            for (int k = 0; k < 8; k++) gb[o + k] += gr[o + k];
        for (; o < out; o++) gb[o] += gr[o];
    }
}

static tl_status bw_linear(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    tt_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int64_t in = w->shape[1], out = w->shape[0], rows = tt_numel(x) / in;
    if (tt__need(n, 0)) { /* dx[rows, in] (+)= g[rows, out] @ W[out, in] */
        bool fresh;
        tt_tensor *gx = tt__grad_buf_for_write(x, &fresh);
        if (!gx) return TL_ERR_NOMEM;
        gemm_any(c, x->dtype, rows, in, out, tt_data(g), out, 1, tt_data(w), in, 1, tt_data(gx), in, !fresh);
    }
    if (tt__need(n, 1)) { /* dW[out, in] += g^T @ x */
        tt_tensor *gw = tt__grad_buf(w);
        if (!gw) return TL_ERR_NOMEM;
        if (!tt_is_contiguous(w)) return tl_err(TL_ERR_UNSUPPORTED, "train: linear weight must be contiguous");
        gemm_any(c, x->dtype, out, in, rows, tt_data(g), 1, out, tt_data(x), in, 1, tt_data(gw), in, true);
    }
    if (b && tt__need(n, 2)) {
        tt_tensor *gb = tt__grad_buf(b);
        if (!gb) return TL_ERR_NOMEM;
        if (x->dtype == TT_F32) {
            bias_grad_f32(tt_data(gb), tt_data(g), rows, out);
        } else {
            double *d = tt_data(gb);
            const double *gp = tt_data(g);
            for (int64_t r = 0; r < rows; r++)
                for (int64_t o = 0; o < out; o++) d[o] += gp[r * out + o];
        }
    }
    return TL_OK;
}

tt_tensor *tt_linear(tt_ctx *c, tt_tensor *x, tt_tensor *w, tt_tensor *bias) {
#ifdef TALLOW_CUDA
    if (x && tt__dev(x) == TT_CUDA) return tt__cu_linear(c, x, w, bias);
#endif
    tt_tensor *in3[3] = {x, w, bias};
    if (!tt__check(in3, bias ? 3 : 2, "linear")) return NULL;
    if (w->ndim != 2 || x->shape[x->ndim - 1] != w->shape[1] || (bias && tt_numel(bias) != w->shape[0])) {
        tl_err(TL_ERR_INVALID, "train: linear: x [..., %lld] with W [%lld, %lld]%s",
               (long long)x->shape[x->ndim - 1], (long long)w->shape[0], (long long)(w->ndim > 1 ? w->shape[1] : 0),
               bias ? " and a bias of another size" : "");
        return NULL;
    }
    if (!tt_is_contiguous(w) || (bias && !tt_is_contiguous(bias))) {
        tl_err(TL_ERR_UNSUPPORTED, "train: linear: weight and bias must be contiguous");
        return NULL;
    }
    tt_tensor *xc = tt_contiguous(c, x);
    if (!xc) return NULL;
    int64_t in = w->shape[1], out = w->shape[0], rows = tt_numel(x) / in;
    int64_t sh[TT_MAX_DIMS];
    memcpy(sh, x->shape, sizeof sh);
    sh[x->ndim - 1] = out;
    tt_tensor *o = tt__temp(c, x->dtype, x->ndim, sh);
    if (!o) return NULL;
    gemm_any(c, x->dtype, rows, out, in, tt_data(xc), in, 1, tt_data(w), 1, in, tt_data(o), out, false);
    if (bias) {
        if (x->dtype == TT_F32) {
            bias_add_f32(tt_data(o), tt_data(bias), rows, out);
        } else {
            double *d = tt_data(o);
            const double *bp = tt_data(bias);
            for (int64_t r = 0; r < rows; r++)
                for (int64_t j = 0; j < out; j++) d[r * out + j] += bp[j];
        }
    }
    tt_tensor *ins[3] = {xc, w, bias};
    if (tt__needs_grad(c, ins, 3) && !tt__record(c, "linear", bw_linear, o, ins, bias ? 3 : 2)) return NULL;
    return o;
}
