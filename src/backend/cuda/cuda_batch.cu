/* backend/cuda/cuda_batch: the ops of steps whose tokens come from many
 * sequences (or carry their own positions): RoPE and the KV store by each
 * token's position and slot, attention through the page tables, and the
 * small row ops the generic forward needs (LayerNorm, GELU, GELU-GLU,
 * scale, row gather, per-row argmax).
 *
 * Paged attention: token t (position pos[t] of sequence seq[t]) reads its
 * keys p through its sequence's page table: slot = table[p >> shift] <<
 * shift | (p & (B - 1)), row (kv head h) at cache + (h * N + slot) * D, the
 * cache of a layer being [kv head][N positions][D] f16 (a block is a range
 * of B positions of every head's plane). Grid (token x kv head, split):
 * each block's 4 warps interleave the split's positions for all G query
 * heads of the KV head with an online softmax, merge in shared memory and
 * write (m, l, acc) per head; a second launch merges the splits per query
 * head. A lane holds E consecutive dims (D <= 32 E).
 * Calls: CUDA. */
#include "backend/cuda/cuda_common.cuh"

/* ---- per-token RoPE and KV store ------------------------------------------ */

/* one thread per rotated pair; token t at position pos[t] */
__global__ void rope_rows_k(float *x, int64_t n_tok, int64_t ts, int n_heads, int hd, const int32_t *pos, int n_rot,
                            int neox, float base, float scale, const float *fdiv) {
    pdl_trigger();
    pdl_wait();
    const int half = n_rot / 2;
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n_tok * n_heads * half) return;
    const int p = (int)(i % half);
    const int64_t th = i / half, t = th / n_heads;
    float s, co;
    rope_sincos((float)pos[t] / scale, p, n_rot, base, fdiv, &s, &co);
    float *h = x + t * ts + (th % n_heads) * hd;
    const int a = neox ? p : 2 * p, b = neox ? p + half : 2 * p + 1;
    const float x0 = h[a], x1 = h[b];
    h[a] = __fmaf_rn(x0, co, -__fmul_rn(x1, s));
    h[b] = __fmaf_rn(x0, s, __fmul_rn(x1, co));
}

tl_status tlc_rope_rows(tlc_ctx *c, float *x, int64_t n_tok, int64_t tok_stride, int n_heads, int head_dim,
                        const int32_t *d_pos, const tlc_rope_params *p) {
    if (p->n_rot <= 0 || p->n_rot > head_dim || (p->n_rot & 1))
        return tl_err(TL_ERR_INVALID, "cuda: rope: n_rot %d with head_dim %d", p->n_rot, head_dim);
    const int64_t n = n_tok * n_heads * (p->n_rot / 2);
    if (n <= 0) return TL_OK;
    TLC_TRY(tlc_launch(c, rope_rows_k, dim3(tlc_div_up(n, 256)), dim3(256), 0, x, n_tok, tok_stride, n_heads, head_dim,
                       d_pos, p->n_rot, p->neox ? 1 : 0, p->base, p->scale > 0 ? p->scale : 1.0f, p->freq_div),
            "rope (per token)");
    return TL_OK;
}

__global__ void kv_store_slots_k(const float *k, const float *v, int64_t n_tok, int64_t ts, int nkv, int hd,
                                 __half *kc, __half *vc, int64_t n_plane, const int32_t *slot) {
    pdl_trigger();
    pdl_wait();
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, per = (int64_t)nkv * hd;
    if (i >= n_tok * per) return;
    const int64_t t = i / per, r = i % per;
    const size_t o = ((size_t)(r / hd) * n_plane + slot[t]) * hd + r % hd;
    kc[o] = __float2half(k[t * ts + r]);
    vc[o] = __float2half(v[t * ts + r]);
}

tl_status tlc_kv_store_slots(tlc_ctx *c, const float *k, const float *v, int64_t n_tok, int64_t tok_stride,
                             int n_kv_head, int head_dim, void *kc, void *vc, int64_t n_plane, const int32_t *d_slot) {
    const int64_t n = n_tok * n_kv_head * head_dim;
    if (n <= 0) return TL_OK;
    TLC_TRY(tlc_launch(c, kv_store_slots_k, dim3(tlc_div_up(n, 256)), dim3(256), 0, k, v, n_tok, tok_stride, n_kv_head,
                       head_dim, (__half *)kc, (__half *)vc, n_plane, d_slot),
            "kv store (slots)");
    return TL_OK;
}

/* ---- paged attention ---------------------------------------------------------- */

#define PA_WARPS 4

struct pa_args {
    const float *q;
    int64_t q_stride;
    const __half *kc, *vc;
    int64_t n_plane;
    int D, nh, nkv, shift, window, n_split;
    const int32_t *pos, *seq, *table;
    int64_t table_stride;
    float scale;
    float *part; /* [n_tok][nkv][n_split][G][D + 2]: acc[D], m, l */
};

template <int E, int GM>
__global__ void __launch_bounds__(PA_WARPS * 32) attn_paged_k(pa_args a) {
    pdl_trigger();
    pdl_wait();
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int64_t t = blockIdx.x / a.nkv;
    const int h = (int)(blockIdx.x % a.nkv), G = a.nh / a.nkv, s = blockIdx.y, D = a.D;
    const int64_t last = a.pos[t];
    const int64_t first = a.window > 0 && last - a.window + 1 > 0 ? last - a.window + 1 : 0;
    const int64_t len = last + 1 - first;
    const int64_t chunk = (len + a.n_split - 1) / a.n_split;
    const int64_t p0 = first + s * chunk, p1 = min(p0 + chunk, last + 1);
    const int32_t *tab = a.table + (int64_t)a.seq[t] * a.table_stride;
    const int64_t mask = ((int64_t)1 << a.shift) - 1;
    const bool act = lane * E < D;
    float q[GM][E], acc[GM][E], m[GM], l[GM];
#pragma unroll
    for (int g = 0; g < GM; g++) {
        m[g] = -INFINITY;
        l[g] = 0.0f;
#pragma unroll
        for (int e = 0; e < E; e++) {
            const int d = lane * E + e;
            q[g][e] = g < G && d < D ? a.q[t * a.q_stride + (int64_t)(h * G + g) * D + d] * a.scale : 0.0f;
            acc[g][e] = 0.0f;
        }
    }
    /* two positions per warp in flight: both rows are loaded before either is used */
    for (int64_t p = p0 + w; p < p1; p += 2 * PA_WARPS) {
        float k[2][E], v[2][E];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int64_t pj = p + j * PA_WARPS;
            const bool in = pj < p1;
            const int64_t slot = in ? ((int64_t)tab[pj >> a.shift] << a.shift) | (pj & mask) : 0;
            const __half *kr = a.kc + ((int64_t)h * a.n_plane + slot) * D + lane * E;
            const __half *vr = a.vc + ((int64_t)h * a.n_plane + slot) * D + lane * E;
#pragma unroll
            for (int e = 0; e < E; e++) {
                const bool ok = in && act && lane * E + e < D;
                k[j][e] = ok ? __half2float(kr[e]) : 0.0f;
                v[j][e] = ok ? __half2float(vr[e]) : 0.0f;
            }
        }
#pragma unroll
        for (int j = 0; j < 2; j++) {
            if (p + j * PA_WARPS >= p1) break;
            float sc[GM];
#pragma unroll
            for (int g = 0; g < GM; g++) {
                sc[g] = 0.0f;
#pragma unroll
                for (int e = 0; e < E; e++) sc[g] += q[g][e] * k[j][e];
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
#pragma unroll
                for (int g = 0; g < GM; g++) sc[g] += __shfl_xor_sync(0xffffffffu, sc[g], o);
#pragma unroll
            for (int g = 0; g < GM; g++) {
                const float mn = fmaxf(m[g], sc[g]);
                const float corr = __expf(m[g] - mn), pw = __expf(sc[g] - mn);
                l[g] = l[g] * corr + pw;
#pragma unroll
                for (int e = 0; e < E; e++) acc[g][e] = acc[g][e] * corr + pw * v[j][e];
                m[g] = mn;
            }
        }
    }
    /* merge the warps: each writes its state, warp 0 combines */
    extern __shared__ float pa_sh[]; /* [PA_WARPS][GM][32 E + 2] */
    const int row = 32 * E + 2;
#pragma unroll
    for (int g = 0; g < GM; g++) {
        float *r = pa_sh + (w * GM + g) * row;
#pragma unroll
        for (int e = 0; e < E; e++) r[lane * E + e] = acc[g][e];
        if (lane == 0) r[32 * E] = m[g], r[32 * E + 1] = l[g];
    }
    __syncthreads();
    if (w) return;
    float *out = a.part + (((t * a.nkv + h) * a.n_split + s) * (int64_t)G) * (D + 2);
    for (int g = 0; g < G && g < GM; g++) {
        float mx = -INFINITY;
        for (int k = 0; k < PA_WARPS; k++) mx = fmaxf(mx, pa_sh[(k * GM + g) * row + 32 * E]);
        float ls = 0.0f, f[PA_WARPS];
        for (int k = 0; k < PA_WARPS; k++) {
            const float mk = pa_sh[(k * GM + g) * row + 32 * E];
            f[k] = mk == -INFINITY ? 0.0f : __expf(mk - mx);
            ls += pa_sh[(k * GM + g) * row + 32 * E + 1] * f[k];
        }
        float *o = out + (int64_t)g * (D + 2);
        for (int d = lane; d < D; d += 32) {
            float v = 0.0f;
            for (int k = 0; k < PA_WARPS; k++) v += pa_sh[(k * GM + g) * row + d] * f[k];
            o[d] = v;
        }
        if (lane == 0) o[D] = mx, o[D + 1] = ls;
    }
}

/* one warp per (token, query head): the splits merged, normalized */
__global__ void attn_paged_merge_k(const float *part, int64_t n_tok, int D, int nh, int nkv, int n_split, float *out) {
    pdl_trigger();
    pdl_wait();
    const int64_t r = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= n_tok * nh) return;
    const int lane = threadIdx.x & 31, G = nh / nkv;
    const int64_t t = r / nh;
    const int hq = (int)(r % nh), h = hq / G, g = hq % G;
    const float *p = part + ((t * nkv + h) * n_split * (int64_t)G + g) * (D + 2);
    const int64_t sstride = (int64_t)G * (D + 2);
    float mx = -INFINITY;
    for (int s = 0; s < n_split; s++) mx = fmaxf(mx, p[s * sstride + D]);
    float l = 0.0f;
    for (int s = 0; s < n_split; s++) {
        const float ms = p[s * sstride + D];
        if (ms != -INFINITY) l += p[s * sstride + D + 1] * __expf(ms - mx);
    }
    const float inv = 1.0f / l;
    for (int d = lane; d < D; d += 32) {
        float v = 0.0f;
        for (int s = 0; s < n_split; s++) {
            const float ms = p[s * sstride + D];
            if (ms != -INFINITY) v += p[s * sstride + d] * __expf(ms - mx);
        }
        out[t * (int64_t)nh * D + (int64_t)hq * D + d] = v * inv;
    }
}

int tlc_attn_paged_splits(int64_t n_tok, int n_kv_head, int64_t max_len) {
    int64_t s = (1024 + n_tok * n_kv_head - 1) / (n_tok * n_kv_head);
    const int64_t by_len = (max_len + 15) / 16; /* at least 16 positions per split */
    if (s > by_len) s = by_len;
    if (s > 32) s = 32;
    return s < 1 ? 1 : (int)s;
}

size_t tlc_attn_paged_scratch(int64_t n_tok, int n_head, int n_kv_head, int head_dim) {
    /* the most splits any launch of up to n_tok tokens uses */
    int64_t worst = 0;
    for (int64_t m = 1; m <= n_tok; m++) {
        const int64_t b = m * n_kv_head * tlc_attn_paged_splits(m, n_kv_head, INT64_MAX / 2);
        if (b > worst) worst = b;
    }
    return (size_t)worst * (size_t)(n_head / n_kv_head) * (size_t)(head_dim + 2);
}

template <int E, int GM> static cudaError_t pa_launch(tlc_ctx *c, const pa_args &a, int64_t n_tok) {
    const size_t smem = (size_t)PA_WARPS * GM * (32 * E + 2) * sizeof(float);
    return tlc_launch(c, attn_paged_k<E, GM>, dim3((unsigned)(n_tok * a.nkv), (unsigned)a.n_split), dim3(PA_WARPS * 32),
                      smem, a);
}

template <int E> static cudaError_t pa_launch_g(tlc_ctx *c, const pa_args &a, int64_t n_tok, int G) {
    if (G <= 1) return pa_launch<E, 1>(c, a, n_tok);
    if (G <= 2) return pa_launch<E, 2>(c, a, n_tok);
    if (G <= 4) return pa_launch<E, 4>(c, a, n_tok);
    return pa_launch<E, 8>(c, a, n_tok);
}

tl_status tlc_attn_paged(tlc_ctx *c, const float *q, int64_t q_stride, int64_t n_tok, const void *kc, const void *vc,
                         int64_t n_plane, int n_head, int n_kv_head, int head_dim, const int32_t *d_pos,
                         const int32_t *d_seq, const int32_t *d_table, int64_t table_stride, int block_shift,
                         int window, float scale, int n_split, float *scratch, float *out) {
    if (n_tok <= 0) return TL_OK;
    if (n_kv_head <= 0 || n_head % n_kv_head || n_head / n_kv_head > 8 || head_dim > 256 || head_dim < 1)
        return tl_err(TL_ERR_UNSUPPORTED, "cuda: paged attention with %d heads over %d KV heads of %d dims", n_head,
                      n_kv_head, head_dim);
    pa_args a = {q, q_stride, (const __half *)kc, (const __half *)vc, n_plane, head_dim, n_head, n_kv_head,
                 block_shift, window, n_split, d_pos, d_seq, d_table, table_stride, scale, scratch};
    const int G = n_head / n_kv_head;
    cudaError_t e;
    if (head_dim <= 32)
        e = pa_launch_g<1>(c, a, n_tok, G);
    else if (head_dim <= 64)
        e = pa_launch_g<2>(c, a, n_tok, G);
    else if (head_dim <= 128)
        e = pa_launch_g<4>(c, a, n_tok, G);
    else
        e = pa_launch_g<8>(c, a, n_tok, G);
    TLC_TRY(e, "paged attention");
    const int64_t rows = n_tok * n_head;
    TLC_TRY(tlc_launch(c, attn_paged_merge_k, dim3(tlc_div_up(rows, 4)), dim3(128), 0, (const float *)scratch, n_tok,
                       head_dim, n_head, n_kv_head, n_split, out),
            "paged attention merge");
    return TL_OK;
}

/* ---- row ops ---------------------------------------------------------------- */

/* one block per row: two passes in float over the row (mean, centred variance) */
__global__ void layernorm_k(const float *x, const float *w, const float *b, float eps, int64_t n, float *y) {
    pdl_trigger();
    pdl_wait();
    __shared__ float sh[32];
    const float *xr = x + blockIdx.x * n;
    float *yr = y + blockIdx.x * n;
    auto bsum = [&](float v) {
        v = warp_sum(v);
        __syncthreads();
        if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
        __syncthreads();
        float r = (int)(threadIdx.x & 31) < (int)(blockDim.x >> 5) ? sh[threadIdx.x & 31] : 0.0f;
        return warp_sum(r);
    };
    float s = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += xr[i];
    const float mean = bsum(s) / (float)n;
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += (xr[i] - mean) * (xr[i] - mean);
    const float rstd = rsqrtf(bsum(ss) / (float)n + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = (xr[i] - mean) * rstd;
        if (w) v *= w[i];
        if (b) v += b[i];
        yr[i] = v;
    }
}

tl_status tlc_layernorm(tlc_ctx *c, const float *x, const float *w, const float *b, float eps, int64_t n,
                        int64_t n_rows, float *out) {
    if (n_rows <= 0) return TL_OK;
    TLC_TRY(tlc_launch(c, layernorm_k, dim3((unsigned)n_rows), dim3(256), 0, x, w, b, eps, n, out), "layernorm");
    return TL_OK;
}

__device__ __forceinline__ float gelu_f(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

/* x[t][i] = gelu(x[t][i]) (rows ld apart), or with up (GLU: in [t][2n] -> out [t][n]) */
__global__ void gelu_rows_k(float *x, int64_t n_tok, int64_t n, int64_t ld) {
    pdl_trigger();
    pdl_wait();
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n_tok * n) return;
    float *p = x + (i / n) * ld + i % n;
    *p = gelu_f(*p);
}

__global__ void glu_gelu_rows_k(const float *in, float *out, int64_t n_tok, int64_t n) {
    pdl_trigger();
    pdl_wait();
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n_tok * n) return;
    const int64_t t = i / n, j = i % n;
    out[i] = gelu_f(in[t * 2 * n + j]) * in[t * 2 * n + n + j];
}

tl_status tlc_gelu_rows(tlc_ctx *c, float *x, int64_t n_tok, int64_t n, int64_t ld) {
    if (n_tok * n <= 0) return TL_OK;
    TLC_TRY(tlc_launch(c, gelu_rows_k, dim3(tlc_div_up(n_tok * n, 256)), dim3(256), 0, x, n_tok, n, ld), "gelu");
    return TL_OK;
}

tl_status tlc_glu_gelu_rows(tlc_ctx *c, const float *in, float *out, int64_t n_tok, int64_t n) {
    if (n_tok * n <= 0) return TL_OK;
    TLC_TRY(tlc_launch(c, glu_gelu_rows_k, dim3(tlc_div_up(n_tok * n, 256)), dim3(256), 0, in, out, n_tok, n),
            "gelu glu");
    return TL_OK;
}

__global__ void scale_k(float *x, float s, int64_t n) {
    pdl_trigger();
    pdl_wait();
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
}

tl_status tlc_scale(tlc_ctx *c, float *x, float s, int64_t n) {
    if (n <= 0) return TL_OK;
    TLC_TRY(tlc_launch(c, scale_k, dim3(tlc_div_up(n, 256)), dim3(256), 0, x, s, n), "scale");
    return TL_OK;
}

__global__ void gather_rows_k(const float *x, int64_t n, const int32_t *rows, int64_t m, float *out) {
    pdl_trigger();
    pdl_wait();
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= m * n) return;
    out[i] = x[(int64_t)rows[i / n] * n + i % n];
}

tl_status tlc_gather_rows(tlc_ctx *c, const float *x, int64_t n, const int32_t *d_rows, int64_t m, float *out) {
    if (m * n <= 0) return TL_OK;
    TLC_TRY(tlc_launch(c, gather_rows_k, dim3(tlc_div_up(m * n, 256)), dim3(256), 0, x, n, d_rows, m, out), "gather");
    return TL_OK;
}

/* one block per row: lowest index of the largest value, NaN never chosen over a number */
__global__ void argmax_rows_k(const float *x, int64_t n, int64_t ld, int32_t *out) {
    pdl_trigger();
    pdl_wait();
    __shared__ float sv[32];
    __shared__ int64_t si[32];
    const float *r = x + blockIdx.x * ld;
    float best = -INFINITY;
    int64_t bi = -1;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = r[i];
        if (bi < 0 || v > best || (best != best && v == v)) best = v, bi = i;
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, best, o);
        const int64_t j = __shfl_xor_sync(0xffffffffu, bi, o);
        if (j >= 0 && (bi < 0 || v > best || (v == best && j < bi) || (best != best && v == v))) best = v, bi = j;
    }
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) sv[w] = best, si[w] = bi;
    __syncthreads();
    if (w) return;
    const int nw = blockDim.x >> 5;
    best = lane < nw ? sv[lane] : -INFINITY;
    bi = lane < nw ? si[lane] : -1;
    for (int o = 16; o > 0; o >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, best, o);
        const int64_t j = __shfl_xor_sync(0xffffffffu, bi, o);
        if (j >= 0 && (bi < 0 || v > best || (v == best && j < bi) || (best != best && v == v))) best = v, bi = j;
    }
    if (lane == 0) out[blockIdx.x] = (int32_t)(bi < 0 ? 0 : bi);
}

tl_status tlc_argmax_rows(tlc_ctx *c, const float *x, int64_t n, int64_t ld, int64_t n_rows, int32_t *d_out) {
    if (n_rows <= 0) return TL_OK;
    TLC_TRY(tlc_launch(c, argmax_rows_k, dim3((unsigned)n_rows), dim3(512), 0, x, n, ld, d_out), "argmax rows");
    return TL_OK;
}

tl_status tlc_copy_2d(tlc_ctx *c, void *dst, const void *src, size_t pitch, size_t width, size_t rows) {
    TLC_TRY(cudaMemcpy2DAsync(dst, pitch, src, pitch, width, rows, cudaMemcpyDeviceToDevice, c->stream), "2-d copy");
    return TL_OK;
}
