/* train/autograd: the context (thread pool, grad mode, tape, temporaries)
 * and reverse-mode backward over the tape, plus the gradient accumulation
 * and broadcasting helpers every op's backward uses.
 * Why a tape in creation order: it is already a topological order, so
 * backward is one reverse walk, and freeing each node right after its
 * backward releases saved activations as early as possible.
 * Owns: tape nodes. Calls: base/threadpool, train/tensor. */
#include <stdlib.h>
#include <string.h>

#include "train/tt_internal.h"

tl_status tt_ctx_init(int n_threads, tt_ctx **out) {
    *out = NULL;
    tt_ctx *c = calloc(1, sizeof *c);
    if (!c) return tl_err(TL_ERR_NOMEM, "train: out of memory");
    c->grad_enabled = true;
    if (n_threads < 1) n_threads = 1;
    tl_status s = tl_threadpool_init(n_threads, &c->tp);
    if (s != TL_OK) {
        free(c);
        return s;
    }
    *out = c;
    return TL_OK;
}

static void node_free(tt_node *n) {
    if (!n) return;
    if (!n->freed)
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i]) n->in[i]->n_uses--;
    for (int i = 0; i < TT_NODE_MAX_SAVED; i++) {
        tt_free(n->saved[i]);
        n->saved[i] = NULL;
    }
    free(n->extra);
    n->extra = NULL;
    n->freed = true;
}

void tt_ctx_reset(tt_ctx *c) {
    if (!c) return;
    for (int64_t i = 0; i < c->n_nodes; i++) {
        node_free(c->nodes[i]);
        free(c->nodes[i]);
    }
    c->n_nodes = 0;
    for (int64_t i = 0; i < c->n_temps; i++) {
        tt_tensor *t = c->temps[i];
        if (t->st->refs == 1 && t->st->data) { /* last user of the buffer: keep it for reuse */
            tt__pool_put(c, t->st->device, t->st->data, t->st->nbytes);
            t->st->data = NULL;
        }
        tt_free(t);
    }
    c->n_temps = 0;
    c->live_bytes = 0;
}

void tt_ctx_free(tt_ctx *c) {
    if (!c) return;
    tt_ctx_reset(c);
    for (int64_t i = 0; i < c->n_pool; i++) {
        if (c->pool_dev[i] == TT_CPU) free(c->pool[i]);
        else tt__dev_free(c->pool_dev[i], c->pool[i]);
    }
    free(c->pool);
    free(c->pool_bytes);
    free(c->pool_dev);
    free(c->nodes);
    free(c->temps);
    tl_threadpool_free(c->tp);
    free(c);
}

bool tt_set_grad_enabled(tt_ctx *c, bool on) {
    bool prev = c->grad_enabled;
    c->grad_enabled = on;
    return prev;
}
bool tt_grad_enabled(const tt_ctx *c) { return c->grad_enabled; }
tl_threadpool *tt_ctx_pool(tt_ctx *c) { return c->tp; }
size_t tt_ctx_live_bytes(const tt_ctx *c) { return c->live_bytes; }

bool tt__check(tt_tensor *const *in, int n, const char *op) {
    for (int i = 0; i < n; i++)
        if (!in[i]) return false; /* message already set by whoever failed */
    if (!tt__on_host(op, (const tt_tensor *const *)in, n)) return false;
    for (int i = 1; i < n; i++)
        if (in[i]->dtype != in[0]->dtype) {
            tl_err(TL_ERR_INVALID, "train: %s: inputs have different dtypes", op);
            return false;
        }
    return true;
}

bool tt__needs_grad(tt_ctx *c, tt_tensor *const *in, int n) {
    if (!c->grad_enabled) return false;
    for (int i = 0; i < n; i++)
        if (in[i] && in[i]->requires_grad) return true;
    return false;
}

tt_node *tt__record(tt_ctx *c, const char *op, tt_backward_fn bw, tt_tensor *out,
                    tt_tensor *const *in, int n_in) {
    if (c->n_nodes == c->cap_nodes) {
        int64_t cap = c->cap_nodes ? c->cap_nodes * 2 : 256;
        tt_node **p = realloc(c->nodes, (size_t)cap * sizeof *p);
        if (!p) {
            tl_err(TL_ERR_NOMEM, "train: out of memory recording %s", op);
            return NULL;
        }
        c->nodes = p;
        c->cap_nodes = cap;
    }
    tt_node *n = calloc(1, sizeof *n);
    if (!n) {
        tl_err(TL_ERR_NOMEM, "train: out of memory recording %s", op);
        return NULL;
    }
    n->op = op;
    n->bw = bw;
    n->out = out;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) {
        n->in[i] = in[i];
        if (in[i]) in[i]->n_uses++;
    }
    out->requires_grad = true;
    out->node = n;
    c->nodes[c->n_nodes++] = n;
    return n;
}

void tt__bstrides4(const tt_tensor *x, int ondim, const int64_t *oshape, int64_t st[4]) {
    int64_t o4[4];
    tt__shape4(ondim, oshape, o4);
    for (int j = 0; j < 4; j++) st[j] = 0;
    for (int i = 0; i < x->ndim; i++) {
        int j = 4 - x->ndim + i;
        st[j] = (x->shape[i] == 1 && o4[j] != 1) ? 0 : x->stride[i];
        if (x->shape[i] == 1) st[j] = 0;
    }
}

bool tt__bcast_shape(const tt_tensor *a, const tt_tensor *b, int *ondim, int64_t *oshape) {
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < n; i++) {
        int ia = a->ndim - n + i, ib = b->ndim - n + i;
        int64_t sa = ia >= 0 ? a->shape[ia] : 1, sb = ib >= 0 ? b->shape[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1) return false;
        oshape[i] = sa == 1 ? sb : sa;
    }
    *ondim = n;
    return true;
}

/* Sum a gradient over the dims that broadcasting expanded. */
#define REDUCE4(T)                                                                    \
    do {                                                                              \
        const T *gp = tt_data(g);                                                     \
        T *op = tt_data(o);                                                           \
        int64_t i = 0;                                                                \
        for (int64_t i0 = 0; i0 < gs[0]; i0++)                                        \
            for (int64_t i1 = 0; i1 < gs[1]; i1++)                                    \
                for (int64_t i2 = 0; i2 < gs[2]; i2++) {                              \
                    T *row = op + i0 * os[0] + i1 * os[1] + i2 * os[2];               \
                    if (os[3])                                                        \
                        for (int64_t i3 = 0; i3 < gs[3]; i3++) row[i3] += gp[i++];    \
                    else                                                              \
                        for (int64_t i3 = 0; i3 < gs[3]; i3++) row[0] += gp[i++];     \
                }                                                                     \
    } while (0)

tt_tensor *tt__reduce_to(const tt_tensor *g, int ndim, const int64_t *shape) {
    tt_tensor *o = tt_new(g->dtype, ndim, shape);
    if (!o) return NULL;
    int64_t gs[4], os[4];
    tt__shape4(g->ndim, g->shape, gs);
    tt__bstrides4(o, g->ndim, g->shape, os);
    if (g->dtype == TT_F32) REDUCE4(float);
    else REDUCE4(double);
    return o;
}

tt_tensor *tt__grad_buf(tt_tensor *t) {
    if (!t->grad) t->grad = tt__grad_new(t->owner, tt__dev(t), t->dtype, t->ndim, t->shape);
    return t->grad;
}

tt_tensor *tt__grad_buf_for_write(tt_tensor *t, bool *fresh) {
    *fresh = !t->grad;
    if (!t->grad) t->grad = tt__grad_new_raw(t->owner, tt__dev(t), t->dtype, t->ndim, t->shape);
    return t->grad;
}

#define ACC4(T)                                                                       \
    do {                                                                              \
        T *d = tt_data(t->grad);                                                      \
        const T *s = (const T *)g->st->data;                                          \
        int64_t i = 0;                                                                \
        for (int64_t i0 = 0; i0 < sh[0]; i0++)                                        \
            for (int64_t i1 = 0; i1 < sh[1]; i1++)                                    \
                for (int64_t i2 = 0; i2 < sh[2]; i2++) {                              \
                    const T *r = s + g->offset + i0 * ss[0] + i1 * ss[1] + i2 * ss[2]; \
                    if (ss[3] == 1)                                                   \
                        for (int64_t i3 = 0; i3 < sh[3]; i3++) d[i++] += r[i3];       \
                    else                                                              \
                        for (int64_t i3 = 0; i3 < sh[3]; i3++) d[i++] += r[i3 * ss[3]]; \
                }                                                                     \
    } while (0)

/* On a device: g has t's shape (any strides) or t's numel (contiguous):
 * broadcast reductions are the ops' own business there. */
static tl_status acc_grad_dev(tt_tensor *t, const tt_tensor *g) {
    if (tt__dev(g) != tt__dev(t) || g->dtype != t->dtype || tt_numel(g) != tt_numel(t))
        return tl_err(TL_ERR_INVALID, "train: gradient on %s of %lld elements for a tensor on %s of %lld",
                      tt_device_name(tt__dev(g)), (long long)tt_numel(g), tt_device_name(tt__dev(t)),
                      (long long)tt_numel(t));
    bool fresh = !t->grad;
    if (fresh) {
        /* the copy below writes every element */
        t->grad = tt__grad_new_raw(t->owner, tt__dev(t), t->dtype, t->ndim, t->shape);
        if (!t->grad) return TL_ERR_NOMEM;
    }
    return tt__dev_copy(t->grad, g, !fresh);
}

tl_status tt__acc_grad(tt_tensor *t, const tt_tensor *g) {
    if (!g) return TL_ERR_NOMEM;
    if (tt__dev(t) != TT_CPU || tt__dev(g) != TT_CPU) return acc_grad_dev(t, g);
    bool bcast = g->ndim == t->ndim;
    for (int i = 0; bcast && i < t->ndim; i++) bcast = g->shape[i] == t->shape[i] || g->shape[i] == 1;
    if ((!bcast && tt_numel(g) != tt_numel(t)) || g->dtype != t->dtype)
        return tl_err(TL_ERR_INVALID, "train: gradient of %lld elements for a tensor of %lld",
                      (long long)tt_numel(g), (long long)tt_numel(t));
    if (!t->grad) { /* first gradient: copy instead of zero + add */
        bool whole = tt_numel(g) == tt_numel(t);
        t->grad = (whole ? tt__grad_new_raw : tt__grad_new)(t->owner, TT_CPU, t->dtype, t->ndim, t->shape);
        if (!t->grad) return TL_ERR_NOMEM;
        if (whole) {
            tt_copy_(t->grad, g); /* same shape: strided copy; else row-major order */
            return TL_OK;
        }
    }
    int64_t sh[4], ss[4];
    tt__shape4(t->ndim, t->shape, sh);
    if (bcast) {
        tt__bstrides4(g, t->ndim, t->shape, ss);
    } else { /* same numel, other shape (reshape): read g in its row-major order */
        if (!tt_is_contiguous(g)) {
            tt_tensor *gc = tt__clone(g);
            tl_status st = gc ? tt__acc_grad(t, gc) : TL_ERR_NOMEM;
            tt_free(gc);
            return st;
        }
        tt__shape4(t->ndim, t->shape, sh);
        int64_t s = 1;
        for (int j = 3; j >= 0; j--) {
            ss[j] = s;
            s *= sh[j];
        }
    }
    if (t->dtype == TT_F32) ACC4(float);
    else ACC4(double);
    return TL_OK;
}

void tt_zero_grad(tt_tensor *t) {
    if (t && t->grad) tt_fill(t->grad, 0.0);
}

tl_status tt_backward_with(tt_ctx *c, tt_tensor *root, const tt_tensor *seed) {
    if (!root) return tl_err(TL_ERR_INVALID, "train: backward of a NULL tensor (an op failed earlier)");
    if (!root->requires_grad)
        return tl_err(TL_ERR_STATE, "train: backward: tensor does not require grad");
    if (root->node && root->node->freed)
        return tl_err(TL_ERR_STATE,
                      "train: backward through a freed graph (op '%s'): the first backward released it",
                      root->node->op);
    tl_status s = tt__acc_grad(root, seed);
    if (s != TL_OK) return s;
    if (!root->node) return TL_OK; /* a leaf: nothing to propagate */
    int64_t last = c->n_nodes - 1;
    while (last >= 0 && c->nodes[last] != root->node) last--;
    if (last < 0) return tl_err(TL_ERR_STATE, "train: backward: tensor's node is not on this ctx's tape");
    bool prev = tt_set_grad_enabled(c, false);
    for (int64_t i = last; i >= 0; i--) {
        tt_node *n = c->nodes[i];
        tt_tensor *out = n->out;
        /* a node whose output got no gradient is not on the root's graph
         * (another loss, a no-grad branch): leave it and its data alone */
        if (!out->grad) continue;
        if (n->freed) {
            tt_set_grad_enabled(c, prev);
            return tl_err(TL_ERR_STATE,
                          "train: backward through a freed graph (op '%s' was released by an earlier backward)",
                          n->op);
        }
        {
            s = n->bw(c, n, out->grad);
            if (s != TL_OK) {
                tt_set_grad_enabled(c, prev);
                return tl_err_prefix(s, "backward of %s: ", n->op);
            }
            if (!out->retain_grad) {
                tt__grad_free(out->owner, out->grad);
                out->grad = NULL;
            }
        }
        node_free(n);
        /* Every consumer of out was created later and has already run its
         * backward, and earlier nodes cannot reference it: release its data
         * now unless another tensor shares the storage (views), a node off
         * this graph still uses it, it is the root, or the caller keeps it. */
        if (out != root && !out->retain_grad && out->owner && out->n_uses == 0 && out->st->refs == 1 &&
            out->st->data) {
            c->live_bytes -= out->st->nbytes < c->live_bytes ? out->st->nbytes : c->live_bytes;
            tt__pool_put(c, out->st->device, out->st->data, out->st->nbytes);
            out->st->data = NULL;
            out->st->nbytes = 0;
        }
    }
    tt_set_grad_enabled(c, prev);
    return TL_OK;
}

tl_status tt_backward(tt_ctx *c, tt_tensor *root) {
    if (!root) return tl_err(TL_ERR_INVALID, "train: backward of a NULL tensor (an op failed earlier)");
    if (tt_numel(root) != 1)
        return tl_err(TL_ERR_INVALID, "train: backward needs a scalar (got %lld elements); use tt_backward_with",
                      (long long)tt_numel(root));
    if (tt__dev(root) != TT_CPU) { /* a temporary: no device free inside the step */
        tt_tensor *seed = tt__temp_on(c, tt__dev(root), root->dtype, root->ndim, root->shape);
        if (!seed) return TL_ERR_NOMEM;
        tl_status s = tt__dev_fill(seed, 1.0);
        return s != TL_OK ? s : tt_backward_with(c, root, seed);
    }
    tt_tensor *seed = tt_new(root->dtype, root->ndim, root->shape);
    if (!seed) return TL_ERR_NOMEM;
    tt_fill(seed, 1.0);
    tl_status s = tt_backward_with(c, root, seed);
    tt_free(seed);
    return s;
}
