/* lora/lora_train: fine-tune a LoRA adapter on a loaded GGUF model with the
 * training framework (src/train): the base stays frozen in its file's types
 * (quantized weights dequantized tile by tile, tt_linear_frozen), only the
 * adapter's A and B are parameters, and the result is written as a GGUF
 * adapter that tl_lora_load reads.
 *
 * The forward is the llama family's (RMSNorm, interleaved RoPE as llama GGUF
 * files run it, GQA causal attention, SwiGLU) written in recorded ops; each
 * targeted projection computes W x + s * B (A x) with s = alpha / r (rsLoRA:
 * alpha / sqrt(r)). A is initialised as PEFT does (kaiming-uniform with
 * a = sqrt(5), i.e. U(+-1/sqrt(n_in))), B to zero, so training starts at the
 * base model. Parameters are named by their GGUF tensors
 * ("blk.3.attn_q.weight.lora_a"), so checkpoints (tt_checkpoint_save over
 * the registry) and the exported file share one naming.
 * Owns: the adapter parameters, frozen f32 copies of the norms and the
 * frozen projections (borrowed on the CPU, device copies on CUDA).
 * Calls: train (public API), llm/model (the base's tensors), lora, io/gguf. */
#ifndef TL_LORA_LORA_TRAIN_H
#define TL_LORA_LORA_TRAIN_H

#include "lora/lora.h"
#include "tallow_train.h"

typedef struct lora_train_config {
    int32_t rank;
    float alpha;
    bool rslora;
    uint32_t targets; /* bit (1 << lora_wid) per targeted projection */
    uint64_t seed;    /* A's initialisation */
} lora_train_config;

typedef struct lora_trainee {
    const tl_model *m;     /* the frozen base (not owned) */
    lora_train_config cfg;
    tt_model reg;          /* params: the adapter's A/B; cfg: the base's sizes (checkpoints check them) */
    tt_tensor **a, **b;    /* [n_layer * LORA_W_COUNT] A [r, n_in] / B [n_out, r], NULL where not targeted */
    float *scale;          /* [n_layer * LORA_W_COUNT] s of each pair */
    tt_tensor **norm;      /* [2 * n_layer + 1] attn_norm, ffn_norm per layer, output_norm (f32 copies) */
    tt_frozen **w;         /* [n_layer * LORA_W_COUNT + 1] the base projections, then the output head */
    tt_device dev;         /* where all of the above live */
} lora_trainee;

/* Parse "q,k,v,o,gate,up,down" (or "all") into a targets mask. */
bool lora_parse_targets(const char *s, uint32_t *mask);

/* Set up an adapter to train on m (llama architecture; TL_ERR_UNSUPPORTED
 * names what else a model needs). */
tl_status lora_train_init(lora_trainee *t, const tl_model *m, const lora_train_config *cfg);
/* Start from a loaded adapter's A/B and scales instead (its targets and
 * ranks replace cfg's; tests and continued training). */
tl_status lora_train_init_from(lora_trainee *t, const tl_model *m, const tl_lora *l);
void lora_train_free(lora_trainee *t);
/* Move the trainee to dev (before tt_optim_init): the base projections are
 * uploaded, the norms and the adapter moved; the host model stays as it
 * is (the embedding rows are read from it). */
tl_status lora_train_to(lora_trainee *t, tt_device dev);

/* ids [B*T] -> logits [B, T, vocab]. */
tt_tensor *lora_train_forward(tt_ctx *c, lora_trainee *t, const int32_t *ids, int64_t B, int64_t T);
/* Mean cross-entropy of targets [B*T] (-100: ignored). */
tt_tensor *lora_train_loss(tt_ctx *c, lora_trainee *t, const int32_t *ids, const int32_t *targets, int64_t B,
                           int64_t T);

/* Write the adapter as a GGUF file (general.type adapter, adapter.type lora,
 * adapter.lora.alpha such that llama.cpp's alpha / r equals s: alpha, or
 * alpha * sqrt(r) for rsLoRA; f32 tensors). */
tl_status lora_train_export(const lora_trainee *t, const char *path, const char *name);

#endif
