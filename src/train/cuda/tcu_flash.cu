/* train/cuda/tcu_flash: causal (or full) attention forward and backward on
 * the tensor cores for the framework's BF16 mode, never storing the T x T
 * probabilities.
 *
 * q, k, v, o and their gradients are strided f32 [B, H(kv), T, D] (D 32,
 * 64 or 128; tcu.h's tcu_flash_dims), so a fused QKV projection's output
 * is read in place and the output written token-major; query head h reads
 * kv head h / (H / Hkv). Tiles are rounded to bf16 as they are staged in shared memory (or in
 * registers for a warp's own rows), products accumulate in f32 with
 * mma.sync m16n8k16 (backend/cuda/cuda_mma.cuh, the fragments the engine's
 * flash prefill uses). Scores are kept in the log2 domain: the scale times
 * log2(e) is folded into q, and the forward saves each row's
 * lse2 = max + log2(sum) for the backward.
 *  - forward: a block of 4 warps owns 64 queries (16 per warp) and walks the
 *    key tiles with an online softmax; O = P V with P rounded to bf16 in
 *    registers (an S accumulator pair of n-tiles is an A fragment).
 *  - backward, two kernels so that no sum depends on atomics' order: one
 *    per 64 keys walks the query tiles of every query head of its group for
 *    dV += P^T dO and dK += dS^T Q (the next q and dO tiles landing in
 *    shared memory by cp.async meanwhile); one per 64 queries walks the key tiles for dQ += dS K;
 *    both recompute P from lse2, and dS = P (dP - delta) with
 *    dP = dO V^T and delta = rowsum(dO o O) (a first small kernel).
 * Rows at or past T are zero-filled and masked.
 * Owns nothing. Calls: CUDA (sm_80+ mma.sync, ldmatrix). */
#include <math.h>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_mma.cuh"
#include "train/cuda/tcu_common.cuh"

#define FL_B 64     /* queries (keys) per tile */
#define FL_WARPS 4  /* 16 rows each */
#define FL_LOG2E 1.4426950408889634f

template <int D> struct fl_cfg {
    static constexpr int LD = D + 8; /* padded row, in bf16: ldmatrix rows hit distinct banks */
    static constexpr int TILE = FL_B * LD;
    static constexpr size_t SMEM = (size_t)2 * TILE * 2 + 2 * FL_B * sizeof(float);
    /* the dK/dV kernel also lands its next q and dO tiles in f32 */
    static constexpr size_t SMEM_KV = SMEM + (size_t)2 * FL_B * D * sizeof(float);
};

/* 8 floats rounded to bf16 */
__device__ __forceinline__ uint4 fl_pack8(float4 a, float4 b) {
    return make_uint4(fa_pack_bf16(a.x, a.y), fa_pack_bf16(a.z, a.w), fa_pack_bf16(b.x, b.y), fa_pack_bf16(b.z, b.w));
}

/* A tile's rows [row0, row0 + 64) of x [T, D] f32 (row stride ld) in
 * flight: each thread loads its share into registers (fl_fetch) and later
 * rounds it to bf16 into shared memory (fl_put), so that the next tile's
 * loads can overlap this tile's products. Rows past T are zero. */
template <int D> struct fl_tile {
    static constexpr int CH = D / 8, N = FL_B * CH / (FL_WARPS * 32);
    /* the next tile's registers stay live through the products: only where they fit */
    static constexpr bool PREFETCH = D <= 64;
    float4 a[N], b[N];
};

template <int D>
__device__ __forceinline__ void fl_fetch(fl_tile<D> &f, const float *x, int64_t ld, int64_t row0, int64_t T) {
    constexpr int CH = fl_tile<D>::CH;
#pragma unroll
    for (int n = 0; n < fl_tile<D>::N; n++) {
        const int i = threadIdx.x + n * FL_WARPS * 32, r = i / CH, cc = i % CH;
        const bool in = row0 + r < T;
        const float *src = x + (in ? row0 + r : 0) * ld + cc * 8;
        f.a[n] = in ? *(const float4 *)src : make_float4(0.f, 0.f, 0.f, 0.f);
        f.b[n] = in ? *(const float4 *)(src + 4) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
}

template <int D> __device__ __forceinline__ void fl_put(__nv_bfloat16 *dst, const fl_tile<D> &f) {
    constexpr int CH = fl_tile<D>::CH;
#pragma unroll
    for (int n = 0; n < fl_tile<D>::N; n++) {
        const int i = threadIdx.x + n * FL_WARPS * 32, r = i / CH, cc = i % CH;
        *(uint4 *)(dst + r * fl_cfg<D>::LD + cc * 8) = fl_pack8(f.a[n], f.b[n]);
    }
}

/* the same in one pass, for tiles whose registers would not fit */
template <int D>
__device__ __forceinline__ void fl_stage(__nv_bfloat16 *dst, const float *x, int64_t ld, int64_t row0, int64_t T) {
    constexpr int CH = D / 8;
    for (int i = threadIdx.x; i < FL_B * CH; i += FL_WARPS * 32) {
        const int r = i / CH, cc = i % CH;
        uint4 out = make_uint4(0, 0, 0, 0);
        if (row0 + r < T)
            out = fl_pack8(*(const float4 *)(x + (row0 + r) * ld + cc * 8),
                           *(const float4 *)(x + (row0 + r) * ld + cc * 8 + 4));
        *(uint4 *)(dst + r * fl_cfg<D>::LD + cc * 8) = out;
    }
}

/* rows [row0, row0 + 64) of x (row stride ld) copied as f32 into raw [64][D]
 * by cp.async, rows past T zero-filled: in flight while the block multiplies */
template <int D>
__device__ __forceinline__ void fl_async(float *raw, const float *x, int64_t ld, int64_t row0, int64_t T) {
    constexpr int C4 = D / 4;
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(raw);
    for (int i = threadIdx.x; i < FL_B * C4; i += FL_WARPS * 32) {
        const int r = i / C4, c4 = i % C4;
        const bool in = row0 + r < T;
        cp_async16(base + (uint32_t)(i * 16), x + (in ? row0 + r : 0) * ld + c4 * 4, in ? 16 : 0);
    }
}

/* raw [64][D] f32 (in shared memory) rounded to a bf16 tile */
template <int D> __device__ __forceinline__ void fl_round(__nv_bfloat16 *dst, const float *raw) {
    constexpr int CH = D / 8;
    for (int i = threadIdx.x; i < FL_B * CH; i += FL_WARPS * 32) {
        const int r = i / CH, cc = i % CH;
        *(uint4 *)(dst + r * fl_cfg<D>::LD + cc * 8) =
            fl_pack8(*(const float4 *)(raw + r * D + cc * 8), *(const float4 *)(raw + r * D + cc * 8 + 4));
    }
}

/* The key and value tiles of step j into shared memory: prefetched one step
 * ahead where the registers fit (fk/fv hold step j's, and get step j + 1's) */
template <int D>
__device__ __forceinline__ void fl_kv_step(__nv_bfloat16 *sk, __nv_bfloat16 *sv, fl_tile<D> &fk, fl_tile<D> &fv,
                                           const float *kh, const float *vh, int64_t ld, int64_t j, int64_t n,
                                           int64_t T) {
    __syncthreads(); /* every warp is done with the previous tile */
    if constexpr (fl_tile<D>::PREFETCH) {
        fl_put<D>(sk, fk);
        fl_put<D>(sv, fv);
        __syncthreads();
        if (j + 1 < n) {
            fl_fetch<D>(fk, kh, ld, (j + 1) * FL_B, T);
            fl_fetch<D>(fv, vh, ld, (j + 1) * FL_B, T);
        }
    } else {
        fl_stage<D>(sk, kh, ld, j * FL_B, T);
        fl_stage<D>(sv, vh, ld, j * FL_B, T);
        __syncthreads();
    }
}

/* A fragments of this warp's 16 rows [r0, r0 + 16) of x [T, D] (row stride ld), times f */
template <int D>
__device__ __forceinline__ void fl_rows_a(uint32_t (&a)[D / 16][4], const float *x, int64_t ld, int64_t r0, int64_t T,
                                          float f) {
    const int lane = threadIdx.x & 31, cq = 2 * (lane & 3);
    const int64_t t0 = r0 + (lane >> 2), t1 = t0 + 8;
    const float2 z = make_float2(0.f, 0.f);
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        const int c = kk * 16 + cq;
        const float2 p = t0 < T ? *(const float2 *)(x + t0 * ld + c) : z, q = t1 < T ? *(const float2 *)(x + t1 * ld + c) : z;
        const float2 p8 = t0 < T ? *(const float2 *)(x + t0 * ld + c + 8) : z;
        const float2 q8 = t1 < T ? *(const float2 *)(x + t1 * ld + c + 8) : z;
        a[kk][0] = fa_pack_bf16(p.x * f, p.y * f);
        a[kk][1] = fa_pack_bf16(q.x * f, q.y * f);
        a[kk][2] = fa_pack_bf16(p8.x * f, p8.y * f);
        a[kk][3] = fa_pack_bf16(q8.x * f, q8.y * f);
    }
}

/* acc [16 x 64] += A [16 x D] . X^T, X a staged tile [64][LD] (B[k=d][n=row] = X[row][d]) */
template <int D>
__device__ __forceinline__ void fl_mm_xt(float (&acc)[FL_B / 8][4], const uint32_t (&a)[D / 16][4], uint32_t sx) {
    const int lane = threadIdx.x & 31;
    const uint32_t off = (uint32_t)(((lane & 7) * fl_cfg<D>::LD + 8 * (lane >> 3)) * 2);
#pragma unroll
    for (int nt = 0; nt < FL_B / 8; nt++) {
        acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk += 2) {
            uint32_t b[4];
            fa_ldm4(b, sx + off + (uint32_t)((nt * 8 * fl_cfg<D>::LD + kk * 16) * 2));
            fa_mma_bf16(acc[nt], a[kk], b[0], b[1]);
            fa_mma_bf16(acc[nt], a[kk + 1], b[2], b[3]);
        }
    }
}

/* acc [16 x D] += P [16 x 64] (A fragments) . X, X a staged tile [64][LD] (B[k=row][n=d] = X[row][d]) */
template <int D>
__device__ __forceinline__ void fl_mm_x(float (&acc)[D / 8][4], const uint32_t (&p)[FL_B / 16][4], uint32_t sx) {
    const int lane = threadIdx.x & 31;
    const uint32_t off = (uint32_t)(((lane & 15) * fl_cfg<D>::LD + 8 * (lane >> 4)) * 2);
#pragma unroll
    for (int ks = 0; ks < FL_B / 16; ks++) {
#pragma unroll
        for (int nd = 0; nd < D / 8; nd += 2) {
            uint32_t b[4];
            fa_ldm4t(b, sx + off + (uint32_t)((ks * 16 * fl_cfg<D>::LD + nd * 8) * 2));
            fa_mma_bf16(acc[nd], p[ks], b[0], b[1]);
            fa_mma_bf16(acc[nd + 1], p[ks], b[2], b[3]);
        }
    }
}

/* the C fragments of a [16 x 64] tile as bf16 A fragments of its k16 steps */
__device__ __forceinline__ void fl_to_a(uint32_t (&p)[FL_B / 16][4], const float (&s)[FL_B / 8][4]) {
#pragma unroll
    for (int nt = 0; nt < FL_B / 8; nt++) {
        p[nt / 2][(nt & 1) * 2 + 0] = fa_pack_bf16(s[nt][0], s[nt][1]);
        p[nt / 2][(nt & 1) * 2 + 1] = fa_pack_bf16(s[nt][2], s[nt][3]);
    }
}

/* the [T, D] rows of head h of batch b in a tensor of strides st */
__device__ __forceinline__ int64_t fl_head(tcu_fl_stride st, int64_t b, int64_t h) { return b * st.b + h * st.h; }

/* ---- forward ---- */
template <int D>
__global__ void __launch_bounds__(FL_WARPS * 32)
flash_fwd_k(float *o, float *lse2, const float *q, const float *k, const float *v, tcu_flash_dims d, float sl2,
            bool causal) {
    typedef fl_cfg<D> C;
    extern __shared__ __align__(16) unsigned char fl_smem[];
    __nv_bfloat16 *sk = (__nv_bfloat16 *)fl_smem, *sv = sk + C::TILE;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, cq = 2 * (lane & 3);
    const int64_t bh = blockIdx.y, qt = (int64_t)gridDim.x - 1 - blockIdx.x; /* longest tiles first */
    const int64_t T = d.T, b = bh / d.H, h = bh % d.H, hk = h / (d.H / d.Hkv);
    const float *qh = q + fl_head(d.q, b, h), *kh = k + fl_head(d.kv, b, hk), *vh = v + fl_head(d.kv, b, hk);
    const int64_t r0 = qt * FL_B + warp * 16, t0 = r0 + (lane >> 2), t1 = t0 + 8;
    uint32_t qa[D / 16][4];
    fl_rows_a<D>(qa, qh, d.q.t, r0, T, sl2);
    float acc[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    const uint32_t skt = (uint32_t)__cvta_generic_to_shared(sk), svt = (uint32_t)__cvta_generic_to_shared(sv);
    const int64_t n_kt = causal ? qt + 1 : (T + FL_B - 1) / FL_B;
    fl_tile<D> fk, fv;
    if constexpr (fl_tile<D>::PREFETCH) {
        fl_fetch<D>(fk, kh, d.kv.t, 0, T);
        fl_fetch<D>(fv, vh, d.kv.t, 0, T);
    }
    for (int64_t j = 0; j < n_kt; j++) {
        fl_kv_step<D>(sk, sv, fk, fv, kh, vh, d.kv.t, j, n_kt, T);
        float s[FL_B / 8][4];
        fl_mm_xt<D>(s, qa, skt);
        const int64_t p0 = j * FL_B;
#pragma unroll
        for (int nt = 0; nt < FL_B / 8; nt++) {
            const int64_t p = p0 + nt * 8 + cq;
            if (p >= T || (causal && p > t0)) s[nt][0] = -INFINITY;
            if (p + 1 >= T || (causal && p + 1 > t0)) s[nt][1] = -INFINITY;
            if (p >= T || (causal && p > t1)) s[nt][2] = -INFINITY;
            if (p + 1 >= T || (causal && p + 1 > t1)) s[nt][3] = -INFINITY;
        }
        float mx0 = m0, mx1 = m1;
#pragma unroll
        for (int nt = 0; nt < FL_B / 8; nt++) {
            mx0 = fmaxf(mx0, fmaxf(s[nt][0], s[nt][1]));
            mx1 = fmaxf(mx1, fmaxf(s[nt][2], s[nt][3]));
        }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        /* rows past T see no key: keep their sums finite */
        const float b0 = mx0 == -INFINITY ? 0.0f : mx0, b1 = mx1 == -INFINITY ? 0.0f : mx1;
        const float c0 = exp2f(m0 - b0), c1 = exp2f(m1 - b1);
        m0 = mx0, m1 = mx1;
        float ls0 = 0.0f, ls1 = 0.0f;
#pragma unroll
        for (int nt = 0; nt < FL_B / 8; nt++) {
            s[nt][0] = exp2f(s[nt][0] - b0), s[nt][1] = exp2f(s[nt][1] - b0);
            s[nt][2] = exp2f(s[nt][2] - b1), s[nt][3] = exp2f(s[nt][3] - b1);
            ls0 += s[nt][0] + s[nt][1];
            ls1 += s[nt][2] + s[nt][3];
        }
        l0 = l0 * c0 + ls0;
        l1 = l1 * c1 + ls1;
#pragma unroll
        for (int i = 0; i < D / 8; i++) acc[i][0] *= c0, acc[i][1] *= c0, acc[i][2] *= c1, acc[i][3] *= c1;
        uint32_t pa[FL_B / 16][4];
        fl_to_a(pa, s);
        fl_mm_x<D>(acc, pa, svt);
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float i0 = l0 > 0 ? 1.0f / l0 : 0.0f, i1 = l1 > 0 ? 1.0f / l1 : 0.0f;
    float *oh = o + fl_head(d.o, b, h);
#pragma unroll
    for (int nd = 0; nd < D / 8; nd++) {
        const int c = nd * 8 + cq;
        if (t0 < T) *(float2 *)(oh + t0 * d.o.t + c) = make_float2(acc[nd][0] * i0, acc[nd][1] * i0);
        if (t1 < T) *(float2 *)(oh + t1 * d.o.t + c) = make_float2(acc[nd][2] * i1, acc[nd][3] * i1);
    }
    if ((lane & 3) == 0) {
        if (t0 < T) lse2[bh * T + t0] = m0 + log2f(l0);
        if (t1 < T) lse2[bh * T + t1] = m1 + log2f(l1);
    }
}

/* ---- backward ---- */

/* delta[(b H + h) T + t] = sum_d go[b, h, t, d] * o[b, h, t, d]: a warp per row */
__global__ void flash_delta_k(float *delta, const float *go, const float *o, tcu_flash_dims d) {
    const int64_t r = blockIdx.x * (int64_t)(blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= d.B * d.H * d.T) return;
    const int64_t bh = r / d.T, t = r % d.T, b = bh / d.H, h = bh % d.H;
    const float *gr = go + fl_head(d.go, b, h) + t * d.go.t, *orow = o + fl_head(d.o, b, h) + t * d.o.t;
    float s = 0.0f;
    for (int i = threadIdx.x & 31; i < d.D; i += 32) s += gr[i] * orow[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) delta[r] = s;
}

/* P (log2-domain scores s minus lse2) with the masks, and dS = P (dP - delta), for a
 * [16 x 64] tile whose element (i, j) is (row ri, column cj): row_major says
 * whether rows are queries (the dQ kernel) or keys (the dK/dV kernel) */
template <bool ROWS_ARE_QUERIES>
__device__ __forceinline__ void fl_p_ds(float (&s)[FL_B / 8][4], float (&dp)[FL_B / 8][4], int64_t r_base,
                                        int64_t c_base, int64_t T, bool causal, const float *lse_r,
                                        const float *del_r, const float *lse_c, const float *del_c) {
    const int lane = threadIdx.x & 31, cq = 2 * (lane & 3);
#pragma unroll
    for (int nt = 0; nt < FL_B / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int64_t ri = r_base + (lane >> 2) + (e >= 2 ? 8 : 0);
            const int cl = nt * 8 + cq + (e & 1);
            const int64_t cj = c_base + cl;
            const int64_t qi = ROWS_ARE_QUERIES ? ri : cj, kj = ROWS_ARE_QUERIES ? cj : ri;
            const bool ok = qi < T && kj < T && !(causal && kj > qi);
            const float l = ROWS_ARE_QUERIES ? lse_r[e >= 2] : lse_c[cl];
            const float dl = ROWS_ARE_QUERIES ? del_r[e >= 2] : del_c[cl];
            const float p = ok ? exp2f(s[nt][e] - l) : 0.0f;
            s[nt][e] = p;
            dp[nt][e] = p * (dp[nt][e] - dl);
        }
}

/* dK, dV of 64 keys of kv head hk: the query tiles (from the keys' own on,
 * causal) of each query head of the group, summed in a fixed order */
template <int D>
__global__ void __launch_bounds__(FL_WARPS * 32)
flash_bwd_kv_k(float *dk, float *dv, const float *q, const float *k, const float *v, const float *go,
               const float *lse2, const float *delta, tcu_flash_dims d, float scale, bool causal) {
    typedef fl_cfg<D> C;
    extern __shared__ __align__(16) unsigned char fl_smem[];
    __nv_bfloat16 *sq = (__nv_bfloat16 *)fl_smem, *sg = sq + C::TILE;
    float *sl = (float *)(sg + C::TILE), *sd = sl + FL_B, *rq = sd + FL_B, *rg = rq + FL_B * D;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, cq = 2 * (lane & 3);
    const int64_t T = d.T, G = d.H / d.Hkv, b = blockIdx.y / d.Hkv, hk = blockIdx.y % d.Hkv, kt = blockIdx.x;
    const int64_t kvo = fl_head(d.kv, b, hk);
    const int64_t r0 = kt * FL_B + warp * 16, t0 = r0 + (lane >> 2), t1 = t0 + 8;
    uint32_t ka[D / 16][4], va[D / 16][4];
    fl_rows_a<D>(ka, k + kvo, d.kv.t, r0, T, scale * FL_LOG2E);
    fl_rows_a<D>(va, v + kvo, d.kv.t, r0, T, 1.0f);
    float ak[D / 8][4], av[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) ak[i][e] = av[i][e] = 0.0f;
    const uint32_t sqt = (uint32_t)__cvta_generic_to_shared(sq), sgt = (uint32_t)__cvta_generic_to_shared(sg);
    /* the (query head, query tile) steps in order, each step's q and dO
     * tiles landing in raw f32 while the previous step multiplies */
    const int64_t n_qt = (T + FL_B - 1) / FL_B, j0 = causal ? kt : 0, per = n_qt - j0, n_step = G * per;
    auto issue = [&](int64_t st) {
        const int64_t h = hk * G + st / per, j = j0 + st % per;
        fl_async<D>(rq, q + fl_head(d.q, b, h), d.q.t, j * FL_B, T);
        fl_async<D>(rg, go + fl_head(d.go, b, h), d.go.t, j * FL_B, T);
        cp_async_commit();
    };
    if (n_step > 0) issue(0);
    for (int64_t st = 0; st < n_step; st++) {
        const int64_t h = hk * G + st / per, j = j0 + st % per, bh = b * d.H + h;
        float lv = 0.0f, dv_ = 0.0f;
        const int64_t tl = j * FL_B + threadIdx.x;
        if (threadIdx.x < FL_B && tl < T) lv = lse2[bh * T + tl], dv_ = delta[bh * T + tl];
        cp_async_wait<0>();
        __syncthreads(); /* the raw tiles are in, and every warp is done with the last step */
        fl_round<D>(sq, rq);
        fl_round<D>(sg, rg);
        if (threadIdx.x < FL_B) sl[threadIdx.x] = lv, sd[threadIdx.x] = dv_;
        __syncthreads();
        if (st + 1 < n_step) issue(st + 1);
        {
            float s[FL_B / 8][4], dp[FL_B / 8][4];
            fl_mm_xt<D>(s, ka, sqt);  /* S^T = K Q^T (log2 domain) */
            fl_mm_xt<D>(dp, va, sgt); /* dP^T = V dO^T */
            fl_p_ds<false>(s, dp, r0, j * FL_B, T, causal, nullptr, nullptr, sl, sd);
            uint32_t pa[FL_B / 16][4], da[FL_B / 16][4];
            fl_to_a(pa, s);
            fl_to_a(da, dp);
            fl_mm_x<D>(av, pa, sgt); /* dV += P^T dO */
            fl_mm_x<D>(ak, da, sqt); /* dK += dS^T Q */
        }
    }
    float *dkh = dk + fl_head(d.dkv, b, hk), *dvh = dv + fl_head(d.dkv, b, hk);
#pragma unroll
    for (int nd = 0; nd < D / 8; nd++) {
        const int c = nd * 8 + cq;
        if (t0 < T) {
            *(float2 *)(dkh + t0 * d.dkv.t + c) = make_float2(ak[nd][0] * scale, ak[nd][1] * scale);
            *(float2 *)(dvh + t0 * d.dkv.t + c) = make_float2(av[nd][0], av[nd][1]);
        }
        if (t1 < T) {
            *(float2 *)(dkh + t1 * d.dkv.t + c) = make_float2(ak[nd][2] * scale, ak[nd][3] * scale);
            *(float2 *)(dvh + t1 * d.dkv.t + c) = make_float2(av[nd][2], av[nd][3]);
        }
    }
}

/* dQ of 64 queries: the key tiles up to their own (causal) */
template <int D>
__global__ void __launch_bounds__(FL_WARPS * 32)
flash_bwd_q_k(float *dq, const float *q, const float *k, const float *v, const float *go, const float *lse2,
              const float *delta, tcu_flash_dims d, float scale, bool causal) {
    typedef fl_cfg<D> C;
    extern __shared__ __align__(16) unsigned char fl_smem[];
    __nv_bfloat16 *sk = (__nv_bfloat16 *)fl_smem, *sv = sk + C::TILE;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, cq = 2 * (lane & 3);
    const int64_t bh = blockIdx.y, qt = (int64_t)gridDim.x - 1 - blockIdx.x;
    const int64_t T = d.T, b = bh / d.H, h = bh % d.H, hk = h / (d.H / d.Hkv);
    const float *kh = k + fl_head(d.kv, b, hk), *vh = v + fl_head(d.kv, b, hk);
    const int64_t r0 = qt * FL_B + warp * 16, t0 = r0 + (lane >> 2), t1 = t0 + 8;
    uint32_t qa[D / 16][4], ga[D / 16][4];
    fl_rows_a<D>(qa, q + fl_head(d.q, b, h), d.q.t, r0, T, scale * FL_LOG2E);
    fl_rows_a<D>(ga, go + fl_head(d.go, b, h), d.go.t, r0, T, 1.0f);
    const float lr[2] = {t0 < T ? lse2[bh * T + t0] : 0.0f, t1 < T ? lse2[bh * T + t1] : 0.0f};
    const float dr[2] = {t0 < T ? delta[bh * T + t0] : 0.0f, t1 < T ? delta[bh * T + t1] : 0.0f};
    float aq[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) aq[i][0] = aq[i][1] = aq[i][2] = aq[i][3] = 0.0f;
    const uint32_t skt = (uint32_t)__cvta_generic_to_shared(sk), svt = (uint32_t)__cvta_generic_to_shared(sv);
    const int64_t n_kt = causal ? qt + 1 : (T + FL_B - 1) / FL_B;
    fl_tile<D> fk, fv;
    if constexpr (fl_tile<D>::PREFETCH) {
        fl_fetch<D>(fk, kh, d.kv.t, 0, T);
        fl_fetch<D>(fv, vh, d.kv.t, 0, T);
    }
    for (int64_t j = 0; j < n_kt; j++) {
        fl_kv_step<D>(sk, sv, fk, fv, kh, vh, d.kv.t, j, n_kt, T);
        float s[FL_B / 8][4], dp[FL_B / 8][4];
        fl_mm_xt<D>(s, qa, skt);  /* S = Q K^T (log2 domain) */
        fl_mm_xt<D>(dp, ga, svt); /* dP = dO V^T */
        fl_p_ds<true>(s, dp, r0, j * FL_B, T, causal, lr, dr, nullptr, nullptr);
        uint32_t da[FL_B / 16][4];
        fl_to_a(da, dp);
        fl_mm_x<D>(aq, da, skt); /* dQ += dS K */
    }
    float *dqh = dq + fl_head(d.dq, b, h);
#pragma unroll
    for (int nd = 0; nd < D / 8; nd++) {
        const int c = nd * 8 + cq;
        if (t0 < T) *(float2 *)(dqh + t0 * d.dq.t + c) = make_float2(aq[nd][0] * scale, aq[nd][1] * scale);
        if (t1 < T) *(float2 *)(dqh + t1 * d.dq.t + c) = make_float2(aq[nd][2] * scale, aq[nd][3] * scale);
    }
}

extern "C" bool tcu_flash_ok(int64_t D) { return D == 32 || D == 64 || D == 128; }

extern "C" bool tcu_flash_aligned(const void *p, tcu_fl_stride st) {
    return !((uintptr_t)p & 15) && !(st.b & 3) && !(st.h & 3) && !(st.t & 3);
}

template <int D> static void fl_fwd(tcu_state *s, float *o, float *lse2, const float *q, const float *k, const float *v,
                                    const tcu_flash_dims *d, float scale, bool causal) {
    const size_t sm = fl_cfg<D>::SMEM;
    cudaFuncSetAttribute(flash_fwd_k<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
    const dim3 g((unsigned)((d->T + FL_B - 1) / FL_B), (unsigned)(d->B * d->H));
    flash_fwd_k<D><<<g, FL_WARPS * 32, sm, s->stream>>>(o, lse2, q, k, v, *d, scale * FL_LOG2E, causal);
}

template <int D>
static void fl_bwd(tcu_state *s, float *dq, float *dk, float *dv, const float *go, const float *lse2, const float *delta,
                   const float *q, const float *k, const float *v, const tcu_flash_dims *d, float scale, bool causal) {
    const size_t sm = fl_cfg<D>::SMEM, skv = fl_cfg<D>::SMEM_KV;
    cudaFuncSetAttribute(flash_bwd_kv_k<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)skv);
    cudaFuncSetAttribute(flash_bwd_q_k<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
    const unsigned nt = (unsigned)((d->T + FL_B - 1) / FL_B);
    flash_bwd_kv_k<D><<<dim3(nt, (unsigned)(d->B * d->Hkv)), FL_WARPS * 32, skv, s->stream>>>(dk, dv, q, k, v, go, lse2,
                                                                                           delta, *d, scale, causal);
    flash_bwd_q_k<D><<<dim3(nt, (unsigned)(d->B * d->H)), FL_WARPS * 32, sm, s->stream>>>(dq, q, k, v, go, lse2, delta,
                                                                                        *d, scale, causal);
}

static tl_status fl_check(const tcu_flash_dims *d) {
    if (!tcu_flash_ok(d->D))
        return tl_err(TL_ERR_UNSUPPORTED, "train cuda: flash attention of head size %lld", (long long)d->D);
    if (d->Hkv <= 0 || d->H % d->Hkv)
        return tl_err(TL_ERR_INVALID, "train cuda: flash attention of %lld heads over %lld kv heads", (long long)d->H,
                      (long long)d->Hkv);
    return TL_OK;
}

extern "C" tl_status tcu_flash_fwd(float *o, float *lse2, const float *q, const float *k, const float *v,
                                   const tcu_flash_dims *d, float scale, bool causal) {
    TCU_STATE(s);
    tl_status st = fl_check(d);
    if (st || !d->B || !d->H || !d->T) return st;
    if (d->D == 32) fl_fwd<32>(s, o, lse2, q, k, v, d, scale, causal);
    else if (d->D == 64) fl_fwd<64>(s, o, lse2, q, k, v, d, scale, causal);
    else fl_fwd<128>(s, o, lse2, q, k, v, d, scale, causal);
    return tcu_check("flash attention fwd");
}

extern "C" tl_status tcu_flash_bwd(float *dq, float *dk, float *dv, float *delta, const float *go, const float *o,
                                   const float *lse2, const float *q, const float *k, const float *v,
                                   const tcu_flash_dims *d, float scale, bool causal) {
    TCU_STATE(s);
    tl_status st = fl_check(d);
    if (st || !d->B || !d->H || !d->T) return st;
    const int64_t rows = d->B * d->H * d->T;
    flash_delta_k<<<(unsigned)((rows + 7) / 8), 256, 0, s->stream>>>(delta, go, o, *d);
    if (d->D == 32) fl_bwd<32>(s, dq, dk, dv, go, lse2, delta, q, k, v, d, scale, causal);
    else if (d->D == 64) fl_bwd<64>(s, dq, dk, dv, go, lse2, delta, q, k, v, d, scale, causal);
    else fl_bwd<128>(s, dq, dk, dv, go, lse2, delta, q, k, v, d, scale, causal);
    return tcu_check("flash attention bwd");
}
