/* train/tt_internal: what the framework's own files share and users do not:
 * the tape node, the context's internals, and helpers ops use to make
 * outputs, record nodes and accumulate gradients.
 * Owns: nothing. Calls: tallow_train.h (the public API), base. */
#ifndef TL_TRAIN_TT_INTERNAL_H
#define TL_TRAIN_TT_INTERNAL_H

#include <math.h>
#include <string.h>

#include "base/fp16.h"
#include "base/status.h"
#include "base/threadpool.h"
#include "tallow_train.h"

#define TT_NODE_MAX_IN 4
#define TT_NODE_MAX_SAVED 4

/* Backward: read gout (contiguous, shape of n->out) and accumulate into the
 * inputs that need grad with tt__acc_grad. */
typedef tl_status (*tt_backward_fn)(tt_ctx *c, tt_node *n, const tt_tensor *gout);

struct tt_node {
    const char *op;
    tt_backward_fn bw;
    tt_tensor *in[TT_NODE_MAX_IN];
    int n_in;
    tt_tensor *out;
    tt_tensor *saved[TT_NODE_MAX_SAVED]; /* caller-owned (tt_new) tensors freed with the node */
    double f[4];
    int64_t i[8];
    void *extra;                          /* malloc'd, freed with the node */
    bool freed;
};

struct tt_ctx {
    tl_threadpool *tp;
    bool grad_enabled;
    tt_node **nodes;   /* the tape, in creation (topological) order */
    int64_t n_nodes, cap_nodes;
    tt_tensor **temps; /* temporaries to free at reset */
    int64_t n_temps, cap_temps;
    size_t live_bytes;
    /* buffers of released temporaries, reused by later ones of the same size
     * (a training step allocates the same shapes every step: no page faults
     * or zeroing after the first) */
    void **pool;
    size_t *pool_bytes;
    tt_device *pool_dev;
    int64_t n_pool, cap_pool;
    tt_matmul_prec mm_prec; /* CUDA matmuls (tt_ctx_set_matmul_prec) */
};

/* Zeroed gradient buffer for a tensor owned by c (from c's pool when one of
 * the size is free; c may be NULL: plain allocation), and its release. */
tt_tensor *tt__grad_new(tt_ctx *c, tt_device dev, tt_dtype dt, int ndim, const int64_t *shape);
/* The same with contents undefined, for a caller that writes every element. */
tt_tensor *tt__grad_new_raw(tt_ctx *c, tt_device dev, tt_dtype dt, int ndim, const int64_t *shape);
void tt__grad_free(tt_ctx *c, tt_tensor *g);
/* Give a temporary's buffer (on dev) back to c's pool (or free it). */
void tt__pool_put(tt_ctx *c, tt_device dev, void *data, size_t nbytes);

/* A buffer of nbytes on dev from c's pool (or new), for scratch that an op
 * gives back with tt__pool_put as soon as its work is queued (device work
 * runs in queue order, so a later user of the buffer runs after it). */
void *tt__pool_take(tt_ctx *c, tt_device dev, size_t nbytes);

/* ---- devices (train/device.c): raw memory of a non-CPU device ---------- */
bool tt__dev_compiled(tt_device dev);
void *tt__dev_alloc(tt_device dev, size_t nbytes); /* NULL on failure */
void tt__dev_free(tt_device dev, void *p);
tl_status tt__dev_zero(tt_device dev, void *p, size_t nbytes);
tl_status tt__dev_h2d(tt_device dev, void *dst, const void *src, size_t nbytes);
tl_status tt__dev_d2h(tt_device dev, void *dst, const void *src, size_t nbytes); /* waits */
/* dst (=|+=) src elementwise over dst's shape (src: the same shape or the
 * same numel, read in logical order), any strides, either side on the
 * device; add: f32 only. Host<->device pairs need contiguous tensors. */
tl_status tt__dev_copy(tt_tensor *dst, const tt_tensor *src, bool add);
tl_status tt__dev_fill(tt_tensor *t, double v);
/* False (TL_ERR_UNSUPPORTED naming op and device) unless every non-NULL
 * input is on the CPU: the guard of the ops that have no device kernel. */
bool tt__on_host(const char *op, const tt_tensor *const *xs, int n);
#define TT__HOST_ONLY(op, ret, ...)                                                    \
    do {                                                                             \
        const tt_tensor *tt__hx_[] = {__VA_ARGS__};                                  \
        if (!tt__on_host(op, tt__hx_, (int)(sizeof tt__hx_ / sizeof *tt__hx_))) return ret; \
    } while (0)
/* True if every non-NULL input is on dev (else an error naming op). */
bool tt__all_on(const char *op, tt_device dev, const tt_tensor *const *xs, int n);
static inline tt_device tt__dev(const tt_tensor *x) { return x ? x->st->device : TT_CPU; }
#ifdef TALLOW_CUDA
/* The CUDA kernels of the ops (train/cuda/ops_cuda.c): each public op
 * calls its own when its first input is on TT_CUDA. */
tt_tensor *tt__cu_add(tt_ctx *c, tt_tensor *a, tt_tensor *b);
tt_tensor *tt__cu_gelu_tanh(tt_ctx *c, tt_tensor *x);
tt_tensor *tt__cu_norm(tt_ctx *c, tt_tensor *x, tt_tensor *w, tt_tensor *b, double eps, bool rms);
tt_tensor *tt__cu_silu(tt_ctx *c, tt_tensor *x);
tt_tensor *tt__cu_scale(tt_ctx *c, tt_tensor *x, double a);
/* Records op's node (when a gradient is wanted) with a copy of the size
 * bytes at saved as what its backward keeps (freed with the node). */
bool tt__cu_record_saved(tt_ctx *c, const char *op, tt_backward_fn fn, tt_tensor *o, tt_tensor **in, int n_in,
                         const void *saved, size_t size);
/* Scratch bytes a CUDA linear of x [M, K] and w [N, K] takes in a matmul
 * mode, forward or backward. */
size_t tt__cu_linear_scratch(int mode, int64_t M, int64_t N, int64_t K, bool bwd);
tt_tensor *tt__cu_mul(tt_ctx *c, tt_tensor *a, tt_tensor *b);
tt_tensor *tt__cu_rope(tt_ctx *c, tt_tensor *x, int64_t pos0, double theta);
tt_tensor *tt__cu_embedding(tt_ctx *c, tt_tensor *w, const int32_t *ids, int ndim, const int64_t *shape);
tt_tensor *tt__cu_cross_entropy(tt_ctx *c, tt_tensor *logits, const int32_t *targets, int32_t ignore_index);
tt_tensor *tt__cu_attention(tt_ctx *c, tt_tensor *q, tt_tensor *k, tt_tensor *v, bool causal, double scale);
/* The fused form of tt_attention_qkv (the flash kernels: BF16 mode, head size
 * 32/64/128); tt__cu_attention_qkv_ok says whether it applies. */
bool tt__cu_attention_qkv_ok(const tt_ctx *c, int64_t D);
tt_tensor *tt__cu_attention_qkv(tt_ctx *c, tt_tensor *qkv, int64_t H, int64_t Hkv, bool causal, double scale);
tt_tensor *tt__cu_linear(tt_ctx *c, tt_tensor *x, tt_tensor *w, tt_tensor *bias);
/* x [..., in] @ W^T for a frozen weight on the device (train/cuda/ops_frozen_cuda.c). */
struct tcu_frozen;
tt_tensor *tt__cu_linear_frozen(tt_ctx *c, tt_tensor *x, struct tcu_frozen *w, int64_t n_in, int64_t n_out);
/* AdamW over CUDA parameters (train/cuda/optim_cuda.c); max_norm > 0 clips. */
tl_status tt__cu_optim_step(tt_optim *o, double lr, double max_norm);
double tt__cu_optim_norm(tt_optim *o);
void tt__cu_optim_free(tt_optim *o);
#endif

static inline size_t tt__esize(tt_dtype dt) {
    return dt == TT_F64 ? 8 : (dt == TT_BF16 || dt == TT_F16) ? 2 : 4;
}
/* F32/F64: the dtypes ops compute in; the others are storage only. */
static inline bool tt__is_compute(tt_dtype dt) { return dt == TT_F32 || dt == TT_F64; }
static inline bool tt__is_float(tt_dtype dt) { return dt != TT_I32; }

/* double -> float rounded to odd (truncate, then set the last bit if
 * inexact): rounding that float to bf16/f16 (fewer than 23 - 2 mantissa
 * bits) then gives the correctly rounded (nearest-even) result of the double,
 * with no double-rounding error. */
static inline float tt__f32_round_odd(double v) {
    float f = (float)v;
    if ((double)f == v || v != v || isinf(f)) return f;
    if (fabs((double)f) > fabs(v)) f = nextafterf(f, 0.0f);
    uint32_t b;
    memcpy(&b, &f, 4);
    b |= 1;
    memcpy(&f, &b, 4);
    return f;
}

/* Element at storage offset o (elements, not counting t->offset's base). */
static inline double tt__ld(const tt_tensor *t, int64_t o) {
    const void *p = t->st->data;
    switch (t->dtype) {
    case TT_F32: return ((const float *)p)[o];
    case TT_F64: return ((const double *)p)[o];
    case TT_BF16: return tl_bf16_to_fp32(((const uint16_t *)p)[o]);
    case TT_F16: return tl_fp16_to_fp32(((const uint16_t *)p)[o]);
    default: return ((const int32_t *)p)[o];
    }
}

/* Store v at storage offset o, rounding to nearest-even (I32: truncation
 * toward zero, saturating; NaN -> 0). */
static inline void tt__st(tt_tensor *t, int64_t o, double v) {
    void *p = t->st->data;
    switch (t->dtype) {
    case TT_F32: ((float *)p)[o] = (float)v; break;
    case TT_F64: ((double *)p)[o] = v; break;
    case TT_BF16: ((uint16_t *)p)[o] = tl_fp32_to_bf16(tt__f32_round_odd(v)); break;
    case TT_F16: ((uint16_t *)p)[o] = tl_fp32_to_fp16(tt__f32_round_odd(v)); break;
    default:
        ((int32_t *)p)[o] = v != v ? 0 : v >= 2147483647.0 ? INT32_MAX : v <= -2147483648.0 ? INT32_MIN : (int32_t)v;
        break;
    }
}

/* Storage offset of flat (row-major logical) index i of t. */
int64_t tt__flat_off(const tt_tensor *t, int64_t i);
/* NULL-safe: false (with an error naming op) unless x's dtype computes. */
bool tt__check_compute(const tt_tensor *x, const char *op);
/* False (with an error naming op) if an op would record a gradient through
 * a storage-dtype tensor (only tt_to carries gradients for those). */
bool tt__grad_dtype_ok(tt_ctx *c, const tt_tensor *x, const char *op);
/* Shape text "[2, 3, 4]" into buf (for error messages). */
const char *tt__shape_str(const tt_tensor *x, char *buf, size_t n);

/* A contiguous temporary owned by c (contents unspecified: ops write all of
 * it). Compute dtypes only: every op makes its output here before touching
 * data, so a storage-dtype input fails cleanly instead of being read as
 * float. tt__temp_any allows every dtype (creation, copies, tt_to). */
tt_tensor *tt__temp(tt_ctx *c, tt_dtype dt, int ndim, const int64_t *shape);
tt_tensor *tt__temp_any(tt_ctx *c, tt_dtype dt, int ndim, const int64_t *shape);
/* The same on dev (contents unspecified). */
tt_tensor *tt__temp_on(tt_ctx *c, tt_device dev, tt_dtype dt, int ndim, const int64_t *shape);
/* A temporary view sharing x's storage with the given shape/strides/offset. */
tt_tensor *tt__view(tt_ctx *c, const tt_tensor *x, int ndim, const int64_t *shape,
                    const int64_t *stride, int64_t offset);
/* Caller-owned contiguous copy of x (for saved tensors). */
tt_tensor *tt__clone(const tt_tensor *x);
/* A contiguous temporary with x's values (x itself if contiguous). Not recorded. */
tt_tensor *tt__contig(tt_ctx *c, tt_tensor *x);

/* True if any input requires grad and grad mode is on. */
bool tt__needs_grad(tt_ctx *c, tt_tensor *const *in, int n);
/* Record a node producing out (sets out->requires_grad, out->node). */
tt_node *tt__record(tt_ctx *c, const char *op, tt_backward_fn bw, tt_tensor *out,
                    tt_tensor *const *in, int n_in);
/* Add g (any strides, shape of t) into t->grad (allocated zeroed if absent). */
tl_status tt__acc_grad(tt_tensor *t, const tt_tensor *g);
/* Grad buffer of t (allocating zeros if absent), for ops that accumulate in place. */
tt_tensor *tt__grad_buf(tt_tensor *t);
/* Grad buffer of t (any device) for a backward that writes it whole: when t
 * has none yet it is made with contents undefined and *fresh is set (write,
 * do not add); else *fresh is false (add into it). NULL: out of memory. */
tt_tensor *tt__grad_buf_for_write(tt_tensor *t, bool *fresh);
static inline bool tt__need(const tt_node *n, int i) { return n->in[i] && n->in[i]->requires_grad; }

/* Element-wise style passes: fewer values than this stay on the calling
 * thread (waking the pool costs more than they take). */
#define TT_PAR_MIN 16384
/* Thread ith's share [*a, *b) of n items in nth contiguous blocks (empty
 * when a >= b). */
static inline void tt__split(int64_t n, int ith, int nth, int64_t *a, int64_t *b) {
    const int64_t per = (n + nth - 1) / nth;
    *a = per * ith;
    *b = *a + per < n ? *a + per : n;
}

/* Broadcast: output shape of a and b; false if incompatible. */
bool tt__bcast_shape(const tt_tensor *a, const tt_tensor *b, int *ondim, int64_t *oshape);
/* Strides of x aligned to a 4-d right-aligned output shape (0 where broadcast). */
void tt__bstrides4(const tt_tensor *x, int ondim, const int64_t *oshape, int64_t st[4]);
void tt__shape4(int ndim, const int64_t *shape, int64_t sh[4]);
/* Sum g (shape gshape, contiguous) down to t's shape (broadcast reverse) into a
 * caller-owned tensor. */
tt_tensor *tt__reduce_to(const tt_tensor *g, int ndim, const int64_t *shape);

bool tt__check(tt_tensor *const *in, int n, const char *op); /* non-NULL, same dtype */

void tt__fill_strided(tt_tensor *t, double v);

#endif
