/* train/ops_frozen: linear through a frozen weight kept in its GGUF storage
 * type (f32, f16, bf16 or any quantized block type), for fine-tuning an
 * adapter on a model that is never converted to f32 as a whole:
 *   y[rows, out] = x[rows, in] @ W^T
 * On the CPU, W is borrowed and dequantized a tile of rows at a time (about
 * 1 MiB of f32, rows split over the pool) and the tile's product runs
 * through the f32 gemm; the backward dequantizes the same tiles again for
 * dx += dy @ W. On CUDA, W is uploaded once in the engine's layout and
 * dequantized whole into scratch for each matmul (train/cuda). W gets no
 * gradient and must outlive the step's backward.
 * Owns: a CUDA weight's device copy. Calls: quant (dequantize), train/gemm,
 * train/cuda. */
#include <stdlib.h>

#include "quant/quant.h"
#include "train/tt_internal.h"
#ifdef TALLOW_CUDA
#include "train/cuda/tcu.h"
#endif

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

struct tt_frozen {
    tt_device dev;
    frozen_w w; /* CPU: the borrowed bytes; CUDA: sizes and type only */
    void *cu;   /* CUDA: the device copy (tcu_frozen) */
};

tl_status tt_frozen_init(tt_frozen **out, tt_device dev, const void *w, uint32_t type, int64_t n_in, int64_t n_out) {
    *out = NULL;
    const tl_type_info *ti = tl_type_get(type);
    size_t rb = ti && n_in > 0 ? tl_row_bytes(type, n_in) : 0;
    if (!w || !rb || n_out < 1 || !quant_kernels_get(type) || !quant_kernels_get(type)->to_float)
        return tl_err(TL_ERR_INVALID, "train: frozen weight: a %s W [%lld, %lld] cannot be read",
                      ti ? tl_type_name(type) : "unknown-type", (long long)n_out, (long long)n_in);
    if (!tt_device_available(dev))
        return tl_err(TL_ERR_UNSUPPORTED, "train: frozen weight: device %s is not available", tt_device_name(dev));
    tt_frozen *f = calloc(1, sizeof *f);
    if (!f) return tl_err(TL_ERR_NOMEM, "train: frozen weight: out of memory");
    *f = (tt_frozen){dev, {w, (tl_type)type, n_in, n_out, rb}, NULL};
#ifdef TALLOW_CUDA
    if (dev == TT_CUDA) {
        tl_status s = tcu_frozen_upload((tcu_frozen **)&f->cu, w, type, n_in, n_out);
        if (s) {
            free(f);
            return s;
        }
        f->w.w = NULL; /* not borrowed: the host bytes may go */
    }
#endif
    *out = f;
    return TL_OK;
}

void tt_frozen_free(tt_frozen *f) {
    if (!f) return;
#ifdef TALLOW_CUDA
    tcu_frozen_free(f->cu);
#endif
    free(f);
}

tt_tensor *tt_linear_frozen(tt_ctx *c, tt_tensor *x, const tt_frozen *f) {
    if (!x) return NULL;
    if (!f) {
        tl_err(TL_ERR_INVALID, "train: linear_frozen: no weight");
        return NULL;
    }
    const int64_t n_in = f->w.n_in, n_out = f->w.n_out;
    if (x->dtype != TT_F32 || x->shape[x->ndim - 1] != n_in || tt__dev(x) != f->dev) {
        tl_err(TL_ERR_INVALID, "train: linear_frozen: f32 x [..., %lld] on %s with a %s W [%lld, %lld] on %s",
               (long long)x->shape[x->ndim - 1], tt_device_name(tt__dev(x)), tl_type_name(f->w.type),
               (long long)n_out, (long long)n_in, tt_device_name(f->dev));
        return NULL;
    }
#ifdef TALLOW_CUDA
    if (f->dev == TT_CUDA) return tt__cu_linear_frozen(c, x, (struct tcu_frozen *)f->cu, n_in, n_out);
#endif
    const frozen_w *w = &f->w;
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
    *fw = *w;
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
