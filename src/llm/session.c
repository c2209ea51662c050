/* llm/session: tl_session, one sequence: a context of one sequence whose
 * evaluations append to sequence 0 (the public API's simple path, used by
 * run, chat, bench and perplexity).
 * Owns: its context. Calls: llm/context. */
#include <stdlib.h>
#include <string.h>

#include "llm/context.h"

struct tl_session {
    tl_context *c;
};

tl_session_params tl_session_default_params(void) {
    tl_session_params p = {0, 0, 0};
    return p;
}

tl_status tl_session_init(tl_model *m, const tl_session_params *params, tl_session **out) {
    if (!m || !out) return tl_err(TL_ERR_INVALID, "tl_session_init: NULL argument");
    *out = NULL;
    tl_session_params p = params ? *params : tl_session_default_params();
    if (p.n_ctx < 0 || p.n_batch < 0 || p.n_threads < 0)
        return tl_err(TL_ERR_INVALID, "session: negative n_ctx/n_batch/n_threads");
    tl_session *s = calloc(1, sizeof *s);
    if (!s) return tl_err(TL_ERR_NOMEM, "session: out of memory");
    tl_context_params cp = tl_context_default_params();
    cp.n_ctx = p.n_ctx;
    cp.n_batch = p.n_batch;
    cp.n_threads = p.n_threads;
    cp.n_seq_max = 1;
    tl_status st = tl_context_init(m, &cp, &s->c);
    if (st) {
        free(s);
        return tl_err_prefix(st, "session: ");
    }
    *out = s;
    return TL_OK;
}

tl_status tl_session_set_lora(tl_session *s, const tl_lora_use *u, int32_t n) {
    if (!s) return tl_err(TL_ERR_INVALID, "tl_session_set_lora: NULL session");
    return tl_seq_set_lora(s->c, 0, u, n);
}

void tl_session_free(tl_session *s) {
    if (!s) return;
    tl_context_free(s->c);
    free(s);
}

static tl_status sess_decode(tl_session *s, const int32_t *tokens, int32_t n, bool all) {
    if (!s || !tokens || n < 1) return tl_err(TL_ERR_INVALID, "session: no tokens to evaluate");
    const int32_t len = tl_seq_len(s->c, 0);
    const tl_model *m = tl_context_model(s->c);
    if ((int64_t)len + n > tl_context_n_seq_ctx(s->c))
        return tl_err(TL_ERR_INVALID, "session: %d tokens do not fit the context (%d used of %d%s)", n, len,
                      tl_context_n_seq_ctx(s->c),
                      m->pl.pos && tl_context_n_seq_ctx(s->c) == m->hp.n_ctx_train ? ": the model's learned positions end there" : "");
    int8_t *keep = NULL;
    if (all) {
        keep = malloc((size_t)n);
        if (!keep) return tl_err(TL_ERR_NOMEM, "session: out of memory");
        memset(keep, 1, (size_t)n);
    }
    tl_batch b = {.n_tokens = n, .token = tokens, .logits = keep};
    tl_status st = tl_decode(s->c, &b);
    free(keep);
    return st;
}

tl_status tl_session_eval(tl_session *s, const int32_t *tokens, int32_t n, const float **logits) {
    tl_status st = sess_decode(s, tokens, n, false);
    if (st) return st;
    if (logits) {
        *logits = tl_context_logits(s->c, n - 1);
        if (!*logits) return tl_err(TL_ERR_BACKEND, "session: reading the logits failed: %s", tl_last_error());
    }
    return TL_OK;
}

tl_status tl_session_eval_all(tl_session *s, const int32_t *tokens, int32_t n, float *out) {
    if (!out) return tl_err(TL_ERR_INVALID, "session: NULL logits buffer");
    tl_status st = sess_decode(s, tokens, n, true);
    if (st) return st;
    const size_t nv = (size_t)tl_context_model(s->c)->hp.n_vocab;
    for (int32_t i = 0; i < n; i++) {
        const float *lg = tl_context_logits(s->c, i);
        if (!lg) return tl_err(TL_ERR_BACKEND, "session: reading the logits failed: %s", tl_last_error());
        memcpy(out + (size_t)i * nv, lg, nv * sizeof(float));
    }
    return TL_OK;
}

tl_status tl_session_eval_greedy(tl_session *s, const int32_t *tokens, int32_t n, int32_t *next) {
    if (!next) return tl_err(TL_ERR_INVALID, "session: NULL token output");
    tl_status st = sess_decode(s, tokens, n, false);
    return st ? st : tl_context_greedy(s->c, n - 1, next);
}

int32_t tl_session_pos(const tl_session *s) { return tl_seq_len(s->c, 0); }
int32_t tl_session_n_ctx(const tl_session *s) { return tl_context_n_seq_ctx(s->c); }

tl_status tl_session_rewind(tl_session *s, int32_t pos) {
    const int32_t len = tl_seq_len(s->c, 0);
    if (pos < 0 || pos > len) return tl_err(TL_ERR_INVALID, "session: cannot rewind to %d (position is %d)", pos, len);
    return tl_seq_truncate(s->c, 0, pos);
}

tl_context *tl_session_context(tl_session *s) { return s->c; }

uint64_t tl_session_device_bytes(const tl_session *s) {
    if (!s || s->c->model->params.backend == TL_BACKEND_CPU) return 0;
    return s->c->be->ctx_bytes(s->c->bc);
}

static uint64_t sess_bytes(const tl_tensor *t) {
    return t->data ? tl_row_bytes(t->type, t->ne[0]) * (uint64_t)t->ne[1] : 0;
}

tl_status tl_model_device_stats(tl_model *m, bool measure, tl_device_stats *out) {
    if (!m || !out) return tl_err(TL_ERR_INVALID, "device stats: NULL argument");
    memset(out, 0, sizeof *out);
    if (!m->be->device_stats) return tl_err(TL_ERR_UNSUPPORTED, "device stats: the model runs on the CPU");
    out->kv_bytes_per_pos = (uint64_t)m->hp.n_layer * 2 * (uint64_t)m->hp.n_head_kv * (uint64_t)m->hp.head_dim * 2;
    /* a decode step reads every matrix in the file's encoding but the token
     * table (one row), unless that table is also the output head */
    uint64_t b = sess_bytes(&m->output);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const llm_layer *L = &m->layers[il];
        b += sess_bytes(&L->wq) + sess_bytes(&L->wk) + sess_bytes(&L->wv) + sess_bytes(&L->wo) +
             sess_bytes(&L->w_gate) + sess_bytes(&L->w_up) + sess_bytes(&L->w_down);
    }
    out->decode_bytes = b;
    return m->be->device_stats(m->bm, measure, out);
}
