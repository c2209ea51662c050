/* backend/cuda/cuda_matvec: batch-1 matrix-vector products for decode, the
 * op that decides tokens/s (every weight byte is read once per token).
 *
 * Design: a warp owns R rows; each lane walks the row in 16-byte "units" of
 * the repacked layout with a stride of 32 units, so one warp-wide load is
 * 512 contiguous bytes; U units per lane are loaded before any is used so
 * R*U*16 bytes per lane are in flight. Weights are loaded with the
 * streaming hint (read once); the activation (a few KB) is read through the
 * read-only (.nc) path and stays in L1. That is only valid while the
 * producer of x has finished before this grid starts, i.e. without
 * programmatic dependent launch (PDL, off by default: see cuda_common.cuh).
 * Measured 2026-11-30 on the H200: with PDL on, .nc reads of x raced with
 * the producer (decode logits of F16/F32 models wrong), and reading x
 * through L2 only (ld.cg) made the matvecs 3-4x slower; a PDL-safe variant
 * (x staged in shared memory) is not written yet. Quantized types dot int8 activations
 * (q8_1: per 32 values d and d*sum) with dp4a; float types use f32 FMA.
 * Modes: store, accumulate (residual add fused), GLU (rows i and i+m of a
 * [gate; up] matrix in one warp, silu(g)*u written: the FFN's gate/up/SiLU in
 * one launch). Calls: CUDA. */
#include "backend/cuda/cuda_common.cuh"

#define MV_WARPS 4

__device__ __forceinline__ int dp4a(int a, int b, int c) { return __dp4a(a, b, c); }

__device__ __forceinline__ uint4 ld_stream(const void *p) { return __ldcs((const uint4 *)p); }

/* units per row for each type (16 weight bytes each; Q6_K: a 48-byte unit) */
template <int T> struct mv;

template <> struct mv<TL_TYPE_F16> {
    struct W { uint4 q; };
    static __device__ int64_t units(int64_t n) { return n / 8; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        return W{ld_stream((const uint8_t *)w.q + w.q_row * row + u * 16)};
    }
    static __device__ float dot(const W &v, const tlc_weight &, int64_t, int64_t u, const float *xf,
                                const int8_t *, const float2 *) {
        float4 a = __ldg((const float4 *)(xf + u * 8)), b = __ldg((const float4 *)(xf + u * 8 + 4));
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
        float4 a = __ldg((const float4 *)(xf + u * 8)), b = __ldg((const float4 *)(xf + u * 8 + 4));
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
        float4 a = __ldg((const float4 *)(xf + u * 4));
        return __uint_as_float(v.q.x) * a.x + __uint_as_float(v.q.y) * a.y +
               __uint_as_float(v.q.z) * a.z + __uint_as_float(v.q.w) * a.w;
    }
};

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
        int4 x0 = __ldg((const int4 *)(xq + u * 32)), x1 = __ldg((const int4 *)(xq + u * 32 + 16));
        float2 ds = __ldg(xds + u);
        int s = 0;
        s = dp4a((int)(v.q.x & 0x0F0F0F0F), x0.x, s);
        s = dp4a((int)(v.q.y & 0x0F0F0F0F), x0.y, s);
        s = dp4a((int)(v.q.z & 0x0F0F0F0F), x0.z, s);
        s = dp4a((int)(v.q.w & 0x0F0F0F0F), x0.w, s);
        s = dp4a((int)((v.q.x >> 4) & 0x0F0F0F0F), x1.x, s);
        s = dp4a((int)((v.q.y >> 4) & 0x0F0F0F0F), x1.y, s);
        s = dp4a((int)((v.q.z >> 4) & 0x0F0F0F0F), x1.z, s);
        s = dp4a((int)((v.q.w >> 4) & 0x0F0F0F0F), x1.w, s);
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
        int4 x0 = __ldg((const int4 *)(xq + u * 32)), x1 = __ldg((const int4 *)(xq + u * 32 + 16));
        float2 ds = __ldg(xds + u);
        int s = 0;
        s = dp4a((int)(v.q.x & 0x0F0F0F0F), x0.x, s);
        s = dp4a((int)(v.q.y & 0x0F0F0F0F), x0.y, s);
        s = dp4a((int)(v.q.z & 0x0F0F0F0F), x0.z, s);
        s = dp4a((int)(v.q.w & 0x0F0F0F0F), x0.w, s);
        s = dp4a((int)((v.q.x >> 4) & 0x0F0F0F0F), x1.x, s);
        s = dp4a((int)((v.q.y >> 4) & 0x0F0F0F0F), x1.y, s);
        s = dp4a((int)((v.q.z >> 4) & 0x0F0F0F0F), x1.z, s);
        s = dp4a((int)((v.q.w >> 4) & 0x0F0F0F0F), x1.w, s);
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
        int4 x = __ldg((const int4 *)(xq + u * 16));
        float2 ds = __ldg(xds + (u >> 1));
        int s = 0;
        s = dp4a((int)v.q.x, x.x, s);
        s = dp4a((int)v.q.y, x.y, s);
        s = dp4a((int)v.q.z, x.z, s);
        s = dp4a((int)v.q.w, x.w, s);
        return __half2float(v.d) * ds.x * (float)s;
    }
};

/* Q4_K: unit = one 64-value chunk j of a 256-value super-block: 32 quant
 * bytes (low nibbles: sub-block 2j, high: 2j+1), so one lane decodes the
 * chunk's two 6-bit scales/mins once; 4 lanes share the 16-byte header (d,
 * dmin, 12 bytes of scales), read through the cache. */
template <> struct mv<TL_TYPE_Q4_K> {
    struct W { uint4 q0, q1, h; };
    static __device__ int64_t units(int64_t n) { return n / 64; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        const uint8_t *b = (const uint8_t *)w.q + w.q_row * row + (u >> 2) * 144;
        const uint8_t *qs = b + 16 + (u & 3) * 32;
        W v;
        v.h = __ldg((const uint4 *)b);
        v.q0 = ld_stream(qs);
        v.q1 = ld_stream(qs + 16);
        return v;
    }
    static __device__ __forceinline__ int byte_of(const uint4 &h, int i) {
        /* scales byte i (0..11) lives in header words y, z, w */
        uint32_t wd = i < 4 ? h.y : (i < 8 ? h.z : h.w);
        return (int)((wd >> (8 * (i & 3))) & 0xFF);
    }
    static __device__ float dot(const W &v, const tlc_weight &, int64_t, int64_t u, const float *,
                                const int8_t *xq, const float2 *xds) {
        int64_t sb = u >> 2;
        int j = (int)(u & 3);
        int sc0, m0, sc1, m1;
        if (j < 2) {
            sc0 = byte_of(v.h, 2 * j) & 63; m0 = byte_of(v.h, 2 * j + 4) & 63;
            sc1 = byte_of(v.h, 2 * j + 1) & 63; m1 = byte_of(v.h, 2 * j + 5) & 63;
        } else {
            int a0 = 2 * j, a1 = 2 * j + 1;
            sc0 = (byte_of(v.h, a0 + 4) & 0xF) | ((byte_of(v.h, a0 - 4) >> 6) << 4);
            m0 = (byte_of(v.h, a0 + 4) >> 4) | ((byte_of(v.h, a0) >> 6) << 4);
            sc1 = (byte_of(v.h, a1 + 4) & 0xF) | ((byte_of(v.h, a1 - 4) >> 6) << 4);
            m1 = (byte_of(v.h, a1 + 4) >> 4) | ((byte_of(v.h, a1) >> 6) << 4);
        }
        float2 dd = __half22float2(*(const __half2 *)&v.h.x);
        const int8_t *xl = xq + sb * 256 + 64 * j;
        int4 xa0 = __ldg((const int4 *)xl), xa1 = __ldg((const int4 *)(xl + 16));
        int4 xb0 = __ldg((const int4 *)(xl + 32)), xb1 = __ldg((const int4 *)(xl + 48));
        float2 d0 = __ldg(xds + sb * 8 + 2 * j), d1 = __ldg(xds + sb * 8 + 2 * j + 1);
        int sa = 0, sbb = 0;
        sa = dp4a((int)(v.q0.x & 0x0F0F0F0F), xa0.x, sa);
        sa = dp4a((int)(v.q0.y & 0x0F0F0F0F), xa0.y, sa);
        sa = dp4a((int)(v.q0.z & 0x0F0F0F0F), xa0.z, sa);
        sa = dp4a((int)(v.q0.w & 0x0F0F0F0F), xa0.w, sa);
        sa = dp4a((int)(v.q1.x & 0x0F0F0F0F), xa1.x, sa);
        sa = dp4a((int)(v.q1.y & 0x0F0F0F0F), xa1.y, sa);
        sa = dp4a((int)(v.q1.z & 0x0F0F0F0F), xa1.z, sa);
        sa = dp4a((int)(v.q1.w & 0x0F0F0F0F), xa1.w, sa);
        sbb = dp4a((int)((v.q0.x >> 4) & 0x0F0F0F0F), xb0.x, sbb);
        sbb = dp4a((int)((v.q0.y >> 4) & 0x0F0F0F0F), xb0.y, sbb);
        sbb = dp4a((int)((v.q0.z >> 4) & 0x0F0F0F0F), xb0.z, sbb);
        sbb = dp4a((int)((v.q0.w >> 4) & 0x0F0F0F0F), xb0.w, sbb);
        sbb = dp4a((int)((v.q1.x >> 4) & 0x0F0F0F0F), xb1.x, sbb);
        sbb = dp4a((int)((v.q1.y >> 4) & 0x0F0F0F0F), xb1.y, sbb);
        sbb = dp4a((int)((v.q1.z >> 4) & 0x0F0F0F0F), xb1.z, sbb);
        sbb = dp4a((int)((v.q1.w >> 4) & 0x0F0F0F0F), xb1.w, sbb);
        return dd.x * (sc0 * d0.x * (float)sa + sc1 * d1.x * (float)sbb) - dd.y * (m0 * d0.y + m1 * d1.y);
    }
};

/* Q6_K: unit = (n, t) quarter of a super-block: 16 bytes of ql low half, 16
 * of ql high half, 16 of qh -> 64 values in 4 groups of 16. */
template <> struct mv<TL_TYPE_Q6_K> {
    struct W { uint4 a, b, h; uint32_t sc; __half d; };
    static __device__ int64_t units(int64_t n) { return n / 64; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        int64_t sb = u >> 2;
        int n = (int)((u >> 1) & 1), t = (int)(u & 1);
        const uint8_t *b = (const uint8_t *)w.q + w.q_row * row + sb * 208;
        W v;
        v.a = ld_stream(b + 64 * n + 16 * t);
        v.b = ld_stream(b + 64 * n + 32 + 16 * t);
        v.h = ld_stream(b + 128 + 32 * n + 16 * t);
        /* scales 8n+t+{0,2,4,6}: bytes of the two words at 192+8n */
        const uint32_t *sw = (const uint32_t *)(b + 192 + 8 * n);
        uint32_t s0 = __ldg(sw), s1 = __ldg(sw + 1);
        /* pack sc[t], sc[t+2] (from s0) and sc[t+4], sc[t+6] (from s1) */
        v.sc = ((s0 >> (8 * t)) & 0xFF) | (((s0 >> (8 * (t + 2))) & 0xFF) << 8) |
               (((s1 >> (8 * t)) & 0xFF) << 16) | (((s1 >> (8 * (t + 2))) & 0xFF) << 24);
        v.d = ((const __half *)((const uint8_t *)w.s + w.s_row * row))[sb];
        return v;
    }
    static __device__ float dot(const W &v, const tlc_weight &, int64_t, int64_t u, const float *,
                                const int8_t *xq, const float2 *xds) {
        int64_t sb = u >> 2;
        int n = (int)((u >> 1) & 1), t = (int)(u & 1);
        int64_t e0 = sb * 256 + 128 * n + 16 * t;
        const uint32_t A[4] = {v.a.x, v.a.y, v.a.z, v.a.w};
        const uint32_t B[4] = {v.b.x, v.b.y, v.b.z, v.b.w};
        const uint32_t H[4] = {v.h.x, v.h.y, v.h.z, v.h.w};
        float r = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            int4 x = __ldg((const int4 *)(xq + e0 + 32 * k));
            const int xs[4] = {x.x, x.y, x.z, x.w};
            int s = 0;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                uint32_t lo = (k & 1) ? B[i] : A[i];
                lo = (k & 2) ? (lo >> 4) & 0x0F0F0F0F : lo & 0x0F0F0F0F;
                uint32_t hi = ((H[i] >> (2 * k)) & 0x03030303) << 4;
                int q = (int)__vsub4(lo | hi, 0x20202020);
                s = dp4a(q, xs[i], s);
            }
            float2 ds = __ldg(xds + sb * 8 + 4 * n + k);
            int scv = (int)(int8_t)((v.sc >> (8 * k)) & 0xFF);
            r += (float)scv * ds.x * (float)s;
        }
        return __half2float(v.d) * r;
    }
};

template <int T, int R, int U>
__global__ void __launch_bounds__(MV_WARPS * 32)
matvec_k(const tlc_weight w, const float *xf, const int8_t *xq, const float2 *xds, float *y, int mode,
         int64_t n_rows_out) {
    typedef mv<T> M;
    const int lane = threadIdx.x & 31;
    pdl_trigger();
    const int64_t wid = (int64_t)blockIdx.x * MV_WARPS + (threadIdx.x >> 5);
    const bool glu = mode == TLC_MV_GLU;
    int64_t rows[R];
#pragma unroll
    for (int r = 0; r < R; r++) rows[r] = glu ? wid + r * n_rows_out : wid * R + r;
    const int64_t last_out = glu ? wid : wid * R;
    if (last_out >= n_rows_out) {
        pdl_wait();
        return;
    }
    const int64_t nu = M::units(w.n_in);
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    for (int64_t base = 0; base < nu; base += 32 * U) {
        typename M::W v[U][R];
#pragma unroll
        for (int k = 0; k < U; k++) {
            int64_t u = base + k * 32 + lane;
#pragma unroll
            for (int r = 0; r < R; r++)
                if (u < nu && rows[r] < w.n_out) v[k][r] = M::load(w, rows[r], u);
        }
        /* the first loads (weights only) are in flight; now wait for the
         * kernels that produce x (and y, when accumulating) */
        if (base == 0) pdl_wait();
#pragma unroll
        for (int k = 0; k < U; k++) {
            int64_t u = base + k * 32 + lane;
#pragma unroll
            for (int r = 0; r < R; r++)
                if (u < nu && rows[r] < w.n_out) acc[r] += M::dot(v[k][r], w, rows[r], u, xf, xq, xds);
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
        for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
    if (lane != 0) return;
    if (glu) {
        float g = acc[0], u = acc[1];
        y[wid] = g / (1.0f + __expf(-g)) * u;
        return;
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        int64_t row = rows[r];
        if (row >= w.n_out) break;
        if (mode == TLC_MV_ACCUM) y[row] += acc[r];
        else y[row] = acc[r];
    }
}

template <int T>
static cudaError_t mv_launch(tlc_ctx *c, const tlc_weight *w, const float *xf, const int8_t *xq,
                      const float2 *xds, float *y, int mode) {
    constexpr int R = 2;
    constexpr int U = (T == TL_TYPE_Q6_K || T == TL_TYPE_Q4_K) ? 2 : 4;
    int64_t n_out = mode == TLC_MV_GLU ? w->n_out / 2 : w->n_out;
    int64_t warps = mode == TLC_MV_GLU ? n_out : (n_out + R - 1) / R;
    return tlc_launch(c, matvec_k<T, R, U>, dim3(tlc_div_up(warps, MV_WARPS)), dim3(MV_WARPS * 32), 0, *w, xf, xq,
                      xds, y, mode, n_out);
}

tl_status tlc_matvec(tlc_ctx *c, const tlc_weight *w, const float *xf, const void *xq, float *y,
                     int mode) {
    const int8_t *q8 = (const int8_t *)xq;
    const float2 *ds = xq ? (const float2 *)((const uint8_t *)xq + w->n_in) : NULL;
    bool quant = !(w->type == TL_TYPE_F16 || w->type == TL_TYPE_BF16 || w->type == TL_TYPE_F32);
    if (quant && !xq) return tl_err(TL_ERR_INVALID, "cuda: matvec %s needs the q8_1 activation", tl_type_name(w->type));
    if (!quant && !xf) return tl_err(TL_ERR_INVALID, "cuda: matvec %s needs the f32 activation", tl_type_name(w->type));
    if (mode == TLC_MV_GLU && (w->n_out & 1)) return tl_err(TL_ERR_INVALID, "cuda: GLU matvec with odd row count");
    cudaError_t e = cudaSuccess;
    switch (w->type) {
    case TL_TYPE_F16: e = mv_launch<TL_TYPE_F16>(c, w, xf, q8, ds, y, mode); break;
    case TL_TYPE_BF16: e = mv_launch<TL_TYPE_BF16>(c, w, xf, q8, ds, y, mode); break;
    case TL_TYPE_F32: e = mv_launch<TL_TYPE_F32>(c, w, xf, q8, ds, y, mode); break;
    case TL_TYPE_Q4_0: e = mv_launch<TL_TYPE_Q4_0>(c, w, xf, q8, ds, y, mode); break;
    case TL_TYPE_Q4_1: e = mv_launch<TL_TYPE_Q4_1>(c, w, xf, q8, ds, y, mode); break;
    case TL_TYPE_Q8_0: e = mv_launch<TL_TYPE_Q8_0>(c, w, xf, q8, ds, y, mode); break;
    case TL_TYPE_Q4_K: e = mv_launch<TL_TYPE_Q4_K>(c, w, xf, q8, ds, y, mode); break;
    case TL_TYPE_Q6_K: e = mv_launch<TL_TYPE_Q6_K>(c, w, xf, q8, ds, y, mode); break;
    default: return tl_err(TL_ERR_UNSUPPORTED, "cuda: matvec: type %s not supported", tl_type_name(w->type));
    }
    TLC_TRY(e, "matvec");
    return TL_OK;
}
