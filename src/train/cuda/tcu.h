/* train/cuda/tcu: the framework's CUDA kernels behind a C interface of raw
 * device pointers and sizes (the tensor-level glue is train/cuda/ops_cuda.c).
 * Everything is queued on one stream, in order; no call waits for the device
 * unless it says so. Row-major throughout; shapes in the comments.
 * Owns: the stream, the cuBLASLt handle and workspace, pinned upload
 * buffers. Calls: CUDA runtime, cuBLASLt. */
#ifndef TL_TRAIN_CUDA_TCU_H
#define TL_TRAIN_CUDA_TCU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tallow.h"

#ifdef __cplusplus
extern "C" {
#endif

/* element types the kernels take (tt_dtype values) */
enum { TCU_F32 = 0, TCU_F64 = 1, TCU_BF16 = 2, TCU_F16 = 3, TCU_I32 = 4 };
/* matmul modes (tt_matmul_prec values) */
enum { TCU_MM_F32 = 0, TCU_MM_TF32 = 1, TCU_MM_BF16 = 2 };

bool tcu_available(void);
void *tcu_alloc(size_t nbytes);
void tcu_free(void *p);
tl_status tcu_zero(void *p, size_t nbytes);
/* host -> device through a pinned staging ring: returns once src may be reused */
tl_status tcu_h2d(void *dst, const void *src, size_t nbytes);
tl_status tcu_d2h(void *dst, const void *src, size_t nbytes); /* waits */
tl_status tcu_sync(void);
tl_status tcu_memory(size_t *free_bytes, size_t *total_bytes);
tl_status tcu_check(const char *what); /* a launch error, as a tl_status */
/* kernel-call timing (tt_device_profile): on, every tcu_* call marks its end */
tl_status tcu_profile(bool on);
tl_status tcu_profile_report(char *buf, size_t n);

/* dst[i] (=|+=) src[i] over a 4-d index space sh (strides in elements);
 * dtypes: equal, or f32 <-> bf16 (add: f32 only). */
tl_status tcu_copy4(void *dst, int dst_dt, const int64_t dst_st[4], const void *src, int src_dt,
                    const int64_t src_st[4], const int64_t sh[4], bool add);
tl_status tcu_fill(void *p, int dt, int64_t n, double v);

/* ---- GPT-2 ops (f32 tensors) ---- */
/* out[i, :] = w[ids[i], :]; ids on the device: n rows of C. */
tl_status tcu_embedding_fwd(float *out, const float *w, const int32_t *ids, int64_t n, int64_t C);
/* gw[v, :] += sum of g rows i with ids[i] == v, in increasing i: rows of
 * each id listed in order[start[u]..start[u+1]) for the u-th distinct id
 * uid[u] (built on the host), so no atomics and a fixed summation order. */
tl_status tcu_embedding_bwd(float *gw, const float *g, const int32_t *uid, const int32_t *start,
                            const int32_t *order, int64_t n_unique, int64_t C);
/* out = a + b, b broadcast over the rows: a [R, N], b [Rb, N] with R % Rb == 0
 * (row r uses b row r % Rb). */
tl_status tcu_add_rows(float *out, const float *a, const float *b, int64_t R, int64_t Rb, int64_t N);
/* gb[r % Rb, :] += sum over r of g[r, :] (deterministic order); scratch
 * (>= 64 * N floats) makes the Rb == 1 case two-pass and parallel. */
tl_status tcu_sum_rows_into(float *gb, const float *g, int64_t R, int64_t Rb, int64_t N, float *scratch);
/* LayerNorm over rows of C: y = (x - mean) * rstd * w + b; mean/rstd [R].
 * mean NULL: RMSNorm (no centering; b NULL), in both passes. */
tl_status tcu_layernorm_fwd(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                            int64_t R, int64_t C, float eps);
/* gx (=|+=) dx; gw/gb += (deterministic two-pass column sums; scratch
 * [>= 2 * TCU_LN_BLOCKS * C] floats). */
#define TCU_LN_BLOCKS 512
tl_status tcu_layernorm_bwd(float *gx, bool gx_add, float *gw, float *gb, const float *g, const float *x,
                            const float *w, const float *mean, const float *rstd, int64_t R, int64_t C,
                            float *scratch);
tl_status tcu_gelu_tanh_fwd(float *y, const float *x, int64_t n);
tl_status tcu_gelu_tanh_bwd(float *gx, bool gx_add, const float *g, const float *x, int64_t n);
/* SiLU x * sigmoid(x); y (=|+=) a * b; interleaved RoPE of rows of D
 * (row r at position (r / H) % T; cs [T, D] = (cos, sin) pairs; dir -1: the
 * inverse rotation, the backward). */
tl_status tcu_silu_fwd(float *y, const float *x, int64_t n);
tl_status tcu_silu_bwd(float *gx, bool gx_add, const float *g, const float *x, int64_t n);
tl_status tcu_mul(float *y, bool add, const float *a, const float *b, int64_t n);
/* y (=|+=) a * x */
tl_status tcu_scale(float *y, bool add, const float *x, float a, int64_t n);
tl_status tcu_rope(float *y, bool add, const float *x, const float *cs, int64_t rows, int64_t T, int64_t H, int64_t D,
                   int dir);
/* y [M, N] = x [M, K] @ w[N, K]^T (+ bias[N]); mode: TCU_MM_*; scratch for
 * the padded product (tcu_linear_pad_bytes) then the bf16 copies of x and w
 * (BF16: (M*K + N*K) bf16); NULL when both are 0. */
tl_status tcu_linear_fwd(float *y, const float *x, const float *w, const float *bias, int64_t M, int64_t N,
                         int64_t K, int mode, void *scratch);
/* Extra scratch the linear ops need (0 unless N is not a multiple of 8). */
size_t tcu_linear_pad_bytes(int64_t M, int64_t N, int64_t K);
/* gx (=|+=) g @ w; gw (=|+=) g^T @ x; gb += colsum(g) (each may be NULL). */
tl_status tcu_linear_bwd(float *gx, bool gx_add, float *gw, bool gw_add, float *gb, const float *g, const float *x,
                         const float *w, int64_t M, int64_t N, int64_t K, int mode, void *scratch);
/* Softmax of each row of p [rows, T] in place, row r being query r % T
 * (causal: keys after it get 0); and its backward, in place over dp:
 * dS = P * (dP - rowsum(P * dP)) * scale. */
tl_status tcu_softmax_rows(float *p, int64_t rows, int64_t T, bool causal);
tl_status tcu_softmax_rows_bwd(float *dp, const float *p, int64_t rows, int64_t T, float scale);
/* Causal (or full) softmax attention of contiguous q [BH, T, D] and k/v
 * [BH / rep, T, D] (grouped-query: query head h reads kv head h / rep):
 * p [BH, T, T] (kept for the backward), o [BH, T, D]. BF16 mode: scratch
 * for bf16 operand copies, TCU_ATTN_SCRATCH bytes (NULL otherwise). */
#define TCU_ATTN_SCRATCH(BH, T, D) ((size_t)((4 * (BH) * (T) * (D) + (BH) * (T) * (T)) + 320) * 2)
tl_status tcu_attn_fwd(float *o, float *p, const float *q, const float *k, const float *v, int64_t BH, int64_t rep,
                       int64_t T, int64_t D, float scale, bool causal, int mode, void *scratch);
/* dq [BH, T, D], dk/dv [BH / rep, T, D] (written) from go, p, q, k, v; dp
 * scratch [BH, T, T]. */
tl_status tcu_attn_bwd(float *dq, float *dk, float *dv, float *dp, const float *go, const float *p,
                       const float *q, const float *k, const float *v, int64_t BH, int64_t rep, int64_t T, int64_t D,
                       float scale, int mode, void *scratch);
/* Mean cross-entropy of logits [N, V] against targets [N] (ignore: skipped):
 * loss[0] = sum / n_valid; lse [N] kept; rowloss scratch [N]. */
tl_status tcu_xent_fwd(float *loss, float *lse, float *rowloss, const float *logits, const int32_t *tgt,
                       int64_t N, int64_t V, int32_t ignore, int64_t n_valid);
/* glogits (=|+=) (softmax - onehot) * gloss[0] / n_valid (0 on ignored rows). */
tl_status tcu_xent_bwd(float *glogits, bool add, const float *gloss, const float *logits, const float *lse,
                       const int32_t *tgt, int64_t N, int64_t V, int32_t ignore, int64_t n_valid);

/* Flash attention (BF16 mode, tcu_flash.cu) over strided f32 tensors: the
 * element (b, h, t, d) of a tensor with strides st is at
 * b * st.b + h * st.h + t * st.t + d (d unit-stride). q/dq/o/go have H
 * heads; k/v/dk/dv have Hkv, query head h reading kv head h / (H / Hkv)
 * (grouped-query attention). D is 32, 64 or 128 (tcu_flash_ok); every
 * stride is a multiple of 4 and every pointer 16-byte aligned
 * (tcu_flash_aligned). lse2 [B * H, T] is kept for the backward (each
 * row's log2 of the sum of exp2 of its log2-domain scores); the backward
 * writes dq/dk/dv (every element) and uses delta [B * H, T] as scratch. */
typedef struct tcu_fl_stride {
    int64_t b, h, t;
} tcu_fl_stride;
typedef struct tcu_flash_dims {
    int64_t B, H, Hkv, T, D;
    tcu_fl_stride q, kv, o, go, dq, dkv;
} tcu_flash_dims;
bool tcu_flash_ok(int64_t D);
bool tcu_flash_aligned(const void *p, tcu_fl_stride st);
tl_status tcu_flash_fwd(float *o, float *lse2, const float *q, const float *k, const float *v,
                        const tcu_flash_dims *d, float scale, bool causal);
tl_status tcu_flash_bwd(float *dq, float *dk, float *dv, float *delta, const float *go, const float *o,
                        const float *lse2, const float *q, const float *k, const float *v, const tcu_flash_dims *d,
                        float scale, bool causal);

/* ---- frozen GGUF weights (adapter fine-tuning) ---- */
/* W [n_out, n_in] of GGUF type `type`, uploaded once (waits) in the
 * engine's repacked layout; the types the engine's CUDA kernels take
 * (TL_ERR_UNSUPPORTED names another). */
typedef struct tcu_frozen tcu_frozen;
tl_status tcu_frozen_upload(tcu_frozen **out, const void *host, uint32_t type, int64_t n_in, int64_t n_out);
void tcu_frozen_free(tcu_frozen *f);
/* dst [n_out, n_in] f32 = W (queued). */
tl_status tcu_frozen_dequant(const tcu_frozen *f, float *dst);

/* ---- optimizer: every parameter in one launch ---- */
#define TCU_CHUNK 8192 /* elements per block of the multi-tensor kernels */
typedef struct tcu_ptab {
    float *p, *g, *m, *v;
    int64_t n;
    int64_t chunk0; /* index of this tensor's first chunk; chunks = ceil(n / TCU_CHUNK) */
    float wd;       /* this tensor's weight decay */
} tcu_ptab;
/* *norm = sqrt(sum of squares of every g) over n_chunks chunks of the table
 * (deterministic two-pass); scratch >= n_chunks floats. */
tl_status tcu_grad_norm(float *norm, const tcu_ptab *tab_dev, int n_tab, int64_t n_chunks, float *scratch);
/* AdamW on each table entry (step_size = lr / (1 - b1^t), bc2s =
 * sqrt(1 - b2^t)); grads scaled (in place) by min(1, max_norm / (*norm +
 * 1e-6)) when norm != NULL: clipping with the norm still on the device. */
tl_status tcu_adamw(const tcu_ptab *tab_dev, int n_tab, int64_t n_chunks, float lr, float b1, float b2, float eps,
                    float step_size, float bc2s, const float *norm, float max_norm);

#ifdef __cplusplus
}
#endif

#endif
