/* train/cuda/tcu_ops: the element-wise and row kernels of GPT-2 training:
 * embedding, broadcast add and its row sums, LayerNorm, GELU(tanh), fused
 * softmax + cross-entropy. Every reduction runs in a fixed order (no float
 * atomics), so a step gives the same bits each time it runs.
 * Owns: nothing. Calls: tcu_core (stream). */
#include "train/cuda/tcu_common.cuh"

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets it. */
__device__ float block_sum(float v, float *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float t = lane < nw ? sh[lane] : 0.f;
    return warp_sum(t);
}
__device__ float block_max(float v, float *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float t = lane < nw ? sh[lane] : -INFINITY;
    return warp_max(t);
}

/* ---- embedding ---- */
__global__ void k_emb_fwd(float *out, const float *w, const int32_t *ids, int64_t n, int64_t C) {
    int64_t i = blockIdx.x;
    const float *src = w + (int64_t)ids[i] * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) out[i * C + c] = src[c];
}

extern "C" tl_status tcu_embedding_fwd(float *out, const float *w, const int32_t *ids, int64_t n, int64_t C) {
    TCU_STATE(s);
    if (n) k_emb_fwd<<<(unsigned)n, 256, 0, s->stream>>>(out, w, ids, n, C);
    return tcu_check("embedding fwd");
}

__global__ void k_emb_bwd(float *gw, const float *g, const int32_t *uid, const int32_t *start, const int32_t *order,
                          int64_t C) {
    int u = blockIdx.x;
    int a = start[u], b = start[u + 1];
    float *dst = gw + (int64_t)uid[u] * C;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = 0.f;
        for (int j = a; j < b; j++) acc += g[(int64_t)order[j] * C + c];
        dst[c] += acc;
    }
}

extern "C" tl_status tcu_embedding_bwd(float *gw, const float *g, const int32_t *uid, const int32_t *start,
                                       const int32_t *order, int64_t n_unique, int64_t C) {
    TCU_STATE(s);
    if (n_unique) k_emb_bwd<<<(unsigned)n_unique, 256, 0, s->stream>>>(gw, g, uid, start, order, C);
    return tcu_check("embedding bwd");
}

/* ---- broadcast add over rows ---- */
__global__ void k_add_rows(float *out, const float *a, const float *b, int64_t R, int64_t Rb, int64_t N) {
    int64_t n = R * N;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / N, c = i - r * N;
        out[i] = a[i] + b[(r % Rb) * N + c];
    }
}

extern "C" tl_status tcu_add_rows(float *out, const float *a, const float *b, int64_t R, int64_t Rb, int64_t N) {
    TCU_STATE(s);
    if (R > 0 && N > 0) k_add_rows<<<tcu_blocks(R * N, 256), 256, 0, s->stream>>>(out, a, b, R, Rb, N);
    return tcu_check("add");
}

/* gb[rb, c] += sum over k of g[rb + k * Rb, c], k increasing. */
__global__ void k_sum_rows(float *gb, const float *g, int64_t R, int64_t Rb, int64_t N) {
    int64_t n = Rb * N;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t rb = i / N, c = i - rb * N;
        float acc = 0.f;
        for (int64_t r = rb; r < R; r += Rb) acc += g[r * N + c];
        gb[i] += acc;
    }
}

/* Column sums of g [R, N] in two fixed-order passes: 64 row chunks into
 * part [64, N], then part's columns into gb. */
#define SUM_CHUNKS 64
__global__ void k_colsum_part(float *part, const float *g, int64_t R, int64_t N) {
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int k = blockIdx.y;
    if (c >= N) return;
    int64_t per = (R + SUM_CHUNKS - 1) / SUM_CHUNKS, a = k * per, b = a + per < R ? a + per : R;
    float acc = 0.f;
    for (int64_t r = a; r < b; r++) acc += g[r * N + c];
    part[k * N + c] = acc;
}
__global__ void k_colsum_fin(float *gb, const float *part, int64_t N) {
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c >= N) return;
    float acc = 0.f;
    for (int k = 0; k < SUM_CHUNKS; k++) acc += part[k * N + c];
    gb[c] += acc;
}

extern "C" tl_status tcu_sum_rows_into(float *gb, const float *g, int64_t R, int64_t Rb, int64_t N, float *scratch) {
    TCU_STATE(s);
    if (!R || !N) return TL_OK;
    if (Rb == 1 && scratch) {
        dim3 grid((unsigned)((N + 255) / 256), SUM_CHUNKS);
        k_colsum_part<<<grid, 256, 0, s->stream>>>(scratch, g, R, N);
        k_colsum_fin<<<(unsigned)((N + 255) / 256), 256, 0, s->stream>>>(gb, scratch, N);
    } else {
        k_sum_rows<<<tcu_blocks(Rb * N, 256), 256, 0, s->stream>>>(gb, g, R, Rb, N);
    }
    return tcu_check("sum rows");
}

/* ---- LayerNorm: one warp per row ---- */
__global__ void k_ln_fwd(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                         int64_t R, int64_t C, float eps, bool rms) {
    int64_t r = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (r >= R) return;
    const float *xr = x + r * C;
    float s = 0.f;
    for (int64_t c = lane; c < C; c += 32) s += xr[c];
    float mu = rms ? 0.f : warp_sum(s) / (float)C;
    float v = 0.f;
    for (int64_t c = lane; c < C; c += 32) {
        float d = xr[c] - mu;
        v += d * d;
    }
    float rs = rsqrtf(warp_sum(v) / (float)C + eps);
    float *yr = y + r * C;
    for (int64_t c = lane; c < C; c += 32) yr[c] = (xr[c] - mu) * rs * w[c] + (b ? b[c] : 0.f);
    if (lane == 0) {
        if (mean) mean[r] = mu;
        rstd[r] = rs;
    }
}

extern "C" tl_status tcu_layernorm_fwd(float *y, float *mean, float *rstd, const float *x, const float *w,
                                       const float *b, int64_t R, int64_t C, float eps) {
    TCU_STATE(s);
    bool rms = mean == NULL;
    if (R) k_ln_fwd<<<(unsigned)((R + 7) / 8), 256, 0, s->stream>>>(y, mean, rstd, x, w, b, R, C, eps, rms);
    return tcu_check("layernorm fwd");
}

#define LN_BLOCKS TCU_LN_BLOCKS
#define LN_WARPS 8
#define LN_SMEM (200 * 1024)
/* dx per row; each block's rows [a, b) add their g*xhat and g into the
 * block's partials, a warp's own slice of shared memory first, then summed
 * over the warps in order into part [2, LN_BLOCKS, C]. The block has as
 * many warps (up to LN_WARPS) as slices of 2 C floats fit in LN_SMEM. */
__global__ void k_ln_bwd(float *gx, bool add, float *part, const float *g, const float *x, const float *w,
                         const float *mean, const float *rstd, int64_t R, int64_t C) {
    extern __shared__ float sm[]; /* [warps][2][C] */
    const int nw = blockDim.x >> 5, wp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *pw = sm + (int64_t)wp * 2 * C, *pb = pw + C;
    for (int64_t c = lane; c < C; c += 32) pw[c] = pb[c] = 0.f;
    int64_t per = (R + LN_BLOCKS - 1) / LN_BLOCKS, a = blockIdx.x * per, b = a + per < R ? a + per : R;
    for (int64_t r = a + wp; r < b; r += nw) {
        const float *xr = x + r * C, *gr = g + r * C;
        float mu = mean ? mean[r] : 0.f, rs = rstd[r];
        float s1 = 0.f, s2 = 0.f;
        for (int64_t c = lane; c < C; c += 32) {
            float xh = (xr[c] - mu) * rs, dxh = gr[c] * w[c];
            s1 += dxh;
            s2 += dxh * xh;
            pw[c] += gr[c] * xh;
            pb[c] += gr[c];
        }
        s1 = warp_sum(s1) / (float)C;
        s2 = warp_sum(s2) / (float)C;
        float *o = gx + r * C;
        for (int64_t c = lane; c < C; c += 32) {
            float xh = (xr[c] - mu) * rs;
            float d = (gr[c] * w[c] - (mean ? s1 : 0.f) - xh * s2) * rs;
            o[c] = add ? o[c] + d : d;
        }
    }
    __syncthreads();
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        float sw = 0.f, sb = 0.f;
        for (int k = 0; k < nw; k++) {
            sw += sm[(int64_t)k * 2 * C + c];
            sb += sm[(int64_t)k * 2 * C + C + c];
        }
        part[(int64_t)blockIdx.x * C + c] = sw;
        part[(int64_t)(LN_BLOCKS + blockIdx.x) * C + c] = sb;
    }
}

__global__ void k_ln_fin(float *gw, float *gb, const float *part, int64_t C) {
    int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (c >= C) return;
    float sw = 0.f, sb = 0.f;
    for (int k = 0; k < LN_BLOCKS; k++) {
        sw += part[(int64_t)k * C + c];
        sb += part[(int64_t)(LN_BLOCKS + k) * C + c];
    }
    if (gw) gw[c] += sw;
    if (gb) gb[c] += sb;
}

extern "C" tl_status tcu_layernorm_bwd(float *gx, bool gx_add, float *gw, float *gb, const float *g, const float *x,
                                       const float *w, const float *mean, const float *rstd, int64_t R, int64_t C,
                                       float *scratch) {
    TCU_STATE(s);
    if (!R) return TL_OK;
    const size_t slice = 2 * (size_t)C * sizeof(float);
    const int nw = (int)(LN_SMEM / slice < LN_WARPS ? LN_SMEM / slice : LN_WARPS);
    if (nw < 1) return tl_err(TL_ERR_UNSUPPORTED, "train cuda: layernorm of width %lld (at most %zu)", (long long)C,
                              LN_SMEM / (2 * sizeof(float)));
    const size_t smem = (size_t)nw * slice;
    if (smem > 48 * 1024)
        cudaFuncSetAttribute(k_ln_bwd, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    k_ln_bwd<<<LN_BLOCKS, 32 * nw, smem, s->stream>>>(gx, gx_add, scratch, g, x, w, mean, rstd, R, C);
    k_ln_fin<<<(unsigned)((C + 255) / 256), 256, 0, s->stream>>>(gw, gb, scratch, C);
    return tcu_check("layernorm bwd");
}

/* ---- GELU (tanh approximation) ---- */
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
/* tanh(u) = 1 - 2 / (e^2u + 1) with the fast exponential: within ~1e-7 of
 * tanhf absolutely (and saturating to +-1 where e^2u overflows or vanishes),
 * where tanhf's accurate path made these passes compute-bound */
__device__ __forceinline__ float gelu_tanh_of(float v) {
    return 1.f - 2.f / (__expf(2.f * GELU_K * (v + 0.044715f * v * v * v)) + 1.f);
}
__device__ __forceinline__ float gelu_f(float v) { return 0.5f * v * (1.f + gelu_tanh_of(v)); }
__device__ __forceinline__ float gelu_d(float v) {
    const float t = gelu_tanh_of(v);
    return 0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * GELU_K * (1.f + 3.f * 0.044715f * v * v);
}

/* n4 float4s, then the tail (n4 = 0 when a pointer is not 16-byte aligned) */
__global__ void k_gelu_fwd(float *y, const float *x, int64_t n, int64_t n4) {
    const int64_t st = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += st) {
        const float4 v = ((const float4 *)x)[i];
        ((float4 *)y)[i] = make_float4(gelu_f(v.x), gelu_f(v.y), gelu_f(v.z), gelu_f(v.w));
    }
    for (int64_t i = 4 * n4 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += st) y[i] = gelu_f(x[i]);
}
__global__ void k_gelu_bwd(float *gx, bool add, const float *g, const float *x, int64_t n, int64_t n4) {
    const int64_t st = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += st) {
        const float4 v = ((const float4 *)x)[i], gv = ((const float4 *)g)[i];
        float4 r = make_float4(gv.x * gelu_d(v.x), gv.y * gelu_d(v.y), gv.z * gelu_d(v.z), gv.w * gelu_d(v.w));
        if (add) {
            const float4 o = ((const float4 *)gx)[i];
            r.x += o.x, r.y += o.y, r.z += o.z, r.w += o.w;
        }
        ((float4 *)gx)[i] = r;
    }
    for (int64_t i = 4 * n4 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += st) {
        const float r = g[i] * gelu_d(x[i]);
        gx[i] = add ? gx[i] + r : r;
    }
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

extern "C" tl_status tcu_gelu_tanh_fwd(float *y, const float *x, int64_t n) {
    TCU_STATE(s);
    const int64_t n4 = aligned16(y) && aligned16(x) ? n / 4 : 0;
    if (n) k_gelu_fwd<<<tcu_blocks(n4 ? n4 : n, 256), 256, 0, s->stream>>>(y, x, n, n4);
    return tcu_check("gelu fwd");
}
extern "C" tl_status tcu_gelu_tanh_bwd(float *gx, bool gx_add, const float *g, const float *x, int64_t n) {
    TCU_STATE(s);
    const int64_t n4 = aligned16(gx) && aligned16(g) && aligned16(x) ? n / 4 : 0;
    if (n) k_gelu_bwd<<<tcu_blocks(n4 ? n4 : n, 256), 256, 0, s->stream>>>(gx, gx_add, g, x, n, n4);
    return tcu_check("gelu bwd");
}

/* ---- softmax + cross-entropy: one block per row ---- */
__global__ void k_xent_fwd(float *lse, float *rowloss, const float *logits, const int32_t *tgt, int64_t V,
                           int32_t ignore) {
    __shared__ float sh[32];
    int64_t r = blockIdx.x;
    const float *x = logits + r * V;
    /* one pass: each thread keeps its running max and the sum scaled to it */
    float mt = -INFINITY, st = 0.f;
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
        const float v = x[j];
        if (v > mt) {
            st = st * expf(mt - v) + 1.f;
            mt = v;
        } else {
            st += expf(v - mt);
        }
    }
    const float m = block_max(mt, sh);
    float s = block_sum(mt == -INFINITY ? 0.f : st * expf(mt - m), sh);
    if (threadIdx.x == 0) {
        float l = m + logf(s);
        lse[r] = l;
        int32_t t = tgt[r];
        rowloss[r] = (t == ignore || t < 0 || t >= V) ? 0.f : l - x[t];
    }
}
__global__ void k_xent_sum(float *loss, const float *rowloss, int64_t N, float inv) {
    __shared__ float sh[32];
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) s += rowloss[i];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) loss[0] = s * inv;
}

extern "C" tl_status tcu_xent_fwd(float *loss, float *lse, float *rowloss, const float *logits, const int32_t *tgt,
                                  int64_t N, int64_t V, int32_t ignore, int64_t n_valid) {
    TCU_STATE(s);
    if (N) k_xent_fwd<<<(unsigned)N, 1024, 0, s->stream>>>(lse, rowloss, logits, tgt, V, ignore);
    k_xent_sum<<<1, 1024, 0, s->stream>>>(loss, rowloss, N, n_valid ? 1.f / (float)n_valid : 0.f);
    return tcu_check("cross_entropy fwd");
}

__global__ void k_xent_bwd(float *gl, bool add, const float *gloss, const float *logits, const float *lse,
                           const int32_t *tgt, int64_t N, int64_t V, int32_t ignore, float inv) {
    for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
        int32_t t = tgt[r];
        bool skip = t == ignore || t < 0 || t >= V;
        float scale = skip ? 0.f : gloss[0] * inv, l = lse[r];
        const float *x = logits + r * V;
        float *o = gl + r * V;
        for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
            float d = (expf(x[j] - l) - (j == t ? 1.f : 0.f)) * scale;
            o[j] = add ? o[j] + d : d;
        }
    }
}

extern "C" tl_status tcu_xent_bwd(float *glogits, bool add, const float *gloss, const float *logits, const float *lse,
                                  const int32_t *tgt, int64_t N, int64_t V, int32_t ignore, int64_t n_valid) {
    TCU_STATE(s);
    if (!N) return TL_OK;
    k_xent_bwd<<<(unsigned)(N < 1048576 ? N : 1048576), 1024, 0, s->stream>>>(glogits, add, gloss, logits, lse, tgt, N, V, ignore,
                                              n_valid ? 1.f / (float)n_valid : 0.f);
    return tcu_check("cross_entropy bwd");
}

/* ---- attention's row softmax over S [rows of T] (query i = row % T) ---- */
__global__ void k_softmax_causal(float *p, int64_t T, bool causal) {
    __shared__ float sh[32];
    int64_t row = blockIdx.x, i = row % T;
    float *x = p + row * T;
    int64_t lim = causal ? i + 1 : T;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < lim; j += blockDim.x) m = fmaxf(m, x[j]);
    m = block_max(m, sh);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < lim; j += blockDim.x) s += expf(x[j] - m);
    s = block_sum(s, sh);
    float inv = 1.f / s;
    for (int64_t j = threadIdx.x; j < T; j += blockDim.x) x[j] = j < lim ? expf(x[j] - m) * inv : 0.f;
}

/* dS = P * (dP - sum_j P dP) * scale, in place over dP */
__global__ void k_softmax_bwd(float *dp, const float *p, int64_t T, float scale) {
    __shared__ float sh[32];
    int64_t row = blockIdx.x;
    float *d = dp + row * T;
    const float *pr = p + row * T;
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < T; j += blockDim.x) s += pr[j] * d[j];
    s = block_sum(s, sh);
    for (int64_t j = threadIdx.x; j < T; j += blockDim.x) d[j] = pr[j] * (d[j] - s) * scale;
}

extern "C" tl_status tcu_softmax_rows(float *p, int64_t rows, int64_t T, bool causal) {
    TCU_STATE(s);
    if (rows) k_softmax_causal<<<(unsigned)rows, 256, 0, s->stream>>>(p, T, causal);
    return tcu_check("attention softmax");
}

extern "C" tl_status tcu_softmax_rows_bwd(float *dp, const float *p, int64_t rows, int64_t T, float scale) {
    TCU_STATE(s);
    if (rows) k_softmax_bwd<<<(unsigned)rows, 256, 0, s->stream>>>(dp, p, T, scale);
    return tcu_check("attention softmax bwd");
}

/* ---- SiLU, element-wise product, RoPE (the Llama ops) ---- */
__global__ void k_silu_fwd(float *y, const float *x, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i];
        y[i] = v / (1.f + expf(-v));
    }
}
__global__ void k_silu_bwd(float *gx, bool add, const float *g, const float *x, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i], sg = 1.f / (1.f + expf(-v));
        float r = g[i] * sg * (1.f + v * (1.f - sg));
        gx[i] = add ? gx[i] + r : r;
    }
}
extern "C" tl_status tcu_silu_fwd(float *y, const float *x, int64_t n) {
    TCU_STATE(s);
    if (n) k_silu_fwd<<<tcu_blocks(n, 256), 256, 0, s->stream>>>(y, x, n);
    return tcu_check("silu fwd");
}
extern "C" tl_status tcu_silu_bwd(float *gx, bool gx_add, const float *g, const float *x, int64_t n) {
    TCU_STATE(s);
    if (n) k_silu_bwd<<<tcu_blocks(n, 256), 256, 0, s->stream>>>(gx, gx_add, g, x, n);
    return tcu_check("silu bwd");
}

/* y = a * b; and the backward's ga (=|+=) g * b */
__global__ void k_mul(float *y, bool add, const float *a, const float *b, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float r = a[i] * b[i];
        y[i] = add ? y[i] + r : r;
    }
}
extern "C" tl_status tcu_mul(float *y, bool add, const float *a, const float *b, int64_t n) {
    TCU_STATE(s);
    if (n) k_mul<<<tcu_blocks(n, 256), 256, 0, s->stream>>>(y, add, a, b, n);
    return tcu_check("mul");
}

/* y (=|+=) a * x: tt_scale and its backward */
__global__ void k_scale(float *y, bool add, const float *x, float a, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float r = a * x[i];
        y[i] = add ? y[i] + r : r;
    }
}

extern "C" tl_status tcu_scale(float *y, bool add, const float *x, float a, int64_t n) {
    TCU_STATE(s);
    if (n) k_scale<<<tcu_blocks(n, 256), 256, 0, s->stream>>>(y, add, x, a, n);
    return tcu_check("scale");
}

/* x [rows = B*T*H, D], row r at position t = (r / H) % T; cs [T, D] holds
 * (cos, sin) pairs; dir -1 rotates back (the backward). */
__global__ void k_rope(float *y, bool add, const float *x, const float *cs, int64_t rows, int64_t T, int64_t H,
                       int64_t D, float dir) {
    int64_t half = D / 2, n = rows * half;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / half, k = i - r * half, t = (r / H) % T;
        float co = cs[t * D + 2 * k], si = dir * cs[t * D + 2 * k + 1];
        float x0 = x[r * D + 2 * k], x1 = x[r * D + 2 * k + 1];
        float y0 = x0 * co - x1 * si, y1 = x0 * si + x1 * co;
        if (add) {
            y[r * D + 2 * k] += y0;
            y[r * D + 2 * k + 1] += y1;
        } else {
            y[r * D + 2 * k] = y0;
            y[r * D + 2 * k + 1] = y1;
        }
    }
}
extern "C" tl_status tcu_rope(float *y, bool add, const float *x, const float *cs, int64_t rows, int64_t T, int64_t H,
                              int64_t D, int dir) {
    TCU_STATE(s);
    if (rows) k_rope<<<tcu_blocks(rows * (D / 2), 256), 256, 0, s->stream>>>(y, add, x, cs, rows, T, H, D, (float)dir);
    return tcu_check("rope");
}
