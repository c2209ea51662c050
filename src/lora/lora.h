/* lora: LoRA adapters: what a loaded adapter holds, how it is read (GGUF
 * adapter files, PEFT directories), checked against a base model, applied at
 * the engine's linear point and baked into a model.
 *
 * An adapter is a set of low-rank pairs (A, B), one per adapted weight of a
 * layer; it changes that weight's product to y = W x + s * B (A x), where
 * s = scale * alpha / r (rsLoRA: alpha / sqrt(r)). A and B are kept as f32
 * copies (whatever the file stored): they are small next to the base, and
 * one layout serves every base weight type.
 *
 * The low-rank term of a batch is computed per group of tokens that share
 * an adapter (lora_plan, made once per forward from each token's sequence
 * and each sequence's adapter set), so sequences with different adapters
 * stay in one batch: the base product runs once over all tokens, and each
 * group adds its own A/B product over its gathered rows (the segmented
 * product of Punica's SGMV and S-LoRA).
 * Owns: the adapters' A/B copies, plans' scratch. Calls: io (gguf,
 * safetensors), quant, base, llm/model (the base's shapes, read only). */
#ifndef TL_LORA_LORA_H
#define TL_LORA_LORA_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/status.h"
#include "tallow.h"

/* The weights of a layer an adapter may change (GGUF names blk.N.<name>.weight). */
typedef enum lora_wid {
    LORA_W_Q = 0,   /* attn_q      (HF self_attn.q_proj) */
    LORA_W_K = 1,   /* attn_k      (k_proj) */
    LORA_W_V = 2,   /* attn_v      (v_proj) */
    LORA_W_O = 3,   /* attn_output (o_proj) */
    LORA_W_GATE = 4, /* ffn_gate   (mlp.gate_proj) */
    LORA_W_UP = 5,  /* ffn_up      (mlp.up_proj) */
    LORA_W_DOWN = 6, /* ffn_down   (mlp.down_proj) */
    LORA_W_COUNT = 7
} lora_wid;

/* GGUF short name ("attn_q") and HF module name ("q_proj") of a weight id. */
const char *lora_wid_gguf(lora_wid w);
const char *lora_wid_hf(lora_wid w);

/* One adapted weight: W [n_out, n_in] (GGUF ne = [n_in, n_out]). */
typedef struct lora_weight {
    int32_t rank;    /* 0: this weight is not adapted */
    int64_t n_in, n_out;
    float *a;        /* [rank][n_in]  (GGUF lora_a ne = [n_in, rank]) */
    float *b;        /* [n_out][rank] (GGUF lora_b ne = [rank, n_out]) */
    float scale;     /* alpha / rank (rsLoRA alpha / sqrt(rank)); 1 when the file gives no alpha */
} lora_weight;

struct tl_lora {
    int32_t n_layer;
    lora_weight *w;     /* [n_layer * LORA_W_COUNT], index layer * LORA_W_COUNT + wid */
    int32_t n_weights;  /* adapted weights */
    int32_t rank_min, rank_max;
    float alpha;        /* adapter.lora.alpha / lora_alpha (0: none given) */
    bool rslora;
    char format[8];     /* "gguf" or "peft" */
    char name[128];
    char arch[16];      /* base architecture it was checked against */
};

/* Whether every weight l adapts exists in m with the shape it was checked
 * against (so l may be used with m: another load of the same file, or a
 * requantized copy); false with a message naming the first that differs. */
bool lora_fits(const tl_lora *l, const tl_model *m);

static inline const lora_weight *lora_get(const tl_lora *l, int layer, lora_wid w) {
    return &l->w[(int64_t)layer * LORA_W_COUNT + w];
}

/* ---- loading (lora.c, lora_gguf.c, lora_peft.c) --------------------------- */

/* An empty adapter shaped for model m (its layer count). */
tl_status lora_alloc(const tl_model *m, tl_lora **out);
/* Check a pair against the base's weight (layer, w) and store it: A
 * [rank][n_in] and B [n_out][rank] are taken over (freed on error too).
 * `what` names the tensor in messages. */
tl_status lora_set_weight(tl_lora *l, const tl_model *m, int layer, lora_wid w, int32_t rank, int64_t n_in,
                          int64_t n_out, float *a, float *b, float scale, const char *what);
/* Parse "blk.N.<gguf name>.weight" into (layer, wid); false if not one. */
bool lora_parse_gguf_name(const char *name, size_t len, int *layer, lora_wid *w);
/* The base's weight (layer, w): ne[0] = n_in, ne[1] = n_out; false if the
 * model has none. */
bool lora_base_shape(const tl_model *m, int layer, lora_wid w, int64_t *n_in, int64_t *n_out);

tl_status lora_load_gguf(const tl_model *m, const char *path, tl_lora *l);
tl_status lora_load_peft(const tl_model *m, const char *dir, tl_lora *l);

/* ---- a sequence's adapter set and a forward's plan (lora_apply.c) --------- */

#define LORA_SET_MAX 8 /* adapters one sequence may use at once */

typedef struct lora_set {
    int32_t n;
    tl_lora_use u[LORA_SET_MAX];
} lora_set;

/* Validate and copy uses into a set (n <= LORA_SET_MAX, adapters non-NULL
 * and of model m's shape, finite scales). */
tl_status lora_set_make(lora_set *s, const tl_model *m, const tl_lora_use *u, int32_t n);

/* One group of a forward: the batch rows whose sequence uses adapter `lora`
 * with scale `scale`. */
typedef struct lora_group {
    const tl_lora *lora;
    float scale;
    int32_t n_rows;
    int32_t *rows; /* into the plan's row storage */
} lora_group;

typedef struct lora_plan {
    int32_t cap_tokens;  /* rows one forward may hold */
    int32_t cap_rank;    /* largest rank the scratch serves */
    int32_t n_groups;
    lora_group g[64];    /* distinct (adapter, scale) pairs in the batch */
    int32_t *rows;       /* [cap_tokens * LORA_SET_MAX] */
    float *tmp;          /* [cap_tokens * cap_rank] a term's A x rows (the backend's scratch) */
    be_lowrank_term terms[3 * 64]; /* one linear's terms (a stack has up to 3 parts) */
} lora_plan;

void lora_plan_init(lora_plan *p);
void lora_plan_free(lora_plan *p);
/* Grow the scratch for cap_tokens rows and ranks up to cap_rank (called
 * when adapters are attached, never in the forward). */
tl_status lora_plan_reserve(lora_plan *p, int32_t cap_tokens, int32_t cap_rank);
/* Group the rows of a batch: row i uses sets[i] (NULL or empty: none).
 * TL_ERR_INVALID if the batch has more rows than reserved, more groups
 * than the plan holds, or a rank above the reserve. */
tl_status lora_plan_build(lora_plan *p, int32_t n_rows, const lora_set *const *sets);
static inline bool lora_plan_empty(const lora_plan *p) { return p->n_groups == 0; }
/* A non-zero hash of the plan's groups (adapter, scale, rows): two plans
 * with one key hand every linear the same terms over the same rows. */
uint64_t lora_plan_key(const lora_plan *p);

/* The terms of one linear of layer `layer` whose stacked outputs are the
 * weights parts[0..n_parts) starting at columns col0[]: every group whose
 * adapter changes one of them. out->n = 0 when none does. */
void lora_plan_terms(lora_plan *p, int layer, const lora_wid *parts, const int64_t *col0, int n_parts,
                     be_lowrank *out);

/* The linear point's hook (lora_ctx.c): l with the context's low-rank terms
 * for its weight, in *tmp (which it may point at), or l itself when the
 * step uses no adapter. */
struct llm_run;
const be_linear *lora_linear(struct llm_run *r, const be_linear *l, be_linear *tmp, be_lowrank *lr);
/* Build the plan of a context's step of m tokens from batch index i0 (the
 * sequences' adapter sets); nothing to do when no sequence has one. */
tl_status lora_ctx_step(tl_context *c, int32_t i0, int32_t m);
void lora_ctx_free(tl_context *c);

/* The scalar reference of one group's product (tests, the CUDA twin):
 * y[rows[i]] += s * B (A x[rows[i]]) with tmp [n_rows][rank] scratch. */
void lora_ref_apply(const lora_weight *lw, float s, const int32_t *rows, int32_t n_rows, const float *x,
                    int64_t ldx, float *y, int64_t ldy, float *tmp);

/* ---- merging (lora_merge.c) -------------------------------------------------- */

/* Write model m's GGUF to out_path with W += s B A baked into every adapted
 * weight of the n uses; type NULL keeps each merged weight's own type, else
 * merged weights are written in that type (falling back as quantize does
 * when a row does not fit its blocks). Other tensors and keys are copied. */
tl_status lora_merge(const tl_model *m, const tl_lora_use *u, int32_t n, const char *out_path, const char *type,
                     int n_threads);

#endif
