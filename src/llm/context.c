/* llm/context: tl_context: creation, batch validation and evaluation, the
 * outputs of the last batch, and the sequence operations (see context.h and
 * the contexts section of include/tallow.h). */
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "llm/context.h"
#include "lora/lora.h"

#define CTX_OUT_CAP 64 /* output rows per head pass (the backend's logits buffer) */

tl_context_params tl_context_default_params(void) {
    tl_context_params p;
    memset(&p, 0, sizeof p);
    return p;
}

static tl_status ctx_acts(tl_context *c) {
    const llm_hparams *hp = &c->model->hp;
    const size_t nb = (size_t)c->n_batch, no = (size_t)c->n_out_cap, e = (size_t)hp->n_embd;
    const size_t qd = (size_t)hp->n_head * hp->head_dim, kvd = (size_t)hp->n_head_kv * hp->head_dim;
    struct { void **p; size_t bytes; const char *what; } bufs[] = {
        {(void **)&c->a.x, nb * e * 4, "residual stream"},
        {(void **)&c->a.qkv, nb * (qd + 2 * kvd) * 4, "q/k/v"},
        {(void **)&c->a.att, nb * qd * 4, "attention output"},
        {(void **)&c->a.g, nb * (size_t)hp->n_ff * 4, "FFN hidden"},
        {(void **)&c->a.tmp, nb * e * 4, "position rows"},
        {(void **)&c->a.xsel, no * e * 4, "output rows"},
        {(void **)&c->a.logits, no * (size_t)hp->n_vocab * 4, "logits"},
        {(void **)&c->a.argmax, no * 4, "argmax"},
    };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        tl_status s = c->be->alloc(c->bc, bufs[i].bytes, bufs[i].what, bufs[i].p);
        if (s) return s;
    }
    if (c->want_embd) return c->be->alloc(c->bc, no * e * 4, "embeddings", (void **)&c->a.embd);
    return TL_OK;
}

static tl_status ctx_host(tl_context *c) {
    const size_t ns = (size_t)c->n_seq_max;
    c->step_out = malloc((size_t)c->n_batch * sizeof(int32_t));
    c->add = calloc(ns, sizeof(int32_t));
    c->len0 = calloc(ns, sizeof(int32_t));
    c->copies = malloc(ns * sizeof(kv_copy));
    if (!c->step_out || !c->add || !c->len0 || !c->copies) return tl_err(TL_ERR_NOMEM, "context: out of memory");
    return TL_OK;
}

tl_status tl_context_init(tl_model *m, const tl_context_params *params, tl_context **out) {
    if (!m || !out) return tl_err(TL_ERR_INVALID, "tl_context_init: NULL argument");
    *out = NULL;
    tl_context_params p = params ? *params : tl_context_default_params();
    const llm_hparams *hp = &m->hp;
    if (p.n_ctx < 0 || p.n_batch < 0 || p.n_threads < 0 || p.n_seq_max < 0 || p.kv_block < 0 || p.n_seq_ctx < 0)
        return tl_err(TL_ERR_INVALID, "context: negative parameter");
    if (p.n_ctx == 0) p.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (p.n_seq_max == 0) p.n_seq_max = 1;
    if (p.kv_block == 0) p.kv_block = 16;
    if (p.n_ctx > (1 << 24)) return tl_err(TL_ERR_INVALID, "context: n_ctx %d is too large", p.n_ctx);
    if (p.n_seq_max > 65536) return tl_err(TL_ERR_INVALID, "context: n_seq_max %d is too large", p.n_seq_max);
    if (p.n_seq_ctx == 0 || p.n_seq_ctx > p.n_ctx) p.n_seq_ctx = p.n_ctx;
    /* learned positions end at the table's last row */
    if (m->pl.pos && p.n_seq_ctx > hp->n_ctx_train) p.n_seq_ctx = hp->n_ctx_train;
    if (p.n_batch == 0) p.n_batch = 512;
    if (p.n_batch > p.n_ctx) p.n_batch = p.n_ctx;
    if (hp->head_dim > 1024) return tl_err(TL_ERR_UNSUPPORTED, "context: head_dim %d > 1024", hp->head_dim);

    tl_context *c = calloc(1, sizeof *c);
    if (!c) return tl_err(TL_ERR_NOMEM, "context: out of memory");
    c->model = m;
    c->be = m->be;
    c->n_batch = p.n_batch;
    c->n_seq_max = p.n_seq_max;
    c->n_seq_ctx = p.n_seq_ctx;
    c->n_out_cap = p.n_batch < CTX_OUT_CAP ? p.n_batch : CTX_OUT_CAP;
    c->want_embd = p.embeddings;
    tl_status s;
    const int32_t n_blocks = (int32_t)(((int64_t)p.n_ctx + p.kv_block - 1) / p.kv_block);
    if ((s = kv_init(&c->kv, n_blocks, p.kv_block, p.n_seq_max, p.n_seq_ctx))) goto fail;
    c->n_ctx = n_blocks * p.kv_block;
    const int64_t qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    int64_t max_k = hp->n_embd > hp->n_ff ? hp->n_embd : hp->n_ff;
    if (qd > max_k) max_k = qd;
    int64_t max_n = hp->n_embd > hp->n_ff ? hp->n_embd : hp->n_ff;
    if (qd + 2 * kvd > max_n) max_n = qd + 2 * kvd;
    if (hp->n_vocab > max_n) max_n = hp->n_vocab;
    be_ctx_desc d = {
        .n_threads = p.n_threads > 0 ? p.n_threads : tl_cpu_count(),
        .n_tokens = p.n_batch,
        .n_seq_max = p.n_seq_max,
        .table_stride = c->kv.table_stride,
        .n_blocks = n_blocks,
        .block_size = p.kv_block,
        .n_layer = hp->n_layer,
        .n_head_kv = hp->n_head_kv,
        .head_dim = hp->head_dim,
        .max_k = max_k,
        .max_n = max_n,
        .max_len = p.n_seq_ctx,
        .profile = p.profile,
    };
    if ((s = c->be->ctx_init(m->bm, &d, &c->bc))) goto fail;
    if ((s = ctx_acts(c)) || (s = ctx_host(c))) goto fail;
    *out = c;
    return TL_OK;
fail:
    tl_context_free(c);
    return tl_err_prefix(s, "context: ");
}

void tl_context_free(tl_context *c) {
    if (!c) return;
    if (c->bc) c->be->ctx_free(c->bc);
    kv_free(&c->kv);
    free(c->pos), free(c->seq), free(c->slot), free(c->out_of);
    free(c->step_out), free(c->add), free(c->len0), free(c->copies);
    free(c->h_logits), free(c->h_embd), free(c->h_argmax);
    lora_ctx_free(c);
    free(c);
}

const tl_model *tl_context_model(const tl_context *c) { return c->model; }
int32_t tl_context_n_ctx(const tl_context *c) { return c->n_ctx; }
int32_t tl_context_n_seq_max(const tl_context *c) { return c->n_seq_max; }
int32_t tl_context_n_seq_ctx(const tl_context *c) { return c->n_seq_ctx; }

tl_status tl_context_profile(tl_context *c, char *buf, size_t n) {
    if (!c || !buf || !n) return tl_err(TL_ERR_INVALID, "context profile: no context or buffer");
    buf[0] = 0;
    if (!c->be->profile_report) return tl_err(TL_ERR_INVALID, "context profile: the %s backend has no op timer", c->be->name);
    return c->be->profile_report(c->bc, buf, n);
}

/* grow an array to n elements of size sz (keeps nothing: for per-batch data) */
static tl_status ctx_grow(void **p, size_t n, size_t sz) {
    void *q = realloc(*p, n && sz ? n * sz : 1);
    if (!q) return tl_err(TL_ERR_NOMEM, "context: cannot allocate %zu bytes for a batch", n * sz);
    *p = q;
    return TL_OK;
}

static tl_status ctx_reserve(tl_context *c, int32_t n_tokens, int32_t n_out) {
    tl_status s;
    if (n_tokens > c->cap_tokens) {
        if ((s = ctx_grow((void **)&c->pos, (size_t)n_tokens, 4)) || (s = ctx_grow((void **)&c->seq, (size_t)n_tokens, 4)) ||
            (s = ctx_grow((void **)&c->slot, (size_t)n_tokens, 4)) || (s = ctx_grow((void **)&c->out_of, (size_t)n_tokens, 4)))
            return s;
        c->cap_tokens = n_tokens;
    }
    if (n_out > c->cap_out) {
        const llm_hparams *hp = &c->model->hp;
        if ((s = ctx_grow((void **)&c->h_logits, (size_t)n_out, (size_t)hp->n_vocab * 4)) ||
            (s = ctx_grow((void **)&c->h_argmax, (size_t)n_out, 4)))
            return s;
        if (c->want_embd && (s = ctx_grow((void **)&c->h_embd, (size_t)n_out, (size_t)hp->n_embd * 4))) return s;
        c->cap_out = n_out;
    }
    return TL_OK;
}

/* Every check before anything changes: ids, positions, room. Fills c->pos,
 * c->seq and c->add; returns the number of outputs in *n_out. */
static tl_status ctx_validate(tl_context *c, const tl_batch *b, int32_t *n_out) {
    const int32_t n = b->n_tokens, nv = c->model->hp.n_vocab;
    memset(c->add, 0, (size_t)c->n_seq_max * sizeof(int32_t));
    int32_t no = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t t = b->token[i], s = b->seq_id ? b->seq_id[i] : 0;
        if (t < 0 || t >= nv)
            return tl_err(TL_ERR_INVALID, "batch: token %d at index %d is outside the vocabulary (%d)", t, i, nv);
        if (s < 0 || s >= c->n_seq_max)
            return tl_err(TL_ERR_INVALID, "batch: sequence id %d at index %d is outside [0, %d)", s, i, c->n_seq_max);
        const int32_t want = c->kv.len[s] + c->add[s];
        if (b->pos && b->pos[i] != want)
            return tl_err(TL_ERR_INVALID,
                          "batch: token %d of sequence %d is at position %d, but the sequence continues at %d", i, s,
                          b->pos[i], want);
        c->pos[i] = want;
        c->seq[i] = s;
        c->add[s]++;
        const bool keep = b->logits ? b->logits[i] != 0 : i == n - 1;
        c->out_of[i] = keep ? no++ : -1;
    }
    *n_out = no;
    return kv_check(&c->kv, c->add, NULL);
}

/* The appends: blocks for every sequence, copies of shared blocks, slots. */
static tl_status ctx_apply(tl_context *c, int32_t n) {
    int32_t n_copies = 0;
    for (int32_t s = 0; s < c->n_seq_max; s++) {
        c->len0[s] = c->kv.len[s];
        if (c->add[s]) kv_append(&c->kv, s, c->add[s], c->copies, &n_copies);
    }
    for (int32_t i = 0; i < n; i++) c->slot[i] = kv_slot(&c->kv, c->seq[i], c->pos[i]);
    for (int32_t i = 0; i < n_copies; i++) {
        tl_status s = c->be->kv_copy_block(c->bc, c->copies[i].src, c->copies[i].dst);
        if (s) return s;
    }
    return TL_OK;
}

static void ctx_rollback(tl_context *c) {
    for (int32_t s = 0; s < c->n_seq_max; s++)
        if (c->add[s]) kv_truncate(&c->kv, s, c->len0[s]);
}

/* One step: tokens [i0, i0 + m) of the batch. */
static tl_status ctx_step(tl_context *c, const tl_batch *b, int32_t i0, int32_t m, bool first, int32_t *out_base) {
    int32_t n_out = 0, max_len = 0;
    for (int32_t j = 0; j < m; j++) {
        if (c->out_of[i0 + j] >= 0) c->step_out[n_out++] = j;
        if (c->pos[i0 + j] + 1 > max_len) max_len = c->pos[i0 + j] + 1;
    }
    be_step st = {
        .n_tokens = m, .token = b->token + i0, .pos = c->pos + i0, .seq = c->seq + i0, .slot = c->slot + i0,
        .n_out = n_out, .out_row = c->step_out, .max_len = max_len,
        .table = c->kv.table, .table_stride = c->kv.table_stride,
    };
    if (first) st.n_dirty = kv_take_dirty(&c->kv, &st.dirty_seq);
    llm_run r = {.c = c, .model = c->model, .be = c->be, .bc = c->bc, .a = &c->a, .m = m, .n_out = n_out,
                 .out_base = *out_base};
    tl_status s = lora_ctx_step(c, i0, m);
    st.lowrank_key = c->lora && !lora_plan_empty(c->lora) ? lora_plan_key(c->lora) : 0;
    if (!s) s = c->be->step_run(c->bc, &st, llm_forward, &r);
    if (s) return s;
    if (n_out) {
        /* the forward read every chunk but the last; that one stays pending */
        const int32_t last = (n_out - 1) / c->n_out_cap * c->n_out_cap;
        c->pend0 = *out_base + last;
        c->pend_n = n_out - last;
        c->pend_argmax = false;
    }
    *out_base += n_out;
    return TL_OK;
}

tl_status tl_decode(tl_context *c, const tl_batch *b) {
    if (!c || !b || !b->token) return tl_err(TL_ERR_INVALID, "tl_decode: NULL argument");
    if (b->n_tokens < 1) return tl_err(TL_ERR_INVALID, "tl_decode: empty batch");
    if (b->n_tokens > c->n_ctx)
        return tl_err(TL_ERR_INVALID, "tl_decode: %d tokens are more than the context's %d positions", b->n_tokens,
                      c->n_ctx);
    tl_status s;
    /* the previous batch's pending outputs are dropped with it */
    c->pend_n = 0;
    c->n_tokens = 0;
    c->n_out = 0;
    int32_t n_out = 0;
    /* the arrays hold n_tokens entries; outputs at most as many */
    if ((s = ctx_reserve(c, b->n_tokens, 0))) return s;
    if ((s = ctx_validate(c, b, &n_out))) return s;
    if ((s = ctx_reserve(c, b->n_tokens, n_out))) return s;
    if ((s = ctx_apply(c, b->n_tokens))) {
        ctx_rollback(c);
        return s;
    }
    int32_t out_base = 0;
    for (int32_t i = 0; i < b->n_tokens; i += c->n_batch) {
        const int32_t m = b->n_tokens - i < c->n_batch ? b->n_tokens - i : c->n_batch;
        /* a later step reuses the output buffers: read this one's first */
        if (i > 0 && c->pend_n && (s = llm_outputs_read(c, c->pend0, c->pend_n, false))) break;
        c->pend_n = 0;
        if ((s = ctx_step(c, b, i, m, i == 0, &out_base))) break;
    }
    if (s) {
        c->pend_n = 0;
        ctx_rollback(c);
        return s;
    }
    c->n_tokens = b->n_tokens;
    c->n_out = n_out;
    return TL_OK;
}

tl_status llm_outputs_read(tl_context *c, int32_t k0, int32_t n, bool argmax_only) {
    const llm_hparams *hp = &c->model->hp;
    /* the rows of [k0, k0+n) sit at the start of the backend buffers */
    tl_status s = c->be->read_argmax(c->bc, c->h_argmax + k0, c->a.argmax, n);
    if (s || argmax_only) return s;
    if ((s = c->be->read(c->bc, c->h_logits + (size_t)k0 * hp->n_vocab, c->a.logits, (size_t)n * hp->n_vocab * 4)))
        return s;
    if (c->want_embd)
        s = c->be->read(c->bc, c->h_embd + (size_t)k0 * hp->n_embd, c->a.embd, (size_t)n * hp->n_embd * 4);
    return s;
}

/* output index of batch token i, or -1; the pending chunk read if needed */
static int32_t ctx_output(tl_context *c, int32_t i, bool argmax_only) {
    if (!c || i < 0 || i >= c->n_tokens || c->out_of[i] < 0) return -1;
    const int32_t k = c->out_of[i];
    if (c->pend_n && k >= c->pend0 && k < c->pend0 + c->pend_n) {
        if (argmax_only) {
            if (!c->pend_argmax && llm_outputs_read(c, c->pend0, c->pend_n, true)) return -1;
            c->pend_argmax = true;
            return k;
        }
        if (llm_outputs_read(c, c->pend0, c->pend_n, false)) return -1;
        c->pend_n = 0;
    }
    return k;
}

const float *tl_context_logits(tl_context *c, int32_t i) {
    const int32_t k = ctx_output(c, i, false);
    return k < 0 ? NULL : c->h_logits + (size_t)k * c->model->hp.n_vocab;
}

const float *tl_context_embedding(tl_context *c, int32_t i) {
    if (!c || !c->want_embd) return NULL;
    const int32_t k = ctx_output(c, i, false);
    return k < 0 ? NULL : c->h_embd + (size_t)k * c->model->hp.n_embd;
}

tl_status tl_context_greedy(tl_context *c, int32_t i, int32_t *tok) {
    if (!c || !tok) return tl_err(TL_ERR_INVALID, "tl_context_greedy: NULL argument");
    if (i < 0 || i >= c->n_tokens || c->out_of[i] < 0)
        return tl_err(TL_ERR_INVALID, "tl_context_greedy: token %d of the last batch kept no logits", i);
    const int32_t k = ctx_output(c, i, true);
    if (k < 0) return tl_err(TL_ERR_BACKEND, "tl_context_greedy: reading the outputs failed: %s", tl_last_error());
    *tok = c->h_argmax[k];
    return TL_OK;
}

tl_status tl_context_synchronize(tl_context *c) {
    if (!c) return tl_err(TL_ERR_INVALID, "tl_context_synchronize: NULL context");
    return c->be->sync(c->bc);
}

static tl_status ctx_seq_ok(const tl_context *c, int32_t seq) {
    if (!c) return tl_err(TL_ERR_INVALID, "sequence: NULL context");
    if (seq < 0 || seq >= c->n_seq_max)
        return tl_err(TL_ERR_INVALID, "sequence id %d is outside [0, %d)", seq, c->n_seq_max);
    return TL_OK;
}

int32_t tl_seq_len(const tl_context *c, int32_t seq) {
    return ctx_seq_ok(c, seq) ? -1 : c->kv.len[seq];
}

tl_status tl_seq_remove(tl_context *c, int32_t seq) {
    tl_status s = ctx_seq_ok(c, seq);
    return s ? s : kv_truncate(&c->kv, seq, 0);
}

tl_status tl_seq_truncate(tl_context *c, int32_t seq, int32_t len) {
    tl_status s = ctx_seq_ok(c, seq);
    return s ? s : kv_truncate(&c->kv, seq, len);
}

tl_status tl_seq_fork(tl_context *c, int32_t src, int32_t dst, int32_t len) {
    if (!c) return tl_err(TL_ERR_INVALID, "sequence: NULL context");
    return kv_fork(&c->kv, src, dst, len);
}

void tl_context_kv_stats(const tl_context *c, tl_kv_stats *o) {
    memset(o, 0, sizeof *o);
    const llm_hparams *hp = &c->model->hp;
    o->block_size = c->kv.block_size;
    o->n_blocks = c->kv.n_blocks;
    o->n_used = kv_used_blocks(&c->kv);
    for (int32_t s = 0; s < c->n_seq_max; s++) {
        if (c->kv.len[s]) o->n_seqs++;
        o->n_positions += c->kv.len[s];
    }
    o->bytes_per_block = (uint64_t)hp->n_layer * 2 * (uint64_t)hp->n_head_kv * (uint64_t)hp->head_dim * 2 *
                         (uint64_t)c->kv.block_size;
    o->bytes_total = o->bytes_per_block * (uint64_t)o->n_blocks;
}
