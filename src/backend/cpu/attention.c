/* backend/cpu/attention: causal attention over the f16 KV cache, optionally
 * limited to a sliding window of recent positions (gemma3).
 *
 * Work is split over (token, head) pairs. Each pair computes all its scores
 * into per-thread scratch, takes a max-subtracted softmax, then accumulates
 * the V rows. Scores use the F16 dot kernel of the quant layer with the
 * query rounded to f16, which is what the reference engine's CPU path does
 * when its KV cache is f16, so long-context logits track it. */
#include <math.h>
#include <string.h>

#include "base/fp16.h"
#include "ops/ops.h"
#include "quant/quant.h"

void attn_axpy_f16(float *acc, float a, const uint16_t *v, int64_t n);

typedef struct attn_task {
    ops_ctx *c;
    const float *q;
    const uint16_t *kc, *vc;
    int64_t m, pos0, n_head, n_head_kv, head_dim;
    float scale;
    int64_t window; /* > 0: keys at positions > query position - window only */
    float *out;
    const quant_kernels *f16;
} attn_task;

static void attn_run(void *arg, int ith, int nth) {
    attn_task *t = arg;
    const int64_t hd = t->head_dim;
    const int64_t kv_row = t->n_head_kv * hd;
    const int64_t group = t->n_head / t->n_head_kv;
    float *s = t->c->att + (int64_t)ith * t->c->att_stride;
    uint16_t qh[1024]; /* head_dim <= 1024 checked by the session */
    for (int64_t p = ith; p < t->m * t->n_head; p += nth) {
        const int64_t j = p / t->n_head, h = p % t->n_head, hk = h / group;
        const int64_t qpos = t->pos0 + j;
        /* keys first..qpos: n_kv of them, scored into s[0..n_kv) */
        const int64_t first = t->window > 0 && qpos - t->window + 1 > 0 ? qpos - t->window + 1 : 0;
        const int64_t n_kv = qpos + 1 - first;
        const uint16_t *kc = t->kc + first * kv_row, *vc = t->vc + first * kv_row;
        const float *qj = t->q + (j * t->n_head + h) * hd;
        t->f16->from_float(qj, qh, hd);
        float mx = -INFINITY;
        for (int64_t i = 0; i < n_kv; i++) {
            float d;
            t->f16->vec_dot(hd, &d, kc + i * kv_row + hk * hd, qh);
            s[i] = d * t->scale;
            if (s[i] > mx) mx = s[i];
        }
        double sum = 0.0;
        for (int64_t i = 0; i < n_kv; i++) {
            s[i] = expf(s[i] - mx);
            sum += s[i];
        }
        const float inv = (float)(1.0 / sum);
        float *o = t->out + (j * t->n_head + h) * hd;
        memset(o, 0, (size_t)hd * sizeof(float));
        /* probabilities rounded to f16 before weighting V: the reference
         * engine multiplies V (f16) by them as an f16 vector */
        for (int64_t i = 0; i < n_kv; i++)
            attn_axpy_f16(o, tl_fp16_to_fp32(tl_fp32_to_fp16(s[i] * inv)), vc + i * kv_row + hk * hd, hd);
    }
}

void ops_attention_window(ops_ctx *c, const float *q, const uint16_t *kc, const uint16_t *vc,
                          int64_t m, int64_t pos0, int64_t n_head, int64_t n_head_kv,
                          int64_t head_dim, float scale, int64_t window, float *out) {
    attn_task t = {c, q, kc, vc, m, pos0, n_head, n_head_kv, head_dim, scale, window, out,
                   quant_kernels_get(TL_TYPE_F16)};
    tl_threadpool_run(c->tp, attn_run, &t);
}

void ops_attention(ops_ctx *c, const float *q, const uint16_t *kc, const uint16_t *vc,
                   int64_t m, int64_t pos0, int64_t n_head, int64_t n_head_kv,
                   int64_t head_dim, float scale, float *out) {
    ops_attention_window(c, q, kc, vc, m, pos0, n_head, n_head_kv, head_dim, scale, 0, out);
}
