/* backend/cuda/cuda_be: the CUDA implementation of the backend interface
 * (backend/backend.h), shared by its two files: cuda_be.c (weights,
 * contexts, the KV pool, steps and their CUDA graphs) and cuda_be_ops.c (the
 * ops a forward calls).
 *
 * A context of one sequence ("contiguous": its page table is the identity,
 * which kv_cache keeps for one sequence) runs a decode step through the
 * tuned single-token kernels and captures it as one CUDA graph per
 * attention plan; prompts go through cuBLAS GEMMs and the tensor-core flash
 * attention. A context of many sequences runs every step through per-token
 * positions and slots and the paged attention; its decode steps (up to
 * CB_GRAPH_MAX tokens) are captured per token count. The KV pool is
 * [layer][K | V][kv head][n_plane][head_dim] f16 (n_plane = blocks x B).
 *
 * Decode fusions live in the context's state between ops: the normed input
 * a linear's epilogue prepared for the next one (prep_x, prep_g: xq, xn
 * and ssp hold rmsnorm(prep_x) * prep_g), the q8_1 copy of an activation an
 * op wrote (q8_src: xqb), and the Qwen decode prologue the QKV linear left
 * for the attention (pend). Any op that writes those inputs drops them.
 * Owns: device memory of weights and contexts, graphs. Calls: backend/cuda
 * (C ABI), backend. */
#ifndef TL_BACKEND_CUDA_BE_H
#define TL_BACKEND_CUDA_BE_H

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"

#define CB_GRAPH_MAX 64    /* steps of at most this many tokens are captured */
#define CB_GRAPHS 160      /* graphs a context keeps */
#define CBL_SLOTS 8        /* of them, steps with adapters (least recently used replaced) */
#define CB_GEMM_ROWS 16384 /* weight rows per GEMM (bounds the dequantization scratch) */
#define CB_IN_HDR 4        /* step input ints before the arrays: the head's 64-bit argmax key, pad */

struct be_weight {
    int n;                 /* parts */
    int64_t n_in, n_out, rows[3];
    tlc_weight all;        /* the parts as one matrix (one type) */
    bool one;
    tlc_weight qk, v;      /* Q|K over a V of another type, run by one launch */
    bool pair;
    tlc_weight part[3];    /* each part (views into all / qk where stacked) */
};

typedef struct cb_alloc {
    void *p;
    size_t n;
} cb_alloc;

struct be_model {
    tlc_ctx *c;
    cb_alloc *allocs;      /* device memory */
    int n_allocs, cap_allocs;
    cb_alloc *host;        /* be_weight structs */
    int n_host, cap_host;
    uint64_t bytes;
    void *staging;
    size_t staging_bytes;
    bool progress;
    uint64_t done, total;
    int last_pct;
    size_t gemm_elems;     /* largest part (rows capped at CB_GEMM_ROWS) a GEMM dequantizes */
    int64_t max_in;
};

typedef struct cb_graph {
    int32_t m, n_out, plan;
    uint64_t lr_key;       /* be_step.lowrank_key it was captured for (0: no adapters) */
    int lr_slot;           /* its index region (lr_key != 0 and g), else -1 */
    uint64_t used;         /* the step count when last replayed */
    tlc_graph *g;          /* NULL: the step could not be captured (runs eagerly) */
    bool key;              /* its head leaves the argmax as the 64-bit key */
    const int32_t *key_dst;
} cb_graph;

typedef struct cb_lora cb_lora;
struct be_ctx {
    be_model *bm;
    tlc_ctx *c;
    bool contig;           /* one sequence: identity page table */
    int32_t n_tokens, n_seq_max, table_stride, block_shift, n_layer, nkv, hd, max_len;
    int64_t n_plane, max_k, max_n;
    void *kv;
    size_t kv_bytes;
    int32_t *d_table;      /* [n_seq_max][table_stride] */
    int32_t *d_in, *h_in;  /* step inputs: header, tokens, pos, seq, slot, out_row (m each) */
    float *xn, *prod, *gu, *attn_scr, *ssp;
    void *xq, *xqb, *gemm_scr;
    cb_alloc *allocs;
    int n_allocs, cap_allocs;
    uint64_t bytes;
    /* the step now: device inputs; graph_mode: captured (no decision on input values) */
    const be_step *st;
    const int32_t *d_tok, *d_pos, *d_seq, *d_slot, *d_out;
    bool graph_mode;
    /* decode fusion state (see the header comment) */
    const float *prep_x, *prep_g;
    const float *q8_src;
    bool pend;
    be_qkv_epi pend_e;
    be_rope pend_rope;
    const float *pend_bias;
    float *pend_qkv;
    /* the head's argmax of this step as the 64-bit key in d_in */
    bool key_argmax;
    const int32_t *key_dst;
    cb_graph graphs[CB_GRAPHS];
    int n_graphs;
    uint64_t n_steps, prev_lr_key;
    cb_lora *lora;         /* adapters' device copies and index staging (cuda_be_lora.c), or NULL */
    void *xqm;             /* q8_1 rows of a few-token matvec's input [TLC_MVM_MAX][tlc_q8_bytes(max_k)] */
    tlc_prof *prof;        /* op timer of a profiling context (steps run eagerly), or NULL */
};

/* K and V planes of layer il */
static inline void *cb_kc(const be_ctx *bc, int il) {
    return (uint16_t *)bc->kv + (size_t)il * 2 * (size_t)bc->nkv * (size_t)bc->n_plane * (size_t)bc->hd;
}
static inline void *cb_vc(const be_ctx *bc, int il) {
    return (uint16_t *)cb_kc(bc, il) + (size_t)bc->nkv * (size_t)bc->n_plane * (size_t)bc->hd;
}

/* profile: charge the device time since the last mark to (name, detail) */
void cb_mark(be_ctx *bc, const char *name, int detail);
tl_status cb_keep(cb_alloc **list, int *n, int *cap, void *p, size_t bytes);

/* cuda_be_ops.c */
tl_status cb_get_rows(be_ctx *bc, const be_weight *w, const int32_t *ids, int64_t m, float *out);
tl_status cb_gather(be_ctx *bc, const float *x, int64_t n, const int32_t *rows, int64_t m, float *out);
tl_status cb_add(be_ctx *bc, float *x, const float *y, int64_t n);
tl_status cb_scale(be_ctx *bc, float *x, float s, int64_t n);
tl_status cb_norm(be_ctx *bc, const float *x, const be_norm *nm, int64_t n, int64_t m, float *y);
tl_status cb_linear(be_ctx *bc, const be_linear *l);
tl_status cb_attention(be_ctx *bc, const be_attn *a);
/* cuda_be_lora.c: y [m][ldy] += the terms' s B A x (x [m][n_in]) */
tl_status cb_lowrank(be_ctx *bc, const be_lowrank *lr, const float *x, int64_t n_in, int64_t m, float *y, int64_t ldy);
void cb_lora_reset(be_ctx *bc); /* the stream is idle: staging may be reused */
void cb_lora_free(be_ctx *bc);
/* A capture of a step with terms writes its index into region `slot`
 * (< CBL_SLOTS); end says whether the graph is good (CB_LORA_OK), must be
 * dropped until an eager step has placed the adapters (CB_LORA_RETRY), or
 * can never hold this step (CB_LORA_NEVER). */
enum { CB_LORA_OK = 0, CB_LORA_RETRY = 1, CB_LORA_NEVER = 2 };
tl_status cb_lora_capture_begin(be_ctx *bc, int slot);
int cb_lora_capture_end(be_ctx *bc);
/* cuda_be.c: free every captured step with terms (their scratch moved) */
void cb_graphs_drop_lowrank(be_ctx *bc);
/* drop fusion state that reads p (an op is about to write it) */
void cb_touch(be_ctx *bc, const void *p);

const be_ops *be_cuda(void);

#endif
