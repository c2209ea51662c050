/* llm/kv_cache: the bookkeeping of a paged KV cache (the memory itself is
 * the backend's, one pool per context).
 *
 * The pool is n_blocks blocks of block_size positions. Each sequence owns a
 * page table of block ids: position p lives in block table[p / B] at offset
 * p % B. Blocks are reference counted, so a fork shares its source's blocks;
 * a block shared by two sequences is copied (by the backend, kv_copy_block)
 * when one of them next writes into it. Every change is planned first
 * (kv_plan: room, copies) and applied only when the whole batch is valid,
 * so a rejected batch leaves every sequence as it was.
 * Owns: the tables, reference counts and free list. Calls: base. */
#ifndef TL_LLM_KV_CACHE_H
#define TL_LLM_KV_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

typedef struct kv_cache {
    int32_t block_size, block_shift;
    int32_t n_blocks;
    int32_t n_seq_max;
    int32_t table_stride; /* blocks one sequence may hold: ceil(n_seq_ctx / block_size) */
    int32_t n_seq_ctx;    /* longest a sequence may grow */
    int32_t *table;       /* [n_seq_max][table_stride] block ids */
    int32_t *len;         /* [n_seq_max] positions held */
    int32_t *ref;         /* [n_blocks] sequences holding each block (0: free) */
    int32_t *free_list;   /* [n_blocks] stack of free block ids */
    int32_t n_free;
    uint8_t *dirty;       /* [n_seq_max] table row changed since the last kv_take_dirty */
    int32_t *dirty_list;  /* [n_seq_max] */
    int32_t n_dirty;
} kv_cache;

tl_status kv_init(kv_cache *kv, int32_t n_blocks, int32_t block_size, int32_t n_seq_max, int32_t n_seq_ctx);
void kv_free(kv_cache *kv);

/* The appends of one batch: per sequence, how many positions it gains. */
typedef struct kv_plan {
    int32_t new_blocks;   /* fresh blocks the appends need */
    int32_t cow_blocks;   /* shared blocks that must be copied first */
} kv_plan;

/* Check that sequences can grow by add[s] positions (add [n_seq_max]):
 * lengths within n_seq_ctx and enough free blocks (TL_ERR_FULL naming the
 * count needed and free). Changes nothing. */
tl_status kv_check(const kv_cache *kv, const int32_t *add, kv_plan *out);

/* Copy-on-write request: the backend copies src to dst before the step. */
typedef struct kv_copy {
    int32_t src, dst;
} kv_copy;

/* Grow sequence seq by n positions (after kv_check passed for the batch):
 * allocates its new blocks; a shared partial last block is replaced by a
 * fresh one and the copy is appended to copies (*n_copies). */
void kv_append(kv_cache *kv, int32_t seq, int32_t n, kv_copy *copies, int32_t *n_copies);
/* The KV slot (block * block_size + offset) of position p of sequence seq. */
static inline int32_t kv_slot(const kv_cache *kv, int32_t seq, int32_t p) {
    return kv->table[(int64_t)seq * kv->table_stride + (p >> kv->block_shift)] * kv->block_size +
           (p & (kv->block_size - 1));
}

tl_status kv_truncate(kv_cache *kv, int32_t seq, int32_t len);
tl_status kv_fork(kv_cache *kv, int32_t src, int32_t dst, int32_t len);
/* Sequences whose table rows changed since the last call (the backend mirrors them). */
int32_t kv_take_dirty(kv_cache *kv, const int32_t **seqs);

int32_t kv_used_blocks(const kv_cache *kv);

#endif
