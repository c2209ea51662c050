/* lora/lora_apply: adapter sets and a step's plan, for a batch whose rows
 * may each use a different adapter set.
 *
 * A step builds one plan: the distinct (adapter, scale) pairs of its rows,
 * each with the list of rows using it. At every linear point each group
 * becomes one low-rank term of the backend's linear (be_lowrank_term), which
 * runs two small products over its gathered rows (backend/cpu/lowrank.c:
 * tmp = A x[rows], y[rows] += s B tmp), so the base product stays one pass
 * over the whole batch and adapters add only their own work.
 * Owns: the plan's scratch. Calls: nothing but libc. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llm/model.h"
#include "lora/lora.h"

tl_status lora_set_make(lora_set *s, const tl_model *m, const tl_lora_use *u, int32_t n) {
    if (n < 0 || n > LORA_SET_MAX)
        return tl_err(TL_ERR_INVALID, "lora: %d adapters in one set (at most %d)", n, LORA_SET_MAX);
    if (n && !u) return tl_err(TL_ERR_INVALID, "lora: adapter list is NULL");
    for (int32_t i = 0; i < n; i++) {
        if (!u[i].lora) return tl_err(TL_ERR_INVALID, "lora: adapter %d of the set is NULL", i);
        if (!isfinite(u[i].scale)) return tl_err(TL_ERR_INVALID, "lora: adapter %d has a non-finite scale", i);
        if (!lora_fits(u[i].lora, m)) return TL_ERR_INVALID;
    }
    s->n = n;
    for (int32_t i = 0; i < n; i++) s->u[i] = u[i];
    return TL_OK;
}

void lora_plan_init(lora_plan *p) { memset(p, 0, sizeof *p); }

void lora_plan_free(lora_plan *p) {
    free(p->rows);
    free(p->tmp);
    lora_plan_init(p);
}

tl_status lora_plan_reserve(lora_plan *p, int32_t cap_tokens, int32_t cap_rank) {
    if (cap_tokens <= p->cap_tokens && cap_rank <= p->cap_rank) return TL_OK;
    if (cap_tokens < p->cap_tokens) cap_tokens = p->cap_tokens;
    if (cap_rank < p->cap_rank) cap_rank = p->cap_rank;
    if (cap_tokens < 1 || cap_rank < 1 || cap_tokens > (1 << 24) || cap_rank > 65536)
        return tl_err(TL_ERR_INVALID, "lora: plan for %d rows of rank %d", cap_tokens, cap_rank);
    int32_t *rows = malloc((size_t)cap_tokens * LORA_SET_MAX * sizeof *rows);
    float *tmp = malloc((size_t)cap_tokens * (size_t)cap_rank * sizeof *tmp);
    if (!rows || !tmp) {
        free(rows);
        free(tmp);
        return tl_err(TL_ERR_NOMEM, "lora: out of memory for a plan of %d rows, rank %d", cap_tokens, cap_rank);
    }
    free(p->rows);
    free(p->tmp);
    p->rows = rows;
    p->tmp = tmp;
    p->cap_tokens = cap_tokens;
    p->cap_rank = cap_rank;
    return TL_OK;
}

static int find_group(lora_plan *p, const tl_lora_use *u) {
    for (int g = 0; g < p->n_groups; g++)
        if (p->g[g].lora == u->lora && p->g[g].scale == u->scale) return g;
    return -1;
}

tl_status lora_plan_build(lora_plan *p, int32_t n_rows, const lora_set *const *sets) {
    const int gmax = (int)(sizeof p->g / sizeof p->g[0]);
    p->n_groups = 0;
    if (!sets) return TL_OK;
    for (int32_t i = 0; i < n_rows; i++) {
        const lora_set *s = sets[i];
        for (int32_t k = 0; s && k < s->n; k++) {
            int g = find_group(p, &s->u[k]);
            if (g < 0) {
                if (p->n_groups == gmax) {
                    p->n_groups = 0;
                    return tl_err(TL_ERR_INVALID, "lora: a batch uses more than %d distinct adapters", gmax);
                }
                if (s->u[k].lora->rank_max > p->cap_rank || n_rows > p->cap_tokens) {
                    p->n_groups = 0;
                    return tl_err(TL_ERR_INVALID, "lora: plan holds %d rows of rank %d; the batch needs %d of rank %d",
                                  p->cap_tokens, p->cap_rank, n_rows, s->u[k].lora->rank_max);
                }
                g = p->n_groups++;
                p->g[g] = (lora_group){.lora = s->u[k].lora, .scale = s->u[k].scale, .n_rows = 0, .rows = NULL};
            }
            p->g[g].n_rows++;
        }
    }
    /* a canonical group order (adapter address, then scale): a row's terms
     * are then added in the same order whatever else is in its batch, so a
     * sequence's logits do not depend on its neighbours */
    for (int a = 1; a < p->n_groups; a++)
        for (int b = a; b > 0; b--) {
            lora_group *x = &p->g[b - 1], *y = &p->g[b];
            bool after = (uintptr_t)x->lora > (uintptr_t)y->lora || (x->lora == y->lora && x->scale > y->scale);
            if (!after) break;
            lora_group t = *x;
            *x = *y;
            *y = t;
        }
    int32_t off = 0; /* each group's rows are contiguous in p->rows */
    for (int g = 0; g < p->n_groups; g++) {
        p->g[g].rows = p->rows + off;
        off += p->g[g].n_rows;
        p->g[g].n_rows = 0;
    }
    for (int32_t i = 0; i < n_rows; i++) {
        const lora_set *s = sets[i];
        for (int32_t k = 0; s && k < s->n; k++) {
            lora_group *g = &p->g[find_group(p, &s->u[k])];
            g->rows[g->n_rows++] = i;
        }
    }
    return TL_OK;
}

static uint64_t key_mix(uint64_t h, uint64_t v) { /* FNV-1a over v's 8 bytes */
    for (int i = 0; i < 8; i++) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
    return h;
}

uint64_t lora_plan_key(const lora_plan *p) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int gi = 0; gi < p->n_groups; gi++) {
        const lora_group *g = &p->g[gi];
        uint32_t sb;
        memcpy(&sb, &g->scale, sizeof sb);
        h = key_mix(h, (uint64_t)(uintptr_t)g->lora);
        h = key_mix(h, ((uint64_t)sb << 32) | (uint32_t)g->n_rows);
        for (int32_t i = 0; i < g->n_rows; i++) h = key_mix(h, (uint64_t)g->rows[i]);
    }
    return h ? h : 1;
}

void lora_plan_terms(lora_plan *p, int layer, const lora_wid *parts, const int64_t *col0, int n_parts,
                     be_lowrank *out) {
    int32_t n = 0;
    for (int gi = 0; gi < p->n_groups; gi++) {
        const lora_group *g = &p->g[gi];
        if (layer < 0 || layer >= g->lora->n_layer || !g->n_rows || g->scale == 0.0f) continue;
        for (int k = 0; k < n_parts; k++) {
            const lora_weight *lw = lora_get(g->lora, layer, parts[k]);
            if (!lw->rank) continue;
            p->terms[n++] = (be_lowrank_term){.a = lw->a, .b = lw->b, .rank = lw->rank, .col0 = col0[k],
                                              .n_out = lw->n_out, .scale = g->scale * lw->scale, .rows = g->rows,
                                              .n_rows = g->n_rows};
        }
    }
    *out = (be_lowrank){.n = n, .t = p->terms, .tmp = p->tmp};
}

void lora_ref_apply(const lora_weight *lw, float s, const int32_t *rows, int32_t n_rows, const float *x,
                    int64_t ldx, float *y, int64_t ldy, float *tmp) {
    for (int32_t i = 0; i < n_rows; i++) {
        const float *xr = x + (int64_t)rows[i] * ldx;
        for (int32_t r = 0; r < lw->rank; r++) {
            double acc = 0;
            for (int64_t k = 0; k < lw->n_in; k++) acc += (double)lw->a[r * lw->n_in + k] * xr[k];
            tmp[(int64_t)i * lw->rank + r] = (float)acc;
        }
        for (int64_t o = 0; o < lw->n_out; o++) {
            double acc = 0;
            for (int32_t r = 0; r < lw->rank; r++) acc += (double)lw->b[o * lw->rank + r] * tmp[(int64_t)i * lw->rank + r];
            y[(int64_t)rows[i] * ldy + o] += (float)(s * acc);
        }
    }
}
