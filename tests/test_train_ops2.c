/* test_train_ops2: the framework's reductions over dims (max/min with
 * indices, amax/amin, argmax/argmin, var/std, sum/mean over dim lists),
 * joins (cat/stack/split/chunk), indexing (gather/index_select), masks
 * (comparisons, logical ops, where, masked_fill), views (squeeze, flatten,
 * strided slice) and the bf16/f16/i32 storage dtypes with tt_to.
 * Oracles: central finite differences in float64 for every backward (on
 * several shapes, with broadcasting and permuted/narrowed/expanded inputs;
 * tolerance as in test_train_grad: 1e-6 relative), and forward values,
 * tie-breaking, scatter-add gradients and bf16/f16 rounding bits against
 * tests/fixtures/train_ops_ref.safetensors (made by make_train_ops_ref.py
 * with PyTorch 1.13, NumPy's float16 and exact Python rounding); plus error
 * cases (NULL + a message naming the op) and checkpoint round trips. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/fp16.h"
#include "test_util.h"
#include "tallow_train.h"
#include "train_gradcheck.h"

static const char *FIX = "tests/fixtures/train_ops_ref.safetensors";

static tt_tensor *g_idx1, *g_idx2, *g_cond, *g_isel; /* fixed non-differentiable inputs */

/* ---- op builders (inputs: random f64 leaves) ------------------------------ */
static tt_tensor *b_max_d1(tt_ctx *c, tt_tensor **x) { return tt_max_dim(c, x[0], 1, false, NULL); }
static tt_tensor *b_min_keep_perm(tt_ctx *c, tt_tensor **x) {
    int perm[3] = {2, 0, 1};
    tt_tensor *idx;
    return tt_min_dim(c, tt_permute(c, x[0], perm), -1, true, &idx);
}
static tt_tensor *b_max_narrow(tt_ctx *c, tt_tensor **x) {
    return tt_max_dim(c, tt_narrow(c, x[0], 2, 1, 3), 0, true, NULL);
}
static tt_tensor *b_amax(tt_ctx *c, tt_tensor **x) { return tt_amax(c, tt_transpose(c, x[0], 0, 1)); }
static tt_tensor *b_amin(tt_ctx *c, tt_tensor **x) { return tt_amin(c, x[0]); }
static tt_tensor *b_var_u(tt_ctx *c, tt_tensor **x) { return tt_var(c, x[0], 1, true, true); }
static tt_tensor *b_var_all(tt_ctx *c, tt_tensor **x) { return tt_var_dims(c, x[0], 0, NULL, false, false); }
static tt_tensor *b_std_dims_t(tt_ctx *c, tt_tensor **x) {
    int dims[2] = {0, -1};
    return tt_std_dims(c, tt_transpose(c, x[0], 1, 2), 2, dims, false, false);
}
static tt_tensor *b_std_expand(tt_ctx *c, tt_tensor **x) {
    int64_t sh[3] = {3, 2, 5};
    return tt_std(c, tt_expand(c, x[0], 3, sh), -1, true, false); /* x [2,5] broadcast to 3 rows */
}
static tt_tensor *b_sum_dims(tt_ctx *c, tt_tensor **x) {
    int dims[2] = {2, 0};
    return tt_sum_dims(c, tt_narrow(c, x[0], 1, 1, 2), 2, dims, false);
}
static tt_tensor *b_mean_dims(tt_ctx *c, tt_tensor **x) {
    int dims[2] = {-1, 1};
    return tt_mean_dims(c, tt_permute(c, x[0], (int[]){1, 0, 2}), 2, dims, true);
}
static tt_tensor *b_cat3(tt_ctx *c, tt_tensor **x) {
    tt_tensor *xs[3] = {x[0], tt_transpose(c, x[1], 1, 2), x[2]}; /* [2,3,4] [2,1,4] [2,5,4] */
    return tt_cat(c, 3, xs, 1);
}
static tt_tensor *b_cat6(tt_ctx *c, tt_tensor **x) {
    tt_tensor *xs[6] = {x[0], x[1], x[0], tt_narrow(c, x[1], 0, 1, 2), x[0], x[1]};
    return tt_cat(c, 6, xs, 0); /* more than one node's inputs: grouped */
}
static tt_tensor *b_stack(tt_ctx *c, tt_tensor **x) {
    tt_tensor *xs[3] = {x[0], tt_transpose(c, x[1], 0, 1), x[0]};
    return tt_stack(c, 3, xs, -1);
}
static tt_tensor *b_split_chunk(tt_ctx *c, tt_tensor **x) {
    tt_tensor *p[4], *q[4];
    int n = tt_split(c, x[0], 2, 1, p, 4);  /* [3,5] -> 2,2,1 */
    int m = tt_chunk(c, x[0], 3, -1, q, 4); /* -> 2,2,1 */
    if (n != 3 || m != 3) return NULL;
    return tt_add(c, tt_mul(c, p[0], q[1]), tt_mul(c, p[2], q[2])); /* [3,2] * [3,2] + [3,1]*[3,1] broadcast */
}
static tt_tensor *b_where(tt_ctx *c, tt_tensor **x) { return tt_where(c, g_cond, x[0], x[1]); }
static tt_tensor *b_where_views(tt_ctx *c, tt_tensor **x) {
    int64_t sh[3] = {3, 3, 4};
    return tt_where(c, g_cond, tt_transpose(c, x[0], 0, 2), tt_expand(c, x[1], 3, sh));
}
static tt_tensor *b_masked_fill(tt_ctx *c, tt_tensor **x) {
    tt_tensor *m = tt_gt(c, x[1], tt_full(c, TT_F64, 1, (int64_t[]){1}, 0.0)); /* mask from a comparison */
    return tt_masked_fill(c, x[0], m, -3.0);
}
static tt_tensor *b_gather(tt_ctx *c, tt_tensor **x) { return tt_gather(c, x[0], 1, g_idx1); }
static tt_tensor *b_gather_perm(tt_ctx *c, tt_tensor **x) {
    return tt_gather(c, tt_permute(c, x[0], (int[]){1, 0, 2}), -1, g_idx2);
}
static tt_tensor *b_isel(tt_ctx *c, tt_tensor **x) {
    return tt_index_select(c, tt_narrow(c, x[0], 0, 1, 2), 2, g_isel);
}
static tt_tensor *b_isel_ids(tt_ctx *c, tt_tensor **x) {
    int32_t ids[5] = {3, 0, 3, 3, 1};
    return tt_index_select_ids(c, tt_transpose(c, x[0], 0, 1), 1, ids, 5);
}
static tt_tensor *b_views(tt_ctx *c, tt_tensor **x) {
    /* x [2,1,6,1]: squeeze, flatten, strided slices (one from a negative start) */
    tt_tensor *s = tt_squeeze(c, x[0], -1);                  /* [2,1,6] */
    tt_tensor *f = tt_flatten(c, tt_squeeze_all(c, x[0]), 0, 1); /* [12] */
    tt_tensor *a = tt_slice(c, tt_squeeze(c, s, 1), 1, 1, 6, 2); /* [2,3] cols 1,3,5 */
    tt_tensor *b = tt_slice(c, tt_reshape(c, f, 2, (int64_t[]){2, 6}), -1, -6, 100, 2); /* cols 0,2,4 */
    return tt_mul(c, a, tt_add(c, b, a));
}
/* ---- fixture comparisons ------------------------------------------------------ */
static tt_tensor *fx(const char *name) {
    tt_tensor *t = tt_tensor_load(FIX, name);
    CHECK(t != NULL, "fixture %s: %s", name, tl_last_error());
    return t;
}

/* max |a - b| (INFINITY if shapes differ or either is NULL). */
static double diff(const tt_tensor *a, const tt_tensor *b) {
    if (!a || !b || a->ndim != b->ndim) return INFINITY;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return INFINITY;
    double m = 0;
    for (int64_t i = 0; i < tt_numel(a); i++) {
        double e = fabs(tt_get(a, i) - tt_get(b, i));
        if (!(e <= m)) m = e;
    }
    return m;
}

#define EXPECT(got, refname, tol)                                                              \
    do {                                                                                       \
        tt_tensor *r_ = fx(refname);                                                           \
        double e_ = diff(got, r_);                                                             \
        CHECK(e_ <= (tol), "%s: max diff %g (%s)", refname, e_, (got) ? "" : tl_last_error()); \
        tt_free(r_);                                                                           \
    } while (0)

static void vs_torch(void) {
    tt_ctx *c;
    tt_ctx_init(1, &c);
    char nm[64];
    /* max/min/argmax/argmin with ties on a 0.5 grid: torch returns the first */
    tt_tensor *x = fx("in.mx");
    int dims[4] = {0, 1, 2, -1};
    for (int k = 0; k < 4; k++) {
        int d = dims[k];
        tt_tensor *iv, *in;
        snprintf(nm, sizeof nm, "out.max.d%d.v", d);
        EXPECT(tt_max_dim(c, x, d, false, &iv), nm, 0);
        snprintf(nm, sizeof nm, "out.max.d%d.i", d);
        EXPECT(iv, nm, 0);
        CHECK(iv && iv->dtype == TT_I32, "max indices dtype");
        snprintf(nm, sizeof nm, "out.min.d%d.v", d);
        EXPECT(tt_min_dim(c, x, d, false, &in), nm, 0);
        snprintf(nm, sizeof nm, "out.min.d%d.i", d);
        EXPECT(in, nm, 0);
        snprintf(nm, sizeof nm, "out.argmax.d%d", d);
        EXPECT(tt_argmax(c, x, d, false), nm, 0);
        snprintf(nm, sizeof nm, "out.argmin.d%d", d);
        EXPECT(tt_argmin(c, x, d, false), nm, 0);
    }
    EXPECT(tt_amax(c, x), "out.amax", 0);
    EXPECT(tt_amin(c, x), "out.amin", 0);
    /* gradients with ties: amax splits evenly, max(dim) picks the first */
    x->requires_grad = true;
    CHECK(tt_backward(c, tt_amax(c, x)) == TL_OK, "amax backward: %s", tl_last_error());
    EXPECT(x->grad, "out.amax.grad", 1e-15);
    tt_ctx_reset(c);
    tt_zero_grad(x);
    CHECK(tt_backward(c, tt_sum(c, tt_max_dim(c, x, 1, false, NULL))) == TL_OK, "max backward");
    EXPECT(x->grad, "out.max.d1.grad", 0);
    tt_ctx_reset(c);
    tt_free(x);

    /* var/std/sum/mean over dim lists */
    tt_tensor *y = fx("in.var");
    struct {
        const char *n;
        int nd, d[3];
    } dl[4] = {{"d1", 1, {1}}, {"dm1", 1, {-1}}, {"d02", 2, {0, 2}}, {"all", 3, {0, 1, 2}}};
    for (int k = 0; k < 4; k++) {
        for (int u = 0; u < 2; u++) {
            snprintf(nm, sizeof nm, "out.var.%s.u%d", dl[k].n, u);
            EXPECT(tt_var_dims(c, y, dl[k].nd, dl[k].d, u, true), nm, 1e-12);
            snprintf(nm, sizeof nm, "out.std.%s.u%d", dl[k].n, u);
            EXPECT(tt_std_dims(c, y, dl[k].nd, dl[k].d, u, false), nm, 1e-12);
        }
        snprintf(nm, sizeof nm, "out.sum.%s", dl[k].n);
        EXPECT(tt_sum_dims(c, y, dl[k].nd, dl[k].d, false), nm, 1e-12);
        snprintf(nm, sizeof nm, "out.mean.%s", dl[k].n);
        EXPECT(tt_mean_dims(c, y, dl[k].nd, dl[k].d, true), nm, 1e-12);
    }
    tt_free(y);

    /* cat / stack */
    tt_tensor *a = fx("in.cat.a"), *b = fx("in.cat.b"), *cc = fx("in.cat.c");
    tt_tensor *l3[3] = {a, b, cc};
    EXPECT(tt_cat(c, 3, l3, 1), "out.cat.d1", 0);
    tt_tensor *l2[2] = {a, tt_scale(c, a, 2)};
    EXPECT(tt_cat(c, 2, l2, 0), "out.cat.d0", 0);
    tt_tensor *l6[6] = {a, a, a, a, a, a};
    EXPECT(tt_cat(c, 6, l6, -1), "out.cat.dm1", 0);
    tt_tensor *s3[3] = {a, tt_scale(c, a, 2), tt_sub(c, a, tt_full(c, TT_F64, 1, (int64_t[]){1}, 1.0))};
    int sd[4] = {0, 1, 3, -1};
    for (int k = 0; k < 4; k++) {
        snprintf(nm, sizeof nm, "out.stack.d%d", sd[k]);
        EXPECT(tt_stack(c, 3, s3, sd[k]), nm, 0);
    }
    tt_free(a);
    tt_free(b);
    tt_free(cc);

    /* where / comparisons / logical / masked_fill */
    tt_tensor *wc = fx("in.where.cond"), *wa = fx("in.where.a"), *wb = fx("in.where.b");
    EXPECT(tt_where(c, wc, wa, wb), "out.where", 0);
    tt_tensor *ca = fx("in.cmp.a"), *cb = fx("in.cmp.b"), *mk = fx("in.mask");
    tt_tensor *(*cmp[6])(tt_ctx *, tt_tensor *, tt_tensor *) = {tt_eq, tt_ne, tt_lt, tt_le, tt_gt, tt_ge};
    const char *cn[6] = {"eq", "ne", "lt", "le", "gt", "ge"};
    for (int k = 0; k < 6; k++) {
        snprintf(nm, sizeof nm, "out.cmp.%s", cn[k]);
        EXPECT(cmp[k](c, ca, cb), nm, 0);
    }
    tt_tensor *zero = tt_zeros(c, TT_F64, 1, (int64_t[]){1}), *one = tt_full(c, TT_F64, 1, (int64_t[]){1}, 1.0);
    EXPECT(tt_logical_and(c, tt_gt(c, ca, zero), tt_lt(c, cb, one)), "out.logical_and", 0);
    EXPECT(tt_masked_fill(c, ca, mk, -7.5), "out.masked_fill", 0);
    tt_free(wc);
    tt_free(wa);
    tt_free(wb);
    tt_free(ca);
    tt_free(cb);
    tt_free(mk);

    /* gather / index_select, index tensors as I32 (fixture) and f64 */
    tt_tensor *g = fx("in.gather.x"), *i1 = fx("in.gather.i1"), *i2 = fx("in.gather.i2"), *is = fx("in.isel");
    EXPECT(tt_gather(c, g, 1, i1), "out.gather.d1", 0);
    EXPECT(tt_gather(c, g, -1, tt_to(c, i2, TT_F64)), "out.gather.dm1", 0);
    EXPECT(tt_index_select(c, g, 2, is), "out.isel.d2", 0);
    EXPECT(tt_index_select_ids(c, g, 0, (int32_t[]){2, 0}, 2), "out.isel.d0", 0);
    g->requires_grad = true;
    tt_tensor *seed = fx("in.gather.seed");
    CHECK(tt_backward(c, tt_sum(c, tt_mul(c, tt_gather(c, g, 1, i1), seed))) == TL_OK, "gather backward");
    EXPECT(g->grad, "out.gather.d1.grad", 1e-14);
    tt_free(seed);
    tt_free(g);
    tt_free(i1);
    tt_free(i2);
    tt_free(is);
    tt_ctx_free(c);
}

/* bf16/f16 rounding of f64 values against NumPy float16 and exact RNE. */
static void rounding(void) {
    tt_ctx *c;
    tt_ctx_init(1, &c);
    tt_tensor *v = fx("in.round"), *hb = fx("out.f16.bits"), *bb = fx("out.bf16.bits");
    tt_tensor *ti = fx("out.bf16.torch_idx"), *tb = fx("out.bf16.torch_bits");
    if (!v || !hb || !bb || !ti || !tb) return;
    int64_t n = tt_numel(v);
    tt_tensor *h = tt_new(TT_F16, 1, &n), *b = tt_new(TT_BF16, 1, &n);
    tt_copy_(h, v); /* f64 -> f16/bf16 directly */
    tt_copy_(b, v);
    int bad_h = 0, bad_b = 0, bad_rt = 0;
    const uint16_t *hp = tt_data(h), *bp = tt_data(b);
    for (int64_t i = 0; i < n; i++) {
        if (hp[i] != (uint16_t)tt_get(hb, i)) {
            if (bad_h++ < 5) fprintf(stderr, "f16 of %.17g: %04x want %04x\n", tt_get(v, i), hp[i], (int)tt_get(hb, i));
        }
        if (bp[i] != (uint16_t)tt_get(bb, i)) {
            if (bad_b++ < 5)
                fprintf(stderr, "bf16 of %.17g: %04x want %04x\n", tt_get(v, i), bp[i], (int)tt_get(bb, i));
        }
        /* reading back gives the value of those bits */
        double gh = tt_get(h, i), gb = tt_get(b, i);
        if ((gh == gh && gh != (double)tl_fp16_to_fp32(hp[i])) || (gb == gb && gb != (double)tl_bf16_to_fp32(bp[i])))
            bad_rt++;
    }
    CHECK(bad_h == 0, "%d of %lld f16 roundings differ from numpy", bad_h, (long long)n);
    CHECK(bad_b == 0, "%d of %lld bf16 roundings differ from exact RNE", bad_b, (long long)n);
    CHECK(bad_rt == 0, "%d read-backs differ", bad_rt);
    /* f32 -> bf16 through tt_to on the float32-valued entries: torch's bits */
    int64_t m = tt_numel(ti);
    tt_tensor *f = tt_new(TT_F32, 1, &m);
    for (int64_t i = 0; i < m; i++) tt_set(f, i, tt_get(v, (int64_t)tt_get(ti, i)));
    tt_tensor *fb = tt_to(c, f, TT_BF16);
    int bad_t = 0;
    for (int64_t i = 0; fb && i < m; i++) bad_t += ((const uint16_t *)tt_data(fb))[i] != (uint16_t)tt_get(tb, i);
    CHECK(fb && fb->dtype == TT_BF16 && bad_t == 0, "tt_to bf16: %d of %lld differ from torch", bad_t, (long long)m);
    tt_free(f);
    tt_free(h);
    tt_free(b);
    tt_free(v);
    tt_free(hb);
    tt_free(bb);
    tt_free(ti);
    tt_free(tb);
    tt_ctx_free(c);
}

/* Storage dtypes: strided copies, fill, tt_to gradients, ops refusing them. */
static void storage_dtypes(void) {
    tt_ctx *c;
    tt_ctx_init(1, &c);
    int64_t sh[2] = {3, 4};
    tt_tensor *x = tt_new(TT_F64, 2, sh);
    for (int i = 0; i < 12; i++) tt_set(x, i, (i - 5) * 0.375); /* exact in bf16 and f16 */
    tt_dtype dts[3] = {TT_BF16, TT_F16, TT_I32};
    for (int k = 0; k < 3; k++) {
        tt_tensor *s = tt_to(c, tt_transpose(c, x, 0, 1), dts[k]); /* strided source */
        tt_tensor *back = tt_to(c, tt_transpose(c, tt_contiguous(c, tt_transpose(c, s, 0, 1)), 0, 1), TT_F64);
        double e = 0;
        for (int64_t i = 0; back && i < 12; i++) {
            double want = (double)((i % 3) * 4 + i / 3 - 5) * 0.375;
            if (dts[k] == TT_I32) want = trunc(want);
            e = fmax(e, fabs(tt_get(back, i) - want));
        }
        CHECK(s && s->dtype == dts[k] && back && e == 0, "%s strided round trip err %g", tt_dtype_name(dts[k]), e);
        tt_tensor *fl = tt_full(c, dts[k], 2, sh, 2.5);
        CHECK(fl && tt_get(fl, 7) == (dts[k] == TT_I32 ? 2.0 : 2.5), "%s fill", tt_dtype_name(dts[k]));
        /* compute ops refuse storage dtypes with a message naming the dtype */
        CHECK(tt_add(c, s, s) == NULL && strstr(tl_last_error(), tt_dtype_name(dts[k])) &&
                  strstr(tl_last_error(), "add"), "add of %s: %s", tt_dtype_name(dts[k]), tl_last_error());
        CHECK(tt_sum(c, s) == NULL && strstr(tl_last_error(), "sum"), "sum: %s", tl_last_error());
        CHECK(tt_softmax(c, s) == NULL && strstr(tl_last_error(), "tt_to"), "softmax: %s", tl_last_error());
        CHECK(tt_matmul(c, s, tt_transpose(c, s, 0, 1)) == NULL, "matmul of %s", tt_dtype_name(dts[k]));
        CHECK(tt_max_dim(c, s, 0, false, NULL) == NULL && strstr(tl_last_error(), "max"), "max: %s", tl_last_error());
        /* comparisons and masks take any dtype */
        tt_tensor *m = tt_gt(c, s, tt_zeros(c, dts[k], 1, (int64_t[]){1}));
        CHECK(m && m->dtype == dts[k] && tt_get(m, 11) == 1.0 && tt_get(m, 0) == 0.0, "gt of %s",
              tt_dtype_name(dts[k]));
        tt_tensor *w = tt_where(c, tt_transpose(c, m, 0, 1), x, tt_neg(c, x));
        CHECK(w && tt_get(w, 0) == -tt_get(x, 0), "where with a %s mask", tt_dtype_name(dts[k]));
        tt_ctx_reset(c);
    }
    /* tt_to gradients: f64 -> bf16 -> f64 hands back the seed rounded to bf16
     * (the bf16 intermediate's grad is stored in bf16) */
    x->requires_grad = true;
    tt_tensor *y = tt_to(c, tt_to(c, x, TT_BF16), TT_F64);
    tt_tensor *seed = tt_new(TT_F64, 2, sh);
    for (int i = 0; i < 12; i++) tt_set(seed, i, 1.0 + i / 3.0);
    CHECK(tt_backward_with(c, y, seed) == TL_OK, "to backward: %s", tl_last_error());
    double e = 0;
    for (int i = 0; i < 12; i++) {
        double want = (double)tl_bf16_to_fp32(tl_fp32_to_bf16((float)(1.0 + i / 3.0))); /* f32 exact enough: no tie */
        e = fmax(e, fabs(tt_get(x->grad, i) - want));
    }
    CHECK(e == 0 && tt_get(x->grad, 1) != 1.0 + 1 / 3.0, "to grad through bf16: err %g", e);
    tt_ctx_reset(c);
    tt_free(x);
    /* a bf16 leaf: its .grad is bf16 and accumulates over two backwards */
    tt_tensor *p = tt_new(TT_BF16, 2, sh);
    for (int i = 0; i < 12; i++) tt_set(p, i, i * 0.25);
    p->requires_grad = true;
    for (int it = 0; it < 2; it++) {
        tt_tensor *pf = tt_to(c, p, TT_F32);
        CHECK(tt_backward(c, tt_sum(c, tt_mul(c, pf, pf))) == TL_OK, "bf16 leaf backward: %s", tl_last_error());
        tt_ctx_reset(c);
    }
    CHECK(p->grad && p->grad->dtype == TT_BF16 && tt_get(p->grad, 3) == 3.0 && tt_get(p->grad, 11) == 11.0,
          "bf16 leaf grad %g %g (want 3, 11)", p->grad ? tt_get(p->grad, 3) : -1, p->grad ? tt_get(p->grad, 11) : -1);
    /* views of a storage tensor are fine without grad, an error with it */
    CHECK(tt_narrow(c, p, 0, 1, 1) == NULL && strstr(tl_last_error(), "narrow"), "narrow of a bf16 leaf: %s",
          tl_last_error());
    p->requires_grad = false;
    tt_tensor *nv = tt_narrow(c, p, 1, 1, 2);
    CHECK(nv && tt_get(nv, 2) == 1.25, "bf16 narrow view");
    tt_ctx_reset(c);
    tt_free(p);
    tt_free(seed);
    /* to I32 truncates toward zero and carries no gradient */
    tt_tensor *q = tt_new_from(TT_F32, 1, (int64_t[]){4}, (double[]){-1.7, -0.2, 0.9, 3e9});
    q->requires_grad = true;
    tt_tensor *qi = tt_to(c, q, TT_I32);
    CHECK(qi && !qi->requires_grad && tt_get(qi, 0) == -1 && tt_get(qi, 1) == 0 && tt_get(qi, 2) == 0 &&
              tt_get(qi, 3) == 2147483647.0, "to i32");
    tt_ctx_reset(c);
    tt_free(q);
    tt_ctx_free(c);
}

/* Named tensors of every dtype through a safetensors file, and a model
 * checkpoint holding a bf16 parameter loaded into an f32 model. */
static void files(void) {
    tt_ctx *c;
    tt_ctx_init(1, &c);
    char path[64];
    snprintf(path, sizeof path, "/tmp/tt_ops2_%d.safetensors", (int)getpid());
    int64_t sh[3] = {2, 3, 4};
    tt_tensor *f = tt_new(TT_F64, 3, sh);
    tt_init_normal(f, &g_rng, 0, 100);
    tt_tensor *ts[5];
    tt_dtype dts[5] = {TT_F32, TT_F64, TT_BF16, TT_F16, TT_I32};
    for (int k = 0; k < 5; k++) {
        ts[k] = tt_new(dts[k], 3, sh);
        tt_copy_(ts[k], f);
    }
    tt_tensor *strided = tt_transpose(c, ts[2], 0, 2); /* saved through a contiguous copy */
    const char *names[6] = {"a.f32", "a.f64", "a.bf16", "a.f16", "a.i32", "a.bf16.t"};
    const tt_tensor *all[6] = {ts[0], ts[1], ts[2], ts[3], ts[4], strided};
    CHECK(tt_tensors_save(path, 6, names, all) == TL_OK, "save: %s", tl_last_error());
    for (int k = 0; k < 6; k++) {
        tt_tensor *l = tt_tensor_load(path, names[k]);
        const tt_tensor *w = all[k];
        bool same = l && l->dtype == w->dtype && l->ndim == 3;
        for (int64_t i = 0; same && i < 24; i++) same = tt_get(l, i) == tt_get(w, i);
        CHECK(same, "load %s", names[k]);
        tt_free(l);
    }
    CHECK(tt_tensor_load(path, "nope") == NULL && strstr(tl_last_error(), "nope"), "missing tensor: %s",
          tl_last_error());
    remove(path);
    /* model checkpoint with a bf16 parameter, loaded into the f32 model */
    tt_model m;
    tt_model_config cfg = tt_model_config_default(TT_ARCH_LLAMA, 16, 8, 8, 1, 2);
    CHECK(tt_model_init(&m, &cfg, 5) == TL_OK, "model init: %s", tl_last_error());
    tt_tensor *orig = m.params.p[0].t, *b16 = tt_new(TT_BF16, orig->ndim, orig->shape);
    tt_copy_(b16, orig);
    m.params.p[0].t = b16;
    tt_rng r;
    tt_rng_seed(&r, 3);
    CHECK(tt_checkpoint_save(path, &m, NULL, 7, &r) == TL_OK, "ckpt save: %s", tl_last_error());
    m.params.p[0].t = orig;
    tt_fill(orig, 0);
    int64_t step = 0;
    CHECK(tt_checkpoint_load(path, &m, NULL, &step, NULL) == TL_OK, "ckpt load: %s", tl_last_error());
    bool same = step == 7;
    for (int64_t i = 0; same && i < tt_numel(orig); i++) same = tt_get(orig, i) == tt_get(b16, i);
    CHECK(same, "bf16 checkpoint parameter loaded into f32");
    tt_tensor *bf = tt_tensor_load(path, "model.");
    CHECK(bf == NULL, "prefix is not a name");
    char pn[128];
    snprintf(pn, sizeof pn, "model.%s", m.params.p[0].name);
    bf = tt_tensor_load(path, pn);
    CHECK(bf && bf->dtype == TT_BF16, "stored as BF16");
    tt_free(bf);
    remove(path);
    tt_model_free(&m);
    tt_free(b16);
    for (int k = 0; k < 5; k++) tt_free(ts[k]);
    tt_free(f);
    tt_ctx_free(c);
}

static void errors(void) {
    tt_ctx *c;
    tt_ctx_init(1, &c);
    int64_t sh[3] = {2, 3, 4};
    tt_tensor *x = tt_zeros(c, TT_F64, 3, sh);
    tt_tensor *y = tt_zeros(c, TT_F64, 2, (int64_t[]){3, 5});
#define ERR(expr, word)                                                                              \
    CHECK((expr) == NULL && strstr(tl_last_error(), word), "%s: want an error with '%s', got '%s'", #expr, word, \
          tl_last_error())
    ERR(tt_max_dim(c, x, 3, false, NULL), "max");
    ERR(tt_min_dim(c, x, -4, false, NULL), "min");
    ERR(tt_argmax(c, x, 5, false), "argmax");
    ERR(tt_var(c, x, 3, true, false), "var");
    ERR(tt_std_dims(c, x, 2, (int[]){1, -2}, true, false), "repeated");
    ERR(tt_sum_dims(c, x, 5, (int[]){0, 1, 2, 0, 1}, false), "sum_dims");
    ERR(tt_max_dim(c, tt_zeros(c, TT_F64, 2, (int64_t[]){2, 0}), 1, false, NULL), "empty");
    ERR(tt_amax(c, tt_zeros(c, TT_F64, 1, (int64_t[]){0})), "amax");
    tt_tensor *xy[2] = {x, y};
    ERR(tt_cat(c, 2, xy, 0), "cat");
    ERR(tt_cat(c, 0, xy, 0), "cat");
    tt_tensor *xx[2] = {x, x};
    ERR(tt_cat(c, 2, xx, 3), "cat");
    ERR(tt_stack(c, 2, xy, 0), "stack");
    ERR(tt_stack(c, 2, xx, 4), "stack");
    tt_tensor *mixed[2] = {x, tt_zeros(c, TT_F32, 3, sh)};
    ERR(tt_cat(c, 2, mixed, 0), "dtypes");
    tt_tensor *outs[2];
    CHECK(tt_split(c, x, 1, 2, outs, 2) == -1 && strstr(tl_last_error(), "split"), "split room");
    CHECK(tt_split(c, x, 0, 2, outs, 2) == -1, "split size 0");
    CHECK(tt_chunk(c, x, 0, 0, outs, 2) == -1 && strstr(tl_last_error(), "chunk"), "chunk 0");
    ERR(tt_where(c, tt_zeros(c, TT_F64, 1, (int64_t[]){3}), x, x), "where");
    ERR(tt_masked_fill(c, y, tt_zeros(c, TT_F64, 2, (int64_t[]){2, 5}), 0), "masked_fill");
    ERR(tt_eq(c, x, y), "eq");
    ERR(tt_gather(c, x, 1, tt_zeros(c, TT_I32, 2, (int64_t[]){2, 3})), "gather");
    ERR(tt_gather(c, x, 1, tt_zeros(c, TT_I32, 3, (int64_t[]){2, 3, 5})), "gather");
    ERR(tt_gather(c, x, 1, tt_full(c, TT_I32, 3, (int64_t[]){2, 2, 4}, 3)), "outside [0, 3)");
    ERR(tt_gather(c, x, 1, tt_full(c, TT_F64, 3, (int64_t[]){2, 2, 4}, 0.5)), "not an integer");
    ERR(tt_index_select(c, x, 2, tt_full(c, TT_I32, 1, (int64_t[]){2}, -1)), "index_select");
    ERR(tt_index_select(c, x, 2, x), "1-d");
    ERR(tt_index_select_ids(c, x, -4, (int32_t[]){0}, 1), "index_select");
    ERR(tt_index_select_ids(c, x, 0, (int32_t[]){2}, 1), "outside");
    ERR(tt_squeeze(c, x, 3), "squeeze");
    ERR(tt_flatten(c, x, 2, 1), "flatten");
    ERR(tt_slice(c, x, 1, 0, 2, 0), "slice");
    ERR(tt_to(c, x, (tt_dtype)9), "dtype");
    CHECK(tt_squeeze(c, x, 1) == x, "squeeze of a non-1 dim is a no-op");
    tt_tensor *s = tt_slice(c, x, 2, -100, -1, 2);
    CHECK(s && s->shape[2] == 2, "slice clamps: %lld", s ? (long long)s->shape[2] : -1LL);
    CHECK(tt_max_dim(c, NULL, 0, false, NULL) == NULL, "NULL propagates");
#undef ERR
    tt_ctx_free(c);
}

int main(void) {
    tt_rng_seed(&g_rng, 20261130);
    /* fixed index/mask inputs for the gradient checks */
    int64_t s1[3] = {3, 2, 5}, s2[3] = {4, 3, 2}, sc[3] = {3, 1, 4}, si[1] = {5};
    g_idx1 = tt_new(TT_I32, 3, s1); /* gather dim 1 of [3,4,5] */
    for (int64_t i = 0; i < 30; i++) tt_set(g_idx1, i, (double)(tt_rng_next(&g_rng) % 4));
    g_idx2 = tt_new(TT_I32, 3, s2); /* gather dim -1 of [4,3,5] (permuted [3,4,5]); repeats */
    for (int64_t i = 0; i < 24; i++) tt_set(g_idx2, i, (double)(tt_rng_next(&g_rng) % 5));
    g_cond = tt_new(TT_F64, 3, sc);
    for (int64_t i = 0; i < 12; i++) tt_set(g_cond, i, (double)(tt_rng_next(&g_rng) % 2));
    g_isel = tt_new_from(TT_I32, 1, si, (double[]){4, 0, 4, 2, 4});

    FILE *ff = fopen(FIX, "rb"); /* committed with the test: its absence is a failure, reported once */
    CHECK(ff != NULL, "fixture %s missing (run from the repo root; make it with tests/fixtures/make_train_ops_ref.py)",
          FIX);
    if (ff) {
        fclose(ff);
        vs_torch();
        rounding();
    }
    storage_dtypes();
    files();
    errors();

    double worst = 0;
#define RUN(...) GC_RUN(worst, __VA_ARGS__)
    RUN("max dim 1", b_max_d1, 1, -1, 1, {3, 3, 4, 5});
    RUN("min dim -1 keepdim (permuted)", b_min_keep_perm, 1, -1, 1, {3, 4, 5, 3});
    RUN("max dim 0 keepdim (narrowed)", b_max_narrow, 1, -1, 1, {3, 4, 2, 5});
    RUN("amax (transposed)", b_amax, 1, -1, 1, {3, 3, 4, 2});
    RUN("amin", b_amin, 1, -1, 1, {2, 5, 3});
    RUN("var unbiased keepdim", b_var_u, 1, -1, 1, {3, 2, 5, 3});
    RUN("var all biased", b_var_all, 1, -1, 1, {3, 2, 3, 4});
    RUN("std dims {0,-1} (transposed)", b_std_dims_t, 1, -1, 1, {3, 3, 4, 5});
    RUN("std unbiased (expanded)", b_std_expand, 1, -1, 1, {2, 2, 5});
    RUN("sum dims {2,0} (narrowed)", b_sum_dims, 1, -1, 1, {3, 2, 4, 3});
    RUN("mean dims {-1,1} keepdim (permuted)", b_mean_dims, 1, -1, 1, {3, 3, 2, 4});
    RUN("cat 3 dim 1 (transposed input)", b_cat3, 3, -1, 1, {3, 2, 3, 4}, {3, 2, 4, 1}, {3, 2, 5, 4});
    RUN("cat 6 dim 0 (grouped, narrowed)", b_cat6, 2, -1, 1, {2, 2, 3}, {2, 3, 3});
    RUN("stack 3 dim -1 (transposed)", b_stack, 2, -1, 1, {2, 3, 4}, {2, 4, 3});
    RUN("split/chunk views", b_split_chunk, 1, -1, 1, {2, 3, 5});
    RUN("where broadcast", b_where, 2, -1, 1, {4, 2, 1, 1, 4}, {2, 5, 1});
    RUN("where (transposed, expanded)", b_where_views, 2, -1, 1, {3, 4, 3, 3}, {2, 1, 4});
    RUN("masked_fill (mask from gt)", b_masked_fill, 2, -1, 1, {2, 3, 4}, {1, 4});
    RUN("gather dim 1", b_gather, 1, -1, 1, {3, 3, 4, 5});
    RUN("gather dim -1 (permuted, repeats)", b_gather_perm, 1, -1, 1, {3, 3, 4, 5});
    RUN("index_select repeats (narrowed)", b_isel, 1, -1, 1, {3, 3, 4, 5});
    RUN("index_select ids (transposed)", b_isel_ids, 1, -1, 1, {2, 4, 3});
    RUN("squeeze/flatten/slice step", b_views, 1, -1, 1, {4, 2, 1, 6, 1});
    printf("worst relative grad error over the new ops: %.3g\n", worst);
    tt_free(g_idx1);
    tt_free(g_idx2);
    tt_free(g_cond);
    tt_free(g_isel);
    return test_finish();
}
