/* train/cuda/ops_cuda: the CUDA face of the ops GPT-2 and Llama train with
 * (add, mul, GELU, SiLU, LayerNorm, RMSNorm, RoPE, embedding, cross-entropy,
 * linear, attention): shape
 * checks, outputs, tape records and backward, over the kernels of tcu.h.
 * Inputs must be f32 on the CUDA device; strided inputs are made contiguous
 * through the recorded tt_contiguous (so their gradients flow back), and
 * scratch comes from the ctx's pool and goes back as soon as the work using
 * it is queued. Ids and targets are checked on the host, where they are,
 * before they are uploaded.
 * Owns: nothing. Calls: train internals, train/cuda/tcu. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/cuda/tcu.h"
#include "train/tt_internal.h"

static float *F(const tt_tensor *t) { return (float *)tt_data(t); }

/* Inputs present, on CUDA, f32 (NULLs allowed after the first n_req). */
static bool cu_check(const char *op, tt_tensor *const *in, int n, int n_req) {
    for (int i = 0; i < n_req; i++)
        if (!in[i]) return false;
    if (!tt__all_on(op, TT_CUDA, (const tt_tensor *const *)in, n)) return false;
    for (int i = 0; i < n; i++)
        if (in[i] && in[i]->dtype != TT_F32) {
            tl_err(TL_ERR_UNSUPPORTED, "train: %s on cuda computes in f32 (input %d is %s)", op, i,
                   tt_dtype_name(in[i]->dtype));
            return false;
        }
    return true;
}

static float *scratch(tt_ctx *c, size_t nbytes) { return tt__pool_take(c, TT_CUDA, nbytes ? nbytes : 64); }
static void scratch_put(tt_ctx *c, void *p, size_t nbytes) { tt__pool_put(c, TT_CUDA, p, nbytes ? nbytes : 64); }

/* Gradient buffer of t and whether it already held a gradient: then the
 * kernel adds, else it must overwrite every element (the bytes of a fresh
 * buffer are not zeroed). */
static float *grad_of(tt_tensor *t, bool *add) {
    bool fresh;
    tt_tensor *g = tt__grad_buf_for_write(t, &fresh);
    *add = !fresh;
    return g ? F(g) : NULL;
}

/* Gradient buffer of t, zeroed when fresh: for kernels that always add. */
static float *grad_acc_of(tt_tensor *t) {
    tt_tensor *g = tt__grad_buf(t);
    return g ? F(g) : NULL;
}

bool tt__cu_record_saved(tt_ctx *c, const char *op, tt_backward_fn fn, tt_tensor *o, tt_tensor **in, int n_in,
                         const void *saved, size_t size) {
    if (!tt__needs_grad(c, in, n_in)) return true;
    tt_node *n = tt__record(c, op, fn, o, in, n_in);
    void *sv = malloc(size);
    if (!n || !sv) {
        free(sv);
        if (n) tl_err(TL_ERR_NOMEM, "train: out of memory");
        return false;
    }
    memcpy(sv, saved, size);
    n->extra = sv;
    return true;
}

/* ---- add: a + b with b's shape a suffix of a's (or the other way) ---- */
static tl_status bw_add(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    tl_status s = TL_OK;
    if (tt__need(n, 0)) s = tt__acc_grad(n->in[0], g);
    if (s || !tt__need(n, 1)) return s;
    int64_t R = n->i[0], N = n->i[1];
    if (R == 1) return tt__acc_grad(n->in[1], g);
    float *gb = grad_acc_of(n->in[1]);
    if (!gb) return TL_ERR_NOMEM;
    size_t nb = (size_t)64 * (size_t)N * sizeof(float);
    float *sc = scratch(c, nb);
    if (!sc) return TL_ERR_NOMEM;
    s = tcu_sum_rows_into(gb, F(g), R, 1, N, sc);
    scratch_put(c, sc, nb);
    return s;
}

static bool is_suffix(const tt_tensor *big, const tt_tensor *small) {
    int lead = 0;
    while (lead < small->ndim && small->shape[lead] == 1 && small->ndim - lead > 0) lead++;
    int k = small->ndim - lead;
    if (k > big->ndim) return false;
    for (int i = 0; i < k; i++)
        if (small->shape[lead + i] != big->shape[big->ndim - k + i]) return false;
    return true;
}

tt_tensor *tt__cu_add(tt_ctx *c, tt_tensor *a, tt_tensor *b) {
    tt_tensor *in[2] = {a, b};
    if (!cu_check("add", in, 2, 2)) return NULL;
    tt_tensor *big = a, *small = b;
    if (tt_numel(b) > tt_numel(a)) big = b, small = a;
    if (!is_suffix(big, small)) {
        char s1[64], s2[64];
        tl_err(TL_ERR_UNSUPPORTED, "train: add on cuda broadcasts a trailing block only (%s + %s)",
               tt__shape_str(a, s1, sizeof s1), tt__shape_str(b, s2, sizeof s2));
        return NULL;
    }
    big = tt_contiguous(c, big);
    small = tt_contiguous(c, small);
    if (!big || !small) return NULL;
    int64_t N = tt_numel(small), R = N ? tt_numel(big) / N : 0;
    tt_tensor *o = tt__temp_on(c, TT_CUDA, TT_F32, big->ndim, big->shape);
    if (!o || tcu_add_rows(F(o), F(big), F(small), R, 1, N) != TL_OK) return NULL;
    tt_tensor *rin[2] = {big, small};
    if (tt__needs_grad(c, rin, 2)) {
        tt_node *n = tt__record(c, "add", bw_add, o, rin, 2);
        if (!n) return NULL;
        n->i[0] = R;
        n->i[1] = N;
    }
    return o;
}

/* ---- GELU (tanh) ---- */
static tl_status bw_gelu(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    bool add;
    float *gx = grad_of(n->in[0], &add);
    if (!gx) return TL_ERR_NOMEM;
    return tcu_gelu_tanh_bwd(gx, add, F(g), F(n->in[0]), tt_numel(g));
}

tt_tensor *tt__cu_gelu_tanh(tt_ctx *c, tt_tensor *x) {
    if (!cu_check("gelu_tanh", &x, 1, 1)) return NULL;
    x = tt_contiguous(c, x);
    if (!x) return NULL;
    tt_tensor *o = tt__temp_on(c, TT_CUDA, TT_F32, x->ndim, x->shape);
    if (!o || tcu_gelu_tanh_fwd(F(o), F(x), tt_numel(x)) != TL_OK) return NULL;
    if (tt__needs_grad(c, &x, 1) && !tt__record(c, "gelu_tanh", bw_gelu, o, &x, 1)) return NULL;
    return o;
}

/* ---- LayerNorm / RMSNorm over the last dim; mean (LayerNorm) and rstd
 * kept as temporaries ---- */
typedef struct ln_saved {
    tt_tensor *mean, *rstd;
} ln_saved;

static tl_status bw_layernorm(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    tt_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    ln_saved *sv = n->extra;
    int64_t C = x->shape[x->ndim - 1], R = tt_numel(x) / C;
    bool ax = false;
    float *gx = tt__need(n, 0) ? grad_of(x, &ax) : NULL;
    float *gw = tt__need(n, 1) ? grad_acc_of(w) : NULL;
    float *gb = b && tt__need(n, 2) ? grad_acc_of(b) : NULL;
    if ((tt__need(n, 0) && !gx) || (tt__need(n, 1) && !gw) || (b && tt__need(n, 2) && !gb)) return TL_ERR_NOMEM;
    size_t nb = (size_t)2 * TCU_LN_BLOCKS * (size_t)C * sizeof(float);
    float *sc = scratch(c, nb);
    if (!sc) return TL_ERR_NOMEM;
    /* dx is needed for the weight sums anyway: with no x grad, write it to scratch */
    float *gx_sink = gx;
    size_t nbx = (size_t)tt_numel(x) * sizeof(float);
    if (!gx_sink) {
        gx_sink = scratch(c, nbx);
        if (!gx_sink) return TL_ERR_NOMEM;
    }
    tl_status s = tcu_layernorm_bwd(gx_sink, ax, gw, gb, F(g), F(x), F(w), sv->mean ? F(sv->mean) : NULL,
                                    F(sv->rstd), R, C, sc);
    scratch_put(c, sc, nb);
    if (!gx) scratch_put(c, gx_sink, nbx);
    return s;
}

tt_tensor *tt__cu_norm(tt_ctx *c, tt_tensor *x, tt_tensor *w, tt_tensor *b, double eps, bool rms) {
    tt_tensor *in[3] = {x, w, b};
    const char *op = rms ? "rmsnorm" : "layernorm";
    if (!cu_check(op, in, 3, 2)) return NULL;
    int64_t C = x->shape[x->ndim - 1];
    if (tt_numel(w) != C || (b && tt_numel(b) != C) || !tt_is_contiguous(w) || (b && !tt_is_contiguous(b))) {
        tl_err(TL_ERR_INVALID, "train: %s: weight/bias of %lld for rows of %lld", op, (long long)tt_numel(w),
               (long long)C);
        return NULL;
    }
    x = tt_contiguous(c, x);
    if (!x) return NULL;
    int64_t R = tt_numel(x) / (C ? C : 1);
    tt_tensor *o = tt__temp_on(c, TT_CUDA, TT_F32, x->ndim, x->shape);
    tt_tensor *mean = rms ? NULL : tt__temp_on(c, TT_CUDA, TT_F32, 1, &R);
    tt_tensor *rstd = tt__temp_on(c, TT_CUDA, TT_F32, 1, &R);
    if (!o || (!rms && !mean) || !rstd) return NULL;
    if (tcu_layernorm_fwd(F(o), mean ? F(mean) : NULL, F(rstd), F(x), F(w), b ? F(b) : NULL, R, C, (float)eps) !=
        TL_OK)
        return NULL;
    tt_tensor *rin[3] = {x, w, b};
    const ln_saved sv = {.mean = mean, .rstd = rstd};
    if (!tt__cu_record_saved(c, op, bw_layernorm, o, rin, 3, &sv, sizeof sv)) return NULL;
    return o;
}

/* ---- embedding: rows of w; the backward sums each id's rows in order ---- */
typedef struct emb_saved {
    tt_tensor *csr; /* a temporary: uid [nu], start [nu + 1], order [n] */
    int64_t nu;
} emb_saved;

static tl_status bw_embedding(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    emb_saved *sv = n->extra;
    if (!tt__need(n, 0)) return TL_OK;
    float *gw = grad_acc_of(n->in[0]);
    if (!gw) return TL_ERR_NOMEM;
    int64_t C = n->in[0]->shape[1];
    const int32_t *csr = tt_data(sv->csr);
    return tcu_embedding_bwd(gw, F(g), csr, csr + sv->nu, csr + 2 * sv->nu + 1, sv->nu, C);
}

/* Positions grouped by id (counting sort, stable): the host side of the
 * deterministic scatter-add. csr: uid [nu], start [nu + 1], order [n]. */
static int32_t *build_csr(const int32_t *ids, int64_t n, int64_t V, int64_t *nu_out) {
    int32_t *cnt = calloc((size_t)V + 1, sizeof *cnt);
    int32_t *csr = malloc((size_t)(2 * n + 1 + n) * sizeof *csr + sizeof *csr);
    if (!cnt || !csr) {
        free(cnt);
        free(csr);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) cnt[ids[i] + 1]++;
    int64_t nu = 0;
    for (int64_t v = 0; v < V; v++) nu += cnt[v + 1] > 0;
    for (int64_t v = 0; v < V; v++) cnt[v + 1] += cnt[v]; /* cnt[v] = first slot of id v */
    int32_t *uid = csr, *start = csr + nu, *order = csr + 2 * nu + 1;
    int64_t u = 0;
    for (int64_t v = 0; v < V; v++)
        if (cnt[v + 1] > cnt[v]) {
            uid[u] = (int32_t)v;
            start[u++] = cnt[v];
        }
    start[nu] = (int32_t)n;
    for (int64_t i = 0; i < n; i++) order[cnt[ids[i]]++] = (int32_t)i;
    free(cnt);
    *nu_out = nu;
    return csr;
}

tt_tensor *tt__cu_embedding(tt_ctx *c, tt_tensor *w, const int32_t *ids, int ndim, const int64_t *shape) {
    if (!cu_check("embedding", &w, 1, 1)) return NULL;
    if (w->ndim != 2 || !tt_is_contiguous(w) || ndim < 1 || ndim >= TT_MAX_DIMS) {
        tl_err(TL_ERR_INVALID, "train: embedding needs a contiguous [V, C] table and 1..%d index dims",
               TT_MAX_DIMS - 1);
        return NULL;
    }
    int64_t n = 1, V = w->shape[0], C = w->shape[1];
    for (int i = 0; i < ndim; i++) n *= shape[i];
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V) {
            tl_err(TL_ERR_INVALID, "train: embedding: id %d at %lld outside [0, %lld)", ids[i], (long long)i,
                   (long long)V);
            return NULL;
        }
    int64_t osh[TT_MAX_DIMS];
    for (int i = 0; i < ndim; i++) osh[i] = shape[i];
    osh[ndim] = C;
    tt_tensor *o = tt__temp_on(c, TT_CUDA, TT_F32, ndim + 1, osh);
    tt_tensor *dids = tt__temp_on(c, TT_CUDA, TT_I32, 1, &n);
    if (!o || !dids) return NULL;
    if (tt__dev_h2d(TT_CUDA, tt_data(dids), ids, (size_t)n * 4) != TL_OK) return NULL;
    if (tcu_embedding_fwd(F(o), F(w), tt_data(dids), n, C) != TL_OK) return NULL;
    if (tt__needs_grad(c, &w, 1)) {
        int64_t nu;
        int32_t *h = build_csr(ids, n, V, &nu);
        emb_saved *sv = malloc(sizeof *sv);
        tt_node *nd = h && sv ? tt__record(c, "embedding", bw_embedding, o, &w, 1) : NULL;
        if (!nd) {
            free(h);
            free(sv);
            tl_err(TL_ERR_NOMEM, "train: out of memory");
            return NULL;
        }
        nd->extra = sv;
        sv->nu = nu;
        /* sized for the most distinct ids (n), not this batch's count: the
         * same size every step, so the pool reuses it instead of growing */
        int64_t len = 2 * nu + 1 + n, cap = 3 * n + 1;
        sv->csr = tt__temp_on(c, TT_CUDA, TT_I32, 1, &cap);
        tl_status s = sv->csr ? tt__dev_h2d(TT_CUDA, tt_data(sv->csr), h, (size_t)len * 4) : TL_ERR_NOMEM;
        free(h);
        if (s != TL_OK) return NULL;
    }
    return o;
}

/* ---- softmax + cross-entropy over rows of logits [N, V] ---- */
typedef struct xent_saved {
    tt_tensor *lse, *tgt;
    int64_t n_valid;
    int32_t ignore;
} xent_saved;

static tl_status bw_xent(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    xent_saved *sv = n->extra;
    tt_tensor *x = n->in[0];
    bool add;
    float *gl = grad_of(x, &add);
    if (!gl) return TL_ERR_NOMEM;
    return tcu_xent_bwd(gl, add, F(g), F(x), F(sv->lse), tt_data(sv->tgt), x->shape[0], x->shape[1], sv->ignore,
                        sv->n_valid);
}

tt_tensor *tt__cu_cross_entropy(tt_ctx *c, tt_tensor *logits, const int32_t *targets, int32_t ignore_index) {
    if (!cu_check("cross_entropy", &logits, 1, 1)) return NULL;
    if (logits->ndim != 2) {
        tl_err(TL_ERR_INVALID, "train: cross_entropy needs logits [N, V] (got %d dims)", logits->ndim);
        return NULL;
    }
    int64_t N = logits->shape[0], V = logits->shape[1], n_valid = 0;
    for (int64_t i = 0; i < N; i++) {
        if (targets[i] == ignore_index) continue;
        if (targets[i] < 0 || targets[i] >= V) {
            tl_err(TL_ERR_INVALID, "train: cross_entropy: target %d at %lld outside [0, %lld)", targets[i],
                   (long long)i, (long long)V);
            return NULL;
        }
        n_valid++;
    }
    logits = tt_contiguous(c, logits);
    if (!logits) return NULL;
    int64_t one = 1;
    tt_tensor *loss = tt__temp_on(c, TT_CUDA, TT_F32, 1, &one);
    tt_tensor *lse = tt__temp_on(c, TT_CUDA, TT_F32, 1, &N), *tgt = tt__temp_on(c, TT_CUDA, TT_I32, 1, &N);
    if (!loss || !lse || !tgt) return NULL;
    if (tt__dev_h2d(TT_CUDA, tt_data(tgt), targets, (size_t)N * 4) != TL_OK) return NULL;
    size_t nb = (size_t)N * sizeof(float);
    float *rowloss = scratch(c, nb);
    if (!rowloss) return NULL;
    tl_status s = tcu_xent_fwd(F(loss), F(lse), rowloss, F(logits), tt_data(tgt), N, V, ignore_index, n_valid);
    scratch_put(c, rowloss, nb);
    if (s != TL_OK) return NULL;
    const xent_saved sv = {.lse = lse, .tgt = tgt, .n_valid = n_valid, .ignore = ignore_index};
    return tt__cu_record_saved(c, "cross_entropy", bw_xent, loss, &logits, 1, &sv, sizeof sv) ? loss : NULL;
}

/* ---- linear: x [..., K] @ w[N, K]^T + bias ---- */
static size_t bf16_scratch(int mode, int64_t a, int64_t b, int64_t d) {
    return mode == TT_MM_BF16 ? (size_t)(a + b + d + 192) * 2 : 0;
}

size_t tt__cu_linear_scratch(int mode, int64_t M, int64_t N, int64_t K, bool bwd) {
    return bwd ? tcu_linear_pad_bytes(M, N, K) + bf16_scratch(mode, M * N, M * K, N * K) +
                     (size_t)64 * (size_t)N * sizeof(float) + 256
               : tcu_linear_pad_bytes(M, N, K) + bf16_scratch(mode, M * K, N * K, 0);
}

static tl_status bw_linear(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    tt_tensor *x = n->in[0], *w = n->in[1], *bias = n->in[2];
    int64_t K = w->shape[1], N = w->shape[0], M = tt_numel(x) / K;
    int mode = (int)n->i[0];
    bool ax = false, aw = false;
    float *gx = tt__need(n, 0) ? grad_of(x, &ax) : NULL;
    float *gw = tt__need(n, 1) ? grad_of(w, &aw) : NULL;
    float *gb = bias && tt__need(n, 2) ? grad_acc_of(bias) : NULL;
    if ((tt__need(n, 0) && !gx) || (tt__need(n, 1) && !gw) || (bias && tt__need(n, 2) && !gb)) return TL_ERR_NOMEM;
    size_t nb = tt__cu_linear_scratch(mode, M, N, K, true);
    void *sc = scratch(c, nb);
    if (!sc) return TL_ERR_NOMEM;
    tl_status s = tcu_linear_bwd(gx, ax, gw, aw, gb, F(g), F(x), F(w), M, N, K, mode, sc);
    scratch_put(c, sc, nb);
    return s;
}

tt_tensor *tt__cu_linear(tt_ctx *c, tt_tensor *x, tt_tensor *w, tt_tensor *bias) {
    tt_tensor *in[3] = {x, w, bias};
    if (!cu_check("linear", in, 3, 2)) return NULL;
    if (w->ndim != 2 || x->shape[x->ndim - 1] != w->shape[1] || (bias && tt_numel(bias) != w->shape[0]) ||
        !tt_is_contiguous(w) || (bias && !tt_is_contiguous(bias))) {
        tl_err(TL_ERR_INVALID, "train: linear: x [..., %lld] with W [%lld, %lld]%s (cuda: contiguous W and bias)",
               (long long)x->shape[x->ndim - 1], (long long)w->shape[0], (long long)w->shape[1],
               bias ? " and a bias" : "");
        return NULL;
    }
    x = tt_contiguous(c, x);
    if (!x) return NULL;
    int64_t K = w->shape[1], N = w->shape[0], M = tt_numel(x) / (K ? K : 1);
    int64_t osh[TT_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) osh[i] = x->shape[i];
    osh[x->ndim - 1] = N;
    tt_tensor *o = tt__temp_on(c, TT_CUDA, TT_F32, x->ndim, osh);
    if (!o) return NULL;
    int mode = (int)c->mm_prec;
    size_t nb = tt__cu_linear_scratch(mode, M, N, K, false);
    void *sc = nb ? scratch(c, nb) : NULL;
    if (nb && !sc) return NULL;
    tl_status s = tcu_linear_fwd(F(o), F(x), F(w), bias ? F(bias) : NULL, M, N, K, mode, sc);
    if (sc) scratch_put(c, sc, nb);
    if (s != TL_OK) return NULL;
    tt_tensor *rin[3] = {x, w, bias};
    if (tt__needs_grad(c, rin, 3)) {
        tt_node *n = tt__record(c, "linear", bw_linear, o, rin, 3);
        if (!n) return NULL;
        n->i[0] = mode;
    }
    return o;
}

/* ---- attention: q [B, H, T, D], k/v [B, Hkv, T, D] -> [B, H, T, D] ----
 * BF16 mode runs the flash kernels on the inputs' own strides (views of a
 * fused QKV or permuted heads cost no copy) and stores the output
 * token-major, as the CPU op does, so merging heads is a free reshape; the
 * exact matmul path (F32/TF32 modes, one shape for q/k/v) keeps P. */
typedef struct attn_saved {
    tt_tensor *p;        /* the probabilities (matmul path), or NULL */
    tt_tensor *lse, *o;  /* flash path: each row's log2-sum-exp and the output */
    tcu_flash_dims dims; /* flash path: shapes and strides of q/k/v/o */
    float scale;
    int mode;
    bool causal;
} attn_saved;

/* the softmax scale: the caller's, or 1/sqrt(D) */
static float attn_scale(double scale, int64_t D) { return scale > 0 ? (float)scale : 1.0f / sqrtf((float)D); }

static tcu_fl_stride st3(const tt_tensor *t, int b, int h, int tt) {
    tcu_fl_stride s = {t->stride[b], t->stride[h], t->stride[tt]};
    return s;
}

/* A [B, H, T, D] tensor the flash kernels can read in place */
static bool flash_readable(const tt_tensor *t) { return t->stride[3] == 1 && tcu_flash_aligned(F(t), st3(t, 0, 1, 2)); }

/* The gradient buffer the flash backward writes input i's gradient into:
 * the tensor's own (fresh, contiguous) gradient, or scratch when one is
 * there to add to or none is needed; *tmp says which. */
static float *flash_grad_dst(tt_ctx *c, tt_node *n, int i, bool *tmp) {
    tt_tensor *t = n->in[i];
    *tmp = !tt__need(n, i) || t->grad;
    if (*tmp) return scratch(c, (size_t)tt_numel(t) * sizeof(float));
    bool fresh;
    tt_tensor *g = tt__grad_buf_for_write(t, &fresh);
    return g ? F(g) : NULL;
}

/* Adds a contiguous buffer of t's shape into t's gradient. */
static tl_status acc_from_buf(tt_tensor *t, float *buf) {
    tt_tensor view = *t; /* a borrowed tensor over the buffer */
    tt_storage st = *t->st;
    st.data = buf;
    st.refs = 2;
    view.st = &st;
    view.offset = 0;
    view.grad = NULL;
    view.node = NULL;
    for (int64_t j = t->ndim - 1, m = 1; j >= 0; j--) {
        view.stride[j] = m;
        m *= t->shape[j];
    }
    return tt__acc_grad(t, &view);
}

static tl_status bw_attention_flash(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    attn_saved *sv = n->extra;
    tcu_flash_dims d = sv->dims;
    tt_tensor *gc = flash_readable(g) ? (tt_tensor *)g : tt__contig(c, (tt_tensor *)g);
    size_t nd = (size_t)(d.B * d.H * d.T) * sizeof(float);
    float *delta = scratch(c, nd), *dst[3] = {NULL, NULL, NULL};
    bool tmp[3] = {false, false, false};
    tl_status s = gc && delta ? TL_OK : TL_ERR_NOMEM;
    for (int i = 0; i < 3 && !s; i++)
        if (!(dst[i] = flash_grad_dst(c, n, i, &tmp[i]))) s = TL_ERR_NOMEM;
    if (!s) {
        d.go = st3(gc, 0, 1, 2);
        d.dq = (tcu_fl_stride){d.H * d.T * d.D, d.T * d.D, d.D};
        d.dkv = (tcu_fl_stride){d.Hkv * d.T * d.D, d.T * d.D, d.D};
        s = tcu_flash_bwd(dst[0], dst[1], dst[2], delta, F(gc), F(sv->o), F(sv->lse), F(n->in[0]), F(n->in[1]),
                          F(n->in[2]), &d, sv->scale, sv->causal);
    }
    for (int i = 0; i < 3; i++) {
        if (!s && tmp[i] && tt__need(n, i)) s = acc_from_buf(n->in[i], dst[i]);
        if (tmp[i] && dst[i]) scratch_put(c, dst[i], (size_t)tt_numel(n->in[i]) * sizeof(float));
    }
    if (delta) scratch_put(c, delta, nd);
    return s;
}

static tl_status bw_attention(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    attn_saved *sv = n->extra;
    tt_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    int64_t BH = q->shape[0] * q->shape[1], rep = q->shape[1] / k->shape[1], T = q->shape[2], D = q->shape[3];
    size_t nq = (size_t)(BH * T * D) * sizeof(float), nkv = nq / (size_t)rep, np = (size_t)(BH * T * T) * sizeof(float);
    float *dq = scratch(c, nq), *dk = scratch(c, nkv), *dv = scratch(c, nkv), *dp = scratch(c, np);
    tl_status s = dq && dk && dv && dp ? TL_OK : TL_ERR_NOMEM;
    tt_tensor *gc = tt__contig(c, (tt_tensor *)g);
    if (!s && !gc) s = TL_ERR_NOMEM;
    size_t nsc = sv->mode == TT_MM_BF16 ? TCU_ATTN_SCRATCH(BH, T, D) : 0;
    void *sc = nsc && !s ? scratch(c, nsc) : NULL;
    if (nsc && !sc) s = TL_ERR_NOMEM;
    if (!s)
        s = tcu_attn_bwd(dq, dk, dv, dp, F(gc), F(sv->p), F(q), F(k), F(v), BH, rep, T, D, sv->scale, sv->mode, sc);
    if (sc) scratch_put(c, sc, nsc);
    float *dd[3] = {dq, dk, dv};
    for (int i = 0; i < 3 && !s; i++)
        if (tt__need(n, i)) s = acc_from_buf(n->in[i], dd[i]);
    if (dq) scratch_put(c, dq, nq);
    if (dk) scratch_put(c, dk, nkv);
    if (dv) scratch_put(c, dv, nkv);
    if (dp) scratch_put(c, dp, np);
    return s;
}

bool tt__cu_attention_qkv_ok(const tt_ctx *c, int64_t D) { return c->mm_prec == TT_MM_BF16 && tcu_flash_ok(D); }

/* BF16 flash attention of q/k/v as they lie (made readable if they are not). */
static tt_tensor *attention_flash(tt_ctx *c, tt_tensor *q, tt_tensor *k, tt_tensor *v, bool causal, float sc) {
    if (!flash_readable(q)) q = tt_contiguous(c, q);
    if (!flash_readable(k) || !flash_readable(v) || memcmp(k->stride, v->stride, 3 * sizeof(int64_t))) {
        k = tt_contiguous(c, k);
        v = tt_contiguous(c, v);
    }
    if (!q || !k || !v) return NULL;
    attn_saved sv = {.scale = sc, .mode = TT_MM_BF16, .causal = causal};
    tcu_flash_dims *d = &sv.dims;
    d->B = q->shape[0], d->H = q->shape[1], d->Hkv = k->shape[1], d->T = q->shape[2], d->D = q->shape[3];
    d->q = st3(q, 0, 1, 2);
    d->kv = st3(k, 0, 1, 2);
    /* stored [B, T, H, D], viewed as [B, H, T, D] */
    int64_t bsh[4] = {d->B, d->T, d->H, d->D}, lsh = d->B * d->H * d->T;
    tt_tensor *ob = tt__temp_on(c, TT_CUDA, TT_F32, 4, bsh);
    int64_t vst[4] = {d->T * d->H * d->D, d->D, d->H * d->D, 1};
    tt_tensor *o = ob ? tt__view(c, ob, 4, q->shape, vst, 0) : NULL;
    sv.lse = tt__temp_on(c, TT_CUDA, TT_F32, 1, &lsh);
    sv.o = o;
    if (!o || !sv.lse) return NULL;
    d->o = st3(o, 0, 1, 2);
    if (tcu_flash_fwd(F(o), F(sv.lse), F(q), F(k), F(v), d, sc, causal) != TL_OK) return NULL;
    tt_tensor *rin[3] = {q, k, v};
    return tt__cu_record_saved(c, "attention", bw_attention_flash, o, rin, 3, &sv, sizeof sv) ? o : NULL;
}

tt_tensor *tt__cu_attention(tt_ctx *c, tt_tensor *q, tt_tensor *k, tt_tensor *v, bool causal, double scale) {
    tt_tensor *in[3] = {q, k, v};
    if (!cu_check("attention", in, 3, 3)) return NULL;
    bool ok = q->ndim == 4 && k->ndim == 4 && v->ndim == 4 && k->shape[0] == q->shape[0] &&
              v->shape[0] == q->shape[0] && k->shape[1] > 0 && q->shape[1] % k->shape[1] == 0;
    for (int i = 1; ok && i < 4; i++) ok = v->shape[i] == k->shape[i] && (i == 1 || k->shape[i] == q->shape[i]);
    int mode = (int)c->mm_prec;
    const bool fl = ok && mode == TT_MM_BF16 && tcu_flash_ok(q->shape[3]);
    if (!ok) {
        char s1[64], s2[64];
        tl_err(TL_ERR_UNSUPPORTED, "train: attention on cuda needs q [B, H, T, D] and k/v [B, Hkv, T, D] (q %s, k %s)",
               tt__shape_str(q, s1, sizeof s1), tt__shape_str(k, s2, sizeof s2));
        return NULL;
    }
    float sc = attn_scale(scale, q->shape[3]);
    if (fl) return attention_flash(c, q, k, v, causal, sc);
    q = tt_contiguous(c, q);
    k = tt_contiguous(c, k);
    v = tt_contiguous(c, v);
    if (!q || !k || !v) return NULL;
    int64_t BH = q->shape[0] * q->shape[1], rep = q->shape[1] / k->shape[1], T = q->shape[2], D = q->shape[3];
    int64_t psh[3] = {BH, T, T};
    tt_tensor *o = tt__temp_on(c, TT_CUDA, TT_F32, 4, q->shape);
    tt_tensor *p = tt__temp_on(c, TT_CUDA, TT_F32, 3, psh);
    if (!o || !p) return NULL;
    size_t nsc = mode == TT_MM_BF16 ? TCU_ATTN_SCRATCH(BH, T, D) : 0;
    void *scr = nsc ? scratch(c, nsc) : NULL;
    if (nsc && !scr) return NULL;
    tl_status st = tcu_attn_fwd(F(o), F(p), F(q), F(k), F(v), BH, rep, T, D, sc, causal, mode, scr);
    if (scr) scratch_put(c, scr, nsc);
    if (st != TL_OK) return NULL;
    attn_saved sv = {.p = p, .o = o, .scale = sc, .mode = mode, .causal = causal};
    tt_tensor *rin[3] = {q, k, v};
    return tt__cu_record_saved(c, "attention", bw_attention, o, rin, 3, &sv, sizeof sv) ? o : NULL;
}

/* ---- attention over a fused qkv [B, T, (H + 2 Hkv) D] -> [B, T, H D] ----
 * The flash kernels read q/k/v where the projection left them and write
 * the gradient of all three straight into qkv's. */

/* the head strides of a token-major [B, T, ... D] tensor with heads of D columns */
static tcu_fl_stride tok_major(const tt_tensor *t, int64_t D) {
    tcu_fl_stride s = {t->stride[0], D, t->stride[1]};
    return s;
}

static tl_status bw_attention_qkv(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    attn_saved *sv = n->extra;
    tcu_flash_dims d = sv->dims;
    tt_tensor *qkv = n->in[0];
    const int64_t W = (d.H + 2 * d.Hkv) * d.D;
    const bool ok_g = g->stride[2] == 1 && tcu_flash_aligned(F(g), tok_major(g, d.D));
    tt_tensor *gc = ok_g ? (tt_tensor *)g : tt__contig(c, (tt_tensor *)g);
    size_t nd = (size_t)(d.B * d.H * d.T) * sizeof(float), nb = (size_t)(d.B * d.T * W) * sizeof(float);
    const bool tmp = qkv->grad != NULL;
    bool fresh;
    float *delta = scratch(c, nd);
    tt_tensor *gq = tmp ? NULL : tt__grad_buf_for_write(qkv, &fresh);
    float *dst = tmp ? scratch(c, nb) : gq ? F(gq) : NULL;
    tl_status s = gc && delta && dst ? TL_OK : TL_ERR_NOMEM;
    if (!s) {
        d.go = tok_major(gc, d.D);
        d.dq = d.dkv = (tcu_fl_stride){d.T * W, d.D, W};
        s = tcu_flash_bwd(dst, dst + d.H * d.D, dst + (d.H + d.Hkv) * d.D, delta, F(gc), F(sv->o), F(sv->lse),
                          F(qkv), F(qkv) + d.H * d.D, F(qkv) + (d.H + d.Hkv) * d.D, &d, sv->scale, sv->causal);
    }
    if (!s && tmp) s = acc_from_buf(qkv, dst);
    if (tmp && dst) scratch_put(c, dst, nb);
    if (delta) scratch_put(c, delta, nd);
    return s;
}

tt_tensor *tt__cu_attention_qkv(tt_ctx *c, tt_tensor *qkv, int64_t H, int64_t Hkv, bool causal, double scale) {
    if (!cu_check("attention_qkv", &qkv, 1, 1)) return NULL;
    const int64_t B = qkv->shape[0], T = qkv->shape[1], D = qkv->shape[2] / (H + 2 * Hkv);
    if (qkv->stride[2] != 1 || !tcu_flash_aligned(F(qkv), tok_major(qkv, D))) qkv = tt_contiguous(c, qkv);
    int64_t osh[3] = {B, T, H * D}, lsh = B * H * T;
    tt_tensor *o = qkv ? tt__temp_on(c, TT_CUDA, TT_F32, 3, osh) : NULL;
    tt_tensor *lse = o ? tt__temp_on(c, TT_CUDA, TT_F32, 1, &lsh) : NULL;
    if (!lse) return NULL;
    attn_saved sv = {.lse = lse, .o = o, .scale = attn_scale(scale, D), .mode = TT_MM_BF16, .causal = causal};
    tcu_flash_dims *d = &sv.dims;
    d->B = B, d->H = H, d->Hkv = Hkv, d->T = T, d->D = D;
    d->q = d->kv = tok_major(qkv, D);
    d->o = (tcu_fl_stride){T * H * D, D, H * D};
    const float *x = F(qkv);
    if (tcu_flash_fwd(F(o), F(lse), x, x + H * D, x + (H + Hkv) * D, d, sv.scale, causal) != TL_OK) return NULL;
    return tt__cu_record_saved(c, "attention_qkv", bw_attention_qkv, o, &qkv, 1, &sv, sizeof sv) ? o : NULL;
}

/* ---- SiLU, element-wise product (same shapes), RoPE: the Llama ops ---- */
static tl_status bw_silu(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    bool add;
    float *gx = grad_of(n->in[0], &add);
    return gx ? tcu_silu_bwd(gx, add, F(g), F(n->in[0]), tt_numel(g)) : TL_ERR_NOMEM;
}

tt_tensor *tt__cu_silu(tt_ctx *c, tt_tensor *x) {
    if (!cu_check("silu", &x, 1, 1)) return NULL;
    x = tt_contiguous(c, x);
    if (!x) return NULL;
    tt_tensor *o = tt__temp_on(c, TT_CUDA, TT_F32, x->ndim, x->shape);
    if (!o || tcu_silu_fwd(F(o), F(x), tt_numel(x)) != TL_OK) return NULL;
    if (tt__needs_grad(c, &x, 1) && !tt__record(c, "silu", bw_silu, o, &x, 1)) return NULL;
    return o;
}

/* ---- scale: a * x (the LoRA term's s) ---- */
static tl_status bw_scale(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    bool add;
    float *gx = grad_of(n->in[0], &add);
    float a;
    memcpy(&a, n->extra, sizeof a);
    return gx ? tcu_scale(gx, add, F(g), a, tt_numel(g)) : TL_ERR_NOMEM;
}

tt_tensor *tt__cu_scale(tt_ctx *c, tt_tensor *x, double a) {
    if (!cu_check("scale", &x, 1, 1)) return NULL;
    x = tt_contiguous(c, x);
    if (!x) return NULL;
    const float af = (float)a;
    tt_tensor *o = tt__temp_on(c, TT_CUDA, TT_F32, x->ndim, x->shape);
    if (!o || tcu_scale(F(o), false, F(x), af, tt_numel(x)) != TL_OK) return NULL;
    return tt__cu_record_saved(c, "scale", bw_scale, o, &x, 1, &af, sizeof af) ? o : NULL;
}

static tl_status bw_mul(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    for (int i = 0; i < 2; i++) {
        if (!tt__need(n, i)) continue;
        bool add;
        float *gi = grad_of(n->in[i], &add);
        if (!gi) return TL_ERR_NOMEM;
        tl_status s = tcu_mul(gi, add, F(g), F(n->in[1 - i]), tt_numel(g));
        if (s) return s;
    }
    return TL_OK;
}

tt_tensor *tt__cu_mul(tt_ctx *c, tt_tensor *a, tt_tensor *b) {
    tt_tensor *in[2] = {a, b};
    if (!cu_check("mul", in, 2, 2)) return NULL;
    bool same = a->ndim == b->ndim;
    for (int i = 0; same && i < a->ndim; i++) same = a->shape[i] == b->shape[i];
    if (!same) {
        char s1[64], s2[64];
        tl_err(TL_ERR_UNSUPPORTED, "train: mul on cuda needs one shape (%s * %s)", tt__shape_str(a, s1, sizeof s1),
               tt__shape_str(b, s2, sizeof s2));
        return NULL;
    }
    a = tt_contiguous(c, a);
    b = tt_contiguous(c, b);
    if (!a || !b) return NULL;
    tt_tensor *o = tt__temp_on(c, TT_CUDA, TT_F32, a->ndim, a->shape);
    if (!o || tcu_mul(F(o), false, F(a), F(b), tt_numel(a)) != TL_OK) return NULL;
    tt_tensor *rin[2] = {a, b};
    if (tt__needs_grad(c, rin, 2) && !tt__record(c, "mul", bw_mul, o, rin, 2)) return NULL;
    return o;
}

typedef struct rope_saved {
    tt_tensor *cs;
} rope_saved;

static tl_status bw_rope_cu(tt_ctx *c, tt_node *n, const tt_tensor *g) {
    if (!tt__need(n, 0)) return TL_OK;
    tt_tensor *x = n->in[0];
    rope_saved *sv = n->extra;
    bool add;
    float *gx = grad_of(x, &add);
    if (!gx) return TL_ERR_NOMEM;
    int64_t T = x->shape[1], H = x->shape[2], D = x->shape[3];
    return tcu_rope(gx, add, F(g), F(sv->cs), tt_numel(x) / D, T, H, D, -1);
}

tt_tensor *tt__cu_rope(tt_ctx *c, tt_tensor *x, int64_t pos0, double theta) {
    if (!cu_check("rope", &x, 1, 1)) return NULL;
    if (x->ndim != 4 || x->shape[3] % 2) {
        tl_err(TL_ERR_INVALID, "train: rope needs [B, T, H, D] with even D");
        return NULL;
    }
    x = tt_contiguous(c, x);
    if (!x) return NULL;
    int64_t T = x->shape[1], H = x->shape[2], D = x->shape[3], n = T * D;
    /* the angle table in double on the host, as the CPU op, then float */
    float *h = malloc((size_t)n * sizeof *h);
    tt_tensor *cs = tt__temp_on(c, TT_CUDA, TT_F32, 1, &n), *o = tt__temp_on(c, TT_CUDA, TT_F32, 4, x->shape);
    if (!h || !cs || !o) {
        free(h);
        if (cs && o) tl_err(TL_ERR_NOMEM, "train: out of memory");
        return NULL;
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < D / 2; i++) {
            double ang = (double)(pos0 + t) * pow(theta, -2.0 * (double)i / (double)D);
            h[t * D + 2 * i] = (float)cos(ang);
            h[t * D + 2 * i + 1] = (float)sin(ang);
        }
    tl_status s = tt__dev_h2d(TT_CUDA, tt_data(cs), h, (size_t)n * sizeof *h);
    free(h);
    if (s || tcu_rope(F(o), false, F(x), F(cs), tt_numel(x) / D, T, H, D, 1) != TL_OK) return NULL;
    const rope_saved sv = {.cs = cs};
    return tt__cu_record_saved(c, "rope", bw_rope_cu, o, &x, 1, &sv, sizeof sv) ? o : NULL;
}
