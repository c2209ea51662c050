/* backend/cuda/cuda_matvec: batch-1 matrix-vector products for decode, the
 * op that decides tokens/s (every weight byte is read once per token).
 *
 * Design: a warp owns R rows; each lane walks the row in 16-byte "units" of
 * the repacked layout with a stride of 32 units, so one warp-wide load is
 * 512 contiguous bytes; U units per lane are loaded before any is used so
 * R*U*16 bytes per lane are in flight. Weights are loaded with the
 * streaming hint (read once) before griddepcontrol.wait (programmatic
 * dependent launch: they are constant, so a matvec streams its weights
 * while the kernel before it finishes); the activation (a few KB) is read
 * after the wait with plain loads (L1-cached, ordered by the memory model).
 * Measured 2026-11-30 on the H200: reading it through the non-coherent path
 * (__ldg) raced with the producer under PDL (decode logits wrong), and
 * through L2 only (ld.cg) made the matvecs 3-4x slower; plain loads give
 * bit-identical logits with PDL and cost ~2% without it. Quantized types
 * dot int8 activations (q8_1: per 32 values d and d*sum) with dp4a; float
 * types use f32 FMA.
 * Modes: store, accumulate (residual add fused), GLU (rows i and i+m of a
 * [gate; up] matrix in one warp, silu(g)*u written: the FFN's gate/up/SiLU in
 * one launch).
 * Fusions (tlc_matvec_fused), which remove every separate norm/quantize
 * launch from a decode layer:
 *  - RMSNorm folded in: the product is linear in the activation scale, so
 *    the producer hands over q8_1(x o g) and per-32 partial sums of x^2, and
 *    each warp multiplies its dot by rsqrt(sum/n + eps) at the end;
 *  - q8_1 epilogue: the last block to finish a group of 32 consecutive
 *    outputs writes their q8_1 block (and, accumulating into the residual,
 *    y o g_next and the partial sum of y^2 for the next layer's folded
 *    norm; for GLU, the quantized SiLU(g)*u the down projection reads);
 *  - in-block input quantization (in_q8, template flag IQ): each block
 *    quantizes the f32 input into shared memory after the wait, while its
 *    first weights are in flight, so the producer needs no q8_1 at all.
 *    Measured 2026-11-30 (tg128, same binary): Q8_0 down +2.4%, but Q4_0
 *    8B -1.0%, 1B -3.9%, Q4_K_M -9.2%; so the engine uses it for Q8_0 only.
 * Calls: CUDA. */
#include "backend/cuda/cuda_common.cuh"

#define MV_WARPS 4

__device__ __forceinline__ int dp4a(int a, int b, int c) { return __dp4a(a, b, c); }

__device__ __forceinline__ uint4 ld_stream(const void *p) { return __ldcs((const uint4 *)p); }

/* activation loads: plain (weak) global loads, L1-cached, which the memory
 * model orders after griddepcontrol.wait. Not __ldg: ld.global.nc requires
 * the data to be read-only for the kernel's whole lifetime, which is false
 * under programmatic dependent launch (the producer may still be running
 * when this grid starts); with .nc, decode logits were wrong (see header). */
template <typename T> __device__ __forceinline__ T ldx(const T *p) { return *p; }

/* units per row for each type (16 weight bytes each; Q6_K: 24) */
template <int T> struct mv;

template <> struct mv<TL_TYPE_F16> {
    struct W { uint4 q; };
    static __device__ int64_t units(int64_t n) { return n / 8; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        return W{ld_stream((const uint8_t *)w.q + w.q_row * row + u * 16)};
    }
    static __device__ float dot(const W &v, const tlc_weight &, int64_t, int64_t u, const float *xf,
                                const int8_t *, const float2 *) {
        float4 a = ldx((const float4 *)(xf + u * 8)), b = ldx((const float4 *)(xf + u * 8 + 4));
        const __half2 *h = (const __half2 *)&v.q;
        float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]), f2 = __half22float2(h[2]),
               f3 = __half22float2(h[3]);
        return f0.x * a.x + f0.y * a.y + f1.x * a.z + f1.y * a.w + f2.x * b.x + f2.y * b.y +
               f3.x * b.z + f3.y * b.w;
    }
};

template <> struct mv<TL_TYPE_BF16> {
    struct W { uint4 q; };
    static __device__ int64_t units(int64_t n) { return n / 8; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        return W{ld_stream((const uint8_t *)w.q + w.q_row * row + u * 16)};
    }
    static __device__ float dot(const W &v, const tlc_weight &, int64_t, int64_t u, const float *xf,
                                const int8_t *, const float2 *) {
        float4 a = ldx((const float4 *)(xf + u * 8)), b = ldx((const float4 *)(xf + u * 8 + 4));
        const uint32_t *p = (const uint32_t *)&v.q;
        float r = 0;
        r += __uint_as_float(p[0] << 16) * a.x + __uint_as_float(p[0] & 0xffff0000u) * a.y;
        r += __uint_as_float(p[1] << 16) * a.z + __uint_as_float(p[1] & 0xffff0000u) * a.w;
        r += __uint_as_float(p[2] << 16) * b.x + __uint_as_float(p[2] & 0xffff0000u) * b.y;
        r += __uint_as_float(p[3] << 16) * b.z + __uint_as_float(p[3] & 0xffff0000u) * b.w;
        return r;
    }
};

template <> struct mv<TL_TYPE_F32> {
    struct W { uint4 q; };
    static __device__ int64_t units(int64_t n) { return n / 4; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        return W{ld_stream((const uint8_t *)w.q + w.q_row * row + u * 16)};
    }
    static __device__ float dot(const W &v, const tlc_weight &, int64_t, int64_t u, const float *xf,
                                const int8_t *, const float2 *) {
        float4 a = ldx((const float4 *)(xf + u * 4));
        return __uint_as_float(v.q.x) * a.x + __uint_as_float(v.q.y) * a.y +
               __uint_as_float(v.q.z) * a.z + __uint_as_float(v.q.w) * a.w;
    }
};

/* sum over the 32 values of unit u of nibble * q8 activation: the 16 bytes
 * hold value i in the low nibble of byte i and value i+16 in the high one
 * (Q4_0's order, which the Q4_1 and repacked Q4_K units share) */
__device__ __forceinline__ int mv_nib_dot(const uint4 &q, const int8_t *xq, int64_t u) {
    const int4 x0 = ldx((const int4 *)(xq + u * 32)), x1 = ldx((const int4 *)(xq + u * 32 + 16));
    int s = 0;
    s = dp4a((int)(q.x & 0x0F0F0F0F), x0.x, s);
    s = dp4a((int)(q.y & 0x0F0F0F0F), x0.y, s);
    s = dp4a((int)(q.z & 0x0F0F0F0F), x0.z, s);
    s = dp4a((int)(q.w & 0x0F0F0F0F), x0.w, s);
    s = dp4a((int)((q.x >> 4) & 0x0F0F0F0F), x1.x, s);
    s = dp4a((int)((q.y >> 4) & 0x0F0F0F0F), x1.y, s);
    s = dp4a((int)((q.z >> 4) & 0x0F0F0F0F), x1.z, s);
    s = dp4a((int)((q.w >> 4) & 0x0F0F0F0F), x1.w, s);
    return s;
}

template <> struct mv<TL_TYPE_Q4_0> {
    struct W { uint4 q; __half d; };
    static __device__ int64_t units(int64_t n) { return n / 32; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        W v;
        v.q = ld_stream((const uint8_t *)w.q + w.q_row * row + u * 16);
        v.d = ((const __half *)((const uint8_t *)w.s + w.s_row * row))[u];
        return v;
    }
    static __device__ float dot(const W &v, const tlc_weight &, int64_t, int64_t u, const float *,
                                const int8_t *xq, const float2 *xds) {
        const float2 ds = ldx(xds + u);
        const int s = mv_nib_dot(v.q, xq, u);
        return __half2float(v.d) * (ds.x * (float)s - 8.0f * ds.y);
    }
};

template <> struct mv<TL_TYPE_Q4_1> {
    struct W { uint4 q; __half2 dm; };
    static __device__ int64_t units(int64_t n) { return n / 32; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        W v;
        v.q = ld_stream((const uint8_t *)w.q + w.q_row * row + u * 16);
        v.dm = ((const __half2 *)((const uint8_t *)w.s + w.s_row * row))[u];
        return v;
    }
    static __device__ float dot(const W &v, const tlc_weight &, int64_t, int64_t u, const float *,
                                const int8_t *xq, const float2 *xds) {
        const float2 ds = ldx(xds + u);
        const int s = mv_nib_dot(v.q, xq, u);
        float2 dm = __half22float2(v.dm);
        return dm.x * ds.x * (float)s + dm.y * ds.y;
    }
};

template <> struct mv<TL_TYPE_Q8_0> {
    struct W { uint4 q; __half d; };
    static __device__ int64_t units(int64_t n) { return n / 16; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        W v;
        v.q = ld_stream((const uint8_t *)w.q + w.q_row * row + u * 16);
        v.d = ((const __half *)((const uint8_t *)w.s + w.s_row * row))[u >> 1];
        return v;
    }
    static __device__ float dot(const W &v, const tlc_weight &, int64_t, int64_t u, const float *,
                                const int8_t *xq, const float2 *xds) {
        int4 x = ldx((const int4 *)(xq + u * 16));
        float2 ds = ldx(xds + (u >> 1));
        int s = 0;
        s = dp4a((int)v.q.x, x.x, s);
        s = dp4a((int)v.q.y, x.y, s);
        s = dp4a((int)v.q.z, x.z, s);
        s = dp4a((int)v.q.w, x.w, s);
        return __half2float(v.d) * ds.x * (float)s;
    }
};

/* Q4_K (repacked, cuda_common.cuh): unit = one 32-value sub-block, 16
 * quant bytes in Q4_0's order; its scale/min pair (2 bytes) and the
 * super-block's (d, dmin) come through L1 (8 lanes share them). Value =
 * d*sc*q - dmin*m, so the dot is d*sc*xd*sum(q*xq) - dmin*m*sum(x). */
template <> struct mv<TL_TYPE_Q4_K> {
    struct W { uint4 q; __half2 dd; uint16_t scm; };
    static __device__ int64_t units(int64_t n) { return n / 32; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        const uint8_t *s = (const uint8_t *)w.s + w.s_row * row;
        W v;
        v.q = ld_stream((const uint8_t *)w.q + w.q_row * row + u * 16);
        v.dd = ((const __half2 *)s)[u >> 3];
        v.scm = ((const uint16_t *)(s + w.n_in / 256 * 4))[u];
        return v;
    }
    static __device__ float dot(const W &v, const tlc_weight &, int64_t, int64_t u, const float *,
                                const int8_t *xq, const float2 *xds) {
        const float2 ds = ldx(xds + u);
        const int s = mv_nib_dot(v.q, xq, u);
        float2 dd = __half22float2(v.dd);
        return dd.x * (float)(v.scm & 0xFF) * ds.x * (float)s - dd.y * (float)(v.scm >> 8) * ds.y;
    }
};

/* Q6_K (repacked, cuda_common.cuh): unit = 32 values, 16 bytes of low
 * nibbles + 8 bytes of high bit pairs (both streamed), d and the two int8
 * scales of its halves through L1. Values are 6-bit unsigned minus 32. */
template <> struct mv<TL_TYPE_Q6_K> {
    struct W { uint4 q; uint2 h; __half d; uint16_t sc; };
    static __device__ int64_t units(int64_t n) { return n / 32; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        const uint8_t *q = (const uint8_t *)w.q + w.q_row * row, *s = (const uint8_t *)w.s + w.s_row * row;
        W v;
        v.q = ld_stream(q + u * 16);
        v.h = __ldcs((const uint2 *)(q + w.n_in / 2 + u * 8));
        v.d = ((const __half *)s)[u >> 3];
        v.sc = ((const uint16_t *)(s + w.n_in / 256 * 2))[u];
        return v;
    }
    static __device__ float dot(const W &v, const tlc_weight &, int64_t, int64_t u, const float *,
                                const int8_t *xq, const float2 *xds) {
        int4 x0 = ldx((const int4 *)(xq + u * 32)), x1 = ldx((const int4 *)(xq + u * 32 + 16));
        float2 ds = ldx(xds + u);
        const uint32_t Q[4] = {v.q.x, v.q.y, v.q.z, v.q.w};
        const int X0[4] = {x0.x, x0.y, x0.z, x0.w}, X1[4] = {x1.x, x1.y, x1.z, x1.w};
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint32_t lo = (Q[j] & 0x0F0F0F0F) | (((v.h.x >> (2 * j)) & 0x03030303) << 4);
            const uint32_t hi = ((Q[j] >> 4) & 0x0F0F0F0F) | (((v.h.y >> (2 * j)) & 0x03030303) << 4);
            s0 = dp4a((int)__vsub4(lo, 0x20202020), X0[j], s0);
            s1 = dp4a((int)__vsub4(hi, 0x20202020), X1[j], s1);
        }
        const int sc0 = (int)(int8_t)(v.sc & 0xFF), sc1 = (int)(int8_t)(v.sc >> 8);
        return __half2float(v.d) * ds.x * (float)(sc0 * s0 + sc1 * s1);
    }
};

__device__ __forceinline__ float mv_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float mv_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The fused prologue/epilogue of a decode matvec (see tlc_mv_fuse). */
struct mv_fuse_d {
    const float *in_ss;
    float eps;
    const float *out_norm;
    float *out_f;
    int8_t *out_q;
    float *out_ss;
    /* QKV RoPE + KV store epilogue (rope_on) */
    int rope_on, nh, nkv, hd;
    float base, scale;
    const float *fdiv;
    __half *kc, *vc;
    int64_t n_ctx;
    const int32_t *d_pos;
    int in_q; /* quantize xf into shared memory in each block (tlc_mv_fuse.in_q8) */
};

/* rows r0, r0+1 (an adjacent pair of one head) of [q | k | v]: rotate q/k
 * at *d_pos and store k/v into the cache; the same arithmetic as rope_kv_k */
__device__ __forceinline__ void mv_rope_pair(const mv_fuse_d &f, int64_t r0, float &y0, float &y1) {
    const int head = (int)(r0 / f.hd), a = (int)(r0 % f.hd), p = a / 2;
    const int64_t pos = __ldcg(f.d_pos);
    if (pos >= f.n_ctx) return;
    if (head < f.nh + f.nkv) {
        float inv = powf(f.base, -2.0f * (float)p / (float)f.hd);
        if (f.fdiv) inv /= f.fdiv[p];
        float s, co;
        sincosf((float)pos / f.scale * inv, &s, &co);
        const float x0 = y0, x1 = y1;
        y0 = x0 * co - x1 * s;
        y1 = x0 * s + x1 * co;
        if (head >= f.nh) {
            __half *kr = f.kc + ((int64_t)(head - f.nh) * f.n_ctx + pos) * f.hd;
            kr[a] = __float2half(y0);
            kr[a + 1] = __float2half(y1);
        }
    } else {
        __half *vr = f.vc + ((int64_t)(head - f.nh - f.nkv) * f.n_ctx + pos) * f.hd;
        vr[a] = __float2half(y0);
        vr[a + 1] = __float2half(y1);
    }
}

/* U units of each of the R rows per lane, from unit base on (weights only) */
template <typename M, int U, int R>
__device__ __forceinline__ void mv_load(typename M::W (&v)[U][R], const tlc_weight &w, const int64_t (&rows)[R],
                                        int64_t base, int64_t nu, int lane) {
#pragma unroll
    for (int k = 0; k < U; k++) {
        int64_t u = base + k * 32 + lane;
#pragma unroll
        for (int r = 0; r < R; r++)
            if (u < nu && rows[r] < w.n_out) v[k][r] = M::load(w, rows[r], u);
    }
}

/* q8_1 of x [n] (n % 32 == 0) by the block's nw warps into q [n] and ds
 * [n/32]: 8 lanes per 32-value group, 4 values each, 8 float4 loads per
 * lane in flight; the same arithmetic as act_prep_k, so the same bytes. */
__device__ __forceinline__ void mv_block_q8(const float *x, int64_t n, int8_t *q, float2 *ds, int nw) {
    const int lane = threadIdx.x & 31;
    const int64_t n4 = n / 4, stride = (int64_t)nw * 32;
    for (int64_t i0 = (int64_t)(threadIdx.x >> 5) * 32; i0 < n4; i0 += 8 * stride) { /* warp-uniform */
        float4 v[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int64_t i = i0 + k * stride + lane;
            v[k] = i < n4 ? ldx((const float4 *)x + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int64_t i = i0 + k * stride + lane;
            float m = fmaxf(fmaxf(fabsf(v[k].x), fabsf(v[k].y)), fmaxf(fabsf(v[k].z), fabsf(v[k].w)));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 4));
            const float d = m / 127.0f;
            const int q0 = d > 0.0f ? __float2int_rn(v[k].x / d) : 0, q1 = d > 0.0f ? __float2int_rn(v[k].y / d) : 0,
                      q2 = d > 0.0f ? __float2int_rn(v[k].z / d) : 0, q3 = d > 0.0f ? __float2int_rn(v[k].w / d) : 0;
            float sq = (float)(q0 + q1 + q2 + q3);
            sq += __shfl_xor_sync(0xffffffffu, sq, 1);
            sq += __shfl_xor_sync(0xffffffffu, sq, 2);
            sq += __shfl_xor_sync(0xffffffffu, sq, 4);
            if (i < n4) {
                ((char4 *)q)[i] = make_char4((signed char)q0, (signed char)q1, (signed char)q2, (signed char)q3);
                if ((lane & 7) == 0) ds[i / 8] = make_float2(d, d * sq);
            }
        }
    }
}

/* W warps per block, R weight rows per warp (GLU: R/2 outputs, each a gate
 * row and an up row), U units per lane in flight.
 * q8_1 epilogue (f.out_q): the blocks of one 32-output group count
 * themselves in cnt[group] after their outputs are visible (threadfence);
 * the last one reads the group's 32 outputs back from L2 and writes its
 * q8_1 block, then zeroes the counter for the next launch. So the fast
 * layout (4 warps, 2 rows each) stays and no extra launch is needed. */
template <int T, int R, int U, int W, bool IQ = false>
__global__ void __launch_bounds__(W * 32)
matvec_k(const tlc_weight w, const float *xf, const int8_t *xq, const float2 *xds, float *y, int mode,
         int64_t n_rows_out, const mv_fuse_d f, int *cnt) {
    typedef mv<T> M;
    constexpr int K = R / 2; /* GLU outputs per warp */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    pdl_trigger();
    const int64_t wid = (int64_t)blockIdx.x * W + warp;
    const bool glu = mode == TLC_MV_GLU;
    int64_t rows[R];
#pragma unroll
    for (int r = 0; r < R; r++) rows[r] = glu ? (r < K ? wid * K + r : wid * K + (r - K) + n_rows_out) : wid * R + r;
    const int64_t first_out = glu ? wid * K : wid * R;
    const bool live = first_out < n_rows_out;
    if (!live && !f.out_q && !IQ) {
        pdl_wait();
        return;
    }
    const int64_t nu = live ? M::units(w.n_in) : 0;
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    float sc = 1.0f;
    /* every warp passes once (base 0: the wait, and the block-wide input
     * quantization, which needs all of them), live ones until nu */
    for (int64_t base = 0; base == 0 || base < nu; base += 32 * U) {
        typename M::W v[U][R];
        mv_load<M, U, R>(v, w, rows, base, nu, lane);
        if (base == 0) {
            /* the first loads (weights only) are in flight; now wait for
             * the kernels that produce x (and y, when accumulating), and
             * fold the input's RMSNorm: W (x o g) * rsqrt(mean(x^2) + eps) */
            pdl_wait();
            if (f.in_ss) {
                float s = 0;
                for (int64_t i = lane; i < w.n_in / 32; i += 32) s += f.in_ss[i];
                sc = rsqrtf(mv_warp_sum(s) / (float)w.n_in + f.eps);
            }
            if (IQ) {
                /* q8_1 of the f32 input into shared memory, while the weights fly */
                extern __shared__ __align__(16) uint8_t mv_sm[];
                mv_block_q8(xf, w.n_in, (int8_t *)mv_sm, (float2 *)(mv_sm + w.n_in), W);
                __syncthreads();
                xq = (const int8_t *)mv_sm;
                xds = (const float2 *)(mv_sm + w.n_in);
            }
        }
#pragma unroll
        for (int k = 0; k < U; k++) {
            int64_t u = base + k * 32 + lane;
#pragma unroll
            for (int r = 0; r < R; r++)
                if (u < nu && rows[r] < w.n_out) acc[r] += M::dot(v[k][r], w, rows[r], u, xf, xq, xds);
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = mv_warp_sum(acc[r]) * sc;
    if (lane == 0 && live) {
        if (glu) {
#pragma unroll
            for (int k = 0; k < K; k++) {
                int64_t o = wid * K + k;
                if (o >= n_rows_out) break;
                float g = acc[k], u = acc[K + k];
                y[o] = g / (1.0f + __expf(-g)) * u;
            }
        } else {
            if (R == 2 && f.rope_on) mv_rope_pair(f, rows[0], acc[0], acc[1]);
#pragma unroll
            for (int r = 0; r < R; r++) {
                int64_t row = rows[r];
                if (row >= w.n_out) break;
                if (mode == TLC_MV_ACCUM) y[row] += acc[r];
                else y[row] = acc[r];
            }
        }
    }
    if (!f.out_q) return;
    const int per_block = glu ? W * K : W * R; /* outputs per block */
    int64_t grp;
    float o;
    if (per_block == 32) {
        /* the block owns its group: outputs through shared memory */
        __shared__ float sv[32];
        if (lane == 0) {
#pragma unroll
            for (int r = 0; r < (glu ? K : R); r++) {
                const int64_t oi = glu ? wid * K + r : rows[r];
                sv[oi & 31] = y[oi]; /* this thread's own store: visible to itself */
            }
        }
        __syncthreads();
        if (warp != 0) return;
        grp = blockIdx.x;
        o = sv[lane];
    } else {
        /* is this block the last of its 32-output group? */
        __shared__ int last;
        if (lane == 0) __threadfence();
        __syncthreads();
        grp = (int64_t)blockIdx.x * per_block / 32;
        if (threadIdx.x == 0) last = atomicAdd(&cnt[grp], 1) == 32 / per_block - 1;
        __syncthreads();
        if (!last || warp != 0) return;
        __threadfence();
        o = __ldcg(y + grp * 32 + lane);
    }
    const int64_t i = grp * 32 + lane;
    const float xv = f.out_norm ? o * f.out_norm[i] : o;
    if (f.out_f) f.out_f[i] = xv;
    const float d = mv_warp_max(fabsf(xv)) / 127.0f;
    const int qi = d > 0.0f ? __float2int_rn(xv / d) : 0;
    f.out_q[i] = (int8_t)qi;
    const float sq = mv_warp_sum((float)qi);
    const float ss = mv_warp_sum(o * o);
    if (lane == 0) {
        ((float2 *)(f.out_q + n_rows_out))[grp] = make_float2(d, d * sq);
        if (f.out_ss) f.out_ss[grp] = ss;
        if (per_block != 32) cnt[grp] = 0;
    }
}

/* epilogue: TLC_EPI_SPLIT (a separate act_prep_ss launch), TLC_EPI_COUNT
 * (the last block of each group, 4-warp blocks), TLC_EPI_BLOCK (blocks of
 * exactly 32 outputs: GLU 4 warps x 8 outputs, accumulate 32 warps x 1 row,
 * or 16 warps x 2 rows for Q8_0 and with in-block input quantization) */
template <int T, bool IQ>
static cudaError_t mv_launch_iq(tlc_ctx *c, const tlc_weight *w, const float *xf, const int8_t *xq,
                                const float2 *xds, float *y, int mode, const mv_fuse_d &f) {
    const int64_t n_out = mode == TLC_MV_GLU ? w->n_out / 2 : w->n_out;
    const int epi = mode == TLC_MV_GLU ? c->epi_glu : c->epi_acc;
    const size_t sm = IQ ? (size_t)w->n_in + (size_t)w->n_in / 32 * sizeof(float2) : 0;
    if (f.out_q && epi == TLC_EPI_BLOCK) {
        const dim3 g(tlc_div_up(n_out, 32));
        if (mode == TLC_MV_GLU) /* never IQ */
            return tlc_launch(c, matvec_k<T, 16, 1, 4>, g, dim3(128), 0, *w, xf, xq, xds, y, mode, n_out, f,
                              c->mv_cnt);
        /* 32 warps x 1 row (4 units per lane, 64 registers) instead of 16 x 2:
         * measured 2026-11-30 (tg128, same call): 1B F16 927 -> 995, 1B Q4_0
         * 1772 -> 1825, 8B Q4_0 521 -> 540, Q4_K_M 473 -> 478, but Q8_0 369
         * -> 307; not with the in-block quantization (it spills there) */
        if (!IQ && (c->mv_lean == 1 || (c->mv_lean < 0 && T != TL_TYPE_Q8_0)))
            return tlc_launch(c, matvec_k<T, 1, 4, 32, IQ>, g, dim3(1024), sm, *w, xf, xq, xds, y, mode, n_out,
                              f, c->mv_cnt);
        return tlc_launch(c, matvec_k<T, 2, 4, 16, IQ>, g, dim3(512), sm, *w, xf, xq, xds, y, mode, n_out,
                          f, c->mv_cnt);
    }
    constexpr int R = 2, U = 4;
    const int64_t warps = mode == TLC_MV_GLU ? n_out : (n_out + R - 1) / R;
    const dim3 g(tlc_div_up(warps, MV_WARPS)), b(MV_WARPS * 32);
    return tlc_launch(c, matvec_k<T, R, U, MV_WARPS, IQ>, g, b, sm, *w, xf, xq, xds, y, mode, n_out, f, c->mv_cnt);
}

/* the in-block quantization (IQ) is compiled only where it can run:
 * quantized types, not GLU (validated by tlc_matvec_fused) */
template <int T>
static cudaError_t mv_launch(tlc_ctx *c, const tlc_weight *w, const float *xf, const int8_t *xq,
                             const float2 *xds, float *y, int mode, const mv_fuse_d &f) {
    if constexpr (T != TL_TYPE_F16 && T != TL_TYPE_BF16 && T != TL_TYPE_F32)
        if (f.in_q) return mv_launch_iq<T, true>(c, w, xf, xq, xds, y, mode, f);
    return mv_launch_iq<T, false>(c, w, xf, xq, xds, y, mode, f);
}

bool tlc_weight_is_float(const tlc_weight *w) {
    return w->type == TL_TYPE_F16 || w->type == TL_TYPE_BF16 || w->type == TL_TYPE_F32;
}

bool tlc_mv_in_q8_ok(const tlc_weight *w) {
    return !tlc_weight_is_float(w) && w->n_in % 32 == 0 && w->n_in <= TLC_MV_INQ_MAX;
}

bool tlc_mv_in_q8_use(const tlc_ctx *c, const tlc_weight *w) {
    if (!tlc_mv_in_q8_ok(w) || c->inq == 0) return false;
    return c->inq == 1 || w->type == TL_TYPE_Q8_0;
}

void tlc_set_mv_epilogue(tlc_ctx *c, int glu, int acc) {
    c->epi_glu = glu;
    c->epi_acc = acc;
}

tl_status tlc_matvec(tlc_ctx *c, const tlc_weight *w, const float *xf, const void *xq, float *y,
                     int mode) {
    return tlc_matvec_fused(c, w, xf, xq, y, mode, NULL);
}

tl_status tlc_matvec_fused(tlc_ctx *c, const tlc_weight *w, const float *xf, const void *xq, float *y, int mode,
                           const tlc_mv_fuse *fz) {
    const int8_t *q8 = (const int8_t *)xq;
    const float2 *ds = xq ? (const float2 *)((const uint8_t *)xq + w->n_in) : NULL;
    const bool quant = !tlc_weight_is_float(w);
    const bool in_q = fz && fz->in_q8;
    if (in_q && (!tlc_mv_in_q8_ok(w) || !xf || mode == TLC_MV_GLU))
        return tl_err(TL_ERR_INVALID, "cuda: matvec: in-block quantization needs a quantized weight, the f32 input, "
                      "a store/accumulate mode and n_in %% 32 == 0 with n_in <= %d (%s, n_in %lld)", TLC_MV_INQ_MAX, tl_type_name(w->type),
                      (long long)w->n_in);
    if (quant && !xq && !in_q) return tl_err(TL_ERR_INVALID, "cuda: matvec %s needs the q8_1 activation", tl_type_name(w->type));
    if (!quant && !xf) return tl_err(TL_ERR_INVALID, "cuda: matvec %s needs the f32 activation", tl_type_name(w->type));
    if (mode == TLC_MV_GLU && (w->n_out & 1)) return tl_err(TL_ERR_INVALID, "cuda: GLU matvec with odd row count");
    mv_fuse_d f = {};
    f.in_q = in_q;
    if (fz) {
        f.in_ss = fz->in_ss;
        f.eps = fz->eps;
        if (fz->in_ss && w->n_in % 32)
            return tl_err(TL_ERR_INVALID, "cuda: matvec: folded RMSNorm needs n_in %% 32 == 0 (n_in %lld)",
                          (long long)w->n_in);
        if (fz->out_q) {
            int64_t n_out = mode == TLC_MV_GLU ? w->n_out / 2 : w->n_out;
            if (n_out % 32 || n_out / 32 > TLC_MV_GROUPS)
                return tl_err(TL_ERR_INVALID, "cuda: matvec: q8_1 epilogue needs %% 32 outputs, at most %d groups "
                              "(%lld outputs)", TLC_MV_GROUPS, (long long)n_out);
            if (mode == TLC_MV_GLU && (fz->out_norm || fz->out_ss || fz->out_f))
                return tl_err(TL_ERR_INVALID, "cuda: matvec: the GLU epilogue only quantizes");
            f.out_norm = fz->out_norm;
            f.out_f = fz->out_f;
            f.out_q = (int8_t *)fz->out_q;
            f.out_ss = fz->out_ss;
        }
    }
    /* the split variant: the plain kernel, then a separate quantize launch */
    const bool split = f.out_q && (mode == TLC_MV_GLU ? c->epi_glu : c->epi_acc) == TLC_EPI_SPLIT;
    mv_fuse_d fq = f;
    if (split) f.out_q = NULL;
    if (fz && fz->rope) {
        const tlc_rope_kv_args *ra = fz->rope;
        const int hd = ra->head_dim;
        if (mode != TLC_MV_STORE || fz->out_q || ra->p.neox || ra->p.n_rot != hd || (hd & 1) ||
            w->n_out != (int64_t)(ra->n_head + 2 * ra->n_kv_head) * hd)
            return tl_err(TL_ERR_INVALID, "cuda: matvec: the RoPE+KV epilogue needs a stored [q|k|v] matvec with "
                          "adjacent-pair rotation of whole heads (rows %lld, head_dim %d, n_rot %d)",
                          (long long)w->n_out, hd, ra->p.n_rot);
        f.rope_on = 1;
        f.nh = ra->n_head;
        f.nkv = ra->n_kv_head;
        f.hd = hd;
        f.base = ra->p.base;
        f.scale = ra->p.scale > 0 ? ra->p.scale : 1.0f;
        f.fdiv = ra->p.freq_div;
        f.kc = (__half *)ra->kc;
        f.vc = (__half *)ra->vc;
        f.n_ctx = ra->n_ctx;
        f.d_pos = ra->d_pos;
    }
    cudaError_t e = cudaSuccess;
    switch (w->type) {
    case TL_TYPE_F16: e = mv_launch<TL_TYPE_F16>(c, w, xf, q8, ds, y, mode, f); break;
    case TL_TYPE_BF16: e = mv_launch<TL_TYPE_BF16>(c, w, xf, q8, ds, y, mode, f); break;
    case TL_TYPE_F32: e = mv_launch<TL_TYPE_F32>(c, w, xf, q8, ds, y, mode, f); break;
    case TL_TYPE_Q4_0: e = mv_launch<TL_TYPE_Q4_0>(c, w, xf, q8, ds, y, mode, f); break;
    case TL_TYPE_Q4_1: e = mv_launch<TL_TYPE_Q4_1>(c, w, xf, q8, ds, y, mode, f); break;
    case TL_TYPE_Q8_0: e = mv_launch<TL_TYPE_Q8_0>(c, w, xf, q8, ds, y, mode, f); break;
    case TL_TYPE_Q4_K: e = mv_launch<TL_TYPE_Q4_K>(c, w, xf, q8, ds, y, mode, f); break;
    case TL_TYPE_Q6_K: e = mv_launch<TL_TYPE_Q6_K>(c, w, xf, q8, ds, y, mode, f); break;
    default: return tl_err(TL_ERR_UNSUPPORTED, "cuda: matvec: type %s not supported", tl_type_name(w->type));
    }
    TLC_TRY(e, "matvec");
    if (split)
        return tlc_act_prep_ss(c, y, fq.out_norm, mode == TLC_MV_GLU ? w->n_out / 2 : w->n_out, 1, fq.out_f,
                               fq.out_q, fq.out_ss);
    return TL_OK;
}
