/* ops: the operation API the forward passes call.
 *
 * Activations are plain float arrays laid out token-major: a batch of m
 * tokens of width n is x[m][n] (ne = [n, m]). Weights are tl_tensors of any
 * supported type. Each op checks the device of its tensor arguments and runs
 * the matching backend kernel; a device without the op is an error naming
 * both (never a silent copy to the host). Today the CPU backend implements
 * every op here; the CUDA backend runs its own fused decode step (see
 * backend/cuda) and reuses these as its oracle.
 * Owns: the ops_ctx scratch. Calls: backend/cpu, quant, base/threadpool. */
#ifndef TL_OPS_OPS_H
#define TL_OPS_OPS_H

#include <stdint.h>

#include "base/threadpool.h"
#include "tensor/tensor.h"

typedef struct ops_ctx {
    tl_threadpool *tp;
    uint8_t *wbuf;      /* scratch for activations converted to a weight's vec_dot_type */
    size_t wbuf_size;
    float *gscale;      /* activation scale tables for the prefill kernels */
    size_t gscale_n;    /* floats in gscale */
    float *att;         /* [n_threads][att_stride] attention score scratch */
    int64_t att_stride;
    float *attp;        /* attention's per-span partial results, grown on demand */
    size_t attp_n;      /* floats in attp */
    uint8_t *panel;     /* [n_threads][panel_stride] repacked weight rows (backend/cpu/gemm.h) */
    size_t panel_stride;
    uint8_t *few;       /* the few-token kernels' activation table (backend/cpu/gemm.h) */
    size_t few_bytes;
} ops_ctx;

/* Scratch sizing: activation conversion for up to max_m rows of max_k
 * elements, attention scores for up to max_kv positions per thread. */
tl_status ops_ctx_init(ops_ctx *c, tl_threadpool *tp, int64_t max_m, int64_t max_k, int64_t max_kv);
void ops_ctx_free(ops_ctx *c);

/* y[m][N] = W . x[m] for W [K, N] (ne order), x [m][K]. */
tl_status ops_matmul(ops_ctx *c, const tl_tensor *w, const float *x, int64_t m, float *y);
/* Two or three weights sharing one input (QKV, gate/up): one conversion of
 * x and one parallel region. ys[i] is [m][N_i]. n_w in 1..3. */
tl_status ops_matmul_multi(ops_ctx *c, const tl_tensor *const *ws, int n_w, const float *x,
                           int64_t m, float *const *ys);
/* The same with output i's rows ldys[i] floats apart (0: N_i), so stacked
 * outputs (a token's [q | k | v]) can interleave. */
tl_status ops_matmul_multi_ld(ops_ctx *c, const tl_tensor *const *ws, int n_w, const float *x, int64_t m,
                              float *const *ys, const int64_t *ldys);

/* out[i][:] = row ids[i] of table (any type) dequantized; table [n, rows]. */
tl_status ops_get_rows(const tl_tensor *table, const int32_t *ids, int64_t m, float *out);

/* y[j][:] = x[j][:] / rms(x[j]) * w (w may be NULL: no scale); x,y [m][n]. */
void ops_rmsnorm(const float *x, const float *w, int64_t n, int64_t m, float eps, float *y);
/* y[j][:] = (x[j] - mean(x[j])) / sqrt(var(x[j]) + eps) * w + b (LayerNorm,
 * biased variance); w, b [n] may be NULL (no scale / no shift); y may be x. */
void ops_layernorm(const float *x, const float *w, const float *b, int64_t n, int64_t m, float eps, float *y);
/* x[j][:] += b for bias b [n]. */
void ops_add_bias(float *x, const float *b, int64_t n, int64_t m);
/* x[i] += y[i] for i < n. */
void ops_add(float *x, const float *y, int64_t n);
/* g[i] = silu(g[i]) * u[i]. */
void ops_silu_mul(float *g, const float *u, int64_t n);
/* g[i] = gelu(g[i]) * u[i], gelu(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void ops_gelu_mul(float *g, const float *u, int64_t n);
/* x[i] = gelu(x[i]) (the tanh approximation above, as GPT-2). */
void ops_gelu(float *x, int64_t n);
/* x[i] *= s for i < n. */
void ops_scale(float *x, float s, int64_t n);

typedef struct ops_rope_params {
    int32_t n_rot;            /* rotated dims per head (<= head_dim) */
    int32_t neox;             /* 0: pairs (2i, 2i+1); 1: pairs (i, i + n_rot/2) */
    float base;
    float scale;              /* position divisor (linear scaling) */
    const float *freq_factors; /* [n_rot/2] divisors of each frequency, or NULL */
} ops_rope_params;

/* Rotate x [m][n_heads][head_dim] in place; token j is at position pos[j]. */
void ops_rope(float *x, int64_t head_dim, int64_t n_heads, int64_t m, const int32_t *pos,
              const ops_rope_params *p);

/* A layer's paged KV cache as the CPU backend lays it out: block b's K rows
 * start at k + b * block_stride, row o of a block at + o * row (f16), V the
 * same from v; sequence s's i-th block is table[s * table_stride + i]. */
typedef struct ops_kv_view {
    const uint16_t *k, *v;
    int64_t block_stride, row;
    int32_t block_shift;        /* log2 of positions per block */
    const int32_t *table;
    int64_t table_stride;
} ops_kv_view;

/* Causal attention of m tokens, token j at position pos[j] of sequence
 * seq[j] seeing that sequence's keys pos[j] - window < i <= pos[j]
 * (window <= 0: 0..pos[j]). GQA: query head h reads KV head h / (n_head /
 * n_head_kv). q: token j's heads at q + j * q_stride; out [m][n_head][head_dim]. */
typedef struct ops_attn_args {
    const float *q;
    int64_t q_stride, m;
    const int32_t *pos, *seq;
    ops_kv_view kv;
    int64_t n_head, n_head_kv, head_dim, window;
    float scale;
    float *out;
} ops_attn_args;
tl_status ops_attention_paged(ops_ctx *c, const ops_attn_args *a);

/* Store m rows of [n] floats as f16 into dst rows (row stride n). */
void ops_store_f16(uint16_t *dst, const float *src, int64_t n);

#endif
