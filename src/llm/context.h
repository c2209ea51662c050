/* llm/context: a context (tl_context): the paged KV cache's bookkeeping, the
 * backend state holding its memory, and the forward's activations; batches
 * are validated, split into steps of at most n_batch tokens and run through
 * the model's one forward.
 * Owns: the kv_cache, the backend context, the host output buffers.
 * Calls: llm/kv_cache, llm/forward, backend. */
#ifndef TL_LLM_CONTEXT_H
#define TL_LLM_CONTEXT_H

#include "llm/kv_cache.h"
#include "llm/model.h"

/* The forward's activations, in backend memory. */
typedef struct llm_acts {
    float *x;        /* [n_batch][n_embd] residual stream */
    float *qkv;      /* [n_batch][qd + 2 kvd] a token's [q | k | v] */
    float *att;      /* [n_batch][qd] attention output */
    float *g;        /* [n_batch][n_ff] FFN hidden */
    float *tmp;      /* [n_batch][n_embd] gpt2's position rows */
    float *xsel;     /* [n_out_cap][n_embd] the rows whose outputs are kept */
    float *logits;   /* [n_out_cap][n_vocab] */
    float *embd;     /* [n_out_cap][n_embd] final hidden states, or NULL */
    int32_t *argmax; /* [n_out_cap] */
} llm_acts;

struct tl_context {
    tl_model *model;
    const be_ops *be;
    be_ctx *bc;
    kv_cache kv;
    int32_t n_ctx, n_batch, n_seq_max, n_seq_ctx, n_out_cap;
    bool want_embd;
    llm_acts a;
    /* a batch's inputs, host side */
    int32_t cap_tokens;
    int32_t *pos, *seq, *slot, *out_of; /* [cap_tokens] out_of: output index, -1 none */
    int32_t *step_out;                  /* [n_batch] a step's output rows */
    int32_t *add, *len0;                /* [n_seq_max] */
    kv_copy *copies;                    /* [n_seq_max] */
    /* the last batch's outputs */
    int32_t n_tokens, n_out, cap_out;
    float *h_logits;                    /* [cap_out][n_vocab] */
    float *h_embd;                      /* [cap_out][n_embd] */
    int32_t *h_argmax;                  /* [cap_out] */
    int32_t pend0, pend_n;              /* outputs [pend0, pend0 + pend_n) still in backend memory */
    bool pend_argmax;                   /* their argmax was read already */
    /* LoRA (src/lora/lora_ctx.c): each sequence's adapter set and the step's plan; NULL until attached */
    struct lora_set *seq_lora;          /* [n_seq_max] */
    struct lora_plan *lora;
    const struct lora_set **row_set;    /* [n_batch] the step's rows' sets */
};

/* One step's forward state (a be_forward_fn argument). */
typedef struct llm_run {
    tl_context *c;
    const tl_model *model;
    const be_ops *be;
    be_ctx *bc;
    llm_acts *a;
    int32_t m;        /* tokens */
    int32_t n_out;    /* rows whose outputs are kept (the step's out_row) */
    int32_t out_base; /* output index of the step's first output */
} llm_run;

/* The one linear point (llm/linear.c): every forward applies every weight
 * through it; adapters add their low-rank term here. */
tl_status llm_linear(llm_run *r, const be_linear *l);

/* The model's forward over one step (llm/forward.c: every architecture). */
tl_status llm_forward(void *run, const be_step_dev *d);
/* The head over the step's output rows (chunks of n_out_cap; every chunk but
 * the last is read to the host at once): llm/forward.c. */
tl_status llm_head(llm_run *r, const be_step_dev *d, const be_norm *nm);
/* Read outputs [k0, k0 + n) of the step from backend memory into the host buffers. */
tl_status llm_outputs_read(tl_context *c, int32_t k0, int32_t n, bool argmax_only);

#endif
