/* lora/lora_merge: bake adapters into a model file: W' = W + sum_u s_u B_u A_u
 * for every weight some adapter changes, every other tensor and key copied.
 * Each merged tensor is produced while the file is written (a fill
 * callback: a row of W dequantized to f32, its low-rank rows added, then
 * quantized to the output type; rows split over a thread pool), so only the
 * mapped base and one output tensor are in memory. The file is written as
 * out_path.tmp and renamed by the writer.
 * Owns: nothing past the call. Calls: io/gguf, quant, base/threadpool,
 * llm/model (the base's file and shapes). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "io/gguf.h"
#include "llm/model.h"
#include "lora/lora.h"
#include "quant/quant.h"

typedef struct merge_job {
    const tl_lora_use *u;
    int32_t n_use;
    int layer;
    lora_wid w;
    const gguf_tensor *src;
    tl_type dst;
    char name[96];
    uint8_t *out;
    float **scratch;  /* [threads][n_in + max rank] */
    tl_threadpool *tp;
    atomic_int failed;
} merge_job;

static void merge_rows(void *arg, int ith, int nth) {
    merge_job *j = arg;
    const int64_t n_in = j->src->ne[0], n_out = j->src->ne[1];
    const size_t src_row = tl_row_bytes(j->src->type, n_in), dst_row = tl_row_bytes(j->dst, n_in);
    float *row = j->scratch[ith];
    for (int64_t o = n_out * ith / nth; o < n_out * (ith + 1) / nth; o++) {
        if (quant_dequantize(j->src->type, (const uint8_t *)j->src->data + (size_t)o * src_row, row, n_in)) {
            atomic_store(&j->failed, 1);
            return;
        }
        for (int32_t k = 0; k < j->n_use; k++) {
            const lora_weight *lw = lora_get(j->u[k].lora, j->layer, j->w);
            if (!lw->rank) continue;
            const float s = j->u[k].scale * lw->scale;
            for (int32_t r = 0; r < lw->rank; r++) {
                const float c = s * lw->b[o * lw->rank + r], *a = lw->a + (int64_t)r * n_in;
                for (int64_t i = 0; i < n_in; i++) row[i] += c * a[i];
            }
        }
        if (quant_quantize(j->dst, row, j->out + (size_t)o * dst_row, n_in)) {
            atomic_store(&j->failed, 1);
            return;
        }
    }
}

static tl_status merge_fill(void *ctx, void *dst, size_t size) {
    merge_job *j = ctx;
    j->out = dst;
    atomic_store(&j->failed, 0);
    tl_threadpool_run(j->tp, merge_rows, j);
    if (atomic_load(&j->failed))
        return tl_err(TL_ERR_UNSUPPORTED, "lora merge: tensor '%s': %s -> %s failed", j->name,
                      tl_type_name(j->src->type), tl_type_name(j->dst));
    return TL_OK;
}

static bool adapted(const tl_lora_use *u, int32_t n, int layer, lora_wid w) {
    for (int32_t k = 0; k < n; k++)
        if (layer < u[k].lora->n_layer && lora_get(u[k].lora, layer, w)->rank && u[k].scale != 0.0f) return true;
    return false;
}

tl_status lora_merge(const tl_model *m, const tl_lora_use *u, int32_t n, const char *out_path, const char *type,
                     int n_threads) {
    lora_set chk;
    for (int32_t k = 0; k < n; k += LORA_SET_MAX) { /* same checks as attaching, any count */
        tl_status s = lora_set_make(&chk, m, u + k, n - k < LORA_SET_MAX ? n - k : LORA_SET_MAX);
        if (s) return tl_err_prefix(s, "lora merge: ");
    }
    tl_type want = TL_TYPE_F32;
    if (type && !tl_type_from_name(type, &want))
        return tl_err(TL_ERR_INVALID, "lora merge: unknown type '%s'", type);
    const gguf_file *f = m->gguf;
    int64_t nt = gguf_n_tensors(f);
    merge_job *jobs = calloc((size_t)(nt ? nt : 1), sizeof *jobs);
    tl_threadpool *tp = NULL;
    gguf_writer *w = NULL;
    float **scratch = NULL;
    int nth = 0;
    tl_status s = jobs ? TL_OK : tl_err(TL_ERR_NOMEM, "lora merge: out of memory");
    if (!s) s = tl_threadpool_init(n_threads > 0 ? n_threads : 1, &tp);
    if (!s) {
        nth = tl_threadpool_size(tp);
        scratch = calloc((size_t)nth, sizeof *scratch);
        int64_t n_in = m->hp.n_embd; /* longest row of an adaptable weight */
        if (m->hp.n_ff > n_in) n_in = m->hp.n_ff;
        if ((int64_t)m->hp.n_head * m->hp.head_dim > n_in) n_in = (int64_t)m->hp.n_head * m->hp.head_dim;
        for (int i = 0; scratch && i < nth; i++)
            if (!(scratch[i] = malloc((size_t)n_in * sizeof(float))))
                s = tl_err(TL_ERR_NOMEM, "lora merge: out of memory");
        if (!scratch) s = tl_err(TL_ERR_NOMEM, "lora merge: out of memory");
    }
    if (!s) s = gguf_writer_init(&w);
    if (!s) s = gguf_writer_copy_kvs(w, f);
    for (int64_t i = 0; i < nt && !s; i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        merge_job *j = &jobs[i];
        snprintf(j->name, sizeof j->name, "%.*s", (int)t->name.len, t->name.ptr);
        int layer;
        lora_wid wid;
        if (!lora_parse_gguf_name(t->name.ptr, t->name.len, &layer, &wid) || !adapted(u, n, layer, wid)) {
            s = gguf_writer_add_tensor(w, j->name, t->type, t->n_dims, t->ne, t->data, t->size);
            continue;
        }
        *j = (merge_job){.u = u, .n_use = n, .layer = layer, .w = wid, .src = t, .scratch = scratch, .tp = tp};
        snprintf(j->name, sizeof j->name, "%.*s", (int)t->name.len, t->name.ptr);
        j->dst = quant_row_fallback(type ? want : t->type, t->ne[0]);
        size_t row = tl_row_bytes(j->dst, t->ne[0]);
        if (!row || !quant_kernels_get(j->dst) || !quant_kernels_get(j->dst)->from_float) {
            s = tl_err(TL_ERR_UNSUPPORTED, "lora merge: tensor '%s': cannot write type %s", j->name,
                       tl_type_name(j->dst));
            break;
        }
        s = gguf_writer_add_tensor_fill(w, j->name, j->dst, t->n_dims, t->ne, row * (size_t)t->ne[1], merge_fill, j);
    }
    if (!s) s = gguf_writer_write(w, out_path);
    gguf_writer_free(w);
    for (int i = 0; scratch && i < nth; i++) free(scratch[i]);
    free(scratch);
    if (tp) tl_threadpool_free(tp);
    free(jobs);
    return s;
}
