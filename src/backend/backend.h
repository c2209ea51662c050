/* backend/backend: the interface every compute backend implements (one table
 * of functions per device) and the registry that finds a backend by kind.
 *
 * The engine's forwards (src/llm) are written once against this table. A
 * backend places weights in its memory, holds a context's activations and
 * its paged KV pool, and runs the ops below there. Activation pointers are
 * the backend's own (device pointers on a GPU): callers pass them back into
 * ops and never dereference them. A step (one forward over a batch of
 * tokens) runs through step_run, which a backend may capture and replay (a
 * whole decode step as one CUDA graph), so a forward makes no decision on
 * the values of a step's inputs, only on their counts.
 *
 * Fusion is the backend's business: each linear carries what surrounds it
 * (the norm of its input, its bias, activation, the RoPE/KV-cache epilogue
 * of a QKV projection, a hint naming the norm its output will next be read
 * through), and a backend computes exactly that, fused or not.
 *
 * Kernels know no model: nothing under src/backend/ includes src/llm/.
 * Owns: nothing (each backend owns its state). Calls: tensor, base. */
#ifndef TL_BACKEND_BACKEND_H
#define TL_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "tallow.h"
#include "tensor/tensor.h"

typedef struct be_model be_model;   /* a backend's per-model state (placed weights) */
typedef struct be_ctx be_ctx;       /* a backend's per-context state (activations, KV pool) */
typedef struct be_weight be_weight; /* 1..3 matrices of one input width stacked by rows */

typedef enum be_mode { BE_STORE = 0, BE_ACCUM = 1 } be_mode;

typedef enum be_act {
    BE_ACT_NONE = 0,
    BE_ACT_GELU = 1,     /* y = gelu(y) (tanh form), after the bias */
    BE_ACT_SILU_GLU = 2, /* W stacks [gate; up] (n_out = 2 f): y[i] = silu(g_i) * u_i, i < f */
    BE_ACT_GELU_GLU = 3  /* the same with gelu(g_i) */
} be_act;

typedef enum be_norm_kind { BE_NORM_NONE = 0, BE_NORM_RMS = 1, BE_NORM_LAYER = 2 } be_norm_kind;

/* y = x / rms(x) * w, or LayerNorm (x - mean) / std * w + b; w, b [n] backend f32. */
typedef struct be_norm {
    be_norm_kind kind;
    const float *w, *b;
    float eps;
} be_norm;

typedef struct be_rope {
    int32_t n_rot;         /* rotated dims per head (<= head_dim, even) */
    bool neox;             /* half-split pairs (i, i + n_rot/2) instead of adjacent (2i, 2i+1) */
    float base;
    float scale;           /* positions are divided by it */
    const float *freq_div; /* [n_rot/2] frequency divisors (backend memory), or NULL */
} be_rope;

/* The epilogue of a QKV projection whose output rows are [q | k | v] (n_head,
 * n_head_kv, n_head_kv heads of head_dim): per-head RMSNorm of q and k (if
 * set), RoPE at each token's position (if set), then k and v stored in the
 * KV cache of `layer` at each token's slot. q is left in y for attention. */
typedef struct be_qkv_epi {
    int32_t layer, n_head, n_head_kv, head_dim;
    const float *q_norm, *k_norm; /* [head_dim] backend f32, both or neither */
    float eps;
    const be_rope *rope;          /* NULL: no rotation (learned positions) */
} be_qkv_epi;

/* A low-rank term of a linear (a LoRA adapter's): for each of its rows,
 *   y[row][col0 .. col0 + n_out) += scale * B (A xn[row])
 * where xn is the linear's input after its in_norm and y the product
 * (before bias, activation, post-norm, the residual add and the QKV
 * epilogue, all of which then see it). col0 places it in a stacked weight's
 * outputs ([q | k | v], [gate; up]). a, b, rows and tmp are backend memory. */
typedef struct be_lowrank_term {
    const float *a;      /* [rank][n_in] */
    const float *b;      /* [n_out][rank] */
    int32_t rank;
    int64_t col0, n_out;
    float scale;
    const int32_t *rows; /* [n_rows] rows of the linear's x, ascending */
    int32_t n_rows;
} be_lowrank_term;

typedef struct be_lowrank {
    int32_t n;
    const be_lowrank_term *t;
    float *tmp;          /* scratch [max n_rows][max rank] */
} be_lowrank;

/* One application of a weight: the engine's one linear point.
 *   y = act(W norm(x) + bias), then post-normed (gemma3), then stored or
 *   added into y. x [m][n_in]; y rows are ldy floats apart (0: n_out). */
typedef struct be_linear {
    const be_weight *w;
    int32_t layer, wid;     /* which weight (layer -1: model-level), for adapters */
    const float *x;
    int64_t m;
    float *y;
    int64_t ldy;
    be_mode mode;
    be_norm in_norm;
    const float *bias;      /* [n_out] backend f32, or NULL */
    be_act act;
    const float *post_norm; /* [n_out] RMSNorm weight applied to the product before the add, or NULL */
    float post_eps;
    /* hint: y (the residual, accumulate mode) is next read as rmsnorm(y) * next_norm
     * (next_eps): a backend may prepare that input here */
    const float *next_norm;
    float next_eps;
    /* hint: y is next the input of this weight (a backend may produce y in
     * the form that weight reads) */
    const be_weight *next_w;
    const be_qkv_epi *qkv;  /* QKV projection epilogue, or NULL */
    int32_t *argmax;        /* also each row's argmax (lowest index on ties) into [m] backend ints */
    const be_lowrank *lowrank; /* low-rank terms added to the product (LoRA), or NULL */
} be_linear;

/* Causal attention of m tokens against their sequences' KV (the current
 * step's positions and page tables): token j at position p sees its
 * sequence's keys p - window < i <= p (window <= 0: 0..p).
 * q: token j's heads at q + j * q_stride; out [m][n_head*head_dim]. */
typedef struct be_attn {
    int32_t layer;
    const float *q;
    int64_t q_stride, m;
    int32_t n_head, n_head_kv, head_dim, window;
    float scale;
    float *out;
} be_attn;

/* The inputs of one step, host side. slot[j] = block * block_size + offset
 * is where token j's K/V go; table[s * table_stride + i] is sequence s's
 * i-th block (valid for the sequences this step touches). */
typedef struct be_step {
    int32_t n_tokens;
    const int32_t *token, *pos, *seq, *slot; /* [n_tokens] */
    int32_t n_out;
    const int32_t *out_row;                  /* [n_out] rows whose outputs are kept, ascending */
    int32_t max_len;                         /* the longest context a token of the step sees */
    const int32_t *table;
    int32_t table_stride;
    const int32_t *dirty_seq;                /* sequences whose table rows changed since the last step */
    int32_t n_dirty;
    /* its linears add low-rank terms (adapters): 0 none, else a hash of
     * which rows use which terms, so a backend may replay a step captured
     * with the same key (the terms' index then is the same) */
    uint64_t lowrank_key;
} be_step;

/* The same inputs in backend memory, for the forward's ops. */
typedef struct be_step_dev {
    const int32_t *token, *pos, *out_row;
} be_step_dev;

typedef tl_status (*be_forward_fn)(void *arg, const be_step_dev *d);

typedef struct be_model_desc {
    int32_t device;
    bool verbose;
    const tl_cuda_tuning *cuda_tuning; /* the CUDA backend's settings (NULL: defaults) */
    uint64_t total_bytes; /* weight bytes to place (for progress) */
} be_model_desc;

typedef struct be_ctx_desc {
    int32_t n_threads;   /* CPU threads */
    int32_t n_tokens;    /* most tokens per step */
    int32_t n_seq_max;
    int32_t table_stride;
    int32_t n_blocks, block_size;
    int32_t n_layer, n_head_kv, head_dim;
    int64_t max_k;       /* widest matmul input, for scratch */
    int64_t max_n;       /* widest matmul output */
    int32_t max_len;     /* longest context a token can see */
    bool profile;        /* time every op (profile_report); a backend without a timer refuses */
} be_ctx_desc;

typedef struct be_ops {
    const char *name;
    /* models */
    tl_status (*model_init)(const be_model_desc *d, be_model **out);
    tl_status (*model_ready)(be_model *bm); /* all weights placed */
    void (*model_free)(be_model *bm);
    /* stack parts (same n_in) into one weight; TL_ERR_UNSUPPORTED when this
     * backend cannot run the stack as one (the caller places them apart) */
    tl_status (*weight_place)(be_model *bm, const tl_tensor *const *parts, int n_parts, be_weight **out);
    /* f32 vectors concatenated (norms, biases, RoPE divisors) */
    tl_status (*vec_place)(be_model *bm, const tl_tensor *const *parts, int n_parts, const float **out);
    uint64_t (*model_bytes)(const be_model *bm);
    /* device figures for benchmarks' floors (NULL on the CPU) */
    tl_status (*device_stats)(be_model *bm, bool measure, tl_device_stats *out);
    /* contexts */
    tl_status (*ctx_init)(be_model *bm, const be_ctx_desc *d, be_ctx **out);
    void (*ctx_free)(be_ctx *bc);
    uint64_t (*ctx_bytes)(const be_ctx *bc); /* memory held: KV pool, activations, scratch */
    /* activation memory from the context's arena (sized at init; 64-byte aligned) */
    tl_status (*alloc)(be_ctx *bc, size_t bytes, const char *what, void **out);
    /* copy KV block src to dst in every layer (copy-on-write of a shared block) */
    tl_status (*kv_copy_block)(be_ctx *bc, int32_t src, int32_t dst);
    /* upload the inputs and run fn (possibly captured/replayed) */
    tl_status (*step_run)(be_ctx *bc, const be_step *st, be_forward_fn fn, void *arg);
    /* copy backend memory to the host, after the step's work is done */
    tl_status (*read)(be_ctx *bc, void *dst, const void *src, size_t bytes);
    /* wait for the context's work to finish */
    tl_status (*sync)(be_ctx *bc);
    /* the same for n argmax results a linear wrote (a backend may keep them
     * in another form until read) */
    tl_status (*read_argmax)(be_ctx *bc, int32_t *dst, const int32_t *src, int32_t n);
    /* the op timing table of a profiling context into buf (NULL: no timer) */
    tl_status (*profile_report)(be_ctx *bc, char *buf, size_t n);
    /* ops */
    tl_status (*get_rows)(be_ctx *bc, const be_weight *table, const int32_t *ids, int64_t m, float *out);
    tl_status (*gather)(be_ctx *bc, const float *x, int64_t n, const int32_t *rows, int64_t m, float *out);
    tl_status (*add)(be_ctx *bc, float *x, const float *y, int64_t n);
    tl_status (*scale)(be_ctx *bc, float *x, float s, int64_t n);
    tl_status (*norm)(be_ctx *bc, const float *x, const be_norm *nm, int64_t n, int64_t m, float *y);
    tl_status (*linear)(be_ctx *bc, const be_linear *l);
    tl_status (*attention)(be_ctx *bc, const be_attn *a);
} be_ops;

/* The backend for a kind, or NULL with an error when it is not built in. */
const be_ops *be_find(int kind, const char **why);
const be_ops *be_cpu(void);

#endif
