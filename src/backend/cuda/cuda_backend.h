/* backend/cuda: the CUDA backend's C ABI (plain C; the kernels live in .cu
 * files next to this header and are compiled only with TALLOW_CUDA=ON).
 *
 * Everything is enqueued on the context's one stream, so a sequence of calls
 * can be captured into a CUDA graph (tlc_graph_begin/end) and replayed; ops
 * that depend on the decode position read it from device memory (`d_pos`),
 * which keeps a captured graph valid from token to token. Every call returns
 * a tl_status; CUDA failures become TL_ERR_BACKEND / TL_ERR_NOMEM with a
 * message naming the op (out of memory names the bytes asked and free).
 *
 * Weights are uploaded once and repacked for 16-byte coalesced loads: the
 * quantized blocks are split into a "q" array (quants, 16-byte aligned per
 * block) and an "s" array (per-block scales) wherever the GGUF block is not
 * a multiple of 16 bytes (Q4_0, Q4_1, Q8_0, Q6_K); F16, BF16, F32 and Q4_K
 * are copied as they are.
 * Quantized matvecs take the activation as "q8_1-like": int8 quants [n]
 * followed by float2 (d, d*sum(q)) per 32 elements (tlc_q8_bytes(n)), and use
 * dp4a; float weights take the f32 activation.
 * Owns: device memory it hands out, the stream, the cuBLAS handles.
 * Calls: CUDA runtime, cuBLAS; base/status, tensor/dtype. */
#ifndef TL_BACKEND_CUDA_BACKEND_H
#define TL_BACKEND_CUDA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* inside the C linkage block: these C headers have no guards of their own */
#include "base/status.h"
#include "tensor/dtype.h"

typedef struct tlc_ctx tlc_ctx;

typedef struct tlc_device_info {
    char name[256];
    int n_sm;
    size_t l2_bytes;
    size_t mem_free, mem_total;
} tlc_device_info;

/* A context on device `device` with the kernels tuned by `tune` (copied;
 * NULL: tl_cuda_tuning_default()). TL_ERR_INVALID naming the field if a
 * tuning value is out of range, TL_ERR_BACKEND if no device (message says
 * why). */
tl_status tlc_init(int device, const tl_cuda_tuning *tune, tlc_ctx **out);
void tlc_free(tlc_ctx *c);
tl_status tlc_get_device_info(tlc_ctx *c, tlc_device_info *out);
/* Bytes currently held through tlc_alloc (weights, arenas, caches). */
size_t tlc_bytes_in_use(const tlc_ctx *c);

/* Device memory. `what` names the allocation in error messages. */
tl_status tlc_alloc(tlc_ctx *c, size_t bytes, const char *what, void **out);
void tlc_dfree(tlc_ctx *c, void *p, size_t bytes);
tl_status tlc_upload(tlc_ctx *c, void *dst, const void *src, size_t bytes);   /* sync */
tl_status tlc_download(tlc_ctx *c, void *dst, const void *src, size_t bytes); /* sync */
tl_status tlc_upload_async(tlc_ctx *c, void *dst, const void *src, size_t bytes);
tl_status tlc_download_async(tlc_ctx *c, void *dst, const void *src, size_t bytes);
tl_status tlc_memset(tlc_ctx *c, void *dst, int v, size_t bytes);
tl_status tlc_sync(tlc_ctx *c);
/* the context's cudaStream_t, for launchers that take a stream */
void *tlc_stream_of(tlc_ctx *c);
/* Page-locked host memory (for copies a captured graph replays). */
tl_status tlc_host_alloc(size_t bytes, void **out);
void tlc_host_free(void *p);

/* A bump arena over one device allocation: for activations and scratch
 * sized once at load; push never allocates from the driver. */
typedef struct tlc_arena {
    uint8_t *base;
    size_t size, used;
} tlc_arena;
tl_status tlc_arena_init(tlc_ctx *c, tlc_arena *a, size_t bytes, const char *what);
/* 256-byte aligned; TL_ERR_NOMEM naming `what` if the arena is full. */
tl_status tlc_arena_push(tlc_arena *a, size_t bytes, const char *what, void **out);
void tlc_arena_free(tlc_ctx *c, tlc_arena *a);

/* ---- weights ------------------------------------------------------------ */

typedef struct tlc_weight {
    tl_type type;
    int64_t n_in;   /* row length (GGUF ne[0]) */
    int64_t n_out;  /* rows */
    void *q;        /* [n_out] rows of q_row bytes */
    void *s;        /* [n_out] rows of s_row bytes, or NULL */
    size_t q_row, s_row;
} tlc_weight;

/* Whether matvec/gemm/get_rows support type t. */
bool tlc_type_supported(tl_type t);
/* Device bytes of the repacked layout (each array rounded up to 256). 0 if
 * the type is unsupported or n_in is not a multiple of the block. */
size_t tlc_weight_bytes(tl_type t, int64_t n_in, int64_t n_out);
/* Describe a weight placed at dst (tlc_weight_bytes(...) bytes of device
 * memory) and upload + repack `host` (GGUF layout, rows contiguous).
 * `staging` is device scratch of at least the raw size (rows * row bytes) for
 * repacked types; may be NULL for types copied as they are. */
tl_status tlc_weight_upload(tlc_ctx *c, tlc_weight *w, tl_type t, int64_t n_in, int64_t n_out,
                            const void *host, void *dst, void *staging);
/* Same, but upload rows [row0, row0 + n_rows) of an existing weight (used to
 * concatenate Q|K|V or gate|up into one matrix). w must be described already
 * (tlc_weight_describe). */
tl_status tlc_weight_describe(tlc_weight *w, tl_type t, int64_t n_in, int64_t n_out, void *dst);
tl_status tlc_weight_upload_rows(tlc_ctx *c, const tlc_weight *w, int64_t row0, int64_t n_rows,
                                 const void *host, void *staging);
/* The whole of a described weight, queued on a caller's cudaStream_t instead
 * of a context's (the training framework's frozen weights); same staging rule. */
tl_status tlc_weight_upload_on(void *stream, const tlc_weight *w, const void *host, void *staging);

/* ---- activation prep + matvec (decode) -------------------------------- */

static inline size_t tlc_q8_bytes(int64_t n) { return (size_t)n + (size_t)(n / 32) * 8 + 16; }

/* For each of n_rows rows of x [n_rows][n]: y = x (or rmsnorm(x) * norm_w
 * when norm_w != NULL), written as f32 to out_f (if non-NULL) and as q8_1 to
 * out_q (if non-NULL, rows tlc_q8_bytes(n) apart). n % 32 == 0. */
tl_status tlc_act_prep(tlc_ctx *c, const float *x, const float *norm_w, float eps, int64_t n,
                       int64_t n_rows, float *out_f, void *out_q);

enum {
    TLC_MV_STORE = 0,  /* y = W x */
    TLC_MV_ACCUM = 1,  /* y += W x (residual add fused) */
    TLC_MV_GLU = 2     /* W holds [gate; up] (n_out = 2 m): y[i] = silu(g_i) * u_i, i < m */
};
/* Batch-1 matrix-vector product. xf: f32 [n_in] (float weights), xq: q8_1
 * (quantized weights); the other may be NULL. */
tl_status tlc_matvec(tlc_ctx *c, const tlc_weight *w, const float *xf, const void *xq, float *y,
                     int mode);

typedef struct tlc_rope_params {
    int n_rot;              /* rotated dims (<= head_dim, even) */
    bool neox;              /* half-split pairs (qwen) instead of interleaved (llama) */
    float base;             /* freq base */
    float scale;            /* positions are divided by it (linear scaling) */
    const float *freq_div;  /* device [n_rot/2] divisors (Llama-3 rope_freqs), or NULL */
} tlc_rope_params;

/* Decode fusions around a matvec (NULL fields: off).
 *  in_ss: the activation is x o g (g: RMSNorm weight) given as q8_1 / f32,
 *    and in_ss [n_in/32] holds partial sums of x^2; the result is scaled by
 *    rsqrt(sum(in_ss)/n_in + eps), i.e. W rmsnorm(x; g) without a norm launch.
 *  out_q: epilogue writing q8_1 of the output vector v (n = outputs, % 32):
 *    STORE/ACCUM: v = y_new o out_norm (out_norm may be NULL: v = y_new),
 *    also v as f32 into out_f and per-32 sums of y_new^2 into out_ss, both
 *    optional: what the next matvec's in_ss fold reads.
 *    GLU: v = silu(g) * u (out_norm, out_f, out_ss must be NULL).
 *  out_q must not alias xq (blocks read xq while others write out_q).
 *  rope: the QKV matvec's epilogue (STORE, rows [q | k | v] of n_head,
 *    n_kv_head, n_kv_head heads): rotates q and k at *d_pos (adjacent pairs,
 *    n_rot == head_dim, not NeoX) and stores k, v into the f16 cache, as
 *    tlc_rope_kv does, without its launch.
 *  in_q8: quantized weights read the f32 input xf and each block makes its
 *    own q8_1 copy in shared memory (xq unused; the same bytes as
 *    tlc_act_prep): the producer then needs no quantize epilogue or launch
 *    (the GLU output before the down projection). tlc_mv_in_q8_ok says
 *    whether a weight allows it (n_in <= TLC_MV_INQ_MAX: 1.25 bytes per
 *    input in the 48 KiB of shared memory a launch gets without opt-in). */
typedef struct tlc_rope_kv_args {
    tlc_rope_params p;
    int n_head, n_kv_head, head_dim;
    void *kc, *vc;             /* f16 cache of this layer */
    int64_t n_ctx;
    const int32_t *d_pos;
} tlc_rope_kv_args;
typedef struct tlc_mv_fuse {
    const float *in_ss;
    float eps;
    const float *out_norm;
    float *out_f;
    void *out_q;
    float *out_ss;
    const tlc_rope_kv_args *rope;
    bool in_q8;
    /* store mode, no other epilogue: the argmax of the output (lowest row
     * on ties, NaN never chosen over a number) as a 64-bit key, atomically
     * maxed into *argmax, which must be zero before the launch; the row is
     * tlc_argmax_key_row(key). Greedy decode without an argmax launch. */
    unsigned long long *argmax;
} tlc_mv_fuse;
static inline int32_t tlc_argmax_key_row(unsigned long long key) {
    return (int32_t)(0xFFFFFFFFu - (uint32_t)(key & 0xFFFFFFFFu));
}
#define TLC_MV_INQ_MAX 36864
bool tlc_mv_in_q8_ok(const tlc_weight *w);
/* whether the decode layer should: allowed, and the type and shape it was
 * measured faster for (cuda_matvec.cu) */
bool tlc_mv_in_q8_use(const tlc_ctx *c, const tlc_weight *w);
/* F16/BF16/F32: matvecs read the f32 activation, no q8_1 */
bool tlc_weight_is_float(const tlc_weight *w);
tl_status tlc_matvec_fused(tlc_ctx *c, const tlc_weight *w, const float *xf, const void *xq, float *y,
                           int mode, const tlc_mv_fuse *f);
/* y = [w1 x; w2 x] (store mode) in one launch, for weights of two types with
 * the same n_in: a QKV whose V has another type than Q|K. f may fold the
 * input's RMSNorm and carry the RoPE+KV epilogue (rows numbered over the
 * stacked output; w1 whole heads); no q8_1 epilogue. tlc_matvec2_ok: whether
 * this build has the pair (Q4_K over Q6_K) with the same n_in. */
bool tlc_matvec2_ok(const tlc_ctx *c, const tlc_weight *w1, const tlc_weight *w2);
tl_status tlc_matvec2_fused(tlc_ctx *c, const tlc_weight *w1, const tlc_weight *w2, const float *xf, const void *xq,
                            float *y, const tlc_mv_fuse *f);
/* The unscaled form tlc_matvec_fused's in_ss reads: for each of n_rows rows
 * of x [n_rows][n]: v = x o norm_w (norm_w NULL: v = x) as f32 into out_f and
 * q8_1 into out_q (each optional), per-32 sums of x^2 into out_ss [n_rows][n/32]
 * (optional). One warp per 32 values, many blocks. n % 32 == 0. */
tl_status tlc_act_prep_ss(tlc_ctx *c, const float *x, const float *norm_w, int64_t n, int64_t n_rows,
                          float *out_f, void *out_q, float *out_ss);

/* ---- elementwise / normalisation / position ---------------------------- */

tl_status tlc_rmsnorm(tlc_ctx *c, const float *x, const float *w, float eps, int64_t n,
                      int64_t n_rows, float *out);
tl_status tlc_add(tlc_ctx *c, const float *a, const float *b, float *out, int64_t n);
tl_status tlc_silu_mul(tlc_ctx *c, const float *g, const float *u, float *out, int64_t n);

/* x [n_tok][n_heads][head_dim] in place (tokens tok_stride floats apart; 0:
 * contiguous); token t has position *d_pos + t. */
tl_status tlc_rope(tlc_ctx *c, float *x, int64_t n_tok, int64_t tok_stride, int n_heads,
                   int head_dim, const int32_t *d_pos, const tlc_rope_params *p);
/* Per-head RMSNorm in place (Qwen3 QK-norm): x [n_tok][n_heads][head_dim],
 * tokens tok_stride floats apart (0: contiguous), w [head_dim]. */
tl_status tlc_head_rmsnorm(tlc_ctx *c, float *x, int64_t n_tok, int64_t tok_stride, int n_heads,
                           int head_dim, const float *w, float eps);
/* x[t][i] += b[i] for n_tok rows of n, rows tok_stride apart (0: n). */
tl_status tlc_add_bias(tlc_ctx *c, float *x, int64_t n_tok, int64_t tok_stride, const float *b,
                       int64_t n);
/* out[t][i] = silu(in[t][i]) * in[t][n + i]: rows of [gate | up] -> [n]. */
tl_status tlc_glu_rows(tlc_ctx *c, const float *in, float *out, int64_t n_tok, int64_t n);
tl_status tlc_copy(tlc_ctx *c, void *dst, const void *src, size_t bytes);

/* ---- KV cache + attention ------------------------------------------------
 * Cache layout per layer: k and v [n_kv_head][n_ctx][head_dim], type F16 or
 * F32. Token t of a batch goes to position *d_pos + t. */
tl_status tlc_kv_store(tlc_ctx *c, const float *k, const float *v, int64_t n_tok, int64_t tok_stride,
                       int n_kv_head, int head_dim, void *kc, void *vc, tl_type kv_type,
                       int64_t n_ctx, const int32_t *d_pos);
/* Scratch floats the decode attention needs (split-K partials). */
size_t tlc_attn_decode_scratch(int n_head, int head_dim);
/* The longest context (*d_pos + 1) whose decode attention merges its splits
 * inside a thread-block cluster (8 x tl_cuda_tuning.att_split_min); and the longest
 * context the decode attention launches that follow will see (max_len; 0,
 * the default: not known). Up to tlc_attn_cluster_len they launch just the
 * cluster's blocks (the other splits' blocks would only hold SMs that the
 * next matvec's blocks could load on); past it without clusters (the
 * cluster launch slows the split path down); not known: clusters, and all
 * splits. Any length stays correct under any plan, only slower. */
int64_t tlc_attn_cluster_len(const tlc_ctx *c);
void tlc_attn_plan(tlc_ctx *c, int64_t max_len);
/* One query token at position *d_pos attending to [0, *d_pos] (split-K
 * flash decoding + combine). q, out: [n_head][head_dim] f32; out_q (may be
 * NULL) also receives out as q8_1 (tlc_q8_bytes(n_head*head_dim)).
 * Under programmatic dependent launch it reads *d_pos and the cache below
 * *d_pos before waiting for the kernel before it: no kernel still in flight
 * may write those (the decode graph writes d_pos with the copy that starts
 * the step and only position *d_pos of the cache). */
tl_status tlc_attn_decode(tlc_ctx *c, const float *q, const void *kc, const void *vc,
                          tl_type kv_type, int n_head, int n_kv_head, int head_dim, int64_t n_ctx,
                          const int32_t *d_pos, float scale, float *scratch, float *out, void *out_q);
/* tlc_attn_decode with the Qwen decode prologue (tlc_qk_rope_kv, below)
 * folded in, one launch instead of two: qkv is the token's
 * raw [q | k | v] row (the QKV matvec's output), and the attention applies,
 * in this order, the QKV bias (bias [(n_head + 2 n_kv_head) * head_dim], or
 * NULL: Qwen2), the per-head RMSNorm of the q and k heads (q_norm, k_norm
 * [head_dim], both or neither, eps: Qwen3) and the rotation, making q and
 * the current position's k and v, which it also stores into the cache at
 * *d_pos. tlc_attn_pro_ok: n_rot == head_dim. */
bool tlc_attn_pro_ok(const tlc_ctx *c, int head_dim, const tlc_rope_params *p);
tl_status tlc_attn_decode_pro(tlc_ctx *c, float *qkv, void *kc, void *vc, tl_type kv_type, int n_head, int n_kv_head,
                              int head_dim, int64_t n_ctx, const int32_t *d_pos, float scale, float *scratch,
                              float *out, void *out_q, const tlc_rope_params *p, const float *bias,
                              const float *q_norm, const float *k_norm, float eps);
/* Decode-time fusion of RoPE and the KV store for one token's [q | k | v]
 * row (n_head + 2 n_kv_head heads): rotates q and k in place and writes the
 * rotated k and v into the cache at *d_pos (n_rot == head_dim only). */
tl_status tlc_rope_kv(tlc_ctx *c, float *qkv, int n_head, int n_kv_head, int head_dim, void *kc,
                      void *vc, int64_t n_ctx, const int32_t *d_pos, const tlc_rope_params *p);
/* tlc_rope_kv with, in front of the rotation and in this order, the QKV
 * bias (bias [ (n_head + 2 n_kv_head) * head_dim ], or NULL: Qwen2) and the
 * per-head RMSNorm of the q and k heads (q_norm, k_norm [head_dim], both or
 * neither, eps: Qwen3), for one decode token: one launch instead of the
 * bias, two norm and the RoPE/KV launches. v (biased) is written back into
 * qkv as well. tlc_qk_rope_kv_ok: n_rot == head_dim, a power of two <= 256.
 * (tlc_attn_decode_pro does the same inside the attention, one launch
 * fewer, where the decode attention runs.) */
bool tlc_qk_rope_kv_ok(const tlc_ctx *c, int head_dim, const tlc_rope_params *p);
tl_status tlc_qk_rope_kv(tlc_ctx *c, float *qkv, int n_head, int n_kv_head, int head_dim, void *kc, void *vc,
                         int64_t n_ctx, const int32_t *d_pos, const tlc_rope_params *p, const float *bias,
                         const float *q_norm, const float *k_norm, float eps);
/* n_tok query tokens at positions *d_pos + t, causal. q [n_tok][n_head][head_dim]
 * with tokens q_stride floats apart (0: contiguous); out contiguous. */
tl_status tlc_attn_prefill(tlc_ctx *c, const float *q, int64_t q_stride, const void *kc, const void *vc,
                           tl_type kv_type, int n_head, int n_kv_head, int head_dim,
                           int64_t n_ctx, int64_t n_tok, const int32_t *d_pos, float scale,
                           float *out);
/* The tensor-core path tlc_attn_prefill takes where it applies (f16 cache,
 * head_dim 64 or 128; tl_cuda_tuning.flash_prefill off: never): Q and the softmax
 * weights rounded to f16, f32 accumulation (cuda_flash.cu). */
bool tlc_flash_prefill_supported(const tlc_ctx *c, tl_type kv_type, int head_dim);
tl_status tlc_flash_prefill(tlc_ctx *c, const float *q, int64_t q_stride, const void *kc, const void *vc,
                            int n_head, int n_kv_head, int head_dim, int64_t n_ctx, int64_t n_tok,
                            const int32_t *d_pos, float scale, float *out);

/* ---- prefill GEMM, rows, argmax ---------------------------------------- */

/* f16 scratch elements tlc_gemm needs for a weight and n_tok rows. */
size_t tlc_gemm_scratch_halves(const tlc_weight *w, int64_t n_tok);
/* y [n_tok][n_out] (=, or += with TLC_MV_ACCUM) x [n_tok][n_in] W^T through
 * cuBLAS on tensor cores (f16/bf16 inputs, f32 accumulation); quantized
 * weights are dequantized into `scratch` first. */
tl_status tlc_gemm(tlc_ctx *c, const tlc_weight *w, const float *x, int64_t n_tok, float *y,
                   int mode, void *scratch);
/* As tlc_gemm with y rows ldy floats apart (ldy >= n_out). */
tl_status tlc_gemm_ex(tlc_ctx *c, const tlc_weight *w, const float *x, int64_t n_tok, float *y,
                      int64_t ldy, int mode, void *scratch);
/* A view of rows [row0, row0 + n) of w (no copy). */
tlc_weight tlc_weight_rows(const tlc_weight *w, int64_t row0, int64_t n);
/* Dequantize a whole weight to f16 [n_out][n_in]. */
tl_status tlc_dequant_f16(tlc_ctx *c, const tlc_weight *w, void *out);
/* Dequantize a whole weight to f32 [n_out][n_in] on a caller's cudaStream_t
 * (n_in a multiple of 32): the values tlc_get_rows gives. */
tl_status tlc_dequant_f32_on(void *stream, const tlc_weight *w, float *out);
/* out [n_tok][n_in] f32 = rows tokens[t] of w. d_tokens on the device. */
tl_status tlc_get_rows(tlc_ctx *c, const tlc_weight *w, const int32_t *d_tokens, int64_t n_tok,
                       float *out);
/* *d_out = argmax x[0..n) (lowest index on ties). */
tl_status tlc_argmax(tlc_ctx *c, const float *x, int64_t n, int32_t *d_out);
/* *d_pos += inc (keeps positions on the device inside a captured graph). */
tl_status tlc_pos_advance(tlc_ctx *c, int32_t *d_pos, int32_t inc);

/* ---- graphs + timing ---------------------------------------------------- */

typedef struct tlc_graph tlc_graph;
tl_status tlc_graph_begin(tlc_ctx *c);
tl_status tlc_graph_end(tlc_ctx *c, tlc_graph **out);
tl_status tlc_graph_launch(tlc_ctx *c, tlc_graph *g);
void tlc_graph_free(tlc_graph *g);

/* Copy bandwidth probe: device-to-device copy of `bytes`, median of reps;
 * returns GB/s counting bytes read + written. */
tl_status tlc_measure_copy_bw(tlc_ctx *c, size_t bytes, int reps, double *gbps);
/* f16 GEMM probe m=n=k=dim through cuBLAS, random inputs; TFLOP/s. */
tl_status tlc_measure_gemm(tlc_ctx *c, int dim, int reps, double *tflops);
/* Event timer on the stream. */
/* Op-level timing for profile runs (cuda_prof.cu): tlc_prof_mark(p, stream,
 * name, detail) records an event on the stream (a cudaStream_t) after the
 * work queued so far and charges the interval since the previous mark to
 * (name, detail); name must outlive p (a string literal); detail < 0 prints
 * none. A NULL p makes mark a no-op. collect waits for the last mark and
 * adds up; report writes a table (largest total first) into buf and returns
 * its length. */
typedef struct tlc_prof tlc_prof;
tl_status tlc_prof_init(tlc_prof **out);
void tlc_prof_free(tlc_prof *p);
void tlc_prof_mark(tlc_prof *p, void *stream, const char *name, int detail);
tl_status tlc_prof_collect(tlc_prof *p);
int tlc_prof_report(const tlc_prof *p, char *buf, size_t n);
void tlc_prof_reset(tlc_prof *p); /* totals back to zero (pending marks stay) */

typedef struct tlc_timer tlc_timer;
tl_status tlc_timer_init(tlc_timer **out);
void tlc_timer_free(tlc_timer *t);
tl_status tlc_timer_start(tlc_ctx *c, tlc_timer *t);
tl_status tlc_timer_stop(tlc_ctx *c, tlc_timer *t, double *ms); /* syncs */

/* ---- steps of many sequences (cuda_batch.cu) ------------------------------
 * The KV cache of a layer is [kv head][n_plane][head_dim] f16; a block of B
 * = 1 << block_shift positions is a range of every head's plane, and token
 * t's keys are read through its sequence's page table (see cuda_batch.cu).
 * Positions and slots are per token (device arrays). */

/* x [n_tok][n_heads][head_dim] (tokens tok_stride floats apart) rotated in
 * place, token t at position d_pos[t]. */
tl_status tlc_rope_rows(tlc_ctx *c, float *x, int64_t n_tok, int64_t tok_stride, int n_heads, int head_dim,
                        const int32_t *d_pos, const tlc_rope_params *p);
/* k, v rows of n_tok tokens (tok_stride apart) into the f16 cache at each
 * token's slot d_slot[t]. */
tl_status tlc_kv_store_slots(tlc_ctx *c, const float *k, const float *v, int64_t n_tok, int64_t tok_stride,
                             int n_kv_head, int head_dim, void *kc, void *vc, int64_t n_plane, const int32_t *d_slot);
/* Splits a paged attention launch of n_tok tokens uses (max_len: the
 * longest context any of them sees), and the scratch floats any launch of
 * up to n_tok tokens needs. */
int tlc_attn_paged_splits(int64_t n_tok, int n_kv_head, int64_t max_len);
size_t tlc_attn_paged_scratch(int64_t n_tok, int n_head, int n_kv_head, int head_dim);
/* Attention of n_tok tokens, token t at position d_pos[t] of sequence
 * d_seq[t] (its page table at d_table + seq * table_stride), seeing keys
 * d_pos[t] - window < p <= d_pos[t] (window <= 0: all); q rows q_stride
 * apart, out [n_tok][n_head * head_dim]; head_dim <= 256, at most 8 query
 * heads per KV head. */
tl_status tlc_attn_paged(tlc_ctx *c, const float *q, int64_t q_stride, int64_t n_tok, const void *kc, const void *vc,
                         int64_t n_plane, int n_head, int n_kv_head, int head_dim, const int32_t *d_pos,
                         const int32_t *d_seq, const int32_t *d_table, int64_t table_stride, int block_shift,
                         int window, float scale, int n_split, float *scratch, float *out);
/* tlc_flash_prefill for one sequence whose blocks are given by its page
 * table (d_table; NULL: the identity, as tlc_flash_prefill). */
tl_status tlc_flash_prefill_paged(tlc_ctx *c, const float *q, int64_t q_stride, const void *kc, const void *vc,
                                  int n_head, int n_kv_head, int head_dim, int64_t n_ctx, int64_t n_tok,
                                  const int32_t *d_pos, float scale, float *out, const int32_t *d_table,
                                  int block_shift);
/* y = LayerNorm(x) * w + b per row (w, b may be NULL). */
tl_status tlc_layernorm(tlc_ctx *c, const float *x, const float *w, const float *b, float eps, int64_t n,
                        int64_t n_rows, float *out);
/* x[t][i] = gelu(x[t][i]) for i < n, rows ld apart (tanh form). */
tl_status tlc_gelu_rows(tlc_ctx *c, float *x, int64_t n_tok, int64_t n, int64_t ld);
/* out[t][i] = gelu(in[t][i]) * in[t][n + i]: rows of [gate | up] -> [n]. */
tl_status tlc_glu_gelu_rows(tlc_ctx *c, const float *in, float *out, int64_t n_tok, int64_t n);
tl_status tlc_scale(tlc_ctx *c, float *x, float s, int64_t n);
/* out[r][:] = x[d_rows[r]][:] (rows of n floats). */
tl_status tlc_gather_rows(tlc_ctx *c, const float *x, int64_t n, const int32_t *d_rows, int64_t m, float *out);
/* y [m][ldy] (=, or += with TLC_MV_ACCUM) x [m][n_in] W^T for 2..TLC_MM_SMALL_MAX
 * tokens on the tensor cores, each weight read once (cuda_mm.cu): quantized types
 * dequantized to f16 in shared memory, f16 activations, f32 sums.
 * tlc_mm_small_ok: whether w's type and m are served; scratch holds
 * tlc_mm_small_scratch(m, n_in, n_out, n_sm) bytes (an upper bound). */
/* y [m][ldy] (=, or += with TLC_MV_ACCUM) x [m][n_in] W^T for 2..TLC_MVM_MAX
 * tokens on the decode matvec's unit loads (cuda_mvm.cu): each weight unit
 * dotted with every token, so the weights are read once at the matvec's
 * rate. Float weights take xf [m][n_in] f32; quantized ones xq, m q8_1 rows
 * tlc_q8_bytes(n_in) apart (tlc_act_prep). tlc_mvm_ok: the type, shape and m
 * are served; tlc_mvm_use: and m is within the context's mvm_max_tokens. */
#define TLC_MVM_MAX 4
bool tlc_mvm_ok(const tlc_weight *w, int64_t m);
bool tlc_mvm_use(const tlc_ctx *c, const tlc_weight *w, int64_t m);
tl_status tlc_mvm(tlc_ctx *c, const tlc_weight *w, const float *xf, const void *xq, int64_t m, float *y, int64_t ldy,
                  int mode);
/* more tokens go through dequantization + cuBLAS, faster at 64 (docs/PERFORMANCE.md) */
#define TLC_MM_SMALL_MAX 32
bool tlc_mm_small_ok(const tlc_weight *w, int64_t m);
size_t tlc_mm_small_scratch(int64_t m, int64_t n_in, int64_t n_out, int n_sm);
tl_status tlc_mm_small(tlc_ctx *c, const tlc_weight *w, const float *x, int64_t m, float *y, int64_t ldy, int mode,
                       void *scratch);
/* rows rows of width bytes, pitch bytes apart in both dst and src (device). */
tl_status tlc_copy_2d(tlc_ctx *c, void *dst, const void *src, size_t pitch, size_t width, size_t rows);
/* d_out[r] = argmax of row r of x (n values, rows ld apart; lowest index on ties). */
tl_status tlc_argmax_rows(tlc_ctx *c, const float *x, int64_t n, int64_t ld, int64_t n_rows, int32_t *d_out);

#ifdef __cplusplus
}
#endif
#endif
