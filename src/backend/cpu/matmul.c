/* backend/cpu/matmul: quantized matrix products on the CPU.
 *
 * The activation rows are converted once to the weight's vec_dot_type (the
 * way GGUF's reference engine does, so our numbers track it), then the
 * output rows are split among threads; each thread walks its weight rows in
 * blocks and, for prefill, reuses each weight block across a block of tokens
 * while it is hot in L1/L2. Owns nothing. Calls: quant, base/threadpool. */
#include <stdbool.h>
#include <string.h>

#include "backend/cpu/gemm.h"
#include "ops/ops.h"
#include "quant/quant.h"

#define MM_ROW_BLOCK 16
#define MM_TOK_BLOCK 32
/* fewest tokens for which packing weight panels pays */
#define MM_PANEL_MIN_M 12

typedef struct mm_task {
    int n_w;
    const tl_tensor *w[3];
    float *y[3];
    int64_t ldy[3];       /* row strides of the outputs */
    const quant_kernels *qk[3];
    int64_t row_start[4]; /* prefix sums of output rows over the weights */
    const uint8_t *xq;    /* converted activations [m][xrow bytes] */
    size_t xrow;
    const float *x;       /* source activations, for the conversion pass */
    float *gscale;        /* per 4-token group scale tables for the 1x4 kernels (Q8_0/Q8_1), or NULL */
    bool g4;              /* every weight has a 1x4 kernel for its type */
    bool g1;              /* m < 4 (Q8_K: m == 1), every weight has a 1x1 or 4-row kernel; Q8_0/Q8_1: gscale holds [m][k/32][2] */
    bool f16_gemm;        /* F16 weights, xq holds f16-rounded f32 activations */
    bool f16_panel;       /* ... in token groups for the AVX-512 F16 panel kernel (gemm.h) */
    bool bf16_panel;      /* BF16 weights, xq holds bf16 activations in token pairs groups (gemm.h) */
    bool panel;           /* every weight has a panel form: gscale holds [m][k/32][2] panel tables */
    uint8_t *few;         /* 2..GEMM_FEW_MAX tokens, every weight has a few-token kernel: their table */
    uint8_t *panels;      /* [n_threads][panel_stride] */
    size_t panel_stride;
    int64_t k;
    int64_t m;
} mm_task;

/* Convert activation rows in groups of 4, then build each full group's
 * scale table for the 1x4 kernels. */
static void mm_convert_task(void *arg, int ith, int nth) {
    mm_task *t = arg;
    const quant_kernels *qk = t->qk[0];
    const int64_t n_groups = (t->m + 3) / 4, nb = t->k / 32;
    for (int64_t g = ith; g < n_groups; g += nth) {
        int64_t j0 = 4 * g, j1 = j0 + 4 < t->m ? j0 + 4 : t->m;
        for (int64_t j = j0; j < j1; j++) {
            qk->from_float(t->x + j * t->k, (uint8_t *)t->xq + (size_t)j * t->xrow, t->k);
            if (t->panel) gemm_panel_prep(qk->type, t->k, t->xq + (size_t)j * t->xrow, t->gscale + j * nb * 2);
        }
        if (t->few)
            gemm_few_prep_avx512(qk->type, t->k, t->xq + (size_t)j0 * t->xrow, t->xrow, (int)(j1 - j0), (int)n_groups,
                                 (int)g, t->few);
        if (!t->panel && t->gscale && j1 - j0 == 4)
            gemm_prep_scales(qk->type, t->k, t->xq + (size_t)j0 * t->xrow, t->xrow, t->gscale + g * nb * 8);
    }
}

static void mm_round_task(void *arg, int ith, int nth) {
    mm_task *t = arg;
    if (t->bf16_panel) {
        const int64_t np = (t->k + 1) / 2;
        for (int64_t j = (int64_t)ith * GEMM_F16_TOK; j < t->m; j += (int64_t)nth * GEMM_F16_TOK)
            gemm_bf16_round_group_avx512(t->x + j * t->k, (uint16_t *)t->xq + j * np * 2, t->k,
                                         (int)(t->m - j < GEMM_F16_TOK ? t->m - j : GEMM_F16_TOK));
        return;
    }
    if (t->f16_panel) {
        for (int64_t j = (int64_t)ith * GEMM_F16_TOK; j < t->m; j += (int64_t)nth * GEMM_F16_TOK)
            gemm_f16_round_group_avx512(t->x + j * t->k, (float *)t->xq + j * t->k, t->k,
                                        (int)(t->m - j < GEMM_F16_TOK ? t->m - j : GEMM_F16_TOK));
        return;
    }
    for (int64_t j = ith; j < t->m; j += nth)
        gemm_round_f16_avx2(t->x + j * t->k, (float *)(t->xq + (size_t)j * t->xrow), t->k);
}

/* F16 weights in prefill: each weight row against 4 tokens at a time */
static void mm_rows_f16(const mm_task *t, int wi, int64_t r0, int64_t r1) {
    const tl_tensor *w = t->w[wi];
    const gemm_f16_1x4_fn g4 = gemm_get_f16_1x4();
    const gemm_f16_1x1_fn g1 = gemm_get_f16_1x1();
    const int64_t n_out = t->ldy[wi], k = t->k;
    const float *xs = (const float *)t->xq;
    float *y = t->y[wi];
    for (int64_t mb = 0; mb < t->m; mb += MM_TOK_BLOCK) {
        int64_t me = mb + MM_TOK_BLOCK < t->m ? mb + MM_TOK_BLOCK : t->m;
        for (int64_t rb = r0; rb < r1; rb += MM_ROW_BLOCK) {
            int64_t re = rb + MM_ROW_BLOCK < r1 ? rb + MM_ROW_BLOCK : r1;
            int64_t j = mb;
            for (; j + 4 <= me; j += 4)
                for (int64_t r = rb; r < re; r++) {
                    float o[4];
                    g4(k, o, (const uint16_t *)((const uint8_t *)w->data + (size_t)r * w->nb[1]), xs + j * k,
                       (size_t)k);
                    for (int q = 0; q < 4; q++) y[(j + q) * n_out + r] = o[q];
                }
            for (; j < me; j++)
                for (int64_t r = rb; r < re; r++)
                    g1(k, &y[j * n_out + r], (const uint16_t *)((const uint8_t *)w->data + (size_t)r * w->nb[1]),
                       xs + j * k);
        }
    }
}

/* F16 panel path: each 32 weight rows packed once, then run against every
 * group of tokens */
static void mm_rows_f16_panel(const mm_task *t, int wi, int64_t r0, int64_t r1, uint16_t *panel) {
    const tl_tensor *w = t->w[wi];
    const int64_t ldo = t->ldy[wi], k = t->k;
    for (int64_t rb = r0; rb < r1; rb += GEMM_F16_ROWS) {
        const int nr = (int)(rb + GEMM_F16_ROWS < r1 ? GEMM_F16_ROWS : r1 - rb);
        gemm_f16_panel_pack_avx512((const uint16_t *)((const uint8_t *)w->data + (size_t)rb * w->nb[1]), w->nb[1], nr,
                                   k, panel);
        /* the next panel's rows, fetched a slice per token group while
         * this one runs (packing otherwise waits on 32 short row streams) */
        const uint8_t *next = (const uint8_t *)w->data + (size_t)(rb + GEMM_F16_ROWS) * w->nb[1];
        const int64_t nnext = rb + GEMM_F16_ROWS < r1 ? (r1 - rb - GEMM_F16_ROWS < GEMM_F16_ROWS ? r1 - rb - GEMM_F16_ROWS : GEMM_F16_ROWS) : 0;
        const size_t nbytes = (size_t)nnext * w->nb[1], ngroups = (size_t)((t->m + GEMM_F16_TOK - 1) / GEMM_F16_TOK);
        const size_t slice = ((nbytes + ngroups - 1) / ngroups + 63) & ~(size_t)63;
        size_t pf = 0;
        for (int64_t j = 0; j < t->m; j += GEMM_F16_TOK) {
            const int nt = (int)(t->m - j < GEMM_F16_TOK ? t->m - j : GEMM_F16_TOK);
            for (size_t e = pf + slice; pf < e && pf < nbytes; pf += 64) __builtin_prefetch(next + pf, 0, 3);
            gemm_f16_panel_run_avx512(k, panel, (const float *)t->xq + j * k, nt, nr, t->y[wi] + j * ldo + rb, ldo);
        }
    }
}

/* BF16 panel path: as the F16 one */
static void mm_rows_bf16_panel(const mm_task *t, int wi, int64_t r0, int64_t r1, uint16_t *panel) {
    const tl_tensor *w = t->w[wi];
    const int64_t ldo = t->ldy[wi], k = t->k, np = (k + 1) / 2;
    for (int64_t rb = r0; rb < r1; rb += GEMM_F16_ROWS) {
        const int nr = (int)(rb + GEMM_F16_ROWS < r1 ? GEMM_F16_ROWS : r1 - rb);
        gemm_bf16_panel_pack_avx512((const uint16_t *)((const uint8_t *)w->data + (size_t)rb * w->nb[1]), w->nb[1], nr,
                                    k, panel);
        for (int64_t j = 0; j < t->m; j += GEMM_F16_TOK) {
            const int nt = (int)(t->m - j < GEMM_F16_TOK ? t->m - j : GEMM_F16_TOK);
            gemm_bf16_panel_run_avx512(k, panel, (const uint16_t *)t->xq + j * np * 2, nt, nr, t->y[wi] + j * ldo + rb,
                                       ldo);
        }
    }
}

/* panel path: each 16 weight rows packed once, then run against every token */
static void mm_rows_panel(const mm_task *t, int wi, int64_t r0, int64_t r1, uint8_t *panel) {
    const tl_tensor *w = t->w[wi];
    for (int64_t rb = r0; rb < r1; rb += GEMM_PANEL) {
        const int nr = (int)(rb + GEMM_PANEL < r1 ? GEMM_PANEL : r1 - rb);
        gemm_panel_pack_avx512(w->type, (const uint8_t *)w->data + (size_t)rb * w->nb[1], w->nb[1], nr, t->k, panel);
        gemm_panel_run_avx512(w->type, t->k, panel, t->xq, t->xrow, t->gscale, t->m, nr, t->y[wi] + rb, t->ldy[wi]);
    }
}

static void mm_rows(const mm_task *t, int wi, int64_t r0, int64_t r1, int ith) {
    if (t->bf16_panel) {
        mm_rows_bf16_panel(t, wi, r0, r1, (uint16_t *)(t->panels + (size_t)ith * t->panel_stride));
        return;
    }
    if (t->f16_panel) {
        mm_rows_f16_panel(t, wi, r0, r1, (uint16_t *)(t->panels + (size_t)ith * t->panel_stride));
        return;
    }
    if (t->f16_gemm) {
        mm_rows_f16(t, wi, r0, r1);
        return;
    }
    if (t->panel) {
        mm_rows_panel(t, wi, r0, r1, t->panels + (size_t)ith * t->panel_stride);
        return;
    }
    const tl_tensor *w = t->w[wi];
    if (t->few) {
        /* every token at once: a row block's outputs for all m tokens */
        for (int64_t rb = r0; rb < r1; rb += MM_ROW_BLOCK) {
            const int nr = (int)(rb + MM_ROW_BLOCK < r1 ? MM_ROW_BLOCK : r1 - rb);
            gemm_few_run_avx512(w->type, t->k, (const uint8_t *)w->data + (size_t)rb * w->nb[1], w->nb[1], nr, t->few,
                                (int)t->m, t->y[wi] + rb, t->ldy[wi]);
        }
        return;
    }
    const quant_vec_dot_fn dot = t->qk[wi]->vec_dot;
    const int64_t n_out = t->ldy[wi];
    const int64_t k = t->k;
    const uint8_t *wd = w->data;
    float *y = t->y[wi];
    const gemm_1x4_fn g4 = t->g4 ? gemm_get_1x4(w->type) : NULL;
    const int64_t nb = k / 32;
    for (int64_t mb = 0; mb < t->m; mb += MM_TOK_BLOCK) {
        int64_t me = mb + MM_TOK_BLOCK < t->m ? mb + MM_TOK_BLOCK : t->m;
        for (int64_t rb = r0; rb < r1; rb += MM_ROW_BLOCK) {
            int64_t re = rb + MM_ROW_BLOCK < r1 ? rb + MM_ROW_BLOCK : r1;
            int64_t j = mb;
            if (g4) {
                for (; j + 4 <= me; j += 4) {
                    const uint8_t *xj = t->xq + (size_t)j * t->xrow;
                    for (int64_t r = rb; r < re; r++) {
                        float o[4];
                        g4(k, o, wd + (size_t)r * w->nb[1], xj, t->xrow,
                           t->gscale ? t->gscale + (j / 4) * nb * 8 : NULL);
                        for (int q = 0; q < 4; q++) y[(j + q) * n_out + r] = o[q];
                    }
                }
            }
            for (; j < me; j++) {
                const uint8_t *xj = t->xq + (size_t)j * t->xrow;
                float *yj = y + j * n_out;
                if (t->g1) {
                    const gemm_4x1_fn g41 = gemm_get_4x1(w->type);
                    const gemm_1x1_fn g1 = gemm_get_1x1(w->type);
                    const float *ds1 = t->gscale ? t->gscale + j * nb * 2 : NULL;
                    int64_t r = rb;
                    if (g41)
                        for (; r + 4 <= re; r += 4) g41(k, &yj[r], wd + (size_t)r * w->nb[1], w->nb[1], xj, ds1);
                    for (; r < re; r++) {
                        if (g1) g1(k, &yj[r], wd + (size_t)r * w->nb[1], xj, ds1);
                        else dot(k, &yj[r], wd + (size_t)r * w->nb[1], xj);
                    }
                } else {
                    for (int64_t r = rb; r < re; r++) dot(k, &yj[r], wd + (size_t)r * w->nb[1], xj);
                }
            }
        }
    }
}

static void mm_dot_task(void *arg, int ith, int nth) {
    mm_task *t = arg;
    const int64_t total = t->row_start[t->n_w];
    /* whole blocks of rows per thread, so threads never share a cache line of y */
    const int64_t n_blocks = (total + MM_ROW_BLOCK - 1) / MM_ROW_BLOCK;
    int64_t b0 = n_blocks * ith / nth, b1 = n_blocks * (ith + 1) / nth;
    int64_t g0 = b0 * MM_ROW_BLOCK, g1 = b1 * MM_ROW_BLOCK < total ? b1 * MM_ROW_BLOCK : total;
    for (int wi = 0; wi < t->n_w && g0 < g1; wi++) {
        int64_t lo = t->row_start[wi], hi = t->row_start[wi + 1];
        int64_t a = g0 > lo ? g0 : lo, b = g1 < hi ? g1 : hi;
        if (a < b) mm_rows(t, wi, a - lo, b - lo, ith);
    }
}

static tl_status mm_check(const tl_tensor *w, int64_t k, const quant_kernels **qk) {
    if (w->device != TL_DEVICE_CPU)
        return tl_err(TL_ERR_UNSUPPORTED, "ops_matmul: weight '%s' is on a device the CPU backend cannot read",
                      w->name ? w->name : "?");
    if (w->ne[0] != k)
        return tl_err(TL_ERR_INVALID, "ops_matmul: weight '%s' has %lld inputs, activations have %lld",
                      w->name ? w->name : "?", (long long)w->ne[0], (long long)k);
    *qk = quant_kernels_get(w->type);
    if (!*qk || !(*qk)->vec_dot)
        return tl_err(TL_ERR_UNSUPPORTED, "ops_matmul: no CPU kernel for weight type %s ('%s')",
                      tl_type_name(w->type), w->name ? w->name : "?");
    return TL_OK;
}

tl_status ops_matmul_multi(ops_ctx *c, const tl_tensor *const *ws, int n_w, const float *x,
                           int64_t m, float *const *ys) {
    int64_t ld[3] = {0, 0, 0};
    return ops_matmul_multi_ld(c, ws, n_w, x, m, ys, ld);
}

tl_status ops_matmul_multi_ld(ops_ctx *c, const tl_tensor *const *ws, int n_w, const float *x, int64_t m,
                              float *const *ys, const int64_t *ldys) {
    if (n_w < 1 || n_w > 3) return tl_err(TL_ERR_INVALID, "ops_matmul_multi: %d weights", n_w);
    mm_task t;
    memset(&t, 0, sizeof t);
    t.k = ws[0]->ne[0];
    t.m = m;
    t.x = x;
    for (int i = 0; i < n_w; i++) {
        tl_status s = mm_check(ws[i], t.k, &t.qk[i]);
        if (s) return s;
        if (t.qk[i]->vec_dot_type != t.qk[0]->vec_dot_type) {
            /* mixed activation formats: run them one by one */
            for (int j = 0; j < n_w; j++)
                if ((s = ops_matmul_multi_ld(c, &ws[j], 1, x, m, &ys[j], &ldys[j]))) return s;
            return TL_OK;
        }
        t.w[i] = ws[i];
        t.y[i] = ys[i];
        t.ldy[i] = ldys[i] > 0 ? ldys[i] : ws[i]->ne[1];
        t.row_start[i + 1] = t.row_start[i] + ws[i]->ne[1];
    }
    t.n_w = n_w;
    tl_type vt = t.qk[0]->vec_dot_type;
    if (vt == TL_TYPE_F16 && m >= 4 && gemm_get_f16_1x4() && (size_t)m * (size_t)t.k * 4 <= c->wbuf_size) {
        /* prefill on F16 weights: the activations rounded to f16 (as the
         * vec_dot path would) but kept as f32 for the 1x4 kernel */
        t.f16_gemm = true;
        if (m >= MM_PANEL_MIN_M && gemm_f16_panel_ok() && c->panel && gemm_f16_panel_bytes(t.k) <= c->panel_stride) {
            t.f16_panel = true;
            t.panels = c->panel;
            t.panel_stride = c->panel_stride;
        }
        t.xq = c->wbuf;
        t.xrow = (size_t)t.k * sizeof(float);
        tl_threadpool_run(c->tp, mm_round_task, &t);
    } else if (vt == TL_TYPE_BF16 && m >= MM_PANEL_MIN_M && gemm_bf16_panel_ok() && c->panel &&
               gemm_bf16_panel_bytes(t.k) <= c->panel_stride && (size_t)m * (size_t)(t.k + 1) * 2 <= c->wbuf_size) {
        /* prefill on BF16 weights: the activations in bf16 (as the vec_dot
         * path has them), in token groups of element pairs */
        t.bf16_panel = true;
        t.panels = c->panel;
        t.panel_stride = c->panel_stride;
        t.xq = c->wbuf;
        tl_threadpool_run(c->tp, mm_round_task, &t);
    } else if (vt == TL_TYPE_F32) {
        t.xq = (const uint8_t *)x;
        t.xrow = (size_t)t.k * sizeof(float);
    } else {
        t.xrow = tl_row_bytes(vt, t.k);
        if (t.xrow == 0 || t.xrow * (size_t)m > c->wbuf_size)
            return tl_err(TL_ERR_INVALID, "ops_matmul: %lld x %lld activations do not fit the scratch (%zu bytes)",
                          (long long)m, (long long)t.k, c->wbuf_size);
        t.xq = c->wbuf;
        const quant_kernels *conv = quant_kernels_get(vt);
        if (!conv || !conv->from_float)
            return tl_err(TL_ERR_UNSUPPORTED, "ops_matmul: no CPU conversion to %s", tl_type_name(vt));
        /* the 1x4 prefill kernels apply when every weight has one (all share
         * vt); Q8_0/Q8_1 activations need a scale table, Q8_K carry theirs */
        const bool q8 = vt == TL_TYPE_Q8_0 || vt == TL_TYPE_Q8_1;
        bool g4 = m >= 4 && (vt == TL_TYPE_Q8_K || (q8 && t.k % 32 == 0 &&
                                                    (size_t)m * (size_t)(t.k / 32) * 2 <= c->gscale_n));
        for (int i = 0; i < n_w && g4; i++) g4 = gemm_get_1x4(ws[i]->type) != NULL;
        /* a few tokens (up to GEMM_FEW_MAX): the few-token kernels, rows
         * as stored; they outrun packed panels over that range */
        bool few = m >= 2 && m <= GEMM_FEW_MAX && q8 && t.k % 32 == 0 && c->few && gemm_few_bytes(t.k) <= c->few_bytes;
        for (int i = 0; i < n_w && few; i++) few = gemm_few_ok(ws[i]->type);
        /* enough tokens to spread a panel's packing over: the panel kernel */
        bool panel = !few && m >= MM_PANEL_MIN_M && (q8 || vt == TL_TYPE_Q8_K) && t.k % 32 == 0 && c->panel &&
                     gemm_panel_bytes(t.k) <= c->panel_stride &&
                     (size_t)m * (size_t)(t.k / 32) * 2 <= c->gscale_n;
        for (int i = 0; i < n_w && panel; i++) panel = gemm_panel_ok(ws[i]->type);
        if (few) {
            g4 = false;
            t.few = c->few;
        }
        if (panel) {
            g4 = false;
            t.panel = true;
            t.panels = c->panel;
            t.panel_stride = c->panel_stride;
        }
        t.g4 = g4;
        /* fewer than 4 tokens (decode): the 1x1 and 4-row kernels, with a
         * per-token table for Q8_0/Q8_1; one Q8_K token: the 4-row kernels,
         * which read the Q8_K block's d and sums */
        const bool g1k = m == 1 && vt == TL_TYPE_Q8_K;
        bool g1 = (m < 4 && !few && q8 && t.k % 32 == 0 && (size_t)m * (size_t)(t.k / 32) * 2 <= c->gscale_n) || g1k;
        for (int i = 0; i < n_w && g1; i++)
            g1 = (!g1k && gemm_get_1x1(ws[i]->type)) || gemm_get_4x1(ws[i]->type);
        t.g1 = g1;
        t.gscale = (g4 && q8) || (g1 && q8) || panel ? c->gscale : NULL;
        mm_task ct = t;
        ct.qk[0] = conv;
        if (m == 1 && !panel)
            conv->from_float(x, c->wbuf, t.k);
        else
            tl_threadpool_run(c->tp, mm_convert_task, &ct);
        for (int64_t j = 0; j < m && g1 && q8; j++)
            gemm_prep_scales1(vt, t.k, t.xq + (size_t)j * t.xrow, t.gscale + j * (t.k / 32) * 2);
    }
    tl_threadpool_run(c->tp, mm_dot_task, &t);
    return TL_OK;
}

tl_status ops_matmul(ops_ctx *c, const tl_tensor *w, const float *x, int64_t m, float *y) {
    return ops_matmul_multi(c, &w, 1, x, m, &y);
}

tl_status ops_get_rows(const tl_tensor *table, const int32_t *ids, int64_t m, float *out) {
    const int64_t n = table->ne[0];
    const quant_kernels *qk = quant_kernels_get(table->type);
    if (!qk || !qk->to_float)
        return tl_err(TL_ERR_UNSUPPORTED, "ops_get_rows: cannot read rows of type %s",
                      tl_type_name(table->type));
    for (int64_t j = 0; j < m; j++) {
        if (ids[j] < 0 || ids[j] >= table->ne[1])
            return tl_err(TL_ERR_INVALID, "ops_get_rows: token id %d out of range [0, %lld)", ids[j],
                          (long long)table->ne[1]);
        qk->to_float((const uint8_t *)table->data + (size_t)ids[j] * table->nb[1], out + j * n, n);
    }
    return TL_OK;
}
