/* train/tt_internal: what the framework's own files share and users do not:
 * the tape node, the context's internals, and helpers ops use to make
 * outputs, record nodes and accumulate gradients.
 * Owns: nothing. Calls: train.h. */
#ifndef TL_TRAIN_TT_INTERNAL_H
#define TL_TRAIN_TT_INTERNAL_H

#include "train/train.h"

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
    int64_t n_pool, cap_pool;
};

/* Zeroed gradient buffer for a tensor owned by c (from c's pool when one of
 * the size is free; c may be NULL: plain allocation), and its release. */
tt_tensor *tt__grad_new(tt_ctx *c, tt_dtype dt, int ndim, const int64_t *shape);
void tt__grad_free(tt_ctx *c, tt_tensor *g);
/* Give a temporary's buffer back to c's pool (or free it). */
void tt__pool_put(tt_ctx *c, void *data, size_t nbytes);

static inline size_t tt__esize(tt_dtype dt) { return dt == TT_F64 ? 8 : 4; }

/* A contiguous temporary (zeroed) owned by c. */
tt_tensor *tt__temp(tt_ctx *c, tt_dtype dt, int ndim, const int64_t *shape);
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
static inline bool tt__need(const tt_node *n, int i) { return n->in[i] && n->in[i]->requires_grad; }

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
