/* backend/cuda/cuda_ops: the small ops around the matvecs: activation prep
 * (RMSNorm fused with the q8_1 quantization the next matvec reads), RMSNorm
 * (also per head, for Qwen3's QK-norm: rows of head_dim), residual add,
 * SiLU-gate-multiply, RoPE (interleaved and NeoX), KV-cache store, RoPE
 * with the KV store in one decode launch, and with the Qwen prologue (bias,
 * q/k norm) in front of it, argmax.
 * Positions come from device memory so captured graphs stay valid.
 * Calls: CUDA. */
#include "backend/cuda/cuda_common.cuh"

/* block-wide sum; blockDim.x a multiple of 32, <= 1024 */
__device__ float block_sum(float v) {
    __shared__ float sh[32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    int nw = blockDim.x >> 5;
    float r = lane < nw ? sh[lane] : 0.0f;
    return warp_sum(r);
}

__global__ void act_prep_k(const float *x, const float *nw, float eps, int64_t n, float *out_f,
                           int8_t *out_q, size_t q_stride) {
    pdl_trigger();
    pdl_wait();
    const float *xr = x + blockIdx.x * n;
    float scale = 1.0f;
    if (nw) {
        float ss = 0;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
        ss = block_sum(ss);
        scale = rsqrtf(ss / (float)n + eps);
    }
    if (!out_q) {
        float *o = out_f + blockIdx.x * n;
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = xr[i] * scale * (nw ? nw[i] : 1.0f);
        return;
    }
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nwarp = blockDim.x >> 5;
    int8_t *q = out_q + blockIdx.x * q_stride;
    float2 *ds = (float2 *)(q + n);
    for (int64_t ch = w; ch < n / 32; ch += nwarp) {
        int64_t i = ch * 32 + lane;
        float v = xr[i] * scale * (nw ? nw[i] : 1.0f);
        if (out_f) out_f[blockIdx.x * n + i] = v;
        float amax = warp_max(fabsf(v));
        float d = amax / 127.0f;
        int qi = d > 0.0f ? __float2int_rn(v / d) : 0;
        q[i] = (int8_t)qi;
        float sq = warp_sum((float)qi);
        if (lane == 0) ds[ch] = make_float2(d, d * sq);
    }
}

/* one warp per 32 values: v = x o w -> f32, q8_1 block, sum of x^2 */
__global__ void act_prep_ss_k(const float *x, const float *nw, int64_t n, int64_t n_chunks, float *out_f,
                              int8_t *out_q, size_t q_stride, float *out_ss) {
    pdl_trigger();
    pdl_wait();
    const int lane = threadIdx.x & 31;
    const int64_t ch = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (ch >= n_chunks) return;
    const int64_t per_row = n / 32, row = ch / per_row, cr = ch % per_row, i = cr * 32 + lane;
    const float o = x[row * n + i];
    const float v = nw ? o * nw[i] : o;
    if (out_f) out_f[row * n + i] = v;
    if (out_q) {
        int8_t *q = out_q + row * q_stride;
        float d = warp_max(fabsf(v)) / 127.0f;
        int qi = d > 0.0f ? __float2int_rn(v / d) : 0;
        q[i] = (int8_t)qi;
        float sq = warp_sum((float)qi);
        if (lane == 0) ((float2 *)(q + n))[cr] = make_float2(d, d * sq);
    }
    if (out_ss) {
        float ss = warp_sum(o * o);
        if (lane == 0) out_ss[ch] = ss;
    }
}

tl_status tlc_act_prep_ss(tlc_ctx *c, const float *x, const float *norm_w, int64_t n, int64_t n_rows,
                          float *out_f, void *out_q, float *out_ss) {
    if (n % 32) return tl_err(TL_ERR_INVALID, "cuda: act_prep_ss: n=%lld not a multiple of 32", (long long)n);
    const int64_t chunks = n_rows * (n / 32);
    if (chunks <= 0) return TL_OK;
    TLC_TRY(tlc_launch(c, act_prep_ss_k, dim3(tlc_div_up(chunks, 8)), dim3(256), 0, x, norm_w, n, chunks, out_f,
                       (int8_t *)out_q, tlc_q8_bytes(n), out_ss), "act_prep_ss");
    return TL_OK;
}

tl_status tlc_act_prep(tlc_ctx *c, const float *x, const float *norm_w, float eps, int64_t n,
                       int64_t n_rows, float *out_f, void *out_q) {
    if (out_q && n % 32) return tl_err(TL_ERR_INVALID, "cuda: act_prep: n=%lld not a multiple of 32", (long long)n);
    if (n_rows <= 0) return TL_OK;
    /* no norm: a plain quantization, spread over many blocks */
    if (!norm_w && n % 32 == 0) return tlc_act_prep_ss(c, x, NULL, n, n_rows, out_f, out_q, NULL);
    int th = n >= 1024 ? 1024 : (n >= 256 ? 256 : 64);
    TLC_TRY(tlc_launch(c, act_prep_k, dim3((unsigned)n_rows), dim3(th), 0, x, norm_w, eps, n, out_f, (int8_t *)out_q,
                       tlc_q8_bytes(n)), "act_prep");
    return TL_OK;
}

tl_status tlc_rmsnorm(tlc_ctx *c, const float *x, const float *w, float eps, int64_t n,
                      int64_t n_rows, float *out) {
    if (!w) return tl_err(TL_ERR_INVALID, "cuda: rmsnorm without weight");
    return tlc_act_prep(c, x, w, eps, n, n_rows, out, NULL);
}

__global__ void add_k(const float *a, const float *b, float *o, int64_t n) {
    pdl_trigger();
    pdl_wait();
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) o[i] = a[i] + b[i];
}
__global__ void silu_mul_k(const float *g, const float *u, float *o, int64_t n) {
    pdl_trigger();
    pdl_wait();
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        float x = g[i];
        o[i] = x / (1.0f + expf(-x)) * u[i];
    }
}

tl_status tlc_add(tlc_ctx *c, const float *a, const float *b, float *out, int64_t n) {
    if (n <= 0) return TL_OK;
    add_k<<<tlc_div_up(n, 256), 256, 0, c->stream>>>(a, b, out, n);
    TLC_LAUNCH_CHECK("add");
    return TL_OK;
}

tl_status tlc_silu_mul(tlc_ctx *c, const float *g, const float *u, float *out, int64_t n) {
    if (n <= 0) return TL_OK;
    silu_mul_k<<<tlc_div_up(n, 256), 256, 0, c->stream>>>(g, u, out, n);
    TLC_LAUNCH_CHECK("silu_mul");
    return TL_OK;
}

/* one thread per rotated pair */
__global__ void rope_k(float *x, int64_t n_tok, int64_t ts, int n_heads, int hd, const int32_t *d_pos, int n_rot,
                       int neox, float base, float scale, const float *fdiv) {
    pdl_trigger();
    pdl_wait();
    int half = n_rot / 2;
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n_tok * n_heads * half) return;
    int p = (int)(i % half);
    int64_t th = i / half; /* token * n_heads + head */
    int64_t t = th / n_heads;
    float pos = (float)(__ldcg(d_pos) + t) / scale;
    float s, co;
    rope_sincos(pos, p, n_rot, base, fdiv, &s, &co);
    float *h = x + t * ts + (th % n_heads) * hd;
    int a = neox ? p : 2 * p, b = neox ? p + half : 2 * p + 1;
    float x0 = h[a], x1 = h[b];
    h[a] = x0 * co - x1 * s;
    h[b] = x0 * s + x1 * co;
}

tl_status tlc_rope(tlc_ctx *c, float *x, int64_t n_tok, int64_t tok_stride, int n_heads,
                   int head_dim, const int32_t *d_pos, const tlc_rope_params *p) {
    if (tok_stride == 0) tok_stride = (int64_t)n_heads * head_dim;
    if (p->n_rot <= 0 || p->n_rot > head_dim || (p->n_rot & 1))
        return tl_err(TL_ERR_INVALID, "cuda: rope: n_rot %d with head_dim %d", p->n_rot, head_dim);
    int64_t n = n_tok * n_heads * (p->n_rot / 2);
    if (n <= 0) return TL_OK;
    TLC_TRY(tlc_launch(c, rope_k, dim3(tlc_div_up(n, 256)), dim3(256), 0, x, n_tok, tok_stride, n_heads, head_dim, d_pos,
                       p->n_rot, p->neox ? 1 : 0, p->base, p->scale > 0 ? p->scale : 1.0f, p->freq_div), "rope");
    return TL_OK;
}

template <typename KT>
__global__ void kv_store_k(const float *k, const float *v, int64_t n_tok, int64_t ts, int nkv, int hd, KT *kc,
                           KT *vc, int64_t n_ctx, const int32_t *d_pos) {
    pdl_trigger();
    pdl_wait();
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t per_tok = (int64_t)nkv * hd;
    if (i >= n_tok * per_tok) return;
    int64_t t = i / per_tok, r = i % per_tok;
    int h = (int)(r / hd), d = (int)(r % hd);
    int64_t pos = *d_pos + t;
    if (pos >= n_ctx) return; /* the caller checks capacity before enqueueing */
    size_t o = ((size_t)h * n_ctx + pos) * hd + d;
    kc[o] = (KT)k[t * ts + r];
    vc[o] = (KT)v[t * ts + r];
}

tl_status tlc_kv_store(tlc_ctx *c, const float *k, const float *v, int64_t n_tok, int64_t tok_stride,
                       int n_kv_head, int head_dim, void *kc, void *vc, tl_type kv_type,
                       int64_t n_ctx, const int32_t *d_pos) {
    int64_t n = n_tok * n_kv_head * head_dim;
    if (tok_stride == 0) tok_stride = (int64_t)n_kv_head * head_dim;
    if (n <= 0) return TL_OK;
    if (kv_type == TL_TYPE_F16)
        TLC_TRY(tlc_launch(c, kv_store_k<__half>, dim3(tlc_div_up(n, 256)), dim3(256), 0, k, v, n_tok, tok_stride,
                           n_kv_head, head_dim, (__half *)kc, (__half *)vc, n_ctx, d_pos), "kv_store");
    else if (kv_type == TL_TYPE_F32)
        TLC_TRY(tlc_launch(c, kv_store_k<float>, dim3(tlc_div_up(n, 256)), dim3(256), 0, k, v, n_tok, tok_stride,
                           n_kv_head, head_dim, (float *)kc, (float *)vc, n_ctx, d_pos), "kv_store");
    else
        return tl_err(TL_ERR_UNSUPPORTED, "cuda: KV cache type %s", tl_type_name(kv_type));
    return TL_OK;
}

/* one block: each thread scans float4 chunks tid, tid + 1024, ... with 8
 * loads in flight (the logits sit in L2, so a dependent load per element
 * would leave it latency-bound), then a tree over the block */
__device__ __forceinline__ void am_take(float v, int64_t i, float &best, int64_t &bi) {
    if (bi < 0 || v > best) { best = v; bi = i; } /* increasing i per thread: first hit is lowest */
}

__global__ void argmax_k(const float *x, int64_t n, int32_t *out) {
    pdl_trigger();
    pdl_wait();
    float best = -INFINITY;
    int64_t bi = -1;
    const int64_t n4 = ((uintptr_t)x & 15) ? 0 : n / 4;
    const float4 *x4 = (const float4 *)x;
    for (int64_t c0 = threadIdx.x; c0 < n4; c0 += 8 * (int64_t)blockDim.x) {
        float4 v[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int64_t ci = c0 + k * (int64_t)blockDim.x;
            v[k] = ci < n4 ? x4[ci] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        }
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int64_t ci = c0 + k * (int64_t)blockDim.x;
            if (ci >= n4) break;
            am_take(v[k].x, 4 * ci, best, bi);
            am_take(v[k].y, 4 * ci + 1, best, bi);
            am_take(v[k].z, 4 * ci + 2, best, bi);
            am_take(v[k].w, 4 * ci + 3, best, bi);
        }
    }
    for (int64_t i = 4 * n4 + threadIdx.x; i < n; i += blockDim.x) am_take(x[i], i, best, bi);
    __shared__ float sv[1024];
    __shared__ int64_t si[1024];
    sv[threadIdx.x] = best;
    si[threadIdx.x] = bi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float ov = sv[threadIdx.x + s];
            int64_t oi = si[threadIdx.x + s];
            if (oi >= 0 && (si[threadIdx.x] < 0 || ov > sv[threadIdx.x] ||
                            (ov == sv[threadIdx.x] && oi < si[threadIdx.x]))) {
                sv[threadIdx.x] = ov;
                si[threadIdx.x] = oi;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = (int32_t)si[0];
}

tl_status tlc_argmax(tlc_ctx *c, const float *x, int64_t n, int32_t *d_out) {
    TLC_TRY(tlc_launch(c, argmax_k, dim3(1), dim3(1024), 0, x, n, d_out), "argmax");
    return TL_OK;
}

__global__ void pos_advance_k(int32_t *p, int32_t inc) { *p += inc; }

tl_status tlc_pos_advance(tlc_ctx *c, int32_t *d_pos, int32_t inc) {
    pos_advance_k<<<1, 1, 0, c->stream>>>(d_pos, inc);
    TLC_LAUNCH_CHECK("pos_advance");
    return TL_OK;
}

/* one warp per (token, head) row */
__global__ void head_rmsnorm_k(float *x, int64_t n_rows, int64_t ts, int n_heads, int hd, const float *w,
                               float eps) {
    pdl_trigger();
    pdl_wait();
    int64_t r = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= n_rows) return;
    int lane = threadIdx.x & 31;
    float *h = x + (r / n_heads) * ts + (r % n_heads) * hd;
    float ss = 0;
    for (int i = lane; i < hd; i += 32) ss += h[i] * h[i];
    ss = warp_sum(ss);
    float sc = rsqrtf(ss / (float)hd + eps);
    for (int i = lane; i < hd; i += 32) h[i] = h[i] * sc * w[i];
}

tl_status tlc_head_rmsnorm(tlc_ctx *c, float *x, int64_t n_tok, int64_t tok_stride, int n_heads,
                           int head_dim, const float *w, float eps) {
    if (tok_stride == 0) tok_stride = (int64_t)n_heads * head_dim;
    int64_t rows = n_tok * n_heads;
    if (rows <= 0) return TL_OK;
    TLC_TRY(tlc_launch(c, head_rmsnorm_k, dim3(tlc_div_up(rows, 4)), dim3(128), 0, x, rows, tok_stride, n_heads, head_dim,
                       w, eps), "head_rmsnorm");
    return TL_OK;
}

__global__ void add_bias_k(float *x, int64_t n_tok, int64_t ts, const float *b, int64_t n) {
    pdl_trigger();
    pdl_wait();
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n_tok * n) return;
    x[(i / n) * ts + i % n] += b[i % n];
}

tl_status tlc_add_bias(tlc_ctx *c, float *x, int64_t n_tok, int64_t tok_stride, const float *b, int64_t n) {
    if (tok_stride == 0) tok_stride = n;
    if (n_tok * n <= 0) return TL_OK;
    TLC_TRY(tlc_launch(c, add_bias_k, dim3(tlc_div_up(n_tok * n, 256)), dim3(256), 0, x, n_tok, tok_stride, b, n),
            "add_bias");
    return TL_OK;
}

__global__ void glu_rows_k(const float *in, float *out, int64_t n_tok, int64_t n) {
    pdl_trigger();
    pdl_wait();
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n_tok * n) return;
    int64_t t = i / n, j = i % n;
    float g = in[t * 2 * n + j];
    out[i] = g / (1.0f + expf(-g)) * in[t * 2 * n + n + j];
}

tl_status tlc_glu_rows(tlc_ctx *c, const float *in, float *out, int64_t n_tok, int64_t n) {
    if (n_tok * n <= 0) return TL_OK;
    TLC_TRY(tlc_launch(c, glu_rows_k, dim3(tlc_div_up(n_tok * n, 256)), dim3(256), 0, in, out, n_tok, n), "glu_rows");
    return TL_OK;
}

tl_status tlc_copy(tlc_ctx *c, void *dst, const void *src, size_t bytes) {
    TLC_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream), "device copy");
    return TL_OK;
}

/* the pair (a, b) = (x0, x1) of head `head` of one token's [q | k | v]
 * row h at pos: q/k rotated by pair p's angle and written back (k also
 * into the cache), v into the cache (and written back where v_back) */
__device__ __forceinline__ void rope_kv_pair(float *h, int a, int b, float x0, float x1, int head, int p, int nh,
                                             int nkv, int hd, __half *kc, __half *vc, int64_t n_ctx, int64_t pos,
                                             float base, float scale, const float *fdiv, bool v_back) {
    const bool qk = head < nh + nkv;
    float s = 0.0f, co = 1.0f;
    if (qk) rope_sincos((float)pos / scale, p, hd, base, fdiv, &s, &co);
    rope_store_pair(kc, vc, head, nh, nkv, hd, n_ctx, pos, a, b, s, co, x0, x1);
    if (qk || v_back) {
        h[a] = x0;
        h[b] = x1;
    }
}

/* one thread per rotated pair of q and k heads, plus one per pair of v */
__global__ void rope_kv_k(float *x, int nh, int nkv, int hd, __half *kc, __half *vc, int64_t n_ctx,
                          const int32_t *d_pos, int neox, float base, float scale, const float *fdiv) {
    pdl_trigger();
    pdl_wait();
    int half = hd / 2;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (nh + 2 * nkv) * half) return;
    int head = i / half, p = i % half;
    int64_t pos = __ldcg(d_pos);
    if (pos >= n_ctx) return;
    float *h = x + (int64_t)head * hd;
    int a = neox ? p : 2 * p, b = neox ? p + half : 2 * p + 1;
    rope_kv_pair(h, a, b, h[a], h[b], head, p, nh, nkv, hd, kc, vc, n_ctx, pos, base, scale, fdiv, false);
}

/* tlc_qk_rope_kv: rope_kv_k with the QKV bias and the per-head RMSNorm of
 * q and k in front, one launch instead of up to four. A block of
 * QKR_THREADS threads holds whole heads (half = hd / 2 threads each, a
 * power of two), thread = one rotation pair (a, b) of its head, so a head's
 * sum of squares is a shuffle reduction (and, past 32 threads, one over the
 * head's warps through shared memory). The arithmetic is add_bias_k's,
 * head_rmsnorm_k's and rope_kv_k's in the same order; only the sum of
 * squares adds in another order. */
#define QKR_THREADS 128
__global__ void __launch_bounds__(QKR_THREADS)
qk_rope_kv_k(float *x, int nh, int nkv, int hd, __half *kc, __half *vc, int64_t n_ctx, const int32_t *d_pos, int neox,
             float base, float scale, const float *fdiv, const float *bias, const float *qn, const float *kn,
             float eps) {
    pdl_trigger();
    pdl_wait();
    const int half = hd / 2;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const bool live = i < (nh + 2 * nkv) * half; /* the others still take part in the block's reductions */
    const int head = i / half, p = i % half;
    float *h = x + (int64_t)head * hd;
    const int a = neox ? p : 2 * p, b = neox ? p + half : 2 * p + 1;
    float x0 = live ? h[a] : 0.0f, x1 = live ? h[b] : 0.0f;
    if (bias && live) {
        x0 += bias[(int64_t)head * hd + a];
        x1 += bias[(int64_t)head * hd + b];
    }
    if (qn) {
        /* sum of x^2 over the head's half threads (aligned groups of the block) */
        float ss = x0 * x0 + x1 * x1;
        if (half >= 32) {
            ss = warp_sum(ss);
            if (half > 32) {
                __shared__ float wsum[QKR_THREADS / 32];
                const int w = threadIdx.x >> 5, per = half / 32, w0 = w - w % per;
                if ((threadIdx.x & 31) == 0) wsum[w] = ss;
                __syncthreads();
                ss = 0;
                for (int k = 0; k < per; k++) ss += wsum[w0 + k];
            }
        } else {
            for (int o = half / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        }
        if (live && head < nh + nkv) {
            const float *w = head < nh ? qn : kn, sc = rsqrtf(ss / (float)hd + eps);
            x0 = x0 * sc * w[a];
            x1 = x1 * sc * w[b];
        }
    }
    if (!live) return;
    const int64_t pos = __ldcg(d_pos);
    if (pos >= n_ctx) return;
    rope_kv_pair(h, a, b, x0, x1, head, p, nh, nkv, hd, kc, vc, n_ctx, pos, base, scale, fdiv, true);
}

bool tlc_qk_rope_kv_ok(const tlc_ctx *c, int head_dim, const tlc_rope_params *p) {
    return p->n_rot == head_dim && head_dim >= 2 && head_dim <= 2 * QKR_THREADS && !(head_dim & (head_dim - 1));
}

tl_status tlc_qk_rope_kv(tlc_ctx *c, float *qkv, int n_head, int n_kv_head, int head_dim, void *kc, void *vc,
                         int64_t n_ctx, const int32_t *d_pos, const tlc_rope_params *p, const float *bias,
                         const float *q_norm, const float *k_norm, float eps) {
    if (!tlc_qk_rope_kv_ok(c, head_dim, p))
        return tl_err(TL_ERR_UNSUPPORTED, "cuda: fused bias/norm/rope/kv needs n_rot == head_dim, a power of two "
                      "<= %d (head_dim %d, n_rot %d)", 2 * QKR_THREADS, head_dim, p->n_rot);
    if (!q_norm != !k_norm) return tl_err(TL_ERR_INVALID, "cuda: fused q/k norm needs both norm weights");
    const int n = (n_head + 2 * n_kv_head) * (head_dim / 2);
    TLC_TRY(tlc_launch(c, qk_rope_kv_k, dim3(tlc_div_up(n, QKR_THREADS)), dim3(QKR_THREADS), 0, qkv, n_head,
                       n_kv_head, head_dim, (__half *)kc, (__half *)vc, n_ctx, d_pos, p->neox ? 1 : 0, p->base,
                       p->scale > 0 ? p->scale : 1.0f, p->freq_div, bias, q_norm, k_norm, eps),
            "qk_rope_kv");
    return TL_OK;
}

tl_status tlc_rope_kv(tlc_ctx *c, float *qkv, int n_head, int n_kv_head, int head_dim, void *kc,
                      void *vc, int64_t n_ctx, const int32_t *d_pos, const tlc_rope_params *p) {
    if (p->n_rot != head_dim || (head_dim & 1))
        return tl_err(TL_ERR_UNSUPPORTED, "cuda: rope_kv needs n_rot == head_dim (%d vs %d)", p->n_rot, head_dim);
    int n = (n_head + 2 * n_kv_head) * (head_dim / 2);
    TLC_TRY(tlc_launch(c, rope_kv_k, dim3(tlc_div_up(n, 128)), dim3(128), 0, qkv, n_head, n_kv_head, head_dim,
                       (__half *)kc, (__half *)vc, n_ctx, d_pos, p->neox ? 1 : 0, p->base,
                       p->scale > 0 ? p->scale : 1.0f, p->freq_div),
            "rope_kv");
    return TL_OK;
}
