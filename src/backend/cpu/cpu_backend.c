/* backend/cpu/cpu_backend: the CPU implementation of the backend interface
 * (backend/backend.h) over the CPU kernels (ops/ops.h).
 *
 * Weights stay views into the model's mapping (a stack is a list of up to
 * three tensors, run by one matmul_multi); activations are host memory; the
 * KV pool is one allocation laid out [layer][block][K | V][position][kv dim]
 * in f16. Fused requests of a linear (input norm, bias, activation, post
 * norm, residual add, the QKV epilogue, argmax) run as separate passes.
 * Owns: the context's thread pool, scratch, KV pool and activations.
 * Calls: ops, backend/cpu kernels, base. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/lowrank.h"
#include "base/cpu.h"
#include "ops/ops.h"

struct be_weight {
    int n;
    const tl_tensor *t[3];
    int64_t n_in, n_out;
};

/* what placement allocated, freed with the model */
struct be_model {
    void **owned;
    int n_owned, cap_owned;
    uint64_t bytes;
};

struct be_ctx {
    be_model *bm;
    tl_threadpool *tp;
    ops_ctx ops;
    float *xn;   /* [n_tokens][max_k] normed input of a linear */
    float *prod; /* [n_tokens][max_n] product before a residual add */
    float *up;   /* [n_tokens][max_n] the up half of a GLU */
    uint16_t *kv;
    size_t kv_bytes;
    int32_t n_layer, n_blocks, block_size, block_shift, kvd;
    int64_t max_k, max_n, n_tokens;
    void **allocs;
    int n_allocs, cap_allocs;
    uint64_t bytes;
    const be_step *st; /* the step running now */
};

static tl_status cpu_keep(void ***list, int *n, int *cap, void *p) {
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 64;
        void **l = realloc(*list, (size_t)nc * sizeof *l);
        if (!l) return tl_err(TL_ERR_NOMEM, "cpu backend: out of memory");
        *list = l;
        *cap = nc;
    }
    (*list)[(*n)++] = p;
    return TL_OK;
}

static tl_status cpu_model_init(const be_model_desc *d, be_model **out) {
    (void)d;
    *out = calloc(1, sizeof **out);
    return *out ? TL_OK : tl_err(TL_ERR_NOMEM, "cpu backend: out of memory");
}

static tl_status cpu_model_ready(be_model *bm) { return TL_OK; }

static void cpu_model_free(be_model *bm) {
    if (!bm) return;
    for (int i = 0; i < bm->n_owned; i++) free(bm->owned[i]);
    free(bm->owned);
    free(bm);
}

static tl_status cpu_weight_place(be_model *bm, const tl_tensor *const *parts, int n, be_weight **out) {
    if (n < 1 || n > 3) return tl_err(TL_ERR_INVALID, "cpu backend: a weight stacks 1..3 parts, not %d", n);
    be_weight *w = calloc(1, sizeof *w);
    if (!w) return tl_err(TL_ERR_NOMEM, "cpu backend: out of memory");
    tl_status s = cpu_keep(&bm->owned, &bm->n_owned, &bm->cap_owned, w);
    if (s) {
        free(w);
        return s;
    }
    w->n = n;
    w->n_in = parts[0]->ne[0];
    for (int i = 0; i < n; i++) {
        if (parts[i]->ne[0] != w->n_in)
            return tl_err(TL_ERR_INVALID, "cpu backend: stacked weights have %lld and %lld inputs",
                          (long long)w->n_in, (long long)parts[i]->ne[0]);
        w->t[i] = parts[i];
        w->n_out += parts[i]->ne[1];
    }
    *out = w;
    return TL_OK;
}

static tl_status cpu_vec_place(be_model *bm, const tl_tensor *const *parts, int n, const float **out) {
    if (n == 1) { /* one f32 vector: the mapping itself */
        *out = parts[0]->data;
        return TL_OK;
    }
    int64_t len = 0;
    for (int i = 0; i < n; i++) len += parts[i]->ne[0];
    float *v = malloc((size_t)len * sizeof(float));
    if (!v) return tl_err(TL_ERR_NOMEM, "cpu backend: out of memory");
    tl_status s = cpu_keep(&bm->owned, &bm->n_owned, &bm->cap_owned, v);
    if (s) {
        free(v);
        return s;
    }
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        memcpy(v + off, parts[i]->data, (size_t)parts[i]->ne[0] * sizeof(float));
        off += parts[i]->ne[0];
    }
    bm->bytes += (uint64_t)len * sizeof(float);
    *out = v;
    return TL_OK;
}

static uint64_t cpu_model_bytes(const be_model *bm) { return bm->bytes; }

static void cpu_ctx_free(be_ctx *bc) {
    if (!bc) return;
    for (int i = 0; i < bc->n_allocs; i++) free(bc->allocs[i]);
    free(bc->allocs);
    ops_ctx_free(&bc->ops);
    tl_threadpool_free(bc->tp);
    free(bc->kv);
    free(bc);
}

static tl_status cpu_alloc(be_ctx *bc, size_t bytes, const char *what, void **out) {
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!p) return tl_err(TL_ERR_NOMEM, "cpu backend: cannot allocate %zu bytes for %s", bytes, what);
    tl_status s = cpu_keep(&bc->allocs, &bc->n_allocs, &bc->cap_allocs, p);
    if (s) {
        free(p);
        return s;
    }
    memset(p, 0, bytes);
    bc->bytes += bytes;
    *out = p;
    return TL_OK;
}

static tl_status cpu_ctx_init(be_model *bm, const be_ctx_desc *d, be_ctx **out) {
    if (d->profile)
        return tl_err(TL_ERR_UNSUPPORTED, "cpu backend: no op timer (profile is for the cuda backend; use perf on the cpu)");
    be_ctx *bc = calloc(1, sizeof *bc);
    if (!bc) return tl_err(TL_ERR_NOMEM, "cpu backend: out of memory");
    bc->bm = bm;
    bc->n_layer = d->n_layer;
    bc->n_blocks = d->n_blocks;
    bc->block_size = d->block_size;
    while ((1 << bc->block_shift) < d->block_size) bc->block_shift++;
    bc->kvd = d->n_head_kv * d->head_dim;
    bc->max_k = d->max_k;
    bc->max_n = d->max_n;
    bc->n_tokens = d->n_tokens;
    tl_status s;
    size_t kvb;
    if (!tl_mul_ok((size_t)d->n_layer * 2 * (size_t)d->n_blocks, (size_t)d->block_size * (size_t)bc->kvd * 2, &kvb)) {
        s = tl_err(TL_ERR_NOMEM, "cpu backend: KV cache size overflows");
        goto fail;
    }
    bc->kv = malloc(kvb ? kvb : 1);
    if (!bc->kv) {
        s = tl_err(TL_ERR_NOMEM, "cpu backend: cannot allocate the KV cache (%zu MiB for %lld positions)", kvb >> 20,
                   (long long)d->n_blocks * d->block_size);
        goto fail;
    }
    bc->kv_bytes = kvb;
    const int nth = d->n_threads > 0 ? d->n_threads : tl_cpu_count();
    if ((s = tl_threadpool_init(nth, &bc->tp))) goto fail;
    if ((s = ops_ctx_init(&bc->ops, bc->tp, d->n_tokens, d->max_k, d->max_len))) goto fail;
    const size_t nt = (size_t)d->n_tokens;
    if ((s = cpu_alloc(bc, nt * (size_t)d->max_k * 4, "linear input scratch", (void **)&bc->xn)) ||
        (s = cpu_alloc(bc, nt * (size_t)d->max_n * 4, "linear output scratch", (void **)&bc->prod)) ||
        (s = cpu_alloc(bc, nt * (size_t)d->max_n * 4, "GLU scratch", (void **)&bc->up)))
        goto fail;
    *out = bc;
    return TL_OK;
fail:
    cpu_ctx_free(bc);
    return s;
}

static uint64_t cpu_ctx_bytes(const be_ctx *bc) { return bc->bytes + bc->kv_bytes; }

/* K rows of block b in layer il ([B][kvd] f16, V right after) */
static uint16_t *cpu_kv_block(const be_ctx *bc, int32_t il, int32_t b) {
    return bc->kv + (((size_t)il * (size_t)bc->n_blocks + (size_t)b) * 2 * (size_t)bc->block_size) * (size_t)bc->kvd;
}

static tl_status cpu_kv_copy_block(be_ctx *bc, int32_t src, int32_t dst) {
    const size_t n = 2 * (size_t)bc->block_size * (size_t)bc->kvd * sizeof(uint16_t);
    for (int32_t il = 0; il < bc->n_layer; il++) memcpy(cpu_kv_block(bc, il, dst), cpu_kv_block(bc, il, src), n);
    return TL_OK;
}

static tl_status cpu_step_run(be_ctx *bc, const be_step *st, be_forward_fn fn, void *arg) {
    if (st->n_tokens > bc->n_tokens)
        return tl_err(TL_ERR_INVALID, "cpu backend: a step of %d tokens (the context runs up to %lld)", st->n_tokens,
                      (long long)bc->n_tokens);
    bc->st = st;
    const be_step_dev d = {st->token, st->pos, st->out_row};
    tl_status s = fn(arg, &d);
    bc->st = NULL;
    return s;
}

static tl_status cpu_read(be_ctx *bc, void *dst, const void *src, size_t bytes) {
    memcpy(dst, src, bytes);
    return TL_OK;
}

static tl_status cpu_sync(be_ctx *bc) { return TL_OK; }

static tl_status cpu_read_argmax(be_ctx *bc, int32_t *dst, const int32_t *src, int32_t n) {
    memcpy(dst, src, (size_t)n * sizeof(int32_t));
    return TL_OK;
}

static tl_status cpu_get_rows(be_ctx *bc, const be_weight *w, const int32_t *ids, int64_t m, float *out) {
    return ops_get_rows(w->t[0], ids, m, out);
}

static tl_status cpu_gather(be_ctx *bc, const float *x, int64_t n, const int32_t *rows, int64_t m, float *out) {
    for (int64_t r = 0; r < m; r++) memcpy(out + r * n, x + (int64_t)rows[r] * n, (size_t)n * sizeof(float));
    return TL_OK;
}

static tl_status cpu_add(be_ctx *bc, float *x, const float *y, int64_t n) {
    ops_add(x, y, n);
    return TL_OK;
}

static tl_status cpu_scale(be_ctx *bc, float *x, float s, int64_t n) {
    ops_scale(x, s, n);
    return TL_OK;
}

static tl_status cpu_norm(be_ctx *bc, const float *x, const be_norm *nm, int64_t n, int64_t m, float *y) {
    if (nm->kind == BE_NORM_RMS)
        ops_rmsnorm(x, nm->w, n, m, nm->eps, y);
    else if (nm->kind == BE_NORM_LAYER)
        ops_layernorm(x, nm->w, nm->b, n, m, nm->eps, y);
    else if (x != y)
        memmove(y, x, (size_t)(n * m) * sizeof(float));
    return TL_OK;
}

/* per token: q/k head norms, RoPE, then k and v into the cache at the slot */
static void cpu_qkv_epi(be_ctx *bc, const be_qkv_epi *e, float *y, int64_t ld, int64_t m) {
    const int64_t hd = e->head_dim, qd = (int64_t)e->n_head * hd, kvd = (int64_t)e->n_head_kv * hd;
    const be_step *st = bc->st;
    ops_rope_params rp = {0};
    if (e->rope)
        rp = (ops_rope_params){.n_rot = e->rope->n_rot, .neox = e->rope->neox, .base = e->rope->base,
                               .scale = e->rope->scale, .freq_factors = e->rope->freq_div};
    for (int64_t j = 0; j < m; j++) {
        float *q = y + j * ld, *k = q + qd, *v = k + kvd;
        if (e->q_norm) {
            ops_rmsnorm(q, e->q_norm, hd, e->n_head, e->eps, q);
            ops_rmsnorm(k, e->k_norm, hd, e->n_head_kv, e->eps, k);
        }
        if (e->rope) {
            ops_rope(q, hd, e->n_head, 1, &st->pos[j], &rp);
            ops_rope(k, hd, e->n_head_kv, 1, &st->pos[j], &rp);
        }
        const int32_t slot = st->slot[j];
        uint16_t *kb = cpu_kv_block(bc, e->layer, slot >> bc->block_shift) +
                       (size_t)(slot & (bc->block_size - 1)) * (size_t)bc->kvd;
        ops_store_f16(kb, k, kvd);
        ops_store_f16(kb + (size_t)bc->block_size * (size_t)bc->kvd, v, kvd);
    }
}

static void cpu_argmax(const float *y, int64_t n, int64_t ld, int64_t m, int32_t *out) {
    for (int64_t j = 0; j < m; j++) {
        const float *r = y + j * ld;
        int64_t best = 0;
        for (int64_t i = 1; i < n; i++)
            if (r[i] > r[best] || (r[best] != r[best] && r[i] == r[i])) best = i;
        out[j] = (int32_t)best;
    }
}

/* The linear's low-rank terms into its parts' outputs (a GLU's up half is
 * the stack's second matrix), located by their column in the stack. */
static tl_status cpu_lowrank(be_ctx *bc, const be_linear *l, const float *x, bool glu, float *const *ys,
                             const int64_t *lds) {
    const be_weight *w = l->w;
    for (int32_t k = 0; k < l->lowrank->n; k++) {
        const be_lowrank_term *t = &l->lowrank->t[k];
        int64_t off = 0;
        int part = -1;
        for (int i = 0; i < w->n && part < 0; i++) {
            if (t->col0 >= off && t->col0 + t->n_out <= off + w->t[i]->ne[1]) part = i;
            else off += w->t[i]->ne[1];
        }
        if (part < 0 || (glu && part > 1))
            return tl_err(TL_ERR_INVALID, "cpu backend: low-rank term at columns %lld..%lld is outside the weight",
                          (long long)t->col0, (long long)(t->col0 + t->n_out));
        cpu_lowrank_term(bc->tp, t, w->n_in, x, w->n_in, ys[part] + (t->col0 - off), lds[part], l->lowrank->tmp);
    }
    return TL_OK;
}

static tl_status cpu_linear(be_ctx *bc, const be_linear *l) {
    const be_weight *w = l->w;
    const int64_t m = l->m;
    if (m > bc->n_tokens) return tl_err(TL_ERR_INVALID, "cpu backend: linear of %lld rows", (long long)m);
    const float *x = l->x;
    if (l->in_norm.kind != BE_NORM_NONE) {
        cpu_norm(bc, x, &l->in_norm, w->n_in, m, bc->xn);
        x = bc->xn;
    }
    const bool glu = l->act == BE_ACT_SILU_GLU || l->act == BE_ACT_GELU_GLU;
    const bool via = l->mode == BE_ACCUM; /* product into scratch, then added */
    const int64_t n_out = glu ? w->n_out / 2 : w->n_out;
    if (n_out > bc->max_n) return tl_err(TL_ERR_INVALID, "cpu backend: linear of %lld outputs", (long long)n_out);
    float *out = via ? bc->prod : l->y;
    const int64_t ld = via ? n_out : (l->ldy ? l->ldy : n_out);
    float *ys[3];
    int64_t lds[3];
    tl_status s;
    if (glu) {
        if (w->n != 2 || w->t[0]->ne[1] != w->t[1]->ne[1])
            return tl_err(TL_ERR_INVALID, "cpu backend: a GLU weight stacks gate and up of one size");
        ys[0] = out, ys[1] = bc->up, lds[0] = ld, lds[1] = n_out;
    } else {
        int64_t off = 0;
        for (int i = 0; i < w->n; i++) {
            ys[i] = out + off;
            lds[i] = ld;
            off += w->t[i]->ne[1];
        }
    }
    if ((s = ops_matmul_multi_ld(&bc->ops, w->t, w->n, x, m, ys, lds))) return s;
    if (l->lowrank && (s = cpu_lowrank(bc, l, x, glu, ys, lds))) return s;
    for (int64_t j = 0; j < m; j++) {
        float *r = out + j * ld;
        if (l->bias) ops_add_bias(r, l->bias, n_out, 1);
        if (l->act == BE_ACT_GELU) ops_gelu(r, n_out);
        if (l->act == BE_ACT_SILU_GLU) ops_silu_mul(r, bc->up + j * n_out, n_out);
        if (l->act == BE_ACT_GELU_GLU) ops_gelu_mul(r, bc->up + j * n_out, n_out);
        if (l->post_norm) ops_rmsnorm(r, l->post_norm, n_out, 1, l->post_eps, r);
    }
    if (via) {
        const int64_t ldy = l->ldy ? l->ldy : n_out;
        for (int64_t j = 0; j < m; j++) ops_add(l->y + j * ldy, out + j * n_out, n_out);
    }
    if (l->qkv) cpu_qkv_epi(bc, l->qkv, out, ld, m);
    if (l->argmax) cpu_argmax(out, n_out, ld, m, l->argmax);
    return TL_OK;
}

static tl_status cpu_attention(be_ctx *bc, const be_attn *a) {
    const be_step *st = bc->st;
    const uint16_t *k0 = cpu_kv_block(bc, a->layer, 0);
    ops_attn_args oa = {
        .q = a->q, .q_stride = a->q_stride, .m = a->m, .pos = st->pos, .seq = st->seq,
        .kv = {.k = k0, .v = k0 + (size_t)bc->block_size * (size_t)bc->kvd,
               .block_stride = 2 * (int64_t)bc->block_size * bc->kvd, .row = bc->kvd,
               .block_shift = bc->block_shift, .table = st->table, .table_stride = st->table_stride},
        .n_head = a->n_head, .n_head_kv = a->n_head_kv, .head_dim = a->head_dim, .window = a->window,
        .scale = a->scale, .out = a->out};
    return ops_attention_paged(&bc->ops, &oa);
}

static const be_ops cpu_ops = {
    .name = "cpu",
    .model_init = cpu_model_init,
    .model_ready = cpu_model_ready,
    .model_free = cpu_model_free,
    .weight_place = cpu_weight_place,
    .vec_place = cpu_vec_place,
    .model_bytes = cpu_model_bytes,
    .device_stats = NULL,
    .ctx_init = cpu_ctx_init,
    .ctx_free = cpu_ctx_free,
    .ctx_bytes = cpu_ctx_bytes,
    .alloc = cpu_alloc,
    .kv_copy_block = cpu_kv_copy_block,
    .step_run = cpu_step_run,
    .read = cpu_read,
    .read_argmax = cpu_read_argmax,
    .sync = cpu_sync,
    .get_rows = cpu_get_rows,
    .gather = cpu_gather,
    .add = cpu_add,
    .scale = cpu_scale,
    .norm = cpu_norm,
    .linear = cpu_linear,
    .attention = cpu_attention,
};

const be_ops *be_cpu(void) { return &cpu_ops; }
