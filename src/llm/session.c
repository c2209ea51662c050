/* llm/session: allocation of a session's KV cache, activations and scratch,
 * and the public evaluation entry points (which split long inputs into
 * n_batch chunks). */
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "llm/session.h"
#ifdef TALLOW_CUDA
#include "backend/cuda/cuda_llm.h" /* CUDA dispatch (backend/cuda owns it) */
#endif

tl_session_params tl_session_default_params(void) {
    tl_session_params p = {0, 0, 0};
    return p;
}

static tl_status arena_carve(void **arena, size_t *sizes, void ***ptrs, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        size_t sz = (sizes[i] + 63) & ~(size_t)63;
        if (!tl_add_ok(total, sz, &total)) return tl_err(TL_ERR_NOMEM, "session: buffer sizes overflow");
    }
    uint8_t *p = aligned_alloc(64, total ? total : 64);
    if (!p) return tl_err(TL_ERR_NOMEM, "session: cannot allocate %zu bytes of activations", total);
    memset(p, 0, total);
    *arena = p;
    for (int i = 0; i < n; i++) {
        *ptrs[i] = p;
        p += (sizes[i] + 63) & ~(size_t)63;
    }
    return TL_OK;
}

tl_status tl_session_init(tl_model *m, const tl_session_params *params, tl_session **out) {
    if (!m || !out) return tl_err(TL_ERR_INVALID, "tl_session_init: NULL argument");
    *out = NULL;
    tl_session_params p = params ? *params : tl_session_default_params();
    const llm_hparams *hp = &m->hp;
    if (p.n_ctx < 0 || p.n_batch < 0 || p.n_threads < 0)
        return tl_err(TL_ERR_INVALID, "session: negative n_ctx/n_batch/n_threads");
    if (p.n_ctx == 0) p.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (p.n_batch == 0) p.n_batch = 512;
    if (p.n_batch > p.n_ctx) p.n_batch = p.n_ctx;
    if (p.n_threads == 0) p.n_threads = tl_cpu_count();
    if (p.n_ctx > (1 << 24)) return tl_err(TL_ERR_INVALID, "session: n_ctx %d is too large", p.n_ctx);
    if (hp->head_dim > 1024) return tl_err(TL_ERR_UNSUPPORTED, "session: head_dim %d > 1024", hp->head_dim);

    tl_session *s = calloc(1, sizeof *s);
    if (!s) return tl_err(TL_ERR_NOMEM, "session: out of memory");
    s->model = m;
    s->n_ctx = p.n_ctx;
    s->n_batch = p.n_batch;
    tl_status st;

    const size_t kvd = (size_t)hp->n_head_kv * (size_t)hp->head_dim;
    size_t kv_bytes;
    s->kv_layer = (size_t)p.n_ctx * kvd;
    if (!tl_mul_ok(s->kv_layer, 2 * (size_t)hp->n_layer * sizeof(uint16_t), &kv_bytes)) {
        st = tl_err(TL_ERR_NOMEM, "session: KV cache size overflows");
        goto fail;
    }
    s->kv = malloc(kv_bytes);
    if (!s->kv) {
        st = tl_err(TL_ERR_NOMEM, "session: cannot allocate the KV cache (%zu MiB for %d tokens)", kv_bytes >> 20,
                    p.n_ctx);
        goto fail;
    }

    const size_t nb = (size_t)p.n_batch, e = (size_t)hp->n_embd;
    const size_t qd = (size_t)hp->n_head * hp->head_dim;
    size_t sizes[10] = {
        nb * e * 4, nb * (e > qd ? e : qd) * 4, nb * qd * 4, nb * kvd * 4, nb * kvd * 4,
        nb * qd * 4, nb * (size_t)hp->n_ff * 4, nb * (size_t)hp->n_ff * 4, (size_t)hp->n_vocab * 4, nb * 4,
    };
    void **ptrs[10] = {(void **)&s->a.x, (void **)&s->a.xn, (void **)&s->a.q, (void **)&s->a.k,
                       (void **)&s->a.v, (void **)&s->a.att, (void **)&s->a.g, (void **)&s->a.u,
                       (void **)&s->a.logits, (void **)&s->a.pos};
    if ((st = arena_carve(&s->arena, sizes, ptrs, 10))) goto fail;

    if ((st = tl_threadpool_init(p.n_threads, &s->tp))) goto fail;
    int64_t max_k = hp->n_embd;
    if (hp->n_ff > max_k) max_k = hp->n_ff;
    if ((int64_t)qd > max_k) max_k = (int64_t)qd;
    if ((st = ops_ctx_init(&s->ops, s->tp, p.n_batch, max_k, p.n_ctx))) goto fail;
#ifdef TALLOW_CUDA
    if (m->backend_ctx && (st = llm_cuda_session_init(s))) goto fail;
#endif
    *out = s;
    return TL_OK;
fail:
    tl_session_free(s);
    return st;
}

void tl_session_free(tl_session *s) {
    if (!s) return;
#ifdef TALLOW_CUDA
    llm_cuda_session_free(s);
#endif
    ops_ctx_free(&s->ops);
    tl_threadpool_free(s->tp);
    free(s->arena);
    free(s->kv);
    free(s);
}

tl_status llm_session_check(const tl_session *s, const int32_t *tokens, int32_t n) {
    if (!s || !tokens || n < 1) return tl_err(TL_ERR_INVALID, "session: no tokens to evaluate");
    if ((int64_t)s->n_past + n > s->n_ctx)
        return tl_err(TL_ERR_INVALID, "session: %d tokens do not fit the context (%d used of %d)", n, s->n_past,
                      s->n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->model->hp.n_vocab)
            return tl_err(TL_ERR_INVALID, "session: token %d at index %d is outside the vocabulary (%d)", tokens[i],
                          i, s->model->hp.n_vocab);
    return TL_OK;
}

tl_status tl_session_eval(tl_session *s, const int32_t *tokens, int32_t n, const float **logits) {
#ifdef TALLOW_CUDA
    if (s && s->backend_ctx) return llm_cuda_eval(s, tokens, n, logits);
#endif
    tl_status st = llm_session_check(s, tokens, n);
    if (st) return st;
    for (int32_t i = 0; i < n; i += s->n_batch) {
        int32_t c = n - i < s->n_batch ? n - i : s->n_batch;
        if ((st = llm_forward(s, tokens + i, c, NULL))) return st;
    }
    if (logits) *logits = s->a.logits;
    return TL_OK;
}

tl_status tl_session_eval_all(tl_session *s, const int32_t *tokens, int32_t n, float *out) {
#ifdef TALLOW_CUDA
    if (s && s->backend_ctx) return llm_cuda_eval_all(s, tokens, n, out);
#endif
    tl_status st = llm_session_check(s, tokens, n);
    if (st) return st;
    if (!out) return tl_err(TL_ERR_INVALID, "session: NULL logits buffer");
    for (int32_t i = 0; i < n; i += s->n_batch) {
        int32_t c = n - i < s->n_batch ? n - i : s->n_batch;
        if ((st = llm_forward(s, tokens + i, c, out + (size_t)i * (size_t)s->model->hp.n_vocab))) return st;
    }
    /* keep the last token's logits available like tl_session_eval does */
    memcpy(s->a.logits, out + (size_t)(n - 1) * (size_t)s->model->hp.n_vocab,
           (size_t)s->model->hp.n_vocab * sizeof(float));
    return TL_OK;
}

tl_status tl_session_eval_greedy(tl_session *s, const int32_t *tokens, int32_t n, int32_t *next) {
    if (!next) return tl_err(TL_ERR_INVALID, "session: NULL token output");
#ifdef TALLOW_CUDA
    /* on the device: argmax runs there and only the id comes back */
    if (s && s->backend_ctx) return llm_cuda_eval_greedy(s, tokens, n, next);
#endif
    const float *lg;
    tl_status st = tl_session_eval(s, tokens, n, &lg);
    if (st) return st;
    int32_t best = 0;
    for (int32_t i = 1; i < s->model->hp.n_vocab; i++)
        if (lg[i] > lg[best]) best = i;
    *next = best;
    return TL_OK;
}

int32_t tl_session_pos(const tl_session *s) { return s->n_past; }
int32_t tl_session_n_ctx(const tl_session *s) { return s->n_ctx; }

tl_status tl_session_rewind(tl_session *s, int32_t pos) {
    if (pos < 0 || pos > s->n_past)
        return tl_err(TL_ERR_INVALID, "session: cannot rewind to %d (position is %d)", pos, s->n_past);
    /* cache rows past pos are simply overwritten by later tokens */
    s->n_past = pos;
    return TL_OK;
}
