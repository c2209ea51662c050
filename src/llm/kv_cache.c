/* llm/kv_cache: block allocation, reference counts and page tables of the
 * paged KV cache (see kv_cache.h). */
#include <stdlib.h>
#include <string.h>

#include "llm/kv_cache.h"

tl_status kv_init(kv_cache *kv, int32_t n_blocks, int32_t block_size, int32_t n_seq_max, int32_t n_seq_ctx) {
    memset(kv, 0, sizeof *kv);
    if (block_size < 1 || block_size > 256 || (block_size & (block_size - 1)))
        return tl_err(TL_ERR_INVALID, "kv cache: block size %d is not a power of two in 1..256", block_size);
    if (n_blocks < 1 || n_seq_max < 1 || n_seq_ctx < 1)
        return tl_err(TL_ERR_INVALID, "kv cache: %d blocks, %d sequences, sequence length %d", n_blocks, n_seq_max,
                      n_seq_ctx);
    kv->block_size = block_size;
    while ((1 << kv->block_shift) < block_size) kv->block_shift++;
    kv->n_blocks = n_blocks;
    kv->n_seq_max = n_seq_max;
    kv->n_seq_ctx = n_seq_ctx;
    kv->table_stride = (n_seq_ctx + block_size - 1) / block_size;
    size_t tab;
    if (!tl_mul_ok((size_t)n_seq_max, (size_t)kv->table_stride * sizeof(int32_t), &tab))
        return tl_err(TL_ERR_NOMEM, "kv cache: page tables overflow");
    kv->table = malloc(tab);
    kv->len = calloc((size_t)n_seq_max, sizeof(int32_t));
    kv->ref = calloc((size_t)n_blocks, sizeof(int32_t));
    kv->free_list = malloc((size_t)n_blocks * sizeof(int32_t));
    kv->dirty = calloc((size_t)n_seq_max, 1);
    kv->dirty_list = malloc((size_t)n_seq_max * sizeof(int32_t));
    if (!kv->table || !kv->len || !kv->ref || !kv->free_list || !kv->dirty || !kv->dirty_list) {
        kv_free(kv);
        return tl_err(TL_ERR_NOMEM, "kv cache: cannot allocate the tables of %d sequences", n_seq_max);
    }
    /* unused entries point at block 0: always a valid address for a backend */
    memset(kv->table, 0, tab);
    /* lowest ids are handed out first */
    for (int32_t i = 0; i < n_blocks; i++) kv->free_list[i] = n_blocks - 1 - i;
    kv->n_free = n_blocks;
    return TL_OK;
}

void kv_free(kv_cache *kv) {
    free(kv->table);
    free(kv->len);
    free(kv->ref);
    free(kv->free_list);
    free(kv->dirty);
    free(kv->dirty_list);
    memset(kv, 0, sizeof *kv);
}

static void kv_mark(kv_cache *kv, int32_t seq) {
    if (kv->dirty[seq]) return;
    kv->dirty[seq] = 1;
    kv->dirty_list[kv->n_dirty++] = seq;
}

static int32_t kv_blocks_for(const kv_cache *kv, int32_t len) {
    return (len + kv->block_size - 1) >> kv->block_shift;
}

tl_status kv_check(const kv_cache *kv, const int32_t *add, kv_plan *out) {
    kv_plan p = {0, 0};
    for (int32_t s = 0; s < kv->n_seq_max; s++) {
        if (!add[s]) continue;
        const int32_t len = kv->len[s];
        if ((int64_t)len + add[s] > kv->n_seq_ctx)
            return tl_err(TL_ERR_INVALID, "kv cache: sequence %d would hold %lld positions, more than its limit %d",
                          s, (long long)len + add[s], kv->n_seq_ctx);
        p.new_blocks += kv_blocks_for(kv, len + add[s]) - kv_blocks_for(kv, len);
        /* writing into a shared, partly filled last block copies it */
        if (len & (kv->block_size - 1)) {
            const int32_t b = kv->table[(int64_t)s * kv->table_stride + (len >> kv->block_shift)];
            if (kv->ref[b] > 1) p.cow_blocks++;
        }
    }
    if (p.new_blocks + p.cow_blocks > kv->n_free)
        return tl_err(TL_ERR_FULL, "kv cache: the batch needs %d blocks of %d positions but %d of %d are free",
                      p.new_blocks + p.cow_blocks, kv->block_size, kv->n_free, kv->n_blocks);
    if (out) *out = p;
    return TL_OK;
}

static int32_t kv_take_block(kv_cache *kv) {
    int32_t b = kv->free_list[--kv->n_free];
    kv->ref[b] = 1;
    return b;
}

static void kv_release(kv_cache *kv, int32_t b) {
    if (--kv->ref[b] == 0) kv->free_list[kv->n_free++] = b;
}

void kv_append(kv_cache *kv, int32_t seq, int32_t n, kv_copy *copies, int32_t *n_copies) {
    int32_t *tab = kv->table + (int64_t)seq * kv->table_stride;
    const int32_t len = kv->len[seq];
    if (n <= 0) return;
    bool cow = false;
    if (len & (kv->block_size - 1)) {
        const int32_t i = len >> kv->block_shift;
        if (kv->ref[tab[i]] > 1) {
            const int32_t nb = kv_take_block(kv);
            copies[(*n_copies)++] = (kv_copy){tab[i], nb};
            kv_release(kv, tab[i]);
            tab[i] = nb;
            cow = true;
        }
    }
    const int32_t b0 = kv_blocks_for(kv, len), b1 = kv_blocks_for(kv, len + n);
    for (int32_t i = b0; i < b1; i++) tab[i] = kv_take_block(kv);
    kv->len[seq] = len + n;
    if (b1 > b0 || cow) kv_mark(kv, seq);
}

tl_status kv_truncate(kv_cache *kv, int32_t seq, int32_t len) {
    if (seq < 0 || seq >= kv->n_seq_max)
        return tl_err(TL_ERR_INVALID, "kv cache: sequence id %d out of range [0, %d)", seq, kv->n_seq_max);
    if (len < 0 || len > kv->len[seq])
        return tl_err(TL_ERR_INVALID, "kv cache: cannot truncate sequence %d of %d positions to %d", seq,
                      kv->len[seq], len);
    int32_t *tab = kv->table + (int64_t)seq * kv->table_stride;
    /* released from the end, so the lowest freed block is handed out next:
     * a context of one sequence keeps its blocks in order 0, 1, 2, ...
     * (its page table is the identity, which a backend may rely on) */
    for (int32_t i = kv_blocks_for(kv, kv->len[seq]) - 1; i >= kv_blocks_for(kv, len); i--) {
        kv_release(kv, tab[i]);
        tab[i] = 0;
    }
    if (kv_blocks_for(kv, len) < kv_blocks_for(kv, kv->len[seq])) kv_mark(kv, seq);
    kv->len[seq] = len;
    return TL_OK;
}

tl_status kv_fork(kv_cache *kv, int32_t src, int32_t dst, int32_t len) {
    if (src < 0 || src >= kv->n_seq_max || dst < 0 || dst >= kv->n_seq_max)
        return tl_err(TL_ERR_INVALID, "kv cache: fork %d -> %d: sequence ids must be in [0, %d)", src, dst,
                      kv->n_seq_max);
    if (src == dst) return tl_err(TL_ERR_INVALID, "kv cache: cannot fork sequence %d onto itself", src);
    if (kv->len[dst]) return tl_err(TL_ERR_STATE, "kv cache: fork target %d is not empty (%d positions)", dst, kv->len[dst]);
    if (len < 0 || len > kv->len[src])
        return tl_err(TL_ERR_INVALID, "kv cache: cannot fork %d positions of sequence %d (it holds %d)", len, src,
                      kv->len[src]);
    const int32_t *ts = kv->table + (int64_t)src * kv->table_stride;
    int32_t *td = kv->table + (int64_t)dst * kv->table_stride;
    for (int32_t i = 0; i < kv_blocks_for(kv, len); i++) {
        td[i] = ts[i];
        kv->ref[ts[i]]++;
    }
    kv->len[dst] = len;
    kv_mark(kv, dst);
    return TL_OK;
}

int32_t kv_take_dirty(kv_cache *kv, const int32_t **seqs) {
    int32_t n = kv->n_dirty;
    for (int32_t i = 0; i < n; i++) kv->dirty[kv->dirty_list[i]] = 0;
    kv->n_dirty = 0;
    *seqs = kv->dirty_list;
    return n;
}

int32_t kv_used_blocks(const kv_cache *kv) { return kv->n_blocks - kv->n_free; }
