/* train/ops_frozen: linear through a frozen weight kept in its GGUF storage
 * type (f32, f16, bf16 or any quantized block type), for fine-tuning an
 * adapter on a model that is never converted to f32 as a whole:
 *   y[rows, out] = x[rows, in] @ W^T
 * W is dequantized a tile of rows at a time (about 1 MiB of f32, rows split
 * over the pool) and the tile's product runs through the f32 gemm; the
 * backward dequantizes the same tiles again for dx += dy @ W. W gets no
 * gradient and is only borrowed (it must outlive the step's backward).
 * Owns: nothing past a call. Calls: quant (dequantize), train/gemm. */
#include <stdlib.h>

#include "quant/quant.h"
#include "train/tt_internal.h"

typedef struct frozen_w {
    const void *w;
    tl_type type;
    int64_t n_in, n_out;
    size_t row_bytes;
} frozen_w;

typedef struct frozen_tile {
    const frozen_w *fw;
    int64_t r0, nr;
    float *dst;
    int bad;
} frozen_tile;

static void tile_rows(void *arg, int ith, int nth) {
    frozen_tile *t = arg;
    int64_t a, b;
    tt__split(t->nr, ith, nth, &a, &b);
    for (int64_t r = a; r < b; r++)
        if (quant_dequantize(t->fw->type, (const uint8_t *)t->fw->w + (size_t)(t->r0 + r) * t->fw->row_bytes,
                             t->dst + r * t->fw->n_in, t->fw->n_in))
            t->bad = 1;
}

static int64_t tile_len(const frozen_w *fw) {
    int64_t n = (1 << 18) / (fw->n_in > 0 ? fw->n_in : 1);
    return n < 16 ? 16 : n;
}

/* Dequantize rows [r0, r0 + nr) of W into dst [nr][n_in]. */
static tl_status tile_load(tt_ctx *c, const frozen_w *fw, int64_t r0, int64_t nr, float *dst) {
    frozen_tile t = {fw, r0, nr, dst, 0};
    if (c->tp && nr * fw->n_in >= TT_PAR_MIN) tl_threadpool_run(c->tp, tile_rows, &t);
    else tile_rows(&t, 0, 1);
    return t.bad ? tl_err(TL_ERR_UNSUPPORTED, "train: linear_frozen: cannot dequantize %s", tl_type_name(fw->type))
                 : TL_OK;
}

static tl_status bw_frozen(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    tt_tensor *x = n->in[0];
    const frozen_w *fw = n->extra;
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *gx = tt__grad_buf(x);
    if (!gx) return TL_ERR_NOMEM;
    int64_t rows = tt_numel(x) / fw->n_in, tl = tile_len(fw);
    float *tile = malloc((size_t)tl * (size_t)fw->n_in * sizeof *tile);
    if (!tile) return tl_err(TL_ERR_NOMEM, "train: linear_frozen: out of memory");
    tl_status s = TL_OK;
    for (int64_t r0 = 0; r0 < fw->n_out && !s; r0 += tl) { /* dx += dy[:, r0..] @ W[r0..] */
        int64_t nr = fw->n_out - r0 < tl ? fw->n_out - r0 : tl;
        if (!(s = tile_load(c, fw, r0, nr, tile)))
            tt_gemm_f32(c->tp, rows, fw->n_in, nr, (const float *)tt_data(g) + r0, fw->n_out, 1, tile, fw->n_in, 1,
                        tt_data(gx), fw->n_in, true);
    }
    free(tile);
    return s;
}

tt_tensor *tt_linear_frozen(tt_ctx *c, tt_tensor *x, const void *w, uint32_t type, int64_t n_in, int64_t n_out) {
    TT__HOST_ONLY("linear_frozen", NULL, x);
    if (!x) return NULL;
    const tl_type_info *ti = tl_type_get(type);
    size_t rb = ti && n_in > 0 ? tl_row_bytes(type, n_in) : 0;
    if (!w || !rb || n_out < 1 || x->dtype != TT_F32 || x->shape[x->ndim - 1] != n_in || !quant_kernels_get(type) ||
        !quant_kernels_get(type)->to_float) {
        tl_err(TL_ERR_INVALID, "train: linear_frozen: f32 x [..., %lld] with a %s W [%lld, %lld]",
               (long long)x->shape[x->ndim - 1], tl_type_name(type), (long long)n_out, (long long)n_in);
        return NULL;
    }
    tt_tensor *xc = tt_contiguous(c, x);
    if (!xc) return NULL;
    int64_t sh[TT_MAX_DIMS], rows = tt_numel(x) / n_in;
    memcpy(sh, x->shape, sizeof sh);
    sh[x->ndim - 1] = n_out;
    tt_tensor *o = tt__temp(c, TT_F32, x->ndim, sh);
    frozen_w *fw = malloc(sizeof *fw);
    if (!o || !fw) {
        free(fw);
        if (o) tl_err(TL_ERR_NOMEM, "train: linear_frozen: out of memory");
        return NULL;
    }
    *fw = (frozen_w){w, (tl_type)type, n_in, n_out, rb};
    int64_t tl = tile_len(fw);
    float *tile = malloc((size_t)tl * (size_t)n_in * sizeof *tile);
    tl_status s = tile ? TL_OK : tl_err(TL_ERR_NOMEM, "train: linear_frozen: out of memory");
    for (int64_t r0 = 0; r0 < n_out && !s; r0 += tl) { /* y[:, r0..] = x @ W[r0..]^T */
        int64_t nr = n_out - r0 < tl ? n_out - r0 : tl;
        if (!(s = tile_load(c, fw, r0, nr, tile)))
            tt_gemm_f32(c->tp, rows, nr, n_in, tt_data(xc), n_in, 1, tile, 1, n_in, (float *)tt_data(o) + r0, n_out,
                        false);
    }
    free(tile);
    if (s) {
        free(fw);
        return NULL;
    }
    if (tt__needs_grad(c, &xc, 1)) {
        tt_node *n = tt__record(c, "linear_frozen", bw_frozen, o, &xc, 1);
        if (!n) {
            free(fw);
            return NULL;
        }
        n->extra = fw;
    } else {
        free(fw);
    }
    return o;
}
