/* llm/forward: the llama-family forward pass on the CPU backend, written as
 * a plain sequence of op calls over preallocated buffers:
 *   x = embed(tokens)
 *   per layer: h = rmsnorm(x); q,k,v = h.W (+bias) [qwen3: per-head rmsnorm];
 *              rope(q,k); cache k,v; x += attention(q).Wo
 *              h = rmsnorm(x); x += (silu(h.Wg) * h.Wu).Wd
 *   logits = rmsnorm(x).Wout
 * gemma3 differs by flags: x = embed(tokens) * sqrt(n_embd); the attention
 * and FFN outputs are rmsnormed (post-norms) before their residual adds;
 * gelu instead of silu; sliding-window layers use their own RoPE base and
 * attend to the last n_swa positions only. gpt2 (LayerNorm, learned
 * positions, no RoPE, GELU MLP) has its own pass in llm/arch_gpt2.c.
 * Owns nothing. Calls: ops. */
#include <math.h>
#include <string.h>

#include "llm/session.h"

tl_status llm_forward(tl_session *s, const int32_t *tokens, int32_t m, float *logits_all) {
    const tl_model *md = s->model;
    const llm_hparams *hp = &md->hp;
    llm_acts *a = &s->a;
    ops_ctx *c = &s->ops;
    const int64_t e = hp->n_embd, hd = hp->head_dim;
    const int64_t qd = (int64_t)hp->n_head * hd, kvd = (int64_t)hp->n_head_kv * hd;
    const int64_t pos0 = s->n_past;
    tl_status st;

    if (md->arch == LLM_ARCH_GPT2) return llm_forward_gpt2(s, tokens, m, logits_all); /* llm/arch_gpt2.c */
    if (m < 1 || m > s->n_batch) return tl_err(TL_ERR_INVALID, "forward: %d tokens (1..%d per call)", m, s->n_batch);
    if (pos0 + m > s->n_ctx)
        return tl_err(TL_ERR_INVALID, "forward: context full (%lld + %d tokens > n_ctx %d)", (long long)pos0, m,
                      s->n_ctx);
    for (int32_t j = 0; j < m; j++) a->pos[j] = (int32_t)(pos0 + j);

    if ((st = ops_get_rows(&md->tok_embd, tokens, m, a->x))) return st;
    if (hp->embd_scale > 0.0f) ops_scale(a->x, hp->embd_scale, m * e);

    const ops_rope_params rope = {
        .n_rot = hp->n_rot,
        .neox = hp->rope_type == LLM_ROPE_NEOX,
        .base = hp->rope_base,
        .scale = hp->rope_scale,
        .freq_factors = md->rope_freqs.data,
    };
    const ops_rope_params rope_swa = {
        .n_rot = hp->n_rot, .neox = rope.neox, .base = hp->rope_base_swa, .scale = 1.0f, .freq_factors = NULL};

    for (int il = 0; il < hp->n_layer; il++) {
        const llm_layer *L = &md->layers[il];
        ops_rmsnorm(a->x, L->attn_norm.data, e, m, hp->norm_eps, a->xn);
        const tl_tensor *wqkv[3] = {&L->wq, &L->wk, &L->wv};
        float *yqkv[3] = {a->q, a->k, a->v};
        if ((st = ops_matmul_multi(c, wqkv, 3, a->xn, m, yqkv))) return st;
        if (hp->qkv_bias) {
            ops_add_bias(a->q, L->bq.data, qd, m);
            ops_add_bias(a->k, L->bk.data, kvd, m);
            ops_add_bias(a->v, L->bv.data, kvd, m);
        }
        if (hp->qk_norm) {
            ops_rmsnorm(a->q, L->q_norm.data, hd, m * hp->n_head, hp->norm_eps, a->q);
            ops_rmsnorm(a->k, L->k_norm.data, hd, m * hp->n_head_kv, hp->norm_eps, a->k);
        }
        const bool swa = llm_layer_is_swa(hp, il);
        ops_rope(a->q, hd, hp->n_head, m, a->pos, swa ? &rope_swa : &rope);
        ops_rope(a->k, hd, hp->n_head_kv, m, a->pos, swa ? &rope_swa : &rope);
        uint16_t *kc = llm_kcache(s, il), *vc = llm_vcache(s, il);
        ops_store_f16(kc + pos0 * kvd, a->k, m * kvd);
        ops_store_f16(vc + pos0 * kvd, a->v, m * kvd);
        ops_attention_window(c, a->q, kc, vc, m, pos0, hp->n_head, hp->n_head_kv, hd, hp->att_scale,
                             swa ? hp->n_swa : 0, a->att);
        if ((st = ops_matmul(c, &L->wo, a->att, m, a->xn))) return st;
        if (hp->post_norms) ops_rmsnorm(a->xn, L->attn_post_norm.data, e, m, hp->norm_eps, a->xn);
        ops_add(a->x, a->xn, m * e);

        ops_rmsnorm(a->x, L->ffn_norm.data, e, m, hp->norm_eps, a->xn);
        const tl_tensor *wgu[2] = {&L->w_gate, &L->w_up};
        float *ygu[2] = {a->g, a->u};
        if ((st = ops_matmul_multi(c, wgu, 2, a->xn, m, ygu))) return st;
        if (hp->ffn_gelu)
            ops_gelu_mul(a->g, a->u, m * hp->n_ff);
        else
            ops_silu_mul(a->g, a->u, m * hp->n_ff);
        if ((st = ops_matmul(c, &L->w_down, a->g, m, a->xn))) return st;
        if (hp->post_norms) ops_rmsnorm(a->xn, L->ffn_post_norm.data, e, m, hp->norm_eps, a->xn);
        ops_add(a->x, a->xn, m * e);
    }

    if (logits_all) {
        ops_rmsnorm(a->x, md->output_norm.data, e, m, hp->norm_eps, a->xn);
        if ((st = ops_matmul(c, &md->output, a->xn, m, logits_all))) return st;
    } else {
        const float *last = a->x + (int64_t)(m - 1) * e;
        ops_rmsnorm(last, md->output_norm.data, e, 1, hp->norm_eps, a->xn);
        if ((st = ops_matmul(c, &md->output, a->xn, 1, a->logits))) return st;
    }
    s->n_past += m;
    return TL_OK;
}
