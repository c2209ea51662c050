/* lora/lora_ctx: adapters on a context: each sequence's set
 * (tl_seq_set_lora), the step's plan built from the sequences of its
 * tokens, and the linear point's hook that hands a linear its low-rank
 * terms (the stacked weights' parts located by column: [q | k | v],
 * [gate; up]). A set stays with its sequence id until replaced (removing
 * or truncating the sequence's positions keeps it).
 * Owns: the context's sets and plan. Calls: llm/context (its fields),
 * lora (sets, plans). */
#include <stdlib.h>
#include <string.h>

#include "llm/context.h"
#include "lora/lora.h"

tl_status tl_seq_set_lora(tl_context *c, int32_t seq, const tl_lora_use *u, int32_t n) {
    if (!c) return tl_err(TL_ERR_INVALID, "tl_seq_set_lora: NULL context");
    if (seq < 0 || seq >= c->n_seq_max)
        return tl_err(TL_ERR_INVALID, "tl_seq_set_lora: sequence id %d is outside [0, %d)", seq, c->n_seq_max);
    lora_set set;
    tl_status s = lora_set_make(&set, c->model, u, n);
    if (s) return s;
    if (!n && !c->lora) return TL_OK;
    if (!c->lora) {
        c->seq_lora = calloc((size_t)c->n_seq_max, sizeof *c->seq_lora);
        c->row_set = calloc((size_t)c->n_batch, sizeof *c->row_set);
        c->lora = malloc(sizeof *c->lora);
        if (!c->seq_lora || !c->row_set || !c->lora) {
            lora_ctx_free(c);
            return tl_err(TL_ERR_NOMEM, "tl_seq_set_lora: out of memory");
        }
        lora_plan_init(c->lora);
    }
    int32_t rank = 1;
    for (int32_t i = 0; i < n; i++)
        if (u[i].lora->rank_max > rank) rank = u[i].lora->rank_max;
    if ((s = lora_plan_reserve(c->lora, c->n_batch, rank))) return s;
    c->seq_lora[seq] = set;
    return TL_OK;
}

void lora_ctx_free(tl_context *c) {
    if (c->lora) lora_plan_free(c->lora);
    free(c->lora);
    free(c->seq_lora);
    free(c->row_set);
    c->lora = NULL;
    c->seq_lora = NULL;
    c->row_set = NULL;
}

tl_status lora_ctx_step(tl_context *c, int32_t i0, int32_t m) {
    if (!c->lora) return TL_OK;
    for (int32_t j = 0; j < m; j++) {
        const lora_set *s = &c->seq_lora[c->seq[i0 + j]];
        c->row_set[j] = s->n ? s : NULL;
    }
    return lora_plan_build(c->lora, m, c->row_set);
}

const be_linear *lora_linear(llm_run *r, const be_linear *l, be_linear *tmp, be_lowrank *lr) {
    lora_plan *p = r->c->lora;
    if (!p || lora_plan_empty(p) || l->layer < 0) return l;
    const llm_hparams *hp = &r->model->hp;
    const int64_t qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    lora_wid parts[3];
    int64_t col0[3] = {0, 0, 0};
    int n = 0;
    switch ((llm_wid)l->wid) {
    case LLM_W_QKV:
        parts[0] = LORA_W_Q, parts[1] = LORA_W_K, parts[2] = LORA_W_V;
        col0[1] = qd, col0[2] = qd + kvd;
        n = 3;
        break;
    case LLM_W_O: parts[0] = LORA_W_O, n = 1; break;
    case LLM_W_GATE_UP:
        parts[0] = LORA_W_GATE, parts[1] = LORA_W_UP;
        col0[1] = hp->n_ff;
        n = 2;
        break;
    case LLM_W_DOWN: parts[0] = LORA_W_DOWN, n = 1; break;
    default: return l; /* the output head, gpt2's lone up: never adapted */
    }
    lora_plan_terms(p, l->layer, parts, col0, n, lr);
    if (!lr->n) return l;
    *tmp = *l;
    tmp->lowrank = lr;
    return tmp;
}
