/* train/cuda/ops_frozen_cuda: the CUDA face of tt_linear_frozen. Each
 * matmul dequantizes the whole weight into f32 scratch with the engine's
 * kernel (tcu_frozen_dequant) and runs the framework's linear on it in the
 * context's matmul precision, so a forward and its backward see the same
 * values; the scratch goes back to the pool once the work is queued.
 * Owns: nothing. Calls: train internals, train/cuda/tcu. */
#include <string.h>

#include "train/cuda/tcu.h"
#include "train/tt_internal.h"

typedef struct frozen_saved {
    const tcu_frozen *w;
    int64_t n_in, n_out;
    int mode;
} frozen_saved;

/* *w: W as f32 [n_out, n_in] in pool scratch of *nbytes, followed (at
 * after_w) by the linear's own scratch of M rows, forward or backward. */
static tl_status dequant_scratch(tt_ctx *c, const frozen_saved *f, int64_t M, bool bwd, float **w, size_t *nbytes) {
    *nbytes = (size_t)f->n_out * (size_t)f->n_in * sizeof(float) + 256 +
              tt__cu_linear_scratch(f->mode, M, f->n_out, f->n_in, bwd);
    if (!(*w = tt__pool_take(c, TT_CUDA, *nbytes))) return TL_ERR_NOMEM;
    tl_status s = tcu_frozen_dequant(f->w, *w);
    if (s) tt__pool_put(c, TT_CUDA, *w, *nbytes);
    return s;
}

static void *after_w(float *w, const frozen_saved *f) {
    return (char *)w + ((size_t)f->n_out * (size_t)f->n_in * sizeof(float) + 255) / 256 * 256;
}

static tl_status bw_frozen_cu(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    const frozen_saved *f = n->extra;
    tt_tensor *x = n->in[0];
    if (!tt__need(n, 0)) return TL_OK;
    bool fresh;
    tt_tensor *gx = tt__grad_buf_for_write(x, &fresh);
    tt_tensor *gc = tt__contig(c, (tt_tensor *)g);
    if (!gx || !gc) return TL_ERR_NOMEM;
    const int64_t M = tt_numel(x) / f->n_in;
    size_t nb;
    float *w;
    tl_status s = dequant_scratch(c, f, M, true, &w, &nb);
    if (s) return s;
    s = tcu_linear_bwd(tt_data(gx), !fresh, NULL, false, NULL, tt_data(gc), NULL, w, M, f->n_out, f->n_in, f->mode,
                       after_w(w, f));
    tt__pool_put(c, TT_CUDA, w, nb);
    return s;
}

tt_tensor *tt__cu_linear_frozen(tt_ctx *c, tt_tensor *x, struct tcu_frozen *wt, int64_t n_in, int64_t n_out) {
    x = tt_contiguous(c, x);
    if (!x) return NULL;
    const frozen_saved f = {wt, n_in, n_out, (int)c->mm_prec};
    const int64_t M = tt_numel(x) / n_in;
    int64_t sh[TT_MAX_DIMS];
    memcpy(sh, x->shape, sizeof sh);
    sh[x->ndim - 1] = n_out;
    tt_tensor *o = tt__temp_on(c, TT_CUDA, TT_F32, x->ndim, sh);
    size_t nb;
    float *w;
    if (!o || dequant_scratch(c, &f, M, false, &w, &nb)) return NULL;
    tl_status s = tcu_linear_fwd(tt_data(o), tt_data(x), w, NULL, M, n_out, n_in, f.mode, after_w(w, &f));
    tt__pool_put(c, TT_CUDA, w, nb);
    if (s) return NULL;
    return tt__cu_record_saved(c, "linear_frozen", bw_frozen_cu, o, &x, 1, &f, sizeof f) ? o : NULL;
}
