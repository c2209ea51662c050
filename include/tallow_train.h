/* tallow_train.h: the training framework's public API (installed beside
 * tallow.h; link the same libtallow): tensors with reverse-mode autograd,
 * ops with backward, nn models, optimizers, data and checkpoints, on the CPU
 * and (builds with TALLOW_CUDA) a CUDA device: see "devices" below.
 *
 * Conventions (chosen to read like PyTorch, the framework people compare to):
 *  - shape[] is in PyTorch order: shape[ndim-1] is the fastest-varying dim of
 *    a contiguous tensor (the reverse of the engine's GGUF ne[] order; the
 *    exporter converts). strides are in elements; views share a storage.
 *  - dtype f32 for training, f64 for gradient checks: every op computes in
 *    its input's dtype (inputs of one op must share a dtype).
 *  - Ops take a tt_ctx and return a new tensor owned by that ctx (a
 *    "temporary"): tt_ctx_reset frees all temporaries and the tape at once, so
 *    model code needs no per-tensor frees. Tensors made with tt_new/tt_param
 *    (parameters, data buffers) are owned by the caller: tt_free.
 *  - Ops return NULL on error with tl_last_error() set; a NULL input makes an
 *    op return NULL without touching the message, so a chain of ops can be
 *    checked once at the end.
 *  - Autograd: an op whose inputs require grad (and grad mode on) records a
 *    node on the ctx's tape. tt_backward walks the tape in reverse, accumulates
 *    into leaf .grad (persistent, so micro-batches accumulate), frees each
 *    node's saved tensors and non-leaf grads as soon as they are used, and
 *    marks the graph freed: a second backward is a TL_ERR_STATE error. It
 *    also releases the data of each intermediate (non-leaf) temporary once
 *    its node's backward ran, unless it shares storage with a view, is the
 *    root or has retain_grad set: read activations (logits) before backward.
 * Owns: tensors, storages, the tape. Calls: base (status, threadpool, cpu). */
#ifndef TALLOW_TRAIN_H
#define TALLOW_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tallow.h" /* tl_status, tl_last_error */

typedef struct tl_threadpool tl_threadpool; /* the CPU thread pool (opaque here) */

#define TT_MAX_DIMS 4

/* F32/F64 are the compute dtypes. BF16, F16 (IEEE half) and I32 are storage
 * dtypes: tensors can be created, viewed (without grad), filled, read/written
 * (tt_get/tt_set/tt_copy_ convert, rounding to nearest-even) and saved in
 * checkpoints, and tt_to converts between any two dtypes (differentiable
 * between the float ones); comparisons and logical ops, and the mask/index
 * inputs of where, masked_fill, gather and index_select take them too. Every
 * other op refuses a storage dtype with an error (convert with
 * tt_to(c, x, TT_F32) first): nothing upcasts silently. I32 holds indices
 * (argmax/argmin, max/min indices, gather/index_select indices). */
typedef enum tt_dtype { TT_F32 = 0, TT_F64 = 1, TT_BF16 = 2, TT_F16 = 3, TT_I32 = 4 } tt_dtype;

/* Where a storage's bytes live. TT_CUDA: device memory of the current CUDA
 * device (builds with TALLOW_CUDA; tt_device_available says whether one
 * answers at run time). */
typedef enum tt_device { TT_CPU = 0, TT_CUDA = 1 } tt_device;

typedef struct tt_storage {
    void *data;     /* host or device pointer (see device) */
    size_t nbytes;
    int refs;
    tt_device device;
} tt_storage;

typedef struct tt_node tt_node;
typedef struct tt_ctx tt_ctx;

typedef struct tt_tensor {
    tt_dtype dtype;
    int ndim;
    int64_t shape[TT_MAX_DIMS];  /* PyTorch order */
    int64_t stride[TT_MAX_DIMS]; /* elements */
    int64_t offset;              /* elements into st->data */
    tt_storage *st;
    bool requires_grad;
    bool retain_grad;            /* keep a non-leaf's grad after backward */
    struct tt_tensor *grad;      /* contiguous, same shape; NULL until a backward reaches it */
    tt_node *node;               /* producing op (NULL for leaves) */
    tt_ctx *owner;               /* ctx that frees it; NULL: caller frees with tt_free */
    int32_t n_uses;              /* tape nodes holding it as an input and not yet freed */
    const char *name;            /* optional, not owned */
} tt_tensor;

/* ---- context: threads, grad mode, tape and temporaries ------------------ */
tl_status tt_ctx_init(int n_threads, tt_ctx **out);
void tt_ctx_free(tt_ctx *c);
/* Free every temporary tensor and the tape (call once per training step). */
void tt_ctx_reset(tt_ctx *c);
/* Returns the previous mode; no_grad scope = prev = tt_set_grad_enabled(c, false) ... restore. */
bool tt_set_grad_enabled(tt_ctx *c, bool on);
bool tt_grad_enabled(const tt_ctx *c);
tl_threadpool *tt_ctx_pool(tt_ctx *c);
size_t tt_ctx_live_bytes(const tt_ctx *c); /* bytes held by temporaries + saved tensors */

/* ---- devices --------------------------------------------------------------
 * A tensor lives where its storage does. Every op runs on its inputs'
 * device (inputs of one op share a device); an op that device has no
 * kernel for fails with TL_ERR_UNSUPPORTED naming the op and the device:
 * nothing moves through the host behind the caller's back. On TT_CUDA the
 * ops (see tt_cuda_ops below) queue work on one stream and return at once;
 * reading values (tt_get, tt_to_device to TT_CPU) waits for it. */
const char *tt_device_name(tt_device d); /* "cpu", "cuda" */
bool tt_device_available(tt_device d);
static inline tt_device tt_device_of(const tt_tensor *t) { return t->st->device; }
/* Caller-owned zeroed tensor on dev. */
tt_tensor *tt_new_on(tt_device dev, tt_dtype dt, int ndim, const int64_t *shape);
/* Copy of x on dev (x itself if already there); differentiable: the
 * gradient is copied back to x's device. */
tt_tensor *tt_to_device(tt_ctx *c, tt_tensor *x, tt_device dev);
/* Copy src into dst across devices: same dtype and numel, each contiguous. */
tl_status tt_copy_across(tt_tensor *dst, const tt_tensor *src);
/* Move a caller-owned tensor's storage (and drop its grad) to dev in place. */
tl_status tt_tensor_move(tt_tensor *t, tt_device dev);
/* Wait until the device's queued work is done (and report its errors). */
tl_status tt_device_sync(tt_device dev);
/* The device's free and total memory in bytes (the framework's pool keeps
 * what its ops used, so total - free after a step is that step's peak). */
tl_status tt_device_memory(tt_device dev, size_t *free_bytes, size_t *total_bytes);
/* Kernel-call timing on a device (profile runs; TT_CUDA only): while on,
 * every CUDA call of the framework (a kernel or cuBLASLt launch, a copy)
 * records an event on the stream after its work. The report writes the time
 * per call name since the last report (largest total first, NUL-terminated)
 * and starts the totals again. */
tl_status tt_device_profile(tt_device dev, bool on);
tl_status tt_device_profile_report(tt_device dev, char *buf, size_t n);
/* How the CUDA matmuls (linear, attention) compute: F32 exactly in fp32
 * (the PyTorch-fp32 oracle's mode, the default), TF32 on the tensor cores
 * with fp32 accumulation, BF16 with the operands rounded to bf16 (fp32
 * master weights, activations and accumulation). CPU ops ignore it. */
typedef enum tt_matmul_prec { TT_MM_F32 = 0, TT_MM_TF32 = 1, TT_MM_BF16 = 2 } tt_matmul_prec;
void tt_ctx_set_matmul_prec(tt_ctx *c, tt_matmul_prec p);

/* ---- tensors ------------------------------------------------------------ */
/* Caller-owned contiguous zeroed tensor. */
tt_tensor *tt_new(tt_dtype dt, int ndim, const int64_t *shape);
tt_tensor *tt_new_from(tt_dtype dt, int ndim, const int64_t *shape, const double *vals);
void tt_free(tt_tensor *t);
/* Temporaries owned by c. */
tt_tensor *tt_zeros(tt_ctx *c, tt_dtype dt, int ndim, const int64_t *shape);
tt_tensor *tt_full(tt_ctx *c, tt_dtype dt, int ndim, const int64_t *shape, double v);
tt_tensor *tt_arange(tt_ctx *c, tt_dtype dt, int64_t n);
int64_t tt_numel(const tt_tensor *t);
bool tt_is_contiguous(const tt_tensor *t);
void *tt_data(const tt_tensor *t); /* pointer to element 0 (respecting offset) */
/* Element access by flat logical (row-major) index; any strides. */
double tt_get(const tt_tensor *t, int64_t i);
void tt_set(tt_tensor *t, int64_t i, double v);
void tt_fill(tt_tensor *t, double v);
/* Copy values (same numel) from src into dst, any strides/dtypes. */
void tt_copy_(tt_tensor *dst, const tt_tensor *src);

/* Deterministic RNG (xoshiro256**); state is 4 words, saved in checkpoints. */
typedef struct tt_rng { uint64_t s[4]; } tt_rng;
void tt_rng_seed(tt_rng *r, uint64_t seed);
uint64_t tt_rng_next(tt_rng *r);
double tt_rng_uniform(tt_rng *r);  /* [0,1) */
double tt_rng_normal(tt_rng *r);
void tt_init_normal(tt_tensor *t, tt_rng *r, double mean, double std);
void tt_init_uniform(tt_tensor *t, tt_rng *r, double lo, double hi);
void tt_init_kaiming_uniform(tt_tensor *t, tt_rng *r, int64_t fan_in);
void tt_init_xavier_uniform(tt_tensor *t, tt_rng *r, int64_t fan_in, int64_t fan_out);

/* ---- autograd ----------------------------------------------------------- */
/* Backward from a scalar (numel 1) tensor with seed gradient 1. */
tl_status tt_backward(tt_ctx *c, tt_tensor *root);
/* Backward with an explicit seed gradient (same shape as root). */
tl_status tt_backward_with(tt_ctx *c, tt_tensor *root, const tt_tensor *seed);
void tt_zero_grad(tt_tensor *t); /* frees nothing: zeroes .grad if present */

/* ---- views (recorded: their backward maps grads back) ------------------- */
tt_tensor *tt_reshape(tt_ctx *c, tt_tensor *x, int ndim, const int64_t *shape); /* one -1 allowed */
tt_tensor *tt_permute(tt_ctx *c, tt_tensor *x, const int *perm);
tt_tensor *tt_transpose(tt_ctx *c, tt_tensor *x, int d0, int d1);
tt_tensor *tt_narrow(tt_ctx *c, tt_tensor *x, int dim, int64_t start, int64_t len);
tt_tensor *tt_expand(tt_ctx *c, tt_tensor *x, int ndim, const int64_t *shape);
tt_tensor *tt_unsqueeze(tt_ctx *c, tt_tensor *x, int dim);
tt_tensor *tt_contiguous(tt_ctx *c, tt_tensor *x); /* x itself if already contiguous */

/* ---- element-wise (NumPy broadcasting) ---------------------------------- */
tt_tensor *tt_add(tt_ctx *c, tt_tensor *a, tt_tensor *b);
tt_tensor *tt_sub(tt_ctx *c, tt_tensor *a, tt_tensor *b);
tt_tensor *tt_mul(tt_ctx *c, tt_tensor *a, tt_tensor *b);
tt_tensor *tt_div(tt_ctx *c, tt_tensor *a, tt_tensor *b);
tt_tensor *tt_neg(tt_ctx *c, tt_tensor *x);
tt_tensor *tt_scale(tt_ctx *c, tt_tensor *x, double s);
tt_tensor *tt_exp(tt_ctx *c, tt_tensor *x);
tt_tensor *tt_log(tt_ctx *c, tt_tensor *x);
tt_tensor *tt_sqrt(tt_ctx *c, tt_tensor *x);
tt_tensor *tt_pow(tt_ctx *c, tt_tensor *x, double p);
tt_tensor *tt_relu(tt_ctx *c, tt_tensor *x);
tt_tensor *tt_gelu_tanh(tt_ctx *c, tt_tensor *x);
tt_tensor *tt_gelu_erf(tt_ctx *c, tt_tensor *x);
tt_tensor *tt_silu(tt_ctx *c, tt_tensor *x);
tt_tensor *tt_sigmoid(tt_ctx *c, tt_tensor *x);
tt_tensor *tt_tanh(tt_ctx *c, tt_tensor *x);

/* ---- reductions --------------------------------------------------------- */
tt_tensor *tt_sum(tt_ctx *c, tt_tensor *x);  /* all elements -> [1] */
tt_tensor *tt_mean(tt_ctx *c, tt_tensor *x);
tt_tensor *tt_sum_dim(tt_ctx *c, tt_tensor *x, int dim, bool keepdim);
tt_tensor *tt_mean_dim(tt_ctx *c, tt_tensor *x, int dim, bool keepdim);

/* ---- dtypes, more reductions, joins, indexing, masks ----------------------
 * Dims may be negative (counted from the end); a bad dim, shape or index is
 * an error naming the op and the shapes. The framework has no 0-d tensors: a
 * reduction to a single value gives shape [1]. Index outputs are TT_I32;
 * index inputs may be any dtype holding integral values (TT_I32 usually). */
const char *tt_dtype_name(tt_dtype dt); /* "f32", "f64", "bf16", "f16", "i32" */
/* Convert to dt (x itself if already dt). Differentiable between float
 * dtypes: the backward converts the gradient back to x's dtype (a bf16/f16
 * tensor's .grad is stored in its own dtype, rounded once per accumulation).
 * To TT_I32 truncates toward zero and carries no gradient. */
tt_tensor *tt_to(tt_ctx *c, tt_tensor *x, tt_dtype dt);

/* Reductions over a list of n dims (n == 0: all dims). */
tt_tensor *tt_sum_dims(tt_ctx *c, tt_tensor *x, int n, const int *dims, bool keepdim);
tt_tensor *tt_mean_dims(tt_ctx *c, tt_tensor *x, int n, const int *dims, bool keepdim);
/* Variance / standard deviation: sum((x - mean)^2) / (N - (unbiased ? 1 : 0))
 * over the dims (N = number of reduced elements; N - 1 == 0 gives NaN/inf as
 * in PyTorch). Accumulated in double. */
tt_tensor *tt_var_dims(tt_ctx *c, tt_tensor *x, int n, const int *dims, bool unbiased, bool keepdim);
tt_tensor *tt_std_dims(tt_ctx *c, tt_tensor *x, int n, const int *dims, bool unbiased, bool keepdim);
tt_tensor *tt_var(tt_ctx *c, tt_tensor *x, int dim, bool unbiased, bool keepdim);
tt_tensor *tt_std(tt_ctx *c, tt_tensor *x, int dim, bool unbiased, bool keepdim);
/* Max/min over one dim: values, and (if indices != NULL) a TT_I32 temporary
 * of the same shape with the position along dim. Ties: the first position;
 * NaN counts as larger than everything (it propagates, as in PyTorch). The
 * backward routes each output's gradient to that one position. */
tt_tensor *tt_max_dim(tt_ctx *c, tt_tensor *x, int dim, bool keepdim, tt_tensor **indices);
tt_tensor *tt_min_dim(tt_ctx *c, tt_tensor *x, int dim, bool keepdim, tt_tensor **indices);
/* Max/min of all elements -> [1]; the gradient is split evenly among tied
 * elements (torch.amax). */
tt_tensor *tt_amax(tt_ctx *c, tt_tensor *x);
tt_tensor *tt_amin(tt_ctx *c, tt_tensor *x);
/* Position of the max/min along dim (first on ties) as TT_I32; no grad. */
tt_tensor *tt_argmax(tt_ctx *c, tt_tensor *x, int dim, bool keepdim);
tt_tensor *tt_argmin(tt_ctx *c, tt_tensor *x, int dim, bool keepdim);

/* Join n tensors (same dtype; same shape except along dim for cat, the
 * same shape for stack, which adds a new dim). The backward hands each
 * input its slice of the gradient. */
tt_tensor *tt_cat(tt_ctx *c, int n, tt_tensor *const *xs, int dim);
tt_tensor *tt_stack(tt_ctx *c, int n, tt_tensor *const *xs, int dim);
/* Narrow views of size `size` along dim (the last one shorter) into outs;
 * returns how many (at most max_outs, else an error), -1 on error. chunk:
 * pieces of ceil(len / chunks) (so possibly fewer than chunks, as PyTorch). */
int tt_split(tt_ctx *c, tt_tensor *x, int64_t size, int dim, tt_tensor **outs, int max_outs);
int tt_chunk(tt_ctx *c, tt_tensor *x, int chunks, int dim, tt_tensor **outs, int max_outs);
/* Views: drop dim (a no-op view if its size is not 1, as PyTorch), drop
 * every size-1 dim, merge dims start..end into one, and a strided slice
 * [start, end) with step >= 1 (start/end may be negative, clamped like a
 * Python slice). */
tt_tensor *tt_squeeze(tt_ctx *c, tt_tensor *x, int dim);
tt_tensor *tt_squeeze_all(tt_ctx *c, tt_tensor *x);
tt_tensor *tt_flatten(tt_ctx *c, tt_tensor *x, int start, int end);
tt_tensor *tt_slice(tt_ctx *c, tt_tensor *x, int dim, int64_t start, int64_t end, int64_t step);

/* out[..i_dim..] = x[..index[..i_dim..]..]: index has x's ndim, index.shape[d]
 * <= x.shape[d] for d != dim; out has index's shape (torch.gather). */
tt_tensor *tt_gather(tt_ctx *c, tt_tensor *x, int dim, tt_tensor *index);
/* Rows index[k] of x along dim (index 1-d): out.shape[dim] = numel(index).
 * The backward of both scatter-adds into x's gradient (repeats accumulate). */
tt_tensor *tt_index_select(tt_ctx *c, tt_tensor *x, int dim, tt_tensor *index);
tt_tensor *tt_index_select_ids(tt_ctx *c, tt_tensor *x, int dim, const int32_t *ids, int64_t n);

/* Comparisons with broadcasting (a and b of one dtype, any dtype): 1 where
 * true, 0 where false, in that dtype; no grad. NaN compares unequal. */
tt_tensor *tt_eq(tt_ctx *c, tt_tensor *a, tt_tensor *b);
tt_tensor *tt_ne(tt_ctx *c, tt_tensor *a, tt_tensor *b);
tt_tensor *tt_lt(tt_ctx *c, tt_tensor *a, tt_tensor *b);
tt_tensor *tt_le(tt_ctx *c, tt_tensor *a, tt_tensor *b);
tt_tensor *tt_gt(tt_ctx *c, tt_tensor *a, tt_tensor *b);
tt_tensor *tt_ge(tt_ctx *c, tt_tensor *a, tt_tensor *b);
/* Masks: any dtype, nonzero is true; results 0/1 in the input dtype. */
tt_tensor *tt_logical_not(tt_ctx *c, tt_tensor *m);
tt_tensor *tt_logical_and(tt_ctx *c, tt_tensor *a, tt_tensor *b);
tt_tensor *tt_logical_or(tt_ctx *c, tt_tensor *a, tt_tensor *b);
/* cond ? a : b elementwise over the broadcast of all three (cond any dtype,
 * nonzero = true); gradients flow to a where cond, to b elsewhere. */
tt_tensor *tt_where(tt_ctx *c, tt_tensor *cond, tt_tensor *a, tt_tensor *b);
/* x with v where mask (broadcast to x's shape) is nonzero; grad where not. */
tt_tensor *tt_masked_fill(tt_ctx *c, tt_tensor *x, tt_tensor *mask, double v);

/* Named tensors in a safetensors file, each in its own dtype (F32, F64,
 * BF16, F16, I32); load gives a caller-owned contiguous tensor. */
tl_status tt_tensors_save(const char *path, int n, const char *const *names, const tt_tensor *const *ts);
tt_tensor *tt_tensor_load(const char *path, const char *name);

/* ---- linear algebra ----------------------------------------------------- */
/* a [..., M, K] @ b [..., K, N] with broadcast batch dims. */
tt_tensor *tt_matmul(tt_ctx *c, tt_tensor *a, tt_tensor *b);
/* x [..., in] @ w[out, in]^T + bias[out] (bias may be NULL). */
tt_tensor *tt_linear(tt_ctx *c, tt_tensor *x, tt_tensor *w, tt_tensor *bias);

/* A frozen weight W [out, in] held in a GGUF storage type (type: the
 * GGUF/ggml type id: f32, f16, bf16 or a quantized block type; rows of `in`
 * values, contiguous), e.g. a loaded model's weight that an adapter is
 * trained on. TT_CPU borrows w (it must outlive f); TT_CUDA uploads it once
 * (the types the engine's CUDA backend runs: F32, F16, BF16, Q4_0, Q4_1,
 * Q8_0, Q4_K, Q6_K) and w may go. An unreadable type or an absent device is
 * an error naming it. */
typedef struct tt_frozen tt_frozen;
tl_status tt_frozen_init(tt_frozen **out, tt_device dev, const void *w, uint32_t type, int64_t in, int64_t out_rows);
void tt_frozen_free(tt_frozen *f);
/* x [..., in] @ W^T, x on W's device: dequantized tile by tile (CPU) or
 * whole into scratch (CUDA) in forward and backward, never kept; W gets no
 * gradient and must outlive the backward. */
tt_tensor *tt_linear_frozen(tt_ctx *c, tt_tensor *x, const tt_frozen *w);

/* ---- nn ops --------------------------------------------------------------- */
tt_tensor *tt_softmax(tt_ctx *c, tt_tensor *x);     /* last dim */
tt_tensor *tt_log_softmax(tt_ctx *c, tt_tensor *x); /* last dim */
/* w [V, C]; ids (n = product of shape) -> [shape..., C]. ids are copied. */
tt_tensor *tt_embedding(tt_ctx *c, tt_tensor *w, const int32_t *ids, int ndim, const int64_t *shape);
tt_tensor *tt_layernorm(tt_ctx *c, tt_tensor *x, tt_tensor *w, tt_tensor *b, double eps);
tt_tensor *tt_rmsnorm(tt_ctx *c, tt_tensor *x, tt_tensor *w, double eps);
/* x [B, T, H, D]: interleaved (GPT-J) rotation of pairs (2i, 2i+1) by angle
 * (pos0 + t) * theta^(-2i/D): the convention llama GGUF files run with. */
tt_tensor *tt_rope(tt_ctx *c, tt_tensor *x, int64_t pos0, double theta);
/* q [B, H, T, D], k/v [B, Hkv, S, D] (H % Hkv == 0: GQA); causal mask aligns
 * the last query with the last key. scale <= 0: 1/sqrt(D). -> [B, H, T, D]. */
tt_tensor *tt_attention(tt_ctx *c, tt_tensor *q, tt_tensor *k, tt_tensor *v, bool causal, double scale);
/* Attention over a fused projection qkv [B, T, (H + 2 Hkv) D] (q, then k,
 * then v, each head-major): the same as narrowing, viewing as heads and
 * calling tt_attention, with the output's heads merged -> [B, T, H D].
 * Backends read it in place and write its gradient in place. */
tt_tensor *tt_attention_qkv(tt_ctx *c, tt_tensor *qkv, int64_t heads, int64_t kv_heads, bool causal, double scale);
/* logits [N, V], targets [N]; mean over targets != ignore_index -> [1]. */
tt_tensor *tt_cross_entropy(tt_ctx *c, tt_tensor *logits, const int32_t *targets, int32_t ignore_index);
tt_tensor *tt_mse(tt_ctx *c, tt_tensor *a, tt_tensor *b); /* mean of squares -> [1] */
/* Inverted dropout: keep with prob 1-p, scale 1/(1-p); mask from seed. */
tt_tensor *tt_dropout(tt_ctx *c, tt_tensor *x, double p, uint64_t seed, bool training);

/* ---- matmul kernel (exposed for tests/bench) -----------------------------
 * C[m*ldc + n] (+)= sum_k A[m*rsa + k*csa] * B[k*rsb + n*csb].
 * f32 summation order, the same for every thread count: k runs in slices
 * of TT_GEMM_KC; within a slice one chain from zero (a fused multiply-add
 * per k where the CPU has AVX2/FMA or AVX-512, a multiply and an add on the
 * scalar path), and each slice's sum is added to C in turn. */
#define TT_GEMM_KC 256
void tt_gemm_f32(tl_threadpool *tp, int64_t M, int64_t N, int64_t K,
                 const float *A, int64_t rsa, int64_t csa,
                 const float *B, int64_t rsb, int64_t csb,
                 float *C, int64_t ldc, bool accumulate);
void tt_gemm_f64(int64_t M, int64_t N, int64_t K,
                 const double *A, int64_t rsa, int64_t csa,
                 const double *B, int64_t rsb, int64_t csb,
                 double *C, int64_t ldc, bool accumulate);

/* ---- initialisation schemes (torch.nn.init semantics) ---------------------
 * Fans as torch computes them: a weight [out, in, k...] has fan_in = in * k..,
 * fan_out = out * k.. (2+ dims only). Gains: linear/sigmoid 1, tanh 5/3, relu
 * sqrt(2), leaky_relu sqrt(2 / (1 + a^2)). Kaiming: std = gain / sqrt(fan),
 * uniform bound sqrt(3) * std. Xavier: std = gain * sqrt(2 / (fan_in +
 * fan_out)), uniform bound sqrt(3) * std. */
typedef enum tt_nonlin {
    TT_NL_LINEAR = 0, TT_NL_RELU = 1, TT_NL_LEAKY_RELU = 2, TT_NL_TANH = 3, TT_NL_SIGMOID = 4
} tt_nonlin;
double tt_init_gain(tt_nonlin nl, double a); /* a: leaky_relu negative slope */
/* torch's _calculate_fan_in_and_fan_out; error for fewer than 2 dims. */
tl_status tt_init_fans(const tt_tensor *t, int64_t *fan_in, int64_t *fan_out);
tl_status tt_init_kaiming(tt_tensor *t, tt_rng *r, bool uniform, bool fan_out_mode, tt_nonlin nl, double a);
tl_status tt_init_xavier(tt_tensor *t, tt_rng *r, bool uniform, double gain);
/* nn.Linear / nn.Conv2d default: weight kaiming_uniform(a = sqrt(5)), i.e.
 * U(+-1/sqrt(fan_in)); bias (may be NULL) U(+-1/sqrt(fan_in)) too. */
tl_status tt_init_torch_default(tt_tensor *w, tt_tensor *bias, tt_rng *r);

/* Which scheme a model applies to its 2+-d weights (norms stay 1, biases 0
 * unless the scheme is TORCH_DEFAULT). DEFAULT is each model's own: normal
 * 0.02 (residual projections 0.02/sqrt(2*layers)) for the language models,
 * TORCH_DEFAULT for the vision models. */
typedef enum tt_init_kind {
    TT_INIT_DEFAULT = 0, TT_INIT_NORMAL = 1, TT_INIT_KAIMING_UNIFORM = 2, TT_INIT_KAIMING_NORMAL = 3,
    TT_INIT_XAVIER_UNIFORM = 4, TT_INIT_XAVIER_NORMAL = 5, TT_INIT_TORCH_DEFAULT = 6
} tt_init_kind;
typedef struct tt_init_scheme {
    tt_init_kind kind;
    double std;       /* NORMAL */
    bool fan_out;     /* KAIMING: mode fan_out instead of fan_in */
    tt_nonlin nonlin; /* KAIMING gain (XAVIER: gain = tt_init_gain(nonlin, a)) */
    double a;         /* leaky_relu slope */
} tt_init_scheme;
/* Apply a scheme (not DEFAULT) to one weight (and its bias, may be NULL). */
tl_status tt_init_apply(const tt_init_scheme *s, tt_tensor *w, tt_tensor *bias, tt_rng *r);

/* ---- vision ops (NCHW, with backward) --------------------------------------
 * conv2d: x [N, Cin, H, W], w [Cout, Cin/groups, kH, kW], bias [Cout] or NULL
 * -> [N, Cout, OH, OW], OH = (H + 2*pad - dil*(kH-1) - 1) / stride + 1 (as
 * torch.nn.functional.conv2d). im2col per sample and group + the gemm. */
typedef struct tt_conv2d_opt {
    int64_t stride[2], padding[2], dilation[2], groups; /* [h, w] */
} tt_conv2d_opt;
tt_conv2d_opt tt_conv2d_opt_make(int64_t stride, int64_t padding, int64_t dilation, int64_t groups);
tt_tensor *tt_conv2d(tt_ctx *c, tt_tensor *x, tt_tensor *w, tt_tensor *bias, const tt_conv2d_opt *o);
/* Pools over [N, C, H, W] (floor mode; padding <= kernel/2 as torch asks).
 * max: padding never wins, the gradient goes to the (first) argmax. avg:
 * count_include_pad true divides by the window clipped to the padded input
 * (torch's default), false by the in-image elements only. adaptive avg:
 * window [floor(i*H/OH), ceil((i+1)*H/OH)) as torch; OH = OW = 1 is global
 * average pooling. */
typedef struct tt_pool_opt { int64_t kernel[2], stride[2], padding[2]; } tt_pool_opt;
tt_pool_opt tt_pool_opt_make(int64_t kernel, int64_t stride, int64_t padding); /* stride 0: = kernel */
tt_tensor *tt_max_pool2d(tt_ctx *c, tt_tensor *x, const tt_pool_opt *o);
tt_tensor *tt_avg_pool2d(tt_ctx *c, tt_tensor *x, const tt_pool_opt *o, bool count_include_pad);
tt_tensor *tt_adaptive_avg_pool2d(tt_ctx *c, tt_tensor *x, int64_t oh, int64_t ow);
/* batch_norm over x [N, C, ...] per channel C. training: normalise with the
 * batch mean and biased variance over N and the spatial dims; if running
 * stats are given, update them in place: r = (1 - momentum) * r + momentum
 * * stat with the UNBIASED variance (as torch). eval: use the running stats
 * (required). w/b (affine, may be NULL) and running_* are [C], x's dtype. */
tt_tensor *tt_batch_norm(tt_ctx *c, tt_tensor *x, tt_tensor *w, tt_tensor *b, tt_tensor *running_mean,
                         tt_tensor *running_var, bool training, double momentum, double eps);

/* ---- parameters, models ----------------------------------------------------
 * A model owns its parameters; the registry lists them with dotted names
 * (HF-like: "h.0.attn.c_attn.weight", "layers.0.self_attn.q_proj.weight") and
 * whether weight decay applies (2-d weights yes; norms and biases no). */
typedef struct tt_param {
    char name[96];
    tt_tensor *t;
    bool decay;
} tt_param;

typedef struct tt_params {
    tt_param *p;
    int n, cap;
} tt_params;

tt_tensor *tt_params_find(const tt_params *ps, const char *name);
int64_t tt_params_count(const tt_params *ps); /* total elements */
void tt_params_zero_grad(tt_params *ps);

typedef enum tt_arch { TT_ARCH_GPT2 = 0, TT_ARCH_LLAMA = 1 } tt_arch;

typedef struct tt_model_config {
    tt_arch arch;
    int64_t vocab, ctx, dim, layers, heads, kv_heads, ffn; /* ffn: hidden width of the MLP */
    double norm_eps;   /* 1e-5 (gpt2 layernorm) / 1e-5 (llama rmsnorm) */
    double rope_theta; /* llama */
    double dropout;    /* gpt2 residual/attention-output dropout (0: off) */
    tt_init_scheme init; /* 2-d weights; zeroed (TT_INIT_DEFAULT): the model's own normal init */
} tt_model_config;

/* Defaults for the arch and sizes (kv_heads = heads, ffn = 4*dim for gpt2 and
 * a multiple of 32 near 8/3*dim for llama). */
tt_model_config tt_model_config_default(tt_arch arch, int64_t vocab, int64_t ctx, int64_t dim, int64_t layers,
                                        int64_t heads);

typedef struct tt_block {
    /* gpt2: layernorms with bias, fused QKV, GELU(tanh) MLP; llama: rmsnorm
     * (ln1_w = attention norm, ln2_w = ffn norm), separate q/k/v, SwiGLU. */
    tt_tensor *ln1_w, *ln1_b, *ln2_w, *ln2_b;  /* [dim] */
    tt_tensor *qkv_w, *qkv_b;                  /* gpt2 [3*dim, dim], [3*dim] */
    tt_tensor *wq, *wk, *wv;                   /* llama [heads*hd, dim], [kv_heads*hd, dim] x2 */
    tt_tensor *wo, *wo_b;                      /* [dim, heads*hd], gpt2 bias [dim] */
    tt_tensor *fc_w, *fc_b;                    /* gpt2 [ffn, dim], [ffn]; llama gate [ffn, dim] */
    tt_tensor *up_w;                           /* llama [ffn, dim] */
    tt_tensor *proj_w, *proj_b;                /* [dim, ffn], gpt2 bias [dim] */
} tt_block;

typedef struct tt_model {
    tt_model_config cfg;
    tt_params params;
    tt_tensor *tok_emb;        /* [vocab, dim] (gpt2: also the tied lm head) */
    tt_tensor *pos_emb;        /* gpt2 [ctx, dim] */
    tt_block *blocks;          /* [layers] */
    tt_tensor *lnf_w, *lnf_b;  /* [dim] */
    tt_tensor *lm_head;        /* llama [vocab, dim] */
    bool training;             /* dropout on */
    uint64_t dropout_seed;     /* advanced per forward in training mode */
} tt_model;

/* Allocate parameters and initialise them (normal std 0.02, residual
 * projections 0.02/sqrt(2*layers), norms 1, biases 0) from seed; with
 * cfg->init set, every 2-d weight (embeddings too) gets that scheme. */
tl_status tt_model_init(tt_model *m, const tt_model_config *cfg, uint64_t seed);
void tt_model_free(tt_model *m);
/* Move every parameter to dev (before tt_optim_init; grads are dropped). */
tl_status tt_model_to(tt_model *m, tt_device dev);
/* ids [B*T] -> logits [B, T, vocab] (T <= ctx). */
tt_tensor *tt_model_forward(tt_ctx *c, tt_model *m, const int32_t *ids, int64_t B, int64_t T);
/* Mean cross-entropy of next-token targets [B*T] (ignore -100); logits out optional. */
tt_tensor *tt_model_loss(tt_ctx *c, tt_model *m, const int32_t *ids, const int32_t *targets, int64_t B, int64_t T,
                         tt_tensor **logits);

/* ---- optimizers -------------------------------------------------------------
 * Semantics follow torch.optim (AdamW: decoupled decay p -= lr*wd*p before
 * the Adam update; Adam: wd added to the gradient; SGD: momentum buffer
 * initialised to the first gradient, dampening, Nesterov). Parameters with
 * decay == false get no weight decay (the no-decay group). */
typedef enum tt_optim_kind { TT_OPT_ADAMW = 0, TT_OPT_ADAM = 1, TT_OPT_SGD = 2 } tt_optim_kind;

typedef struct tt_optim_config {
    tt_optim_kind kind;
    double lr, beta1, beta2, eps, weight_decay;
    double momentum, dampening;
    bool nesterov;
} tt_optim_config;

typedef struct tt_optim {
    tt_optim_config cfg;
    tt_params *params;  /* not owned */
    tt_tensor **m, **v; /* [n params]: exp_avg / exp_avg_sq (Adam*), momentum buffer in m (SGD) */
    int64_t step;       /* completed steps */
    double last_norm;   /* tt_optim_step_clipped's norm (CPU) */
    void *dev;          /* private: the device-side parameter table (CUDA) */
} tt_optim;

tt_optim_config tt_optim_default(tt_optim_kind kind, double lr);
tl_status tt_optim_init(tt_optim *o, const tt_optim_config *cfg, tt_params *params);
void tt_optim_free(tt_optim *o);
/* One update with learning rate lr (the schedule's value for this step). */
tl_status tt_optim_step(tt_optim *o, double lr);
/* torch.nn.utils.clip_grad_norm_: returns the total L2 norm before clipping
 * (CPU parameters; on CUDA use tt_optim_step_clipped). */
double tt_clip_grad_norm(tt_params *ps, double max_norm);
/* Clip the gradients to global norm max_norm (<= 0: no clipping) and take
 * one step. The optimizer state lives on the parameters' device (m/v made
 * there by tt_optim_init); on CUDA (AdamW only) norm, clip and update are
 * three launches that never wait for the host. tt_optim_last_norm gives the
 * norm before clipping (on CUDA it waits for the step to finish). */
tl_status tt_optim_step_clipped(tt_optim *o, double lr, double max_norm);
double tt_optim_last_norm(tt_optim *o);

typedef enum tt_sched_kind { TT_SCHED_CONSTANT = 0, TT_SCHED_COSINE = 1, TT_SCHED_STEP = 2 } tt_sched_kind;
typedef struct tt_schedule {
    tt_sched_kind kind;
    double lr_max, lr_min;
    int64_t warmup, total; /* cosine: linear warmup then cosine to lr_min at total */
    int64_t step_size;     /* step: lr_max * gamma^(step / step_size) */
    double gamma;
} tt_schedule;
/* Learning rate for 0-based step. */
double tt_schedule_lr(const tt_schedule *s, int64_t step);

/* ---- data ------------------------------------------------------------------ */
typedef struct tt_dataset {
    int32_t *tokens;       /* token ids: bytes (vocab 256) or a tokenizer's ids */
    int64_t n, n_train;    /* [0, n_train) train, [n_train, n) validation */
    int64_t vocab;         /* 256 (bytes) or the tokenizer's size */
    struct tok_vocab *tok; /* the tokenizer (owned; text/tokenizer.h), NULL for bytes */
    char *tok_path;        /* its file (owned), NULL for bytes */
} tt_dataset;
/* Read a text file; val_frac of the end is the validation split. */
tl_status tt_dataset_load_bytes(tt_dataset *d, const char *path, double val_frac);
/* The same, tokenized with tallow's tokenizer from `tokenizer`: a GGUF
 * model's vocabulary (tokenizer.ggml.*) or an HF tokenizer.json (or a
 * directory holding one); no BOS/EOS added, special-token text not parsed. */
tl_status tt_dataset_load_tokenized(tt_dataset *d, const char *path, const char *tokenizer, double val_frac);
void tt_dataset_free(tt_dataset *d);
/* The tokenizer record of a checkpoint (metadata "tokenizer" = path,
 * "tokenizer_vocab" = size), written after tt_checkpoint_save by
 * tt_checkpoint_save_tokenizer; byte-level checkpoints have none: read
 * gives path[0] = 0 and vocab 256. */
tl_status tt_checkpoint_save_tokenizer(const char *path, const tt_model *m, const tt_optim *o, int64_t step,
                                       const tt_rng *rng, const char *tokenizer, int64_t tok_vocab);
tl_status tt_checkpoint_read_tokenizer(const char *path, char *tokenizer, size_t cap, int64_t *tok_vocab);
/* Random batch of B windows of T+1 tokens: ids/targets [B*T]. */
tl_status tt_dataset_batch(const tt_dataset *d, bool val, tt_rng *r, int64_t B, int64_t T, int32_t *ids,
                           int32_t *targets);
/* Deterministic batch k (validation sweeps): windows at fixed strides. */
tl_status tt_dataset_batch_at(const tt_dataset *d, bool val, int64_t k, int64_t B, int64_t T, int32_t *ids,
                              int32_t *targets);

/* ---- checkpoints (safetensors) -----------------------------------------------
 * model params as "model.<name>", optimizer state as "optim.m.<name>" /
 * "optim.v.<name>", and metadata: step, optimizer step, RNG state, dropout
 * seed and the model config, so a resume continues bit-identically. */
tl_status tt_checkpoint_save(const char *path, const tt_model *m, const tt_optim *o, int64_t step,
                             const tt_rng *rng);
/* Read the config stored in a checkpoint (to build the model before loading). */
tl_status tt_checkpoint_read_config(const char *path, tt_model_config *cfg);
/* Load into an initialised model (and optimizer, may be NULL); step/rng optional. */
tl_status tt_checkpoint_load(const char *path, tt_model *m, tt_optim *o, int64_t *step, tt_rng *rng);

/* ---- trainer: one place for the step every caller runs ---------------------
 * step: zero grads; accum times: random train batch from rng, forward,
 * backward of loss / accum (gradients add up); clip, optimizer step at the
 * schedule's lr, reset the ctx. The reported loss is the micro-batches' mean. */
typedef struct tt_trainer {
    tt_ctx *ctx;        /* not owned */
    tt_model *model;    /* not owned */
    tt_optim *optim;    /* not owned */
    const tt_dataset *data;
    tt_schedule sched;
    tt_rng rng;         /* batch sampling; checkpointed */
    int64_t batch, seq, step;
    double clip;        /* <= 0: off */
    int64_t accum;      /* micro-batches per step (gradient accumulation; default 1) */
    int32_t *ids, *targets; /* [batch*seq] */
} tt_trainer;

tl_status tt_trainer_init(tt_trainer *t, tt_ctx *c, tt_model *m, tt_optim *o, const tt_dataset *d, int64_t batch,
                          int64_t seq, uint64_t seed);
void tt_trainer_free(tt_trainer *t);
tl_status tt_trainer_step(tt_trainer *t, double *loss, double *grad_norm);
/* Mean validation loss over n fixed batches (no grad, eval mode). */
tl_status tt_trainer_eval(tt_trainer *t, int64_t n_batches, double *loss);

/* ---- export -------------------------------------------------------------------
 * Write a model as a GGUF the engine runs: Llama-style -> "llama" (no Q/K
 * permutation: the model already uses interleaved RoPE; RMSNorm eps and rope
 * base in metadata), GPT-2-style -> "gpt2" in llama.cpp's layout (fused
 * attn_qkv, LayerNorm biases, position_embd, output tied to token_embd).
 * Dims in GGUF order (ne[0] = input features). 2-d weights in opts->type
 * ("f32" default, "f16", "bf16"); norms and biases stay f32. Tokenizer:
 * opts->tokenizer NULL -> byte-level "gpt2" vocabulary of 256 tokens
 * (GPT-2's byte-to-unicode text of each byte, no merges); else a GGUF whose
 * tokenizer.ggml.* keys are copied (its size must equal the model's vocab). */
typedef struct tt_export_opts {
    const char *type;      /* NULL or "f32", "f16", "bf16" */
    const char *tokenizer; /* NULL (bytes) or a .gguf path */
} tt_export_opts;
tl_status tt_export_gguf(const tt_model *m, const char *path, const tt_export_opts *opts);

/* ---- vision modules (src/train/nn_vision.c) over the vision ops of train.h: Conv2d,
 * BatchNorm2d (weight, bias and the running_mean / running_var /
 * num_batches_tracked buffers, train/eval mode), Linear, and a small CNN
 * (conv-bn-relu-maxpool, conv-bn-relu-avgpool, linear) to train end to end.
 * Parameters live in a tt_params registry with torch's dotted names
 * ("conv1.weight", "bn1.bias", "fc.weight"); decay is true only for conv and
 * linear weights. Buffers live in a second registry (not optimized: no
 * requires_grad) and are saved in checkpoints with the parameters.
 * Defaults follow torch: Conv2d/Linear kaiming_uniform(a = sqrt(5)) weights
 * and U(+-1/sqrt(fan_in)) biases, BatchNorm weight 1, bias 0, running mean
 * 0, var 1, eps 1e-5, momentum 0.1.
 * The modules own their tensors through the registries. */
/* Add a caller-owned f32 tensor of the given shape to a registry (the
 * registry owns it; tt_registry_free frees all). requires_grad as given. */
tt_tensor *tt_registry_add(tt_params *ps, const char *name, int ndim, const int64_t *shape, bool requires_grad,
                         bool decay);
void tt_registry_free(tt_params *ps);

typedef struct tt_conv2d_layer {
    tt_tensor *weight, *bias; /* [Cout, Cin/groups, k, k], [Cout] or NULL */
    tt_conv2d_opt opt;
} tt_conv2d_layer;
/* Registers "<prefix>.weight" (and "<prefix>.bias"), initialised with init
 * (TT_INIT_DEFAULT: torch's default). */
tl_status tt_conv2d_layer_init(tt_conv2d_layer *l, tt_params *ps, const char *prefix, int64_t cin, int64_t cout,
                               int64_t k, const tt_conv2d_opt *opt, bool bias, const tt_init_scheme *init,
                               tt_rng *r);
tt_tensor *tt_conv2d_layer_forward(tt_ctx *c, const tt_conv2d_layer *l, tt_tensor *x);

typedef struct tt_linear_layer {
    tt_tensor *weight, *bias; /* [out, in], [out] or NULL */
} tt_linear_layer;
tl_status tt_linear_layer_init(tt_linear_layer *l, tt_params *ps, const char *prefix, int64_t in, int64_t out,
                               bool bias, const tt_init_scheme *init, tt_rng *r);
tt_tensor *tt_linear_layer_forward(tt_ctx *c, const tt_linear_layer *l, tt_tensor *x);

typedef struct tt_batchnorm2d {
    tt_tensor *weight, *bias;             /* [C] parameters */
    tt_tensor *running_mean, *running_var; /* [C] buffers */
    tt_tensor *num_batches_tracked;       /* [1] buffer, an integer count held in f64 */
    double eps, momentum;
} tt_batchnorm2d;
/* Parameters "<prefix>.weight/.bias" into ps, buffers "<prefix>.running_mean",
 * ".running_var", ".num_batches_tracked" into bufs. */
tl_status tt_batchnorm2d_init(tt_batchnorm2d *l, tt_params *ps, tt_params *bufs, const char *prefix, int64_t C);
/* training: batch statistics, running stats and num_batches_tracked updated. */
tt_tensor *tt_batchnorm2d_forward(tt_ctx *c, tt_batchnorm2d *l, tt_tensor *x, bool training);

/* ---- a small CNN classifier ------------------------------------------------
 * x [N, in_ch, H, W] -> conv1 (3x3, pad 1) -> bn1 -> relu -> max_pool 2
 * -> conv2 (3x3, pad 1) -> bn2 -> relu -> avg_pool 2 -> flatten -> fc. */
typedef struct tt_cnn_config {
    int64_t in_ch, height, width, c1, c2, classes;
    bool conv_bias;      /* false by default: BatchNorm cancels a conv bias */
    double bn_eps, bn_momentum;
    tt_init_scheme init; /* conv and fc weights; DEFAULT: torch's default */
} tt_cnn_config;
tt_cnn_config tt_cnn_config_default(int64_t in_ch, int64_t height, int64_t width, int64_t classes);

typedef struct tt_cnn {
    tt_cnn_config cfg;
    tt_params params;  /* conv1.weight, bn1.weight, bn1.bias, conv2..., bn2..., fc.weight, fc.bias */
    tt_params buffers; /* bn*.running_mean, bn*.running_var, bn*.num_batches_tracked */
    tt_conv2d_layer conv1, conv2;
    tt_batchnorm2d bn1, bn2;
    tt_linear_layer fc;
    bool training;     /* batch statistics (true after init) or running stats */
} tt_cnn;

tl_status tt_cnn_init(tt_cnn *m, const tt_cnn_config *cfg, uint64_t seed);
void tt_cnn_free(tt_cnn *m);
/* x [N, in_ch, height, width] f32 -> logits [N, classes]. */
tt_tensor *tt_cnn_forward(tt_ctx *c, tt_cnn *m, tt_tensor *x);
/* Mean cross-entropy of labels [N] (ignore -100); logits out optional. */
tt_tensor *tt_cnn_loss(tt_ctx *c, tt_cnn *m, tt_tensor *x, const int32_t *labels, tt_tensor **logits);
/* Parameters as "model.<name>", buffers as "buffer.<name>" (safetensors);
 * load needs a model of the same config and checks every name and shape. */
tl_status tt_cnn_save(const tt_cnn *m, const char *path);
tl_status tt_cnn_load(tt_cnn *m, const char *path);

#endif
