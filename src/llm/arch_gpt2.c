/* llm/arch_gpt2: the GPT-2 architecture in llama.cpp's GGUF layout
 * ("gpt2.*" keys; token_embd, position_embd, blk.N.{attn_norm, attn_qkv,
 * attn_output, ffn_norm, ffn_up, ffn_down}.{weight,bias}, output_norm.{weight,
 * bias}, output.weight optional and tied to token_embd when absent):
 *   x = tok_embd[tokens] + pos_embd[positions]
 *   per layer: h = layernorm(x); q,k,v = h.Wqkv + bqkv (fused, split by rows);
 *              cache k,v; x += attention(q).Wo + bo
 *              h = layernorm(x); x += gelu(h.Wup + bup).Wdown + bdown
 *   logits = layernorm(x).Wout
 * No RoPE: positions enter only through pos_embd, so a context longer than
 * context_length (the table's rows) is refused.
 * Owns nothing (tensors are views into the model's mapping). Calls: backend, io/gguf. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/context.h"

tl_status llm_gpt2_load_hparams(tl_model *m, const char *arch) {
    char key[128];
    snprintf(key, sizeof key, "%s.attention.layer_norm_epsilon", arch);
    double eps;
    tl_status s = gguf_get_float(m->gguf, key, &eps);
    if (s == TL_ERR_NOT_FOUND) return tl_err(TL_ERR_FORMAT, "model: gpt2 needs metadata '%s'", key);
    if (s) return s;
    if (!(eps > 0.0 && eps < 1.0)) return tl_err(TL_ERR_FORMAT, "model: %s = %g is out of range (0, 1)", key, eps);
    llm_hparams *hp = &m->hp;
    hp->norm_eps = (float)eps;
    hp->n_rot = 0; /* no RoPE */
    hp->qkv_bias = true;
    hp->qk_norm = false;
    hp->att_scale = 1.0f / sqrtf((float)hp->head_dim);
    if (hp->head_dim * hp->n_head != hp->n_embd)
        return tl_err(TL_ERR_UNSUPPORTED, "model: gpt2 with key_length %d * %d heads != n_embd %d", hp->head_dim,
                      hp->n_head, hp->n_embd);
    return TL_OK;
}

/* t = rows [row0, row0 + n_rows) of the 2-d weight w (a view, no copy):
 * GGUF rows are whole quant blocks, so any row offset is a valid start. */
static tl_status row_view(tl_tensor *t, const tl_tensor *w, int64_t row0, int64_t n_rows) {
    int64_t ne[2] = {w->ne[0], n_rows};
    tl_status s = tl_tensor_view(t, w->type, 2, ne, (uint8_t *)w->data + (size_t)row0 * w->nb[1]);
    t->name = NULL;
    return s;
}

static tl_status f32_view(tl_tensor *t, const tl_tensor *b, int64_t off, int64_t n) {
    tl_status s = tl_tensor_view(t, TL_TYPE_F32, 1, &n, (float *)b->data + off);
    t->name = NULL;
    return s;
}

tl_status llm_gpt2_load_tensors(tl_model *m) {
    llm_hparams *hp = &m->hp;
    const int64_t e = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim,
                  kvd = (int64_t)hp->n_head_kv * hp->head_dim, f = hp->n_ff;
    tl_status s;
    if ((s = llm_bind_tensor(m, &m->tok_embd, "token_embd.weight", 2, e, 0, true, true))) return s;
    hp->n_vocab = (int32_t)m->tok_embd.ne[1];
    /* the position table is read row by row (get_rows), like token_embd */
    if ((s = llm_bind_tensor(m, &m->pos_embd, "position_embd.weight", 2, e, hp->n_ctx_train, true, true))) return s;
    if ((s = llm_bind_tensor(m, &m->output_norm, "output_norm.weight", 1, e, 0, true, false))) return s;
    if ((s = llm_bind_tensor(m, &m->output_norm_b, "output_norm.bias", 1, e, 0, true, false))) return s;
    if ((s = llm_bind_tensor(m, &m->output, "output.weight", 2, e, hp->n_vocab, false, true))) return s;
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return tl_err(TL_ERR_NOMEM, "model: out of memory");
    for (int il = 0; il < hp->n_layer; il++) {
        llm_layer *L = &m->layers[il];
        tl_tensor wqkv, bqkv;
        char n[96];
#define BIND(t, suffix, nd, a, b, dot)                                            \
    do {                                                                          \
        snprintf(n, sizeof n, "blk.%d.%s", il, suffix);                           \
        if ((s = llm_bind_tensor(m, t, n, nd, a, b, true, dot))) return s;        \
    } while (0)
        BIND(&L->attn_norm, "attn_norm.weight", 1, e, 0, false);
        BIND(&L->attn_norm_b, "attn_norm.bias", 1, e, 0, false);
        BIND(&wqkv, "attn_qkv.weight", 2, e, qd + 2 * kvd, true);
        BIND(&bqkv, "attn_qkv.bias", 1, qd + 2 * kvd, 0, false);
        BIND(&L->wo, "attn_output.weight", 2, qd, e, true);
        BIND(&L->bo, "attn_output.bias", 1, e, 0, false);
        BIND(&L->ffn_norm, "ffn_norm.weight", 1, e, 0, false);
        BIND(&L->ffn_norm_b, "ffn_norm.bias", 1, e, 0, false);
        BIND(&L->w_up, "ffn_up.weight", 2, e, f, true);
        BIND(&L->b_up, "ffn_up.bias", 1, f, 0, false);
        BIND(&L->w_down, "ffn_down.weight", 2, f, e, true);
        BIND(&L->b_down, "ffn_down.bias", 1, e, 0, false);
#undef BIND
        /* fused QKV rows are [q | k | v] (llama.cpp's order) */
        if ((s = row_view(&L->wq, &wqkv, 0, qd)) || (s = row_view(&L->wk, &wqkv, qd, kvd)) ||
            (s = row_view(&L->wv, &wqkv, qd + kvd, kvd)) || (s = f32_view(&L->bq, &bqkv, 0, qd)) ||
            (s = f32_view(&L->bk, &bqkv, qd, kvd)) || (s = f32_view(&L->bv, &bqkv, qd + kvd, kvd)))
            return tl_err_prefix(s, "model: blk.%d.attn_qkv: ", il);
    }
    return TL_OK;
}

/* The gpt2 forward over one step (the contract of llm_forward). */
tl_status llm_forward_gpt2(llm_run *r, const be_step_dev *d) {
    const tl_model *md = r->model;
    const llm_hparams *hp = &md->hp;
    const be_ops *be = r->be;
    llm_acts *a = r->a;
    const int64_t m = r->m, e = hp->n_embd, hd = hp->head_dim;
    const int64_t qkvd = ((int64_t)hp->n_head + 2 * (int64_t)hp->n_head_kv) * hd;
    const float eps = hp->norm_eps;
    tl_status st;
    if ((st = be->get_rows(r->bc, md->pl.emb, d->token, m, a->x))) return st;
    if ((st = be->get_rows(r->bc, md->pl.pos, d->pos, m, a->tmp))) return st;
    if ((st = be->add(r->bc, a->x, a->tmp, m * e))) return st;
    for (int il = 0; il < hp->n_layer; il++) {
        const llm_placed_layer *P = &md->pl.layers[il];
        const be_qkv_epi epi = {.layer = il, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv, .head_dim = (int32_t)hd};
        if ((st = llm_linear(r, &(be_linear){.w = P->qkv, .layer = il, .wid = LLM_W_QKV, .x = a->x, .m = m,
                                             .y = a->qkv, .in_norm = {BE_NORM_LAYER, P->attn_norm, P->attn_norm_b, eps},
                                             .bias = P->bqkv, .qkv = &epi})))
            return st;
        if ((st = be->attention(r->bc, &(be_attn){.layer = il, .q = a->qkv, .q_stride = qkvd, .m = m,
                                                  .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
                                                  .head_dim = (int32_t)hd, .scale = hp->att_scale, .out = a->att})))
            return st;
        if ((st = llm_linear(r, &(be_linear){.w = P->wo, .layer = il, .wid = LLM_W_O, .x = a->att, .m = m, .y = a->x,
                                             .mode = BE_ACCUM, .bias = P->bo})))
            return st;
        if ((st = llm_linear(r, &(be_linear){.w = P->up, .layer = il, .wid = LLM_W_UP, .x = a->x, .m = m, .y = a->g,
                                             .in_norm = {BE_NORM_LAYER, P->ffn_norm, P->ffn_norm_b, eps},
                                             .bias = P->b_up, .act = BE_ACT_GELU, .next_w = P->down})))
            return st;
        if ((st = llm_linear(r, &(be_linear){.w = P->down, .layer = il, .wid = LLM_W_DOWN, .x = a->g, .m = m,
                                             .y = a->x, .mode = BE_ACCUM, .bias = P->b_down})))
            return st;
    }
    return llm_head(r, d, &(be_norm){BE_NORM_LAYER, md->pl.out_norm, md->pl.out_norm_b, eps});
}
