/* llm/model: a loaded model: hyper-parameters, weight tensors (views into the
 * mmapped GGUF: never copied on CPU), and the tokenizer.
 *
 * One struct serves the llama family (llama, qwen2, qwen3) and gemma3: the
 * architecture-specific parts are flags (QKV bias, QK-norm, RoPE layout,
 * gemma3's embedding scale, post-norms, GELU FFN and sliding window);
 * gpt2 adds LayerNorm biases, linear biases and a position table (its
 * fused QKV is bound as row views into wq/wk/wv, bq/bk/bv).
 * Weights are placed once on the model's backend (llm/place.c): the
 * forwards read only the placed handles (llm_placed), never the views.
 * Owns: the gguf mapping, the tokenizer, the layer array, the backend's
 * model state. Calls: io/gguf, text/tokenizer, tensor, backend. */
#ifndef TL_LLM_MODEL_H
#define TL_LLM_MODEL_H

#include "backend/backend.h"
#include "io/gguf.h"
#include "tallow.h"
#include "tensor/tensor.h"
#include "text/tokenizer.h"

typedef enum llm_arch {
    LLM_ARCH_LLAMA = 0,
    LLM_ARCH_QWEN2 = 1,
    LLM_ARCH_QWEN3 = 2,
    LLM_ARCH_GEMMA3 = 3, /* gemma3: see the gemma fields below */
    LLM_ARCH_GPT2 = 4    /* gpt2: LayerNorm with bias, learned positions, GELU MLP (llm/arch_gpt2.c) */
} llm_arch;

typedef enum llm_rope_type {
    LLM_ROPE_NORM = 0, /* interleaved pairs (x[2i], x[2i+1]): llama GGUFs */
    LLM_ROPE_NEOX = 1  /* half-split pairs (x[i], x[i+d/2]): qwen2/qwen3 */
} llm_rope_type;

typedef struct llm_hparams {
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd;      /* model width */
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;    /* attention.key_length, default n_embd/n_head */
    int32_t n_ff;
    int32_t n_rot;       /* rope.dimension_count, default head_dim */
    float norm_eps;
    float rope_base;
    float rope_scale;    /* linear scaling factor: positions are divided by it */
    llm_rope_type rope_type;
    bool qkv_bias;       /* qwen2 */
    bool qk_norm;        /* qwen3, gemma3: RMSNorm per head on Q and K before RoPE */
    float att_scale;     /* softmax scale of Q.K (1/sqrt(head_dim) unless the arch says otherwise) */
    /* gemma3 (all off for the llama family): */
    float embd_scale;    /* token embeddings multiplied by this (sqrt(n_embd)); 0: none */
    bool post_norms;     /* RMSNorm of the attention and FFN outputs before each residual add */
    bool ffn_gelu;       /* FFN gate activation gelu(tanh approx.) instead of silu */
    int32_t n_swa;       /* sliding window: a query at p sees keys at p-n_swa < pos <= p; 0: none */
    int32_t swa_period;  /* every swa_period-th layer ((il+1) % period == 0) is global */
    float rope_base_swa; /* RoPE base of the sliding-window layers (no scaling on those) */
} llm_hparams;

/* Whether layer il uses the sliding window and rope_base_swa (gemma3). */
static inline bool llm_layer_is_swa(const llm_hparams *hp, int il) {
    return hp->n_swa > 0 && (il + 1) % hp->swa_period != 0;
}

typedef struct llm_layer {
    tl_tensor attn_norm;  /* [n_embd] f32 */
    tl_tensor wq;         /* [n_embd, n_head*head_dim] (ne order: ne[0] = input) */
    tl_tensor wk;         /* [n_embd, n_head_kv*head_dim] */
    tl_tensor wv;         /* [n_embd, n_head_kv*head_dim] */
    tl_tensor wo;         /* [n_head*head_dim, n_embd] */
    tl_tensor bq, bk, bv; /* qwen2 biases [n_out] f32, else data == NULL */
    tl_tensor q_norm;     /* qwen3 [head_dim] f32, else data == NULL */
    tl_tensor k_norm;     /* qwen3 [head_dim] f32 */
    tl_tensor ffn_norm;   /* [n_embd] f32 */
    tl_tensor w_gate;     /* [n_embd, n_ff] */
    tl_tensor w_up;       /* [n_embd, n_ff] */
    tl_tensor w_down;     /* [n_ff, n_embd] */
    tl_tensor attn_post_norm; /* gemma3 [n_embd] f32, else data == NULL */
    tl_tensor ffn_post_norm;  /* gemma3 [n_embd] f32, else data == NULL */
    /* gpt2 (else data == NULL): wq/wk/wv and bq/bk/bv are row views of the
     * fused attn_qkv weight and bias; the LayerNorm biases and the linear biases: */
    tl_tensor attn_norm_b, ffn_norm_b; /* [n_embd] f32 */
    tl_tensor bo;                      /* [n_embd] f32 */
    tl_tensor b_up;                    /* [n_ff] f32 */
    tl_tensor b_down;                  /* [n_embd] f32 */
} llm_layer;

/* Which weight a linear applies (with the layer: the linear point's identity,
 * where adapters attach). Stacks cover several GGUF tensors. */
typedef enum llm_wid {
    LLM_W_QKV = 0,     /* attn_q | attn_k | attn_v (gpt2: attn_qkv) */
    LLM_W_O = 1,       /* attn_output */
    LLM_W_GATE_UP = 2, /* ffn_gate ; ffn_up */
    LLM_W_UP = 3,      /* ffn_up alone (gpt2) */
    LLM_W_DOWN = 4,    /* ffn_down */
    LLM_W_OUTPUT = 5   /* output (layer -1) */
} llm_wid;

/* A layer's weights as placed on the backend (NULL: absent). */
typedef struct llm_placed_layer {
    be_weight *qkv;  /* [q | k | v] rows */
    be_weight *wo;
    be_weight *gu;   /* [gate; up] (llama family, gemma3) */
    be_weight *up;   /* gpt2 */
    be_weight *down;
    const float *attn_norm, *attn_norm_b, *ffn_norm, *ffn_norm_b;
    const float *bqkv, *bo, *b_up, *b_down;
    const float *q_norm, *k_norm, *attn_post_norm, *ffn_post_norm;
} llm_placed_layer;

typedef struct llm_placed {
    be_weight *emb, *out, *pos; /* out may be emb (tied); pos: gpt2 */
    const float *out_norm, *out_norm_b, *rope_freqs;
    llm_placed_layer *layers;   /* [n_layer] */
} llm_placed;

struct tl_model {
    gguf_file *gguf;
    tok_vocab *vocab;
    llm_arch arch;
    llm_hparams hp;
    tl_tensor tok_embd;    /* [n_embd, n_vocab] */
    tl_tensor output_norm; /* [n_embd] f32 */
    tl_tensor output;      /* [n_embd, n_vocab]; same data as tok_embd when tied */
    tl_tensor rope_freqs;  /* [n_rot/2] f32 frequency divisors (Llama-3), or data == NULL */
    tl_tensor pos_embd;    /* gpt2 [n_embd, n_ctx_train] learned positions, else data == NULL */
    tl_tensor output_norm_b; /* gpt2 [n_embd] f32 LayerNorm bias, else data == NULL */
    llm_layer *layers;     /* [n_layer] */
    tl_model_params params;
    char name[128];
    char *chat_template;   /* tokenizer.chat_template, NUL-terminated copy, or NULL */
    char ftype[16];
    uint64_t n_params;
    uint64_t n_bytes;
    const be_ops *be;      /* the backend the weights live on */
    be_model *bm;
    llm_placed pl;
};

const char *llm_arch_name(llm_arch a);

/* Bind GGUF tensor `name` into t, checking dims (0: any), a CPU kernel
 * (need_dot: a matmul weight; else f32). Absent and not required: data NULL. */
tl_status llm_bind_tensor(tl_model *m, tl_tensor *t, const char *name, int n_dims, int64_t ne0, int64_t ne1,
                          bool required, bool need_dot);

/* gpt2 (llm/arch_gpt2.c): hyper-parameters after the common keys (LayerNorm
 * epsilon) and tensors (fused QKV split into row views). */
tl_status llm_gpt2_load_hparams(tl_model *m, const char *arch);
tl_status llm_gpt2_load_tensors(tl_model *m);

/* Place every weight on params.backend (llm/place.c); free them. */
tl_status llm_place(tl_model *m);
void llm_unplace(tl_model *m);

#endif
