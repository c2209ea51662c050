/* backend/cuda/cuda_be_lora: a linear's low-rank terms (be_lowrank: LoRA
 * adapters) on the GPU, through the gathered shrink/expand kernels of
 * cuda_lora.cu, so a batch whose sequences use different adapters stays one
 * base product plus the adapters' own work.
 *
 * Adapter matrices are host f32 (the adapter's own tensors); each term's A
 * and B are copied to the device on first use (B transposed, as the expand
 * kernel reads it) and kept for the context's life, keyed by A's address.
 *
 * Per linear, the terms are grouped by their output columns (the parts of a
 * stacked weight: [q | k | v], [gate | up]); per group an entry list (row,
 * term), sorted by row, and its CSR row index go to the device through
 * pinned staging. An eager step uses an arena that is reset when the stream
 * is idle (at each step's start, or after a sync when it is full). A step
 * captured as a graph (cuda_be.c keys it by be_step.lowrank_key) writes its
 * index into one of CBL_SLOTS regions that nothing else writes while that
 * graph lives, so each replay's copies carry the same index. A capture
 * cannot allocate or wait: if an adapter is not on the device yet or the
 * scratch is too small, it is abandoned (CB_LORA_RETRY) and the step runs
 * eagerly, which places them; an index larger than a region can never be
 * captured (CB_LORA_NEVER).
 * Owns: the adapter copies, the staging arena, the shrink scratch. Calls:
 * backend/cuda (C ABI). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_be.h"
#include "backend/cuda/cuda_lora.h"

#define CBL_ARENA (4u << 20) /* staging bytes (host and device mirror) */
#define CBL_TERMS 192        /* terms on one linear: 64 adapters x 3 stacked parts */
#define CBL_SLOT_BYTES (1u << 20) /* one captured step's index bytes */

struct cb_lora {
    struct cbl_mat {
        const float *ha, *hb;
        float *da, *dbt;
        int32_t rank;
        int64_t n_in, n_out;
    } *mat;
    int n_mat, cap_mat;
    uint8_t *h_arena, *d_arena;
    size_t used;
    float *tmp;          /* [entries][max rank] */
    size_t tmp_bytes;
    int32_t *row_ptr_h;  /* host scratch */
    uint8_t *h_slots, *d_slots; /* CBL_SLOTS regions for captured steps */
    int cap_slot;        /* the region a capture writes, or -1 (eager) */
    size_t cap_used;
    int cap_fail;        /* CB_LORA_OK, or why the capture must be abandoned */
};

static void cbl_free_mats(be_ctx *bc, cb_lora *L) {
    for (int i = 0; i < L->n_mat; i++) {
        tlc_dfree(bc->c, L->mat[i].da, (size_t)L->mat[i].rank * (size_t)L->mat[i].n_in * 4);
        tlc_dfree(bc->c, L->mat[i].dbt, (size_t)L->mat[i].rank * (size_t)L->mat[i].n_out * 4);
    }
    free(L->mat);
}

void cb_lora_free(be_ctx *bc) {
    cb_lora *L = bc->lora;
    if (!L) return;
    tlc_sync(bc->c);
    cbl_free_mats(bc, L);
    tlc_host_free(L->h_arena);
    if (L->d_arena) tlc_dfree(bc->c, L->d_arena, CBL_ARENA);
    tlc_host_free(L->h_slots);
    if (L->d_slots) tlc_dfree(bc->c, L->d_slots, (size_t)CBL_SLOTS * CBL_SLOT_BYTES);
    if (L->tmp) tlc_dfree(bc->c, L->tmp, L->tmp_bytes);
    free(L->row_ptr_h);
    free(L);
    bc->lora = NULL;
}

void cb_lora_reset(be_ctx *bc) {
    if (bc->lora) bc->lora->used = 0;
}

static tl_status cbl_init(be_ctx *bc) {
    if (bc->lora) return TL_OK;
    cb_lora *L = calloc(1, sizeof *L);
    if (!L) return tl_err(TL_ERR_NOMEM, "cuda lora: out of memory");
    bc->lora = L;
    L->cap_slot = -1;
    tl_status s = tlc_host_alloc(CBL_ARENA, (void **)&L->h_arena);
    if (!s) s = tlc_alloc(bc->c, CBL_ARENA, "LoRA index staging", (void **)&L->d_arena);
    if (!s && !(L->row_ptr_h = malloc(((size_t)bc->n_tokens + 1) * sizeof *L->row_ptr_h)))
        s = tl_err(TL_ERR_NOMEM, "cuda lora: out of memory");
    if (s) cb_lora_free(bc);
    return s;
}

/* the device copy of a term's matrices (uploaded on first use) */
static tl_status cbl_mat(be_ctx *bc, const be_lowrank_term *t, int64_t n_in, const struct cbl_mat **out) {
    cb_lora *L = bc->lora;
    for (int i = 0; i < L->n_mat; i++)
        if (L->mat[i].ha == t->a && L->mat[i].hb == t->b && L->mat[i].rank == t->rank && L->mat[i].n_in == n_in &&
            L->mat[i].n_out == t->n_out) {
            *out = &L->mat[i];
            return TL_OK;
        }
    if (bc->graph_mode) { /* placed by the eager step the capture is abandoned for */
        L->cap_fail = L->cap_fail ? L->cap_fail : CB_LORA_RETRY;
        return tl_err(TL_ERR_FULL, "cuda lora: an adapter is not on the device yet (capture abandoned)");
    }
    if (L->n_mat == L->cap_mat) {
        int cap = L->cap_mat ? 2 * L->cap_mat : 64;
        void *p = realloc(L->mat, (size_t)cap * sizeof *L->mat);
        if (!p) return tl_err(TL_ERR_NOMEM, "cuda lora: out of memory");
        L->mat = p;
        L->cap_mat = cap;
    }
    struct cbl_mat m = {t->a, t->b, NULL, NULL, t->rank, n_in, t->n_out};
    const size_t na = (size_t)t->rank * (size_t)n_in, nb = (size_t)t->rank * (size_t)t->n_out;
    float *bt = malloc(nb * sizeof *bt);
    if (!bt) return tl_err(TL_ERR_NOMEM, "cuda lora: out of memory for B of %zu values", nb);
    for (int64_t o = 0; o < t->n_out; o++)
        for (int32_t r = 0; r < t->rank; r++) bt[(size_t)r * (size_t)t->n_out + (size_t)o] = t->b[o * t->rank + r];
    tl_status s = tlc_alloc(bc->c, na * 4, "LoRA A", (void **)&m.da);
    if (!s) s = tlc_alloc(bc->c, nb * 4, "LoRA B", (void **)&m.dbt);
    if (!s) s = tlc_upload(bc->c, m.da, t->a, na * 4);
    if (!s) s = tlc_upload(bc->c, m.dbt, bt, nb * 4);
    free(bt);
    if (s) {
        if (m.da) tlc_dfree(bc->c, m.da, na * 4);
        if (m.dbt) tlc_dfree(bc->c, m.dbt, nb * 4);
        return s;
    }
    L->mat[L->n_mat] = m;
    *out = &L->mat[L->n_mat++];
    return TL_OK;
}

/* bytes from the staging arena, copied to its device mirror by cbl_push */
static tl_status cbl_take(be_ctx *bc, size_t bytes, uint8_t **h, uint8_t **d) {
    cb_lora *L = bc->lora;
    bytes = (bytes + 255) & ~(size_t)255;
    if (L->cap_slot >= 0) {
        if (L->cap_used + bytes > CBL_SLOT_BYTES) {
            L->cap_fail = CB_LORA_NEVER;
            return tl_err(TL_ERR_FULL, "cuda lora: a step's adapter index exceeds %u bytes (runs eagerly)",
                          CBL_SLOT_BYTES);
        }
        const size_t off = (size_t)L->cap_slot * CBL_SLOT_BYTES + L->cap_used;
        *h = L->h_slots + off;
        *d = L->d_slots + off;
        L->cap_used += bytes;
        return TL_OK;
    }
    if (bytes > CBL_ARENA)
        return tl_err(TL_ERR_INVALID, "cuda lora: a linear's adapter index needs %zu bytes (staging holds %u)", bytes,
                      CBL_ARENA);
    if (L->used + bytes > CBL_ARENA) {
        /* full: wait until every copy from it has run */
        tl_status s = tlc_sync(bc->c);
        if (s) return s;
        L->used = 0;
    }
    *h = L->h_arena + L->used;
    *d = L->d_arena + L->used;
    L->used += bytes;
    return TL_OK;
}

/* y[rows of term k] (cols col0_k .. col0_k + n_out_k) += s_k B_k A_k x[row]
 * for the n_grp terms t (all of one linear: one shrink, one expand) */
static tl_status cbl_group(be_ctx *bc, const be_lowrank_term *t, int n_grp, const float *x, int64_t n_in, int64_t m,
                           float *y, int64_t ldy) {
    cb_lora *L = bc->lora;
    int32_t n_ent = 0, max_rank = 1;
    int64_t n_cols = 0;
    for (int k = 0; k < n_grp; k++) {
        n_ent += t[k].n_rows;
        if (t[k].rank > max_rank) max_rank = t[k].rank;
        if (t[k].col0 + t[k].n_out > n_cols) n_cols = t[k].col0 + t[k].n_out;
    }
    if (!n_ent) return TL_OK;
    const size_t b_grp = (size_t)n_grp * sizeof(tlc_lora_group), b_ent = (size_t)n_ent * 4,
                 b_ptr = ((size_t)m + 1) * 4;
    uint8_t *h = NULL, *d = NULL;
    tl_status s = cbl_take(bc, b_grp + 2 * b_ent + b_ptr + 32, &h, &d);
    if (s) return s;
    tlc_lora_group *g = (tlc_lora_group *)h;
    int32_t *e_row = (int32_t *)(h + b_grp), *e_grp = e_row + n_ent, *r_ptr = e_grp + n_ent;
    for (int k = 0; k < n_grp; k++) {
        const struct cbl_mat *mt = NULL;
        if ((s = cbl_mat(bc, &t[k], n_in, &mt))) return s;
        g[k] = (tlc_lora_group){mt->da, mt->dbt, t[k].scale, t[k].rank, (int32_t)t[k].col0, (int32_t)t[k].n_out};
    }
    /* entries sorted by row, terms in their given order within a row: a
     * counting sort over the rows (each term's rows ascend) */
    int32_t *cnt = L->row_ptr_h;
    memset(cnt, 0, ((size_t)m + 1) * sizeof *cnt);
    for (int k = 0; k < n_grp; k++)
        for (int32_t i = 0; i < t[k].n_rows; i++) cnt[t[k].rows[i] + 1]++;
    for (int64_t r = 0; r < m; r++) cnt[r + 1] += cnt[r];
    memcpy(r_ptr, cnt, b_ptr);
    for (int k = 0; k < n_grp; k++)
        for (int32_t i = 0; i < t[k].n_rows; i++) {
            const int32_t row = t[k].rows[i], at = cnt[row]++;
            e_row[at] = row;
            e_grp[at] = k;
        }
    if ((s = tlc_upload_async(bc->c, d, h, b_grp + 2 * b_ent + b_ptr))) return s;
    const size_t tb = (size_t)n_ent * (size_t)max_rank * 4;
    if (tb > L->tmp_bytes) {
        if (bc->graph_mode) {
            L->cap_fail = L->cap_fail ? L->cap_fail : CB_LORA_RETRY;
            return tl_err(TL_ERR_FULL, "cuda lora: scratch too small for a capture (abandoned)");
        }
        if ((s = tlc_sync(bc->c))) return s;
        cb_graphs_drop_lowrank(bc); /* their captured kernels read the old scratch */
        if (L->tmp) tlc_dfree(bc->c, L->tmp, L->tmp_bytes);
        L->tmp = NULL;
        L->tmp_bytes = 0;
        if ((s = tlc_alloc(bc->c, tb, "LoRA scratch", (void **)&L->tmp))) return s;
        L->tmp_bytes = tb;
    }
    const tlc_lora_group *dg = (const tlc_lora_group *)d;
    const int32_t *de_row = (const int32_t *)(d + b_grp), *de_grp = de_row + n_ent, *dr_ptr = de_grp + n_ent;
    void *stream = tlc_stream_of(bc->c);
    if ((s = tlc_lora_shrink(x, n_in, (int32_t)n_in, de_row, de_grp, n_ent, dg, max_rank, L->tmp, stream))) return s;
    return tlc_lora_expand(y, ldy, (int32_t)n_cols, dr_ptr, (int32_t)m, de_grp, dg, max_rank, L->tmp, stream);
}

tl_status cb_lowrank(be_ctx *bc, const be_lowrank *lr, const float *x, int64_t n_in, int64_t m, float *y,
                     int64_t ldy) {
    if (!lr || !lr->n) return TL_OK;
    if (lr->n > CBL_TERMS) return tl_err(TL_ERR_INVALID, "cuda lora: %d terms on one linear (at most %d)", lr->n, CBL_TERMS);
    tl_status s = bc->lora ? TL_OK : cbl_init(bc);
    if (s) return s;
    /* the terms in their given order (the plan's canonical adapter order, so
     * a row's sum does not depend on its batch) */
    return cbl_group(bc, lr->t, lr->n, x, n_in, m, y, ldy);
}

tl_status cb_lora_capture_begin(be_ctx *bc, int slot) {
    tl_status s = cbl_init(bc);
    if (s) return s;
    cb_lora *L = bc->lora;
    if (!L->h_slots) {
        const size_t n = (size_t)CBL_SLOTS * CBL_SLOT_BYTES;
        if ((s = tlc_host_alloc(n, (void **)&L->h_slots))) return s;
        if ((s = tlc_alloc(bc->c, n, "LoRA captured index", (void **)&L->d_slots))) {
            tlc_host_free(L->h_slots);
            L->h_slots = NULL;
            return s;
        }
    }
    L->cap_slot = slot;
    L->cap_used = 0;
    L->cap_fail = CB_LORA_OK;
    return TL_OK;
}

int cb_lora_capture_end(be_ctx *bc) {
    cb_lora *L = bc->lora;
    if (!L) return CB_LORA_OK;
    L->cap_slot = -1;
    return L->cap_fail;
}
