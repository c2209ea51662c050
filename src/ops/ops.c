/* ops: scratch management for the op API (the kernels live in backend/). */
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "ops/ops.h"

tl_status ops_ctx_init(ops_ctx *c, tl_threadpool *tp, int64_t max_m, int64_t max_k, int64_t max_kv) {
    memset(c, 0, sizeof *c);
    c->tp = tp;
    /* the widest vec_dot_type is f32 (4 bytes per element) */
    size_t wb;
    if (!tl_mul_ok((size_t)max_m * (size_t)max_k, sizeof(float), &wb))
        return tl_err(TL_ERR_NOMEM, "ops: scratch size overflows");
    c->wbuf_size = wb;
    c->wbuf = aligned_alloc(64, (wb + 63) & ~(size_t)63);
    c->gscale_n = (size_t)max_m * (size_t)((max_k + 31) / 32) * 2 + 8;
    c->gscale = malloc(c->gscale_n * sizeof(float));
    c->att_stride = (max_kv + 15) & ~(int64_t)15;
    int nth = tl_threadpool_size(tp);
    c->att = aligned_alloc(64, (size_t)nth * (size_t)c->att_stride * sizeof(float));
    c->panel_stride = gemm_panel_bytes(max_k);
    if (gemm_f16_panel_bytes(max_k) > c->panel_stride) c->panel_stride = gemm_f16_panel_bytes(max_k);
    if (gemm_bf16_panel_bytes(max_k) > c->panel_stride) c->panel_stride = gemm_bf16_panel_bytes(max_k);
    c->panel = aligned_alloc(64, (size_t)nth * c->panel_stride);
    c->few_bytes = gemm_few_bytes(max_k);
    c->few = aligned_alloc(64, c->few_bytes + 64);
    if (!c->wbuf || !c->att || !c->gscale || !c->panel || !c->few) {
        ops_ctx_free(c);
        return tl_err(TL_ERR_NOMEM, "ops: cannot allocate %zu bytes of scratch", wb);
    }
    return TL_OK;
}

void ops_ctx_free(ops_ctx *c) {
    free(c->wbuf);
    free(c->att);
    free(c->gscale);
    free(c->panel);
    free(c->few);
    free(c->attp);
    memset(c, 0, sizeof *c);
}
