/* backend/cuda/cuda_mv: the decode matvec's building blocks (cuda_matvec.cu):
 * the per-type unit traits (mv<T>: load one 16-byte unit of a repacked row
 * and dot it with the activation), the fused prologue/epilogue parameters
 * (mv_fuse_d), the QKV RoPE+KV pair epilogue and the q8_1 group epilogue.
 * Calls: CUDA. */
#ifndef TL_BACKEND_CUDA_MV_CUH
#define TL_BACKEND_CUDA_MV_CUH

#include "backend/cuda/cuda_common.cuh"

#include <type_traits>

__device__ __forceinline__ int dp4a(int a, int b, int c) { return __dp4a(a, b, c); }

/* weight loads: streamed from global memory (read once) */
__device__ __forceinline__ uint4 ldw16(const void *p) { return __ldcs((const uint4 *)p); }
__device__ __forceinline__ uint2 ldw8(const void *p) { return __ldcs((const uint2 *)p); }

/* activation loads: plain (weak) global loads, L1-cached, which the memory
 * model orders after griddepcontrol.wait. Not __ldg: ld.global.nc requires
 * the data to be read-only for the kernel's whole lifetime, which is false
 * under programmatic dependent launch (the producer may still be running
 * when this grid starts; cuda_common.cuh). */
template <typename T> __device__ __forceinline__ T ldx(const T *p) { return *p; }

/* units per row for each type (16 weight bytes each; Q6_K: 24) */
template <int T> struct mv;

template <> struct mv<TL_TYPE_F16> {
    struct W { uint4 q; };
    static __host__ __device__ int64_t units(int64_t n) { return n / 8; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        return W{ldw16((const uint8_t *)w.q + w.q_row * row + u * 16)};
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
    static __host__ __device__ int64_t units(int64_t n) { return n / 8; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        return W{ldw16((const uint8_t *)w.q + w.q_row * row + u * 16)};
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
    static __host__ __device__ int64_t units(int64_t n) { return n / 4; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        return W{ldw16((const uint8_t *)w.q + w.q_row * row + u * 16)};
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
    static __host__ __device__ int64_t units(int64_t n) { return n / 32; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        W v;
        v.q = ldw16((const uint8_t *)w.q + w.q_row * row + u * 16);
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
    static __host__ __device__ int64_t units(int64_t n) { return n / 32; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        W v;
        v.q = ldw16((const uint8_t *)w.q + w.q_row * row + u * 16);
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
    static __host__ __device__ int64_t units(int64_t n) { return n / 16; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        W v;
        v.q = ldw16((const uint8_t *)w.q + w.q_row * row + u * 16);
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
    static __host__ __device__ int64_t units(int64_t n) { return n / 32; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        const uint8_t *s = (const uint8_t *)w.s + w.s_row * row;
        W v;
        v.q = ldw16((const uint8_t *)w.q + w.q_row * row + u * 16);
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
    static __host__ __device__ int64_t units(int64_t n) { return n / 32; }
    static __device__ W load(const tlc_weight &w, int64_t row, int64_t u) {
        const uint8_t *q = (const uint8_t *)w.q + w.q_row * row, *s = (const uint8_t *)w.s + w.s_row * row;
        W v;
        v.q = ldw16(q + u * 16);
        v.h = ldw8(q + w.n_in / 2 + u * 8);
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
    unsigned long long *amax; /* the output's argmax key (tlc_mv_fuse.argmax) */
};

/* row's argmax key: the value's bits mapped so unsigned order is float
 * order (NaN lowest), then the row complemented so ties keep the lowest */
__device__ __forceinline__ unsigned long long mv_amax_key(float v, int64_t row) {
    const uint32_t u = __float_as_uint(v);
    const uint32_t o = v != v ? 0u : (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)o << 32) | (0xFFFFFFFFu - (uint32_t)row);
}

/* rows r0, r0+1 (an adjacent pair of one head) of [q | k | v]: rotate q/k
 * at *d_pos and store k/v into the cache; the same arithmetic as rope_kv_k.
 * In two steps: mv_rope_prep reads the position and makes the rotation
 * (constant inputs: *d_pos is written by the copy that starts the step, so
 * a matvec calls it before its PDL wait, off the critical path: after the
 * loop it was an L2 round trip and a powf/sincosf at the end of every QKV
 * block), mv_rope_apply rotates and stores. */
struct mv_rope_t {
    int64_t pos; /* >= n_ctx: nothing to do */
    float s, co;
};
__device__ __forceinline__ mv_rope_t mv_rope_prep(const mv_fuse_d &f, int64_t r0) {
    mv_rope_t rp;
    rp.pos = __ldcg(f.d_pos);
    rp.s = 0.0f;
    rp.co = 1.0f;
    const int head = (int)(r0 / f.hd), p = (int)(r0 % f.hd) / 2;
    if (rp.pos < f.n_ctx && head < f.nh + f.nkv) rope_sincos((float)rp.pos / f.scale, p, f.hd, f.base, f.fdiv, &rp.s, &rp.co);
    return rp;
}
__device__ __forceinline__ void mv_rope_apply(const mv_fuse_d &f, int64_t r0, const mv_rope_t &rp, float &y0,
                                              float &y1) {
    const int head = (int)(r0 / f.hd), a = (int)(r0 % f.hd);
    const int64_t pos = rp.pos;
    if (pos >= f.n_ctx) return;
    rope_store_pair(f.kc, f.vc, head, f.nh, f.nkv, f.hd, f.n_ctx, pos, a, a + 1, rp.s, rp.co, y0, y1);
}
__device__ __forceinline__ void mv_rope_pair(const mv_fuse_d &f, int64_t r0, float &y0, float &y1) {
    mv_rope_apply(f, r0, mv_rope_prep(f, r0), y0, y1);
}

/* the q8_1 epilogue of one group of 32 outputs by one warp (lane = output
 * grp*32 + lane, o its final value): y o g_next (out_f), its q8_1 block
 * (out_q; scales after n_rows_out quants) and the sum of o^2 (out_ss) */
__device__ __forceinline__ void mv_q8_group(const mv_fuse_d &f, int64_t grp, float o, int lane,
                                            int64_t n_rows_out, const float *gpre = NULL) {
    const int64_t i = grp * 32 + lane;
    /* gpre: this lane's gamma of f.out_norm, loaded by the caller earlier */
    const float xv = f.out_norm ? o * (gpre ? *gpre : f.out_norm[i]) : o;
    if (f.out_f) f.out_f[i] = xv;
    warp_q8_1(xv, f.out_q, (float2 *)(f.out_q + n_rows_out), i, lane);
    const float ss = warp_sum(o * o);
    if (lane == 0 && f.out_ss) f.out_ss[grp] = ss;
}

/* f(std::integral_constant<int, T>{}) for the weight type t, one of the
 * eight matvec types (cudaErrorInvalidValue for any other): the one place
 * a run-time type picks a kernel instantiation */
template <typename F> static inline cudaError_t mv_dispatch(tl_type t, F &&f) {
    switch (t) {
    case TL_TYPE_F16: return f(std::integral_constant<int, TL_TYPE_F16>{});
    case TL_TYPE_BF16: return f(std::integral_constant<int, TL_TYPE_BF16>{});
    case TL_TYPE_F32: return f(std::integral_constant<int, TL_TYPE_F32>{});
    case TL_TYPE_Q4_0: return f(std::integral_constant<int, TL_TYPE_Q4_0>{});
    case TL_TYPE_Q4_1: return f(std::integral_constant<int, TL_TYPE_Q4_1>{});
    case TL_TYPE_Q8_0: return f(std::integral_constant<int, TL_TYPE_Q8_0>{});
    case TL_TYPE_Q4_K: return f(std::integral_constant<int, TL_TYPE_Q4_K>{});
    case TL_TYPE_Q6_K: return f(std::integral_constant<int, TL_TYPE_Q6_K>{});
    default: return cudaErrorInvalidValue;
    }
}

#endif
