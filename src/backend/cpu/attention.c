/* backend/cpu/attention: causal attention of a batch of tokens, each against
 * its own sequence's keys in the paged f16 KV cache, optionally limited to a
 * sliding window of recent positions (gemma3).
 *
 * Work items are (token, KV head, span of positions). All query heads that
 * share the KV head (GQA) are done together, so each K and V row is read
 * once per item for all of them. A span is walked one KV cache block (at
 * most 16 positions of it) at a time with an online softmax: the block's scores, the
 * running max raised if needed (rescaling the running sum and output),
 * then the block's V rows weighted in; K and V are each read once. When
 * the batch has too few (token, KV head) pairs to occupy every thread
 * (decode), each pair's positions are split into spans on several threads
 * and the spans' (max, sum, output) are merged afterwards, so decode at
 * depth scales with threads. Scores use the query rounded to f16, as the
 * reference engine's CPU path does with an f16 KV cache.
 * Calls: base (cpu, fp16, threadpool), backend/cpu/attention_f16. */
#include <math.h>
#include <string.h>

#include "backend/cpu/attention_f16.h"
#include "base/cpu.h"
#include "base/fp16.h"
#include "ops/ops.h"

/* the most query heads done together (their outputs live on the stack) */
#define ATT_GROUP_FLOATS 4096

typedef struct attn_task {
    const ops_attn_args *a;
    attn_scores_fn scores;
    attn_accum_fn accum;
    int64_t n_split;   /* spans per (token, KV head) */
    float *part;       /* n_split > 1: [m][n_head][n_split][2 + head_dim] (max, sum, output) */
} attn_task;

static void scores_ref(const uint16_t *k, int64_t stride, int n, const float *q, int64_t hd, float *s) {
    for (int i = 0; i < n; i++, k += stride) {
        float d = 0.0f;
        for (int64_t e = 0; e < hd; e++) d += tl_fp16_to_fp32(k[e]) * q[e];
        s[i] = d;
    }
}

static void accum_ref(float *o, const float *p, const uint16_t *v, int64_t stride, int n, int64_t hd) {
    for (int i = 0; i < n; i++, v += stride)
        for (int64_t e = 0; e < hd; e++) o[e] += p[i] * tl_fp16_to_fp32(v[e]);
}

/* positions [p0, p1) for heads h0..h0+ng of token j (all reading KV head
 * hk): running max mx, sum l and unnormalized output o [ng][hd] */
static void attn_span(const attn_task *t, int64_t j, int64_t hk, int64_t h0, int ng, int64_t p0, int64_t p1,
                      float *mx, float *l, float *o) {
    const ops_attn_args *a = t->a;
    const ops_kv_view *kv = &a->kv;
    const int64_t hd = a->head_dim, bsz = (int64_t)1 << kv->block_shift;
    const int32_t *tab = kv->table + (size_t)a->seq[j] * (size_t)kv->table_stride;
    float q[ATT_GROUP_FLOATS];
    for (int g = 0; g < ng; g++) {
        const float *qg = a->q + j * a->q_stride + (h0 + g) * hd;
        for (int64_t e = 0; e < hd; e++) q[g * hd + e] = tl_fp16_to_fp32(tl_fp32_to_fp16(qg[e]));
        mx[g] = -INFINITY;
        l[g] = 0.0f;
    }
    memset(o, 0, sizeof(float) * (size_t)(ng * hd));
    for (int64_t p = p0; p < p1;) {
        /* the rest of p's cache block, at most to p1 and 16 positions */
        const int64_t in_blk = p & (bsz - 1);
        int64_t nn = p1 - p < bsz - in_blk ? p1 - p : bsz - in_blk;
        const int n = (int)(nn < 16 ? nn : 16);
        const size_t off = (size_t)tab[p >> kv->block_shift] * (size_t)kv->block_stride + (size_t)in_blk * (size_t)kv->row +
                           (size_t)(hk * hd);
        for (int g = 0; g < ng; g++) {
            float s[16], bm = -INFINITY;
            t->scores(kv->k + off, kv->row, n, q + g * hd, hd, s);
            for (int i = 0; i < n; i++) {
                s[i] *= a->scale;
                bm = s[i] > bm ? s[i] : bm;
            }
            float *og = o + g * hd;
            if (bm > mx[g]) {
                const float r = expf(mx[g] - bm); /* 0 on the first block */
                if (l[g] > 0.0f)
                    for (int64_t e = 0; e < hd; e++) og[e] *= r;
                l[g] *= r;
                mx[g] = bm;
            }
            float sum = 0.0f;
            for (int i = 0; i < n; i++) sum += (s[i] = expf(s[i] - mx[g]));
            l[g] += sum;
            t->accum(og, s, kv->v + off, kv->row, n, hd);
        }
        p += n;
    }
}

static void attn_run(void *arg, int ith, int nth) {
    const attn_task *t = arg;
    const ops_attn_args *a = t->a;
    const int64_t hd = a->head_dim, group = a->n_head / a->n_head_kv;
    const int ng_max = (int)(group * hd <= ATT_GROUP_FLOATS ? group : ATT_GROUP_FLOATS / hd);
    const int64_t n_items = a->m * a->n_head_kv * t->n_split;
    float o[ATT_GROUP_FLOATS], mx[ATT_GROUP_FLOATS / 16], l[ATT_GROUP_FLOATS / 16];
    for (int64_t it = ith; it < n_items; it += nth) {
        const int64_t c = it % t->n_split, jh = it / t->n_split, j = jh / a->n_head_kv, hk = jh % a->n_head_kv;
        const int64_t qpos = a->pos[j];
        const int64_t first = a->window > 0 && qpos - a->window + 1 > 0 ? qpos - a->window + 1 : 0;
        const int64_t n_kv = qpos + 1 - first;
        const int64_t p0 = first + n_kv * c / t->n_split, p1 = first + n_kv * (c + 1) / t->n_split;
        for (int64_t h0 = hk * group; h0 < (hk + 1) * group; h0 += ng_max) {
            const int ng = (int)((hk + 1) * group - h0 < ng_max ? (hk + 1) * group - h0 : ng_max);
            attn_span(t, j, hk, h0, ng, p0, p1, mx, l, o);
            for (int g = 0; g < ng; g++) {
                if (t->n_split == 1) {
                    float *out = a->out + (j * a->n_head + h0 + g) * hd;
                    const float inv = 1.0f / l[g];
                    for (int64_t e = 0; e < hd; e++) out[e] = o[g * hd + e] * inv;
                } else {
                    float *pp = t->part + ((j * a->n_head + h0 + g) * t->n_split + c) * (2 + hd);
                    pp[0] = mx[g];
                    pp[1] = l[g];
                    memcpy(pp + 2, o + g * hd, sizeof(float) * (size_t)hd);
                }
            }
        }
    }
}

/* spans of one (token, head) merged: out = sum_c e^(mx_c - M) o_c / sum_c e^(mx_c - M) l_c */
static void attn_merge(void *arg, int ith, int nth) {
    const attn_task *t = arg;
    const ops_attn_args *a = t->a;
    const int64_t hd = a->head_dim;
    for (int64_t jh = ith; jh < a->m * a->n_head; jh += nth) {
        const float *pp = t->part + jh * t->n_split * (2 + hd);
        float M = -INFINITY, L = 0.0f;
        for (int64_t c = 0; c < t->n_split; c++) M = pp[c * (2 + hd)] > M ? pp[c * (2 + hd)] : M;
        float *out = a->out + jh * hd;
        memset(out, 0, sizeof(float) * (size_t)hd);
        for (int64_t c = 0; c < t->n_split; c++) {
            const float *q = pp + c * (2 + hd);
            if (q[1] == 0.0f) continue; /* an empty span */
            const float r = expf(q[0] - M);
            L += r * q[1];
            for (int64_t e = 0; e < hd; e++) out[e] += r * q[2 + e];
        }
        const float inv = 1.0f / L;
        for (int64_t e = 0; e < hd; e++) out[e] *= inv;
    }
}

tl_status ops_attention_paged(ops_ctx *c, const ops_attn_args *a) {
    if (a->head_dim > 1024) return tl_err(TL_ERR_UNSUPPORTED, "attention: head_dim %d > 1024", (int)a->head_dim);
    attn_task t = {a, scores_ref, accum_ref, 1, c->att};
    if (tl_cpu_use_avx512() && a->head_dim % 16 == 0) {
        t.scores = attn_scores_avx512;
        t.accum = attn_accum_avx512;
    } else if (tl_cpu_use_avx2() && a->head_dim % 8 == 0) {
        t.scores = attn_scores_avx2;
        t.accum = attn_accum_avx2;
    }
    /* split positions when (token, KV head) pairs are fewer than 4 per
     * thread: spans of at least 64 positions, as the scratch allows */
    const int nth = tl_threadpool_size(c->tp);
    const int64_t pairs = a->m * a->n_head_kv;
    int64_t longest = 0;
    for (int64_t j = 0; j < a->m; j++) longest = a->pos[j] + 1 > longest ? a->pos[j] + 1 : longest;
    if (a->window > 0 && longest > a->window) longest = a->window;
    if (nth > 1 && pairs < 4 * nth) {
        int64_t ns = (4 * nth + pairs - 1) / pairs;
        if (ns > longest / 64) ns = longest / 64;
        const int64_t cap = (int64_t)nth * c->att_stride / (a->m * a->n_head * (2 + a->head_dim));
        if (ns > cap) ns = cap;
        t.n_split = ns > 1 ? ns : 1;
    }
    tl_threadpool_run(c->tp, attn_run, &t);
    if (t.n_split > 1) tl_threadpool_run(c->tp, attn_merge, &t);
    return TL_OK;
}
