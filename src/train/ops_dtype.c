/* train/ops_dtype: tt_to, the conversion between dtypes, with a backward
 * that converts the gradient back. A storage-dtype (bf16/f16) input's
 * gradient is accumulated here in its own dtype, since the shared gradient
 * helpers add in f32/f64 only.
 * Owns: nothing. Calls: train internals. */
#include "train/tt_internal.h"

static tl_status bw_to(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    (void)c;
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *x = n->in[0];
    if (tt__is_compute(x->dtype)) {
        tt_tensor *gx = tt_new(x->dtype, g->ndim, g->shape);
        if (!gx) return TL_ERR_NOMEM;
        tt_copy_(gx, g);
        tl_status s = tt__acc_grad(x, gx);
        tt_free(gx);
        return s;
    }
    tt_tensor *gb = tt__grad_buf(x); /* contiguous, x's shape and dtype */
    if (!gb) return TL_ERR_NOMEM;
    int64_t m = tt_numel(gb);
    for (int64_t i = 0; i < m; i++) /* one rounding per accumulation */
        tt__st(gb, gb->offset + i, tt__ld(gb, gb->offset + i) + tt_get(g, i));
    return TL_OK;
}

tt_tensor *tt_to(tt_ctx *c, tt_tensor *x, tt_dtype dt) {
    TT__HOST_ONLY("to", NULL, x);
    if (!x) return NULL;
    if ((int)dt < TT_F32 || (int)dt > TT_I32) {
        tl_err(TL_ERR_INVALID, "train: to: unknown dtype %d", (int)dt);
        return NULL;
    }
    if (x->dtype == dt) return x;
    tt_tensor *o = tt__temp_any(c, dt, x->ndim, x->shape);
    if (!o) return NULL;
    tt_copy_(o, x);
    /* integers carry no gradient (as in PyTorch) */
    if (tt__is_float(dt) && tt__is_float(x->dtype) && tt__needs_grad(c, &x, 1) &&
        !tt__record(c, "to", bw_to, o, &x, 1))
        return NULL;
    return o;
}
