/* backend/cpu/attention: causal attention of a batch of tokens, each against
 * its own sequence's keys in the paged f16 KV cache, optionally limited to a
 * sliding window of recent positions (gemma3).
 *
 * Work is split over (token, head) pairs. Each pair walks its sequence's
 * blocks through the page table, computing all its scores into per-thread
 * scratch, takes a max-subtracted softmax, then accumulates the V rows.
 * Scores use the F16 dot kernel of the quant layer with the query rounded to
 * f16, which is what the reference engine's CPU path does when its KV cache
 * is f16, so long-context logits track it. */
#include <math.h>
#include <string.h>

#include "base/fp16.h"
#include "ops/ops.h"
#include "quant/quant.h"

void attn_axpy_f16(float *acc, float a, const uint16_t *v, int64_t n);

typedef struct attn_task {
    ops_ctx *c;
    const ops_attn_args *a;
    const quant_kernels *f16;
} attn_task;

/* K (or V) row of position p of the sequence whose page table is tab */
static inline const uint16_t *attn_row(const ops_kv_view *kv, const uint16_t *base, const int32_t *tab, int64_t p) {
    return base + (size_t)tab[p >> kv->block_shift] * (size_t)kv->block_stride +
           (size_t)(p & ((1 << kv->block_shift) - 1)) * (size_t)kv->row;
}

static void attn_run(void *arg, int ith, int nth) {
    attn_task *t = arg;
    const ops_attn_args *a = t->a;
    const ops_kv_view *kv = &a->kv;
    const int64_t hd = a->head_dim, group = a->n_head / a->n_head_kv;
    float *s = t->c->att + (int64_t)ith * t->c->att_stride;
    uint16_t qh[1024]; /* head_dim <= 1024 checked by the context */
    for (int64_t p = ith; p < a->m * a->n_head; p += nth) {
        const int64_t j = p / a->n_head, h = p % a->n_head, hk = h / group;
        const int64_t qpos = a->pos[j];
        const int32_t *tab = kv->table + (size_t)a->seq[j] * (size_t)kv->table_stride;
        /* keys first..qpos: n_kv of them, scored into s[0..n_kv) */
        const int64_t first = a->window > 0 && qpos - a->window + 1 > 0 ? qpos - a->window + 1 : 0;
        const int64_t n_kv = qpos + 1 - first;
        const float *qj = a->q + j * a->q_stride + h * hd;
        t->f16->from_float(qj, qh, hd);
        float mx = -INFINITY;
        for (int64_t i = 0; i < n_kv; i++) {
            float d;
            t->f16->vec_dot(hd, &d, attn_row(kv, kv->k, tab, first + i) + hk * hd, qh);
            s[i] = d * a->scale;
            if (s[i] > mx) mx = s[i];
        }
        double sum = 0.0;
        for (int64_t i = 0; i < n_kv; i++) {
            s[i] = expf(s[i] - mx);
            sum += s[i];
        }
        const float inv = (float)(1.0 / sum);
        float *o = a->out + (j * a->n_head + h) * hd;
        memset(o, 0, (size_t)hd * sizeof(float));
        /* probabilities rounded to f16 before weighting V: the reference
         * engine multiplies V (f16) by them as an f16 vector */
        for (int64_t i = 0; i < n_kv; i++)
            attn_axpy_f16(o, tl_fp16_to_fp32(tl_fp32_to_fp16(s[i] * inv)), attn_row(kv, kv->v, tab, first + i) + hk * hd,
                          hd);
    }
}

tl_status ops_attention_paged(ops_ctx *c, const ops_attn_args *a) {
    int64_t longest = 0;
    for (int64_t j = 0; j < a->m; j++) {
        const int64_t len = a->window > 0 && a->pos[j] + 1 > a->window ? a->window : a->pos[j] + 1;
        if (len > longest) longest = len;
    }
    if (longest > c->att_stride)
        return tl_err(TL_ERR_INVALID, "attention: a token sees %lld positions, the scratch holds %lld",
                      (long long)longest, (long long)c->att_stride);
    if (a->head_dim > 1024) return tl_err(TL_ERR_UNSUPPORTED, "attention: head_dim %d > 1024", (int)a->head_dim);
    attn_task t = {c, a, quant_kernels_get(TL_TYPE_F16)};
    tl_threadpool_run(c->tp, attn_run, &t);
    return TL_OK;
}
