/* train/ops_cmp: comparisons (eq, ne, lt, le, gt, ge) and logical ops
 * giving 0/1 masks, and the ops that consume masks: where (with backward to
 * both branches) and masked_fill. All broadcast like NumPy.
 * Owns: nothing. Calls: train internals. */
#include <stdio.h>

#include "train/tt_internal.h"

/* Broadcast shape of n tensors (NULLs skipped); false + error naming op. */
static bool bshape(const char *op, tt_tensor *const *ts, int n, int *ondim, int64_t *osh) {
    tt_tensor acc = {0};
    acc.ndim = 0;
    char s1[64], s2[64];
    for (int k = 0; k < n; k++) {
        if (!ts[k]) continue;
        int nd;
        int64_t sh[TT_MAX_DIMS];
        if (!tt__bcast_shape(&acc, ts[k], &nd, sh)) {
            tl_err(TL_ERR_INVALID, "train: %s: shapes %s and %s do not broadcast", op, tt__shape_str(&acc, s1, 64),
                   tt__shape_str(ts[k], s2, 64));
            return false;
        }
        acc.ndim = nd;
        memcpy(acc.shape, sh, sizeof sh);
    }
    *ondim = acc.ndim;
    memcpy(osh, acc.shape, sizeof acc.shape);
    return true;
}

/* Visit the broadcast output in row-major order: f(i, offset of each input). */
#define FOR_BCAST(ONDIM, OSH, A, B, C, ...)                                                  \
    do {                                                                                     \
        int64_t sh_[4], sa_[4] = {0}, sb_[4] = {0}, sc_[4] = {0};                            \
        tt__shape4(ONDIM, OSH, sh_);                                                         \
        if (A) tt__bstrides4(A, ONDIM, OSH, sa_);                                            \
        if (B) tt__bstrides4(B, ONDIM, OSH, sb_);                                            \
        if (C) tt__bstrides4(C, ONDIM, OSH, sc_);                                            \
        int64_t i = 0;                                                                       \
        for (int64_t i0 = 0; i0 < sh_[0]; i0++)                                              \
            for (int64_t i1 = 0; i1 < sh_[1]; i1++)                                          \
                for (int64_t i2 = 0; i2 < sh_[2]; i2++)                                      \
                    for (int64_t i3 = 0; i3 < sh_[3]; i3++, i++) {                           \
                        int64_t oa = (A) ? (A)->offset + i0 * sa_[0] + i1 * sa_[1] + i2 * sa_[2] + i3 * sa_[3] : 0; \
                        int64_t ob = (B) ? (B)->offset + i0 * sb_[0] + i1 * sb_[1] + i2 * sb_[2] + i3 * sb_[3] : 0; \
                        int64_t oc = (C) ? (C)->offset + i0 * sc_[0] + i1 * sc_[1] + i2 * sc_[2] + i3 * sc_[3] : 0; \
                        (void)oa;                                                            \
                        (void)ob;                                                            \
                        (void)oc;                                                            \
                        __VA_ARGS__;                                                         \
                    }                                                                        \
    } while (0)

/* ---- comparisons and logical ops (no grad) -------------------------------- */
enum { C_EQ, C_NE, C_LT, C_LE, C_GT, C_GE, L_AND, L_OR, L_NOT };
static const char *c_names[] = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_not"};

static tt_tensor *compare(tt_ctx *c, int op, tt_tensor *a, tt_tensor *b) {
    tt_tensor *in[2] = {a, b};
    int nin = op == L_NOT ? 1 : 2;
    if (!tt__check(in, nin, c_names[op])) return NULL;
    int ondim;
    int64_t osh[TT_MAX_DIMS];
    if (!bshape(c_names[op], in, nin, &ondim, osh)) return NULL;
    tt_tensor *o = tt__temp_any(c, a->dtype, ondim, osh);
    if (!o) return NULL;
    tt_tensor *bb = nin == 2 ? b : NULL;
    FOR_BCAST(ondim, osh, a, bb, (tt_tensor *)NULL, {
        double x = tt__ld(a, oa), y = bb ? tt__ld(bb, ob) : 0;
        bool r;
        switch (op) {
        case C_EQ: r = x == y; break;
        case C_NE: r = x != y; break;
        case C_LT: r = x < y; break;
        case C_LE: r = x <= y; break;
        case C_GT: r = x > y; break;
        case C_GE: r = x >= y; break;
        case L_AND: r = x != 0 && y != 0; break;
        case L_OR: r = x != 0 || y != 0; break;
        default: r = x == 0; break;
        }
        tt__st(o, i, r ? 1.0 : 0.0);
    });
    return o;
}

tt_tensor *tt_eq(tt_ctx *c, tt_tensor *a, tt_tensor *b) { return compare(c, C_EQ, a, b); }
tt_tensor *tt_ne(tt_ctx *c, tt_tensor *a, tt_tensor *b) { return compare(c, C_NE, a, b); }
tt_tensor *tt_lt(tt_ctx *c, tt_tensor *a, tt_tensor *b) { return compare(c, C_LT, a, b); }
tt_tensor *tt_le(tt_ctx *c, tt_tensor *a, tt_tensor *b) { return compare(c, C_LE, a, b); }
tt_tensor *tt_gt(tt_ctx *c, tt_tensor *a, tt_tensor *b) { return compare(c, C_GT, a, b); }
tt_tensor *tt_ge(tt_ctx *c, tt_tensor *a, tt_tensor *b) { return compare(c, C_GE, a, b); }
tt_tensor *tt_logical_and(tt_ctx *c, tt_tensor *a, tt_tensor *b) { return compare(c, L_AND, a, b); }
tt_tensor *tt_logical_or(tt_ctx *c, tt_tensor *a, tt_tensor *b) { return compare(c, L_OR, a, b); }
tt_tensor *tt_logical_not(tt_ctx *c, tt_tensor *m) { return compare(c, L_NOT, m, NULL); }

/* ---- where / masked_fill ------------------------------------------------------ */
/* Gradient for branch t (shape of t): g where (cond != 0) == take, summed
 * over t's broadcast dims. cond is in[0]. */
static tl_status acc_branch(const tt_tensor *cond, tt_tensor *t, const tt_tensor *g, bool take) {
    tt_tensor *gm = tt_new(g->dtype, g->ndim, g->shape);
    if (!gm) return TL_ERR_NOMEM;
    FOR_BCAST(g->ndim, g->shape, cond, (tt_tensor *)NULL, (tt_tensor *)NULL, {
        if ((tt__ld(cond, oa) != 0) == take) tt__st(gm, i, tt_get(g, i));
    });
    tt_tensor *r = gm;
    bool same = t->ndim == g->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == g->shape[d];
    if (!same) r = tt__reduce_to(gm, t->ndim, t->shape);
    tl_status s = r ? tt__acc_grad(t, r) : TL_ERR_NOMEM;
    if (r != gm) tt_free(r);
    tt_free(gm);
    return s;
}

static tl_status bw_where(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    (void)c;
    tl_status s = TL_OK;
    if (tt__need(n, 1)) s = acc_branch(n->in[0], n->in[1], g, true);
    if (s == TL_OK && n->n_in > 2 && tt__need(n, 2)) s = acc_branch(n->in[0], n->in[2], g, false);
    return s;
}

tt_tensor *tt_where(tt_ctx *c, tt_tensor *cond, tt_tensor *a, tt_tensor *b) {
    TT__HOST_ONLY("where", NULL, cond, a, b);
    if (!cond) return NULL;
    tt_tensor *ab[2] = {a, b};
    if (!tt__check(ab, 2, "where") || !tt__check_compute(a, "where")) return NULL;
    tt_tensor *in[3] = {cond, a, b};
    int ondim;
    int64_t osh[TT_MAX_DIMS];
    if (!bshape("where", in, 3, &ondim, osh)) return NULL;
    tt_tensor *o = tt__temp(c, a->dtype, ondim, osh);
    if (!o) return NULL;
    FOR_BCAST(ondim, osh, cond, a, b, { tt__st(o, i, tt__ld(cond, oa) != 0 ? tt__ld(a, ob) : tt__ld(b, oc)); });
    if (tt__needs_grad(c, ab, 2) && !tt__record(c, "where", bw_where, o, in, 3)) return NULL;
    return o;
}

tt_tensor *tt_masked_fill(tt_ctx *c, tt_tensor *x, tt_tensor *mask, double v) {
    TT__HOST_ONLY("masked_fill", NULL, x, mask);
    if (!x || !mask || !tt__check_compute(x, "masked_fill")) return NULL;
    tt_tensor *in[2] = {x, mask};
    int ondim;
    int64_t osh[TT_MAX_DIMS];
    bool ok = bshape("masked_fill", in, 2, &ondim, osh) && ondim == x->ndim;
    for (int d = 0; ok && d < x->ndim; d++) ok = osh[d] == x->shape[d];
    if (!ok) {
        char s1[64], s2[64];
        tl_err(TL_ERR_INVALID, "train: masked_fill: mask %s does not broadcast to x %s", tt__shape_str(mask, s1, 64),
               tt__shape_str(x, s2, 64));
        return NULL;
    }
    tt_tensor *o = tt__temp(c, x->dtype, x->ndim, x->shape);
    if (!o) return NULL;
    FOR_BCAST(ondim, osh, mask, x, (tt_tensor *)NULL, { tt__st(o, i, tt__ld(mask, oa) != 0 ? v : tt__ld(x, ob)); });
    /* the backward is where()'s with x as the "else" branch: in = {mask, NULL, x} */
    tt_tensor *rin[3] = {mask, NULL, x};
    if (tt__needs_grad(c, &x, 1) && !tt__record(c, "masked_fill", bw_where, o, rin, 3)) return NULL;
    return o;
}
