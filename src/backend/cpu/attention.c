/* backend/cpu/attention: causal attention of a batch of tokens, each against
 * its own sequence's keys in the paged f16 KV cache, optionally limited to a
 * sliding window of recent positions (gemma3).
 *
 * Work items are (token, KV head, span of positions). All query heads that
 * share the KV head (GQA) are done together, so each K and V row is read
 * once per item for all of them. A span is walked 16 positions at a time
 * (tiles aligned to multiples of 16) with an online softmax: the tile's
 * scores, the running max raised if needed (rescaling the running sum and
 * output), then the tile's V rows weighted in; K and V are read once. When
 * Positions come in spans of ATT_SPAN, each with its own (max, sum,
 * output), folded in position order. When the batch has too few (token,
 * KV head) pairs to occupy every thread (decode), the spans run on several
 * threads and are folded afterwards, so decode at depth scales with
 * threads; the fold is the same arithmetic, so a token's result does not
 * depend on the batch it is in or the thread count. Scores use the query rounded to f16, as the
 * reference engine's CPU path does with an f16 KV cache.
 * Calls: base (cpu, fp16, threadpool), backend/cpu/attention_f16, backend/cpu/gemm (f16 rounding). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attention_f16.h"
#include "backend/cpu/gemm.h"
#include "base/cpu.h"
#include "base/fp16.h"
#include "ops/ops.h"

/* the most query heads done together (their outputs live on the stack) */
#define ATT_GROUP_FLOATS 4096
/* positions per span: spans start at multiples of it, so a token's
 * arithmetic depends only on its own positions, not on the batch */
#define ATT_SPAN 128

typedef struct attn_task {
    const ops_attn_args *a;
    attn_scores_fn scores;
    attn_accum_fn accum;
    attn_exp_fn exps;
    int64_t n_split;   /* 1: each item does all spans of its pair; else the most spans of a token */
    float *part;       /* n_split > 1: [m][n_head][n_split][2 + head_dim] (max, sum, output) */
} attn_task;

static void scores_ref(const uint16_t *const *k, int n, const float *q, int64_t hd, float *s) {
    for (int i = 0; i < n; i++) {
        float d = 0.0f;
        for (int64_t e = 0; e < hd; e++) d += tl_fp16_to_fp32(k[i][e]) * q[e];
        s[i] = d;
    }
}

static float exp_ref(float *s, int n, float mx) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += (s[i] = expf(s[i] - mx));
    return sum;
}

static void accum_ref(float *o, const float *p, const uint16_t *const *v, int n, int64_t hd) {
    for (int i = 0; i < n; i++)
        for (int64_t e = 0; e < hd; e++) o[e] += p[i] * tl_fp16_to_fp32(v[i][e]);
}

/* heads h0..h0+ng of token j's query, rounded to f16, into q [ng][hd] */
static void attn_round_q(const ops_attn_args *a, int64_t j, int64_t h0, int ng, float *q) {
    const int64_t hd = a->head_dim;
    for (int g = 0; g < ng; g++) {
        const float *qg = a->q + j * a->q_stride + (h0 + g) * hd;
        if (tl_cpu_use_avx2()) { /* F16C: the same round to nearest even */
            gemm_round_f16_avx2(qg, q + g * hd, hd);
            continue;
        }
        for (int64_t e = 0; e < hd; e++) q[g * hd + e] = tl_fp16_to_fp32(tl_fp32_to_fp16(qg[e]));
    }
}

/* positions [p0, p1) for heads h0..h0+ng of token j (all reading KV head
 * hk; q their rounded queries): running max mx, sum l and unnormalized
 * output o [ng][hd] */
static void attn_span(const attn_task *t, int64_t j, int64_t hk, int ng, const float *q, int64_t p0, int64_t p1,
                      float *mx, float *l, float *o) {
    const ops_attn_args *a = t->a;
    const ops_kv_view *kv = &a->kv;
    const int64_t hd = a->head_dim, bsz = (int64_t)1 << kv->block_shift;
    const int32_t *tab = kv->table + (size_t)a->seq[j] * (size_t)kv->table_stride;
    for (int g = 0; g < ng; g++) {
        mx[g] = -INFINITY;
        l[g] = 0.0f;
    }
    memset(o, 0, sizeof(float) * (size_t)(ng * hd));
    for (int64_t p = p0; p < p1;) {
        /* tiles end at multiples of 16 positions, whatever the cache's block
         * size, so the arithmetic depends on positions only */
        const int n = (int)((p | 15) + 1 < p1 ? (p | 15) + 1 - p : p1 - p);
        const uint16_t *kr[16], *vr[16];
        for (int i = 0; i < n; i++) {
            const size_t off = (size_t)tab[(p + i) >> kv->block_shift] * (size_t)kv->block_stride +
                               (size_t)((p + i) & (bsz - 1)) * (size_t)kv->row + (size_t)(hk * hd);
            kr[i] = kv->k + off;
            vr[i] = kv->v + off;
        }
        for (int g = 0; g < ng; g++) {
            float s[16], bm = -INFINITY;
            t->scores(kr, n, q + g * hd, hd, s);
            for (int i = 0; i < n; i++) {
                s[i] *= a->scale;
                bm = s[i] > bm ? s[i] : bm;
            }
            float *og = o + g * hd;
            if (bm > mx[g]) {
                const float r = expf(mx[g] - bm); /* 0 on the first tile */
                if (l[g] > 0.0f)
                    for (int64_t e = 0; e < hd; e++) og[e] *= r;
                l[g] *= r;
                mx[g] = bm;
            }
            l[g] += t->exps(s, n, mx[g]);
            t->accum(og, s, vr, n, hd);
        }
        p += n;
    }
}

/* fold span c's (mx_c, l_c, o_c) into the running (M, L, O), spans in
 * position order (the same arithmetic whether or not spans ran apart) */
static void attn_fold(float *M, float *L, float *O, float mx, float l, const float *o, int64_t hd) {
    if (l == 0.0f) return; /* an empty span */
    if (mx > *M) {
        const float r = expf(*M - mx); /* 0 for the first span */
        if (*L > 0.0f)
            for (int64_t e = 0; e < hd; e++) O[e] *= r;
        *L *= r;
        *M = mx;
    }
    const float r = expf(mx - *M);
    *L += r * l;
    for (int64_t e = 0; e < hd; e++) O[e] += r * o[e];
}

/* token j's positions: [first, qpos] */
static void attn_range(const ops_attn_args *a, int64_t j, int64_t *first, int64_t *last) {
    const int64_t qpos = a->pos[j];
    *first = a->window > 0 && qpos - a->window + 1 > 0 ? qpos - a->window + 1 : 0;
    *last = qpos;
}

static int64_t attn_n_spans(const ops_attn_args *a, int64_t j) {
    int64_t f, l;
    attn_range(a, j, &f, &l);
    return l / ATT_SPAN - f / ATT_SPAN + 1;
}

static void attn_run(void *arg, int ith, int nth) {
    const attn_task *t = arg;
    const ops_attn_args *a = t->a;
    const int64_t hd = a->head_dim, group = a->n_head / a->n_head_kv;
    const int ng_max = (int)(group * hd <= ATT_GROUP_FLOATS ? group : ATT_GROUP_FLOATS / hd);
    const int64_t n_items = a->m * a->n_head_kv * t->n_split;
    float o[ATT_GROUP_FLOATS], mx[ATT_GROUP_FLOATS / 16], l[ATT_GROUP_FLOATS / 16];
    float O[ATT_GROUP_FLOATS], M[ATT_GROUP_FLOATS / 16], L[ATT_GROUP_FLOATS / 16], q[ATT_GROUP_FLOATS];
    for (int64_t it = ith; it < n_items; it += nth) {
        const int64_t c = it % t->n_split, jh = it / t->n_split, j = jh / a->n_head_kv, hk = jh % a->n_head_kv;
        int64_t first, last;
        attn_range(a, j, &first, &last);
        /* spans: absolute positions [ATT_SPAN s, ATT_SPAN (s + 1)) clipped to the range */
        const int64_t s0 = first / ATT_SPAN, ns = last / ATT_SPAN - s0 + 1;
        if (t->n_split > 1 && c >= ns) continue; /* this token has fewer spans */
        const int64_t sa = t->n_split > 1 ? s0 + c : s0, sb = t->n_split > 1 ? sa + 1 : s0 + ns;
        for (int64_t h0 = hk * group; h0 < (hk + 1) * group; h0 += ng_max) {
            const int ng = (int)((hk + 1) * group - h0 < ng_max ? (hk + 1) * group - h0 : ng_max);
            attn_round_q(a, j, h0, ng, q);
            for (int g = 0; g < ng; g++) M[g] = -INFINITY, L[g] = 0.0f;
            memset(O, 0, sizeof(float) * (size_t)(ng * hd));
            for (int64_t sp = sa; sp < sb; sp++) {
                const int64_t p0 = sp * ATT_SPAN > first ? sp * ATT_SPAN : first;
                const int64_t p1 = (sp + 1) * ATT_SPAN < last + 1 ? (sp + 1) * ATT_SPAN : last + 1;
                attn_span(t, j, hk, ng, q, p0, p1, mx, l, o);
                if (t->n_split > 1) {
                    for (int g = 0; g < ng; g++) {
                        float *pp = t->part + ((j * a->n_head + h0 + g) * t->n_split + c) * (2 + hd);
                        pp[0] = mx[g];
                        pp[1] = l[g];
                        memcpy(pp + 2, o + g * hd, sizeof(float) * (size_t)hd);
                    }
                } else {
                    for (int g = 0; g < ng; g++) attn_fold(&M[g], &L[g], O + g * hd, mx[g], l[g], o + g * hd, hd);
                }
            }
            if (t->n_split > 1) continue;
            for (int g = 0; g < ng; g++) {
                float *out = a->out + (j * a->n_head + h0 + g) * hd;
                const float inv = 1.0f / L[g];
                for (int64_t e = 0; e < hd; e++) out[e] = O[g * hd + e] * inv;
            }
        }
    }
}

/* the spans of one (token, head), run apart, folded in position order */
static void attn_merge(void *arg, int ith, int nth) {
    const attn_task *t = arg;
    const ops_attn_args *a = t->a;
    const int64_t hd = a->head_dim;
    for (int64_t jh = ith; jh < a->m * a->n_head; jh += nth) {
        const float *pp = t->part + jh * t->n_split * (2 + hd);
        const int64_t ns = attn_n_spans(a, jh / a->n_head);
        float M = -INFINITY, L = 0.0f, *out = a->out + jh * hd;
        memset(out, 0, sizeof(float) * (size_t)hd);
        for (int64_t c = 0; c < ns; c++) {
            const float *q = pp + c * (2 + hd);
            attn_fold(&M, &L, out, q[0], q[1], q + 2, hd);
        }
        const float inv = 1.0f / L;
        for (int64_t e = 0; e < hd; e++) out[e] *= inv;
    }
}

tl_status ops_attention_paged(ops_ctx *c, const ops_attn_args *a) {
    if (a->head_dim > 1024) return tl_err(TL_ERR_UNSUPPORTED, "attention: head_dim %d > 1024", (int)a->head_dim);
    attn_task t = {a, scores_ref, accum_ref, exp_ref, 1, NULL};
    if (tl_cpu_use_avx512() && a->head_dim % 16 == 0) {
        t.scores = attn_scores_avx512;
        t.accum = attn_accum_avx512;
        t.exps = attn_exp_avx512;
    } else if (tl_cpu_use_avx2() && a->head_dim % 8 == 0) {
        t.scores = attn_scores_avx2;
        t.accum = attn_accum_avx2;
    }
    /* spans run as items of their own when (token, KV head) pairs are
     * fewer than 4 per thread (decode); the result is the same either way */
    const int nth = tl_threadpool_size(c->tp);
    const int64_t pairs = a->m * a->n_head_kv;
    int64_t ns = 1;
    for (int64_t j = 0; j < a->m; j++) ns = attn_n_spans(a, j) > ns ? attn_n_spans(a, j) : ns;
    if (nth > 1 && pairs < 4 * nth && ns > 1) {
        const size_t need = (size_t)(a->m * a->n_head * ns * (2 + a->head_dim));
        if (need > c->attp_n) {
            float *p = realloc(c->attp, need * sizeof(float));
            if (p) c->attp = p, c->attp_n = need;
        }
        if (need <= c->attp_n) {
            t.n_split = ns;
            t.part = c->attp;
        }
    }
    tl_threadpool_run(c->tp, attn_run, &t);
    if (t.n_split > 1) tl_threadpool_run(c->tp, attn_merge, &t);
    return TL_OK;
}
