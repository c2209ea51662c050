/* backend/cpu/attention: causal attention of a batch of tokens, each against
 * its own sequence's keys in the paged f16 KV cache, optionally limited to a
 * sliding window of recent positions (gemma3).
 *
 * Flash-style tiles: a query tile is up to tq consecutive batch rows of one
 * sequence times the query heads of one KV head (GQA: all of its group, or
 * a part of it for wide heads); a KV tile is 16 positions starting at a
 * multiple of 16. Each KV tile's K and V rows are converted to f32 once and
 * used by every query of the tile that sees any of its positions (tiles no
 * query sees are skipped: the causal mask and the window), with an online
 * softmax per query (tile scores, running max raised if needed, running
 * sum and output rescaled, V rows weighted in); no scores beyond a tile's
 * are kept, and K and V are read once per query tile.
 *
 * Positions also come in spans of ATT_SPAN, each with its own (max, sum,
 * output), folded in position order. When the batch has too few (token,
 * KV head) pairs to occupy every thread (decode), a token's spans run as
 * items of their own on all threads and are folded afterwards. Spans and
 * tiles sit at absolute positions, and a query's arithmetic involves only
 * its own positions, so a token's result is the same bits whatever its
 * batch, the thread count or the cache's block size. Scores use the query
 * rounded to f16, as the reference engine's CPU path does with an f16 KV
 * cache.
 *
 * Work items are (query tile, KV heads, head part, span when split), dealt
 * to the threads round robin: one KV head per item for a prompt, all of
 * them for a few tokens (decode), so that an item reads whole cache rows.
 * Each thread's tile buffers and the split spans' partial states live in
 * the op context's attention scratch.
 * Calls: base (cpu, fp16, threadpool), backend/cpu/attention_f16, backend/cpu/gemm (f16 rounding). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/attention_f16.h"
#include "backend/cpu/gemm.h"
#include "base/cpu.h"
#include "base/fp16.h"
#include "ops/ops.h"

/* positions per span: spans start at multiples of it (and of ATT_TILE) */
#define ATT_SPAN 128
/* the most query floats in a query tile (rows x heads x head_dim): with
 * the f32 KV tile it stays within the level-2 cache */
#define ATT_Q_FLOATS 8192
/* the most queries (rows x heads) in a query tile */
#define ATT_Q_MAX 128

typedef struct attn_kern {
    attn_cvt_fn cvt;
    attn_tile_fn tile; /* NULL: composed of scores and accum (attn_tile_parts) */
    attn_scores_fn scores;
    attn_accum_fn accum;
} attn_kern;

typedef struct attn_task {
    const ops_attn_args *a;
    attn_kern k;
    int64_t ng;      /* query heads per item: the KV head's group, or a part of it */
    int64_t n_part;  /* head parts per KV head */
    int64_t nkh;     /* KV heads per item: all of them when the batch is a few tokens (one pass over
                      * whole cache rows), else 1 */
    int64_t tq;      /* batch rows per query tile */
    int64_t n_tiles; /* query tiles: m / tq rounded up */
    int64_t n_split; /* 1: an item walks all spans of its rows; else tq = 1 and one span per item */
    float *scratch;  /* [n_threads][scratch_n] tile buffers */
    size_t scratch_n;
    float *part; /* n_split > 1: [m][n_head][n_split][2 + head_dim] (max, sum, output) */
} attn_task;

/* a thread's view of its tile buffers */
typedef struct attn_buf {
    float *kt, *vt;        /* [16 x hd] the KV tile in f32 (the level's layout) */
    float *q, *o, *O;      /* [nq][hd] queries (f16-rounded), span outputs, running outputs */
    float *mx, *l, *M, *L; /* [ATT_Q_MAX] span and running max and sum */
} attn_buf;

static void cvt_ref(const uint16_t *const *rows, int64_t hd, float *t) {
    for (int i = 0; i < ATT_TILE; i++)
        for (int64_t e = 0; e < hd; e++) t[i * hd + e] = tl_fp16_to_fp32(rows[i][e]);
}

static void scores_ref(const float *kt, const float *q, int64_t hd, float *s) {
    for (int i = 0; i < ATT_TILE; i++) {
        float d = 0.0f;
        for (int64_t e = 0; e < hd; e++) d += kt[i * hd + e] * q[e];
        s[i] = d;
    }
}

static float softmax_ref(float *s, int lo, int hi, float scale, float *mx, float *l) {
    float bm = -INFINITY, r = 1.0f, sum = 0.0f;
    for (int i = lo; i < hi; i++) {
        s[i] *= scale;
        bm = s[i] > bm ? s[i] : bm;
    }
    if (bm > *mx) {
        r = expf(*mx - bm); /* 0 on a span's first tile */
        *l *= r;
        *mx = bm;
    }
    for (int i = 0; i < ATT_TILE; i++) sum += (s[i] = i >= lo && i < hi ? expf(s[i] - *mx) : 0.0f);
    *l += sum;
    return r;
}

static void accum_ref(float *o, const float *p, const float *vt, int64_t hd, int lo, int hi) {
    for (int i = lo; i < hi; i++)
        for (int64_t e = 0; e < hd; e++) o[e] += p[i] * vt[i * hd + e];
}

/* attn_tile_fn from a level's scores and accum and the scalar softmax */
static void attn_tile_parts(const attn_kern *k, const float *kt, const float *vt, const float *q, int64_t ng,
                            int64_t hd, int lo, int hi, float scale, float *mx, float *l, float *o) {
    for (int64_t g = 0; g < ng; g++, q += hd, o += hd) {
        float s[ATT_TILE];
        k->scores(kt, q, hd, s);
        const float f = softmax_ref(s, lo, hi, scale, &mx[g], &l[g]);
        if (f != 1.0f)
            for (int64_t e = 0; e < hd; e++) o[e] *= f;
        k->accum(o, s, vt, hd, lo, hi);
    }
}

/* heads h0..h0+ng of token j's query, rounded to f16, into q [ng][hd] */
static void attn_round_q(const ops_attn_args *a, int64_t j, int64_t h0, int64_t ng, float *q) {
    const int64_t hd = a->head_dim;
    for (int64_t g = 0; g < ng; g++) {
        const float *qg = a->q + j * a->q_stride + (h0 + g) * hd;
        if (tl_cpu_use_avx2()) { /* F16C: the same round to nearest even */
            gemm_round_f16_avx2(qg, q + g * hd, hd);
            continue;
        }
        for (int64_t e = 0; e < hd; e++) q[g * hd + e] = tl_fp16_to_fp32(tl_fp32_to_fp16(qg[e]));
    }
}

/* token j's positions: [first, last] */
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

/* fold a span's (mx, l, o) into the running (M, L, O), spans in position
 * order (the same arithmetic whether or not spans ran apart) */
static void attn_fold(float *M, float *L, float *restrict O, float mx, float l, const float *restrict o, int64_t hd) {
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

/* the lanes of KV tile [tb, tb + 16) that each of nr rows sees (row r
 * sees [first[r], last[r]]; lo[r] >= hi[r]: none) and their union
 * [*ulo, *uhi) (empty: no row sees the tile) */
static void attn_lanes(int64_t tb, int64_t nr, const int64_t *first, const int64_t *last, int *lo, int *hi, int *ulo,
                       int *uhi) {
    *ulo = ATT_TILE, *uhi = 0;
    for (int64_t r = 0; r < nr; r++) {
        lo[r] = first[r] > tb ? (int)(first[r] - tb) : 0;
        hi[r] = last[r] + 1 < tb + ATT_TILE ? (int)(last[r] + 1 - tb) : ATT_TILE;
        if (lo[r] >= hi[r]) continue;
        *ulo = lo[r] < *ulo ? lo[r] : *ulo;
        *uhi = hi[r] > *uhi ? hi[r] : *uhi;
    }
}

/* KV head hk's tile at positions [tb, tb + 16) for the nr rows of a query
 * tile (lanes from attn_lanes; row r's queries q0 + r ng + g): the f16 K/V
 * rows converted once (lanes outside the union clamped into it), then
 * each query's scores, softmax step and V sum */
static void attn_kv_tile(const attn_task *t, attn_buf *w, const int32_t *tab, int64_t hk, int64_t tb, int64_t nr,
                         int64_t ng, int64_t q0, const int *lo, const int *hi, int ulo, int uhi) {
    const ops_attn_args *a = t->a;
    const ops_kv_view *kv = &a->kv;
    const int64_t hd = a->head_dim, bmask = ((int64_t)1 << kv->block_shift) - 1;
    const uint16_t *kr[ATT_TILE], *vr[ATT_TILE];
    const bool one_block = tb >> kv->block_shift == (tb + ATT_TILE - 1) >> kv->block_shift;
    const size_t base = (size_t)tab[tb >> kv->block_shift] * (size_t)kv->block_stride +
                        (size_t)(tb & bmask) * (size_t)kv->row + (size_t)(hk * hd);
    for (int i = 0; i < ATT_TILE; i++) {
        const int64_t p = tb + (i < ulo ? ulo : i >= uhi ? uhi - 1 : i);
        const size_t off = one_block ? base + (size_t)(p - tb) * (size_t)kv->row
                                     : (size_t)tab[p >> kv->block_shift] * (size_t)kv->block_stride +
                                           (size_t)(p & bmask) * (size_t)kv->row + (size_t)(hk * hd);
        kr[i] = kv->k + off;
        vr[i] = kv->v + off;
    }
    t->k.cvt(kr, hd, w->kt);
    t->k.cvt(vr, hd, w->vt);
    for (int64_t r = 0; r < nr; r++) {
        if (lo[r] >= hi[r]) continue;
        const int64_t qi = q0 + r * ng;
        if (t->k.tile)
            t->k.tile(w->kt, w->vt, w->q + qi * hd, ng, hd, lo[r], hi[r], a->scale, w->mx + qi, w->l + qi,
                      w->o + qi * hd);
        else
            attn_tile_parts(&t->k, w->kt, w->vt, w->q + qi * hd, ng, hd, lo[r], hi[r], a->scale, w->mx + qi, w->l + qi,
                            w->o + qi * hd);
    }
}

/* the K and V rows of KV heads [hk, hk + nkh) at positions [p, p + 16)
 * below pend, asked for ahead of use (the loop is not a function of its
 * own: GCC drops calls to a function that only prefetches) */
#define ATT_PREFETCH(a, tab, hk, nkh, p0, pend)                                                                        \
    for (int64_t p_ = (p0); p_ < (p0) + ATT_TILE && p_ < (pend); p_++) {                                               \
        const ops_kv_view *kv_ = &(a)->kv;                                                                             \
        const size_t off_ = (size_t)(tab)[p_ >> kv_->block_shift] * (size_t)kv_->block_stride +                        \
                            (size_t)(p_ & (((int64_t)1 << kv_->block_shift) - 1)) * (size_t)kv_->row +                 \
                            (size_t)((hk) * (a)->head_dim);                                                            \
        const char *k_ = (const char *)(kv_->k + off_), *v_ = (const char *)(kv_->v + off_);                           \
        for (int64_t b_ = 0; b_ < (nkh) * (a)->head_dim * 2; b_ += 64)                                                 \
            __builtin_prefetch(k_ + b_, 0, 3), __builtin_prefetch(v_ + b_, 0, 3);                                      \
    }

/* batch rows [r0, r1) of one sequence, KV heads [hk0, hk0 + nkh), part hp
 * of each one's query heads: all their spans in order (split: only span c
 * of the one row, its state written to the partial results). Query
 * (head part g of KV head hk0 + kh, row r) is index (kh nr + r) ng + g. */
static void attn_group(const attn_task *t, attn_buf *w, int64_t r0, int64_t r1, int64_t hk0, int64_t nkh, int64_t hp,
                       int64_t c) {
    const ops_attn_args *a = t->a;
    const int64_t hd = a->head_dim, nr = r1 - r0, group = a->n_head / a->n_head_kv, hoff = hp * t->ng;
    const int64_t ng = group - hoff < t->ng ? group - hoff : t->ng, nq = nkh * nr * ng;
    const int32_t *tab = a->kv.table + (size_t)a->seq[r0] * (size_t)a->kv.table_stride;
    int64_t first[ATT_Q_MAX], last[ATT_Q_MAX], lo = INT64_MAX, hi = -1;
    for (int64_t r = 0; r < nr; r++) {
        attn_range(a, r0 + r, &first[r], &last[r]);
        lo = first[r] < lo ? first[r] : lo;
        hi = last[r] > hi ? last[r] : hi;
        for (int64_t kh = 0; kh < nkh; kh++)
            attn_round_q(a, r0 + r, (hk0 + kh) * group + hoff, ng, w->q + ((kh * nr + r) * ng) * hd);
    }
    for (int64_t qi = 0; qi < nq; qi++) w->M[qi] = -INFINITY, w->L[qi] = 0.0f;
    memset(w->O, 0, sizeof(float) * (size_t)(nq * hd));
    const int64_t sa = t->n_split > 1 ? lo / ATT_SPAN + c : lo / ATT_SPAN;
    const int64_t sb = t->n_split > 1 ? sa + 1 : hi / ATT_SPAN + 1;
    int tlo[ATT_Q_MAX], thi[ATT_Q_MAX], ulo, uhi;
    for (int64_t sp = sa; sp < sb; sp++) {
        for (int64_t qi = 0; qi < nq; qi++) w->mx[qi] = -INFINITY, w->l[qi] = 0.0f;
        memset(w->o, 0, sizeof(float) * (size_t)(nq * hd));
        const int64_t p0 = sp * ATT_SPAN > lo ? sp * ATT_SPAN : lo & ~(int64_t)(ATT_TILE - 1);
        const int64_t p1 = (sp + 1) * ATT_SPAN < hi + 1 ? (sp + 1) * ATT_SPAN : hi + 1;
        for (int64_t tb = p0; tb < p1; tb += ATT_TILE) {
            attn_lanes(tb, nr, first, last, tlo, thi, &ulo, &uhi);
            if (ulo >= uhi) continue; /* no row sees this tile */
            /* two tiles ahead: a head's rows are a slice of each
             * position's row, a stride the hardware prefetchers follow late */
            ATT_PREFETCH(a, tab, hk0, nkh, tb + 2 * ATT_TILE, hi + 1);
            for (int64_t kh = 0; kh < nkh; kh++)
                attn_kv_tile(t, w, tab, hk0 + kh, tb, nr, ng, kh * nr * ng, tlo, thi, ulo, uhi);
        }
        for (int64_t qi = 0; qi < nq; qi++) {
            if (t->n_split > 1) {
                const int64_t kh = qi / ng, h = (hk0 + kh) * group + hoff + qi % ng; /* nr = 1 */
                float *pp = t->part + ((r0 * a->n_head + h) * t->n_split + c) * (2 + hd);
                pp[0] = w->mx[qi];
                pp[1] = w->l[qi];
                memcpy(pp + 2, w->o + qi * hd, sizeof(float) * (size_t)hd);
            } else {
                attn_fold(&w->M[qi], &w->L[qi], w->O + qi * hd, w->mx[qi], w->l[qi], w->o + qi * hd, hd);
            }
        }
    }
    if (t->n_split > 1) return;
    for (int64_t kh = 0; kh < nkh; kh++)
        for (int64_t r = 0; r < nr; r++)
            for (int64_t g = 0; g < ng; g++) {
                const int64_t qi = (kh * nr + r) * ng + g, h = (hk0 + kh) * group + hoff + g;
                float *out = a->out + ((r0 + r) * a->n_head + h) * hd;
                const float inv = 1.0f / w->L[qi];
                for (int64_t e = 0; e < hd; e++) out[e] = w->O[qi * hd + e] * inv;
            }
}

static void attn_run(void *arg, int ith, int nth) {
    const attn_task *t = arg;
    const ops_attn_args *a = t->a;
    const int64_t hd = a->head_dim, qf = t->nkh * t->tq * t->ng * hd, n_kvg = a->n_head_kv / t->nkh;
    float *s = t->scratch + (size_t)ith * t->scratch_n;
    attn_buf w = {.kt = s, .vt = s + ATT_TILE * hd, .q = s + 2 * ATT_TILE * hd};
    w.o = w.q + qf, w.O = w.o + qf, w.mx = w.O + qf;
    w.l = w.mx + ATT_Q_MAX, w.M = w.l + ATT_Q_MAX, w.L = w.M + ATT_Q_MAX;
    const int64_t n_items = t->n_tiles * n_kvg * t->n_part * t->n_split;
    for (int64_t it = ith; it < n_items; it += nth) {
        const int64_t c = it % t->n_split, x = it / t->n_split, hp = x % t->n_part, kg = x / t->n_part % n_kvg;
        const int64_t tile = x / t->n_part / n_kvg;
        const int64_t r0 = tile * t->tq, r1 = r0 + t->tq < a->m ? r0 + t->tq : a->m;
        if (t->n_split > 1 && c >= attn_n_spans(a, r0)) continue; /* this token has fewer spans */
        /* the tile's rows in runs of one sequence */
        for (int64_t rs = r0, re; rs < r1; rs = re) {
            for (re = rs + 1; re < r1 && a->seq[re] == a->seq[rs];) re++;
            attn_group(t, &w, rs, re, kg * t->nkh, t->nkh, hp, c);
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

static attn_kern attn_kernels(int64_t hd) {
    if (tl_cpu_use_avx512() && hd % 16 == 0) return (attn_kern){attn_cvt_avx512, attn_tile_avx512, NULL, NULL};
    if (tl_cpu_use_avx2() && hd % 8 == 0) return (attn_kern){attn_cvt_avx2, NULL, attn_scores_avx2, attn_accum_avx2};
    return (attn_kern){cvt_ref, NULL, scores_ref, accum_ref};
}

tl_status ops_attention_paged(ops_ctx *c, const ops_attn_args *a) {
    const int64_t hd = a->head_dim;
    if (hd < 1 || hd > 1024) return tl_err(TL_ERR_UNSUPPORTED, "attention: head_dim %d not in 1..1024", (int)hd);
    if (a->n_head_kv < 1 || a->n_head % a->n_head_kv)
        return tl_err(TL_ERR_INVALID, "attention: %d query heads over %d KV heads", (int)a->n_head, (int)a->n_head_kv);
    if (a->m < 1) return TL_OK;
    const int nth = tl_threadpool_size(c->tp);
    const int64_t group = a->n_head / a->n_head_kv;
    attn_task t = {.a = a, .k = attn_kernels(hd), .n_split = 1};
    t.ng = group;
    if (t.ng > ATT_Q_MAX) t.ng = ATT_Q_MAX;
    if (t.ng * hd > ATT_Q_FLOATS) t.ng = ATT_Q_FLOATS / hd;
    t.n_part = (group + t.ng - 1) / t.ng;
    t.tq = ATT_Q_FLOATS / (t.ng * hd) < ATT_Q_MAX / t.ng ? ATT_Q_FLOATS / (t.ng * hd) : ATT_Q_MAX / t.ng;
    t.nkh = 1;
    /* decode (a few tokens, or sequences of fewer than 4 tokens each): each
     * item takes all KV heads that fit, one row per tile, so that it reads
     * whole cache rows in one pass (a head's slice alone is a strided read
     * at a third of the bandwidth); spans run as items of their own when
     * that leaves fewer than 4 items per thread. The result is the same
     * either way. */
    int64_t ns = 1, runs = 1;
    for (int64_t j = 0; j < a->m; j++) {
        ns = attn_n_spans(a, j) > ns ? attn_n_spans(a, j) : ns;
        runs += j > 0 && a->seq[j] != a->seq[j - 1];
    }
    if (a->m * a->n_head_kv < 4 * nth || 4 * runs > a->m) {
        t.tq = 1;
        for (int64_t d = a->n_head_kv; d >= 1; d--)
            if (a->n_head_kv % d == 0 && d * t.ng * hd <= ATT_Q_FLOATS && d * t.ng <= ATT_Q_MAX) {
                t.nkh = d;
                break;
            }
        if (nth > 1 && a->m * (a->n_head_kv / t.nkh) * t.n_part < 4 * nth && ns > 1) t.n_split = ns;
    }
    t.n_tiles = (a->m + t.tq - 1) / t.tq;
    /* per thread: KV tile, queries and outputs, four [ATT_Q_MAX] states;
     * 64-byte multiples so threads do not share cache lines */
    t.scratch_n = ((size_t)(2 * ATT_TILE * hd + 3 * t.nkh * t.tq * t.ng * hd + 4 * ATT_Q_MAX) + 15) & ~(size_t)15;
    const size_t n_part = t.n_split > 1 ? (size_t)(a->m * a->n_head * ns * (2 + hd)) : 0;
    const size_t need = (size_t)nth * t.scratch_n + n_part + 16;
    if (need > c->attp_n) {
        float *p = realloc(c->attp, need * sizeof(float));
        if (!p) return tl_err(TL_ERR_NOMEM, "attention: %zu bytes of scratch", need * sizeof(float));
        c->attp = p, c->attp_n = need;
    }
    t.scratch = (float *)(((uintptr_t)c->attp + 63) & ~(uintptr_t)63);
    t.part = t.scratch + (size_t)nth * t.scratch_n;
    tl_threadpool_run(c->tp, attn_run, &t);
    if (t.n_split > 1) tl_threadpool_run(c->tp, attn_merge, &t);
    return TL_OK;
}
