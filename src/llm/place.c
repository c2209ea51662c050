/* llm/place: put a loaded model's weights on its backend, once, as the
 * stacks the forwards apply: [q | k | v] and [gate; up] per layer (a
 * backend runs a stack of mixed types as it can), norms and biases as f32
 * vectors (qwen2's three QKV biases concatenated like their rows).
 * Owns: nothing beyond the backend's model state it creates.
 * Calls: backend, llm/model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/model.h"

static uint64_t pl_bytes(const tl_tensor *t) {
    return t->data ? tl_row_bytes(t->type, t->ne[0]) * (uint64_t)t->ne[1] : 0;
}

static tl_status pl_w(tl_model *m, be_weight **out, const tl_tensor *a, const tl_tensor *b, const tl_tensor *c,
                      const char *what, int il) {
    const tl_tensor *parts[3] = {a, b, c};
    const int n = c ? 3 : b ? 2 : 1;
    tl_status s = m->be->weight_place(m->bm, parts, n, out);
    if (s && il >= 0) return tl_err_prefix(s, "blk.%d.%s: ", il, what);
    if (s) return tl_err_prefix(s, "%s: ", what);
    return TL_OK;
}

/* f32 vector(s), or NULL when the first is absent */
static tl_status pl_v(tl_model *m, const float **out, const tl_tensor *a, const tl_tensor *b, const tl_tensor *c) {
    *out = NULL;
    if (!a->data) return TL_OK;
    const tl_tensor *parts[3] = {a, b, c};
    const int n = c ? 3 : b ? 2 : 1;
    return m->be->vec_place(m->bm, parts, n, out);
}

static tl_status pl_layer(tl_model *m, int il) {
    const llm_layer *L = &m->layers[il];
    llm_placed_layer *P = &m->pl.layers[il];
    tl_status s;
    if ((s = pl_w(m, &P->qkv, &L->wq, &L->wk, &L->wv, "attn_qkv", il))) return s;
    if ((s = pl_w(m, &P->wo, &L->wo, NULL, NULL, "attn_output", il))) return s;
    if (L->w_gate.data) {
        if ((s = pl_w(m, &P->gu, &L->w_gate, &L->w_up, NULL, "ffn_gate+up", il))) return s;
    } else if ((s = pl_w(m, &P->up, &L->w_up, NULL, NULL, "ffn_up", il))) {
        return s;
    }
    if ((s = pl_w(m, &P->down, &L->w_down, NULL, NULL, "ffn_down", il))) return s;
    if ((s = pl_v(m, &P->attn_norm, &L->attn_norm, NULL, NULL)) || (s = pl_v(m, &P->attn_norm_b, &L->attn_norm_b, NULL, NULL)) ||
        (s = pl_v(m, &P->ffn_norm, &L->ffn_norm, NULL, NULL)) || (s = pl_v(m, &P->ffn_norm_b, &L->ffn_norm_b, NULL, NULL)) ||
        (s = pl_v(m, &P->bqkv, &L->bq, &L->bk, &L->bv)) || (s = pl_v(m, &P->bo, &L->bo, NULL, NULL)) ||
        (s = pl_v(m, &P->b_up, &L->b_up, NULL, NULL)) || (s = pl_v(m, &P->b_down, &L->b_down, NULL, NULL)) ||
        (s = pl_v(m, &P->q_norm, &L->q_norm, NULL, NULL)) || (s = pl_v(m, &P->k_norm, &L->k_norm, NULL, NULL)) ||
        (s = pl_v(m, &P->attn_post_norm, &L->attn_post_norm, NULL, NULL)) ||
        (s = pl_v(m, &P->ffn_post_norm, &L->ffn_post_norm, NULL, NULL)))
        return tl_err_prefix(s, "blk.%d: ", il);
    return TL_OK;
}

tl_status llm_place(tl_model *m) {
    const char *why = NULL;
    m->be = be_find(m->params.backend, &why);
    if (!m->be) return tl_err(TL_ERR_UNSUPPORTED, "model: %s", why);
    be_model_desc d = {.device = 0, .verbose = m->params.verbose, .cuda_tuning = m->params.cuda_tuning};
    d.total_bytes = pl_bytes(&m->tok_embd) + (m->output.data != m->tok_embd.data ? pl_bytes(&m->output) : 0);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const llm_layer *L = &m->layers[il];
        d.total_bytes += pl_bytes(&L->wq) + pl_bytes(&L->wk) + pl_bytes(&L->wv) + pl_bytes(&L->wo) +
                         pl_bytes(&L->w_gate) + pl_bytes(&L->w_up) + pl_bytes(&L->w_down);
    }
    tl_status s = m->be->model_init(&d, &m->bm);
    if (s) return s;
    m->pl.layers = calloc((size_t)m->hp.n_layer, sizeof *m->pl.layers);
    if (!m->pl.layers) return tl_err(TL_ERR_NOMEM, "model: out of memory");
    if ((s = pl_w(m, &m->pl.emb, &m->tok_embd, NULL, NULL, "token_embd", -1))) return s;
    if (m->output.data == m->tok_embd.data)
        m->pl.out = m->pl.emb;
    else if ((s = pl_w(m, &m->pl.out, &m->output, NULL, NULL, "output", -1)))
        return s;
    if (m->pos_embd.data && (s = pl_w(m, &m->pl.pos, &m->pos_embd, NULL, NULL, "position_embd", -1))) return s;
    if ((s = pl_v(m, &m->pl.out_norm, &m->output_norm, NULL, NULL)) ||
        (s = pl_v(m, &m->pl.out_norm_b, &m->output_norm_b, NULL, NULL)) ||
        (s = pl_v(m, &m->pl.rope_freqs, &m->rope_freqs, NULL, NULL)))
        return s;
    for (int il = 0; il < m->hp.n_layer; il++)
        if ((s = pl_layer(m, il))) return s;
    return m->be->model_ready(m->bm);
}

void llm_unplace(tl_model *m) {
    if (m->be && m->bm) m->be->model_free(m->bm);
    m->bm = NULL;
    free(m->pl.layers);
    m->pl.layers = NULL;
}
