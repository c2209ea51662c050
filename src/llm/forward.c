/* llm/forward: the model's forward over one step, for every backend, as a
 * plain sequence of backend ops over the context's activations:
 *   x = embed(tokens)
 *   per layer: q,k,v = rmsnorm(x).Wqkv (+bias) [qwen3: per-head rmsnorm];
 *              rope(q,k); cache k,v; x += attention(q).Wo
 *              x += act(rmsnorm(x).Wgate) * rmsnorm(x).Wup).Wdown
 *   logits = rmsnorm(x).Wout for the rows whose outputs are kept
 * gemma3 differs by flags: x = embed(tokens) * sqrt(n_embd); the attention
 * and FFN outputs are rmsnormed (post-norms) before their residual adds;
 * gelu instead of silu; sliding-window layers use their own RoPE base and
 * attend to the last n_swa positions only. gpt2 (LayerNorm, learned
 * positions, no RoPE, GELU MLP) is llm/arch_gpt2.c.
 * Each linear names the norm its output is read through next, so a backend
 * may prepare that input in its epilogue.
 * Owns nothing. Calls: backend (through llm_linear for every weight). */
#include <math.h>

#include "llm/context.h"

tl_status llm_forward_gpt2(llm_run *r, const be_step_dev *d);

#define FW_TRY(x)                    \
    do {                             \
        tl_status s_ = (x);          \
        if (s_) return s_;           \
    } while (0)

static tl_status fw_layer(llm_run *r, int il, const be_rope *rope, const be_rope *rope_swa) {
    const tl_model *md = r->model;
    const llm_hparams *hp = &md->hp;
    const llm_placed_layer *P = &md->pl.layers[il];
    llm_acts *a = r->a;
    const int64_t m = r->m, hd = hp->head_dim, qd = (int64_t)hp->n_head * hd;
    const int64_t qkvd = qd + 2 * (int64_t)hp->n_head_kv * hd;
    const float eps = hp->norm_eps;
    const bool swa = llm_layer_is_swa(hp, il);
    const be_qkv_epi epi = {.layer = il, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = (int32_t)hd,
                            .q_norm = P->q_norm, .k_norm = P->k_norm, .eps = eps, .rope = swa ? rope_swa : rope};
    FW_TRY(llm_linear(r, &(be_linear){.w = P->qkv, .layer = il, .wid = LLM_W_QKV, .x = a->x, .m = m, .y = a->qkv,
                                      .in_norm = {BE_NORM_RMS, P->attn_norm, NULL, eps}, .bias = P->bqkv,
                                      .qkv = &epi}));
    FW_TRY(r->be->attention(r->bc, &(be_attn){.layer = il, .q = a->qkv, .q_stride = qkvd, .m = m,
                                             .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = (int32_t)hd,
                                             .window = swa ? hp->n_swa : 0, .scale = hp->att_scale, .out = a->att}));
    FW_TRY(llm_linear(r, &(be_linear){.w = P->wo, .layer = il, .wid = LLM_W_O, .x = a->att, .m = m, .y = a->x,
                                      .mode = BE_ACCUM, .post_norm = P->attn_post_norm, .post_eps = eps,
                                      .next_norm = P->ffn_norm, .next_eps = eps}));
    FW_TRY(llm_linear(r, &(be_linear){.w = P->gu, .layer = il, .wid = LLM_W_GATE_UP, .x = a->x, .m = m, .y = a->g,
                                      .in_norm = {BE_NORM_RMS, P->ffn_norm, NULL, eps},
                                      .act = hp->ffn_gelu ? BE_ACT_GELU_GLU : BE_ACT_SILU_GLU,
                                      .next_w = P->down}));
    const float *next = il + 1 < hp->n_layer ? md->pl.layers[il + 1].attn_norm : md->pl.out_norm;
    FW_TRY(llm_linear(r, &(be_linear){.w = P->down, .layer = il, .wid = LLM_W_DOWN, .x = a->g, .m = m, .y = a->x,
                                      .mode = BE_ACCUM, .post_norm = P->ffn_post_norm, .post_eps = eps,
                                      .next_norm = next, .next_eps = eps}));
    return TL_OK;
}

tl_status llm_forward(void *arg, const be_step_dev *d) {
    llm_run *r = arg;
    const tl_model *md = r->model;
    const llm_hparams *hp = &md->hp;
    if (md->arch == LLM_ARCH_GPT2) return llm_forward_gpt2(r, d);
    llm_acts *a = r->a;
    FW_TRY(r->be->get_rows(r->bc, md->pl.emb, d->token, r->m, a->x));
    if (hp->embd_scale > 0.0f) FW_TRY(r->be->scale(r->bc, a->x, hp->embd_scale, (int64_t)r->m * hp->n_embd));
    const be_rope rope = {.n_rot = hp->n_rot, .neox = hp->rope_type == LLM_ROPE_NEOX, .base = hp->rope_base,
                          .scale = hp->rope_scale, .freq_div = md->pl.rope_freqs};
    const be_rope rope_swa = {.n_rot = hp->n_rot, .neox = rope.neox, .base = hp->rope_base_swa, .scale = 1.0f};
    for (int il = 0; il < hp->n_layer; il++) FW_TRY(fw_layer(r, il, &rope, &rope_swa));
    return llm_head(r, d, &(be_norm){BE_NORM_RMS, md->pl.out_norm, NULL, hp->norm_eps});
}

/* The kept rows (all of them, or gathered), normed and through the output
 * weight in chunks of n_out_cap rows, each row's argmax alongside; every
 * chunk but the last is read to the host before the next overwrites it. */
tl_status llm_head(llm_run *r, const be_step_dev *d, const be_norm *nm) {
    const tl_model *md = r->model;
    llm_acts *a = r->a;
    const int64_t e = md->hp.n_embd;
    const int32_t cap = r->c->n_out_cap;
    for (int32_t c0 = 0; c0 < r->n_out; c0 += cap) {
        const int32_t n = r->n_out - c0 < cap ? r->n_out - c0 : cap;
        const float *rows = a->x + (int64_t)c0 * e; /* every row kept: out_row is 0..m-1 */
        if (r->n_out < r->m) {
            FW_TRY(r->be->gather(r->bc, a->x, e, d->out_row + c0, n, a->xsel));
            rows = a->xsel;
        }
        if (a->embd) FW_TRY(r->be->norm(r->bc, rows, nm, e, n, a->embd));
        FW_TRY(llm_linear(r, &(be_linear){.w = md->pl.out, .layer = -1, .wid = LLM_W_OUTPUT, .x = rows, .m = n,
                                          .y = a->logits, .in_norm = *nm, .argmax = a->argmax}));
        if (c0 + n < r->n_out) FW_TRY(llm_outputs_read(r->c, r->out_base + c0, n, false));
    }
    return TL_OK;
}
