/* llm/session: one sequence's state: KV cache, activation buffers sized for
 * n_batch tokens, the thread pool and op scratch. Everything is allocated in
 * tl_session_init; evaluation allocates nothing.
 * Owns: all of the above. Calls: llm/forward, ops, base. */
#ifndef TL_LLM_SESSION_H
#define TL_LLM_SESSION_H

#include "llm/model.h"
#include "ops/ops.h"

typedef struct llm_acts {
    float *x;      /* [n_batch][n_embd] residual stream */
    float *xn;     /* [n_batch][n_embd] normed input of a block */
    float *q;      /* [n_batch][n_head*head_dim] */
    float *k;      /* [n_batch][n_head_kv*head_dim] */
    float *v;      /* [n_batch][n_head_kv*head_dim] */
    float *att;    /* [n_batch][n_head*head_dim] attention output */
    float *g;      /* [n_batch][n_ff] gate, then silu(gate)*up */
    float *u;      /* [n_batch][n_ff] */
    float *logits; /* [n_vocab] last token's logits */
    int32_t *pos;  /* [n_batch] positions of the tokens in flight */
} llm_acts;

struct tl_session {
    tl_model *model;
    int32_t n_ctx;
    int32_t n_batch;
    int32_t n_past;       /* tokens in the KV cache */
    uint16_t *kv;         /* one allocation: K then V per layer, f16 */
    size_t kv_layer;      /* elements per layer per K (n_ctx * n_head_kv * head_dim) */
    llm_acts a;
    void *arena;          /* backing memory of a */
    tl_threadpool *tp;
    ops_ctx ops;
    void *backend_ctx;    /* device state (CUDA), else NULL */
};

/* K and V cache rows of layer il: [n_ctx][n_head_kv*head_dim] f16. */
static inline uint16_t *llm_kcache(tl_session *s, int il) { return s->kv + (size_t)il * 2 * s->kv_layer; }
static inline uint16_t *llm_vcache(tl_session *s, int il) { return s->kv + ((size_t)il * 2 + 1) * s->kv_layer; }

/* Validate an evaluation request: tokens present, inside the vocabulary,
 * and fitting the context. Shared by the CPU and device paths. */
tl_status llm_session_check(const tl_session *s, const int32_t *tokens, int32_t n);

/* Run tokens[0..m) at positions n_past.. (m <= n_batch). logits_all [m][n_vocab]
 * if non-NULL, else the last token's logits go to a.logits. */
tl_status llm_forward(tl_session *s, const int32_t *tokens, int32_t m, float *logits_all);

#endif
