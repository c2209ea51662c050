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
 * after the wait with plain loads (L1-cached, ordered by the memory model;
 * not the non-coherent path, which races with a producer still running under
 * PDL), once per unit for all of a warp's rows, and beside it the folded
 * norm's partial sums, so that a warp waits on one L2 round trip after the
 * wait, not two. Quantized types dot int8 activations (q8_1: per 32 values d
 * and d*sum) with dp4a; float types use f32 FMA.
 * Modes: store, accumulate (residual add fused), GLU (rows i and i+m of a
 * [gate; up] matrix in one warp, silu(g)*u written: the FFN's gate/up/SiLU in
 * one launch).
 * Fusions (tlc_matvec_fused), which remove every separate norm/quantize
 * launch from a decode layer but the GLU's:
 *  - RMSNorm folded in: the product is linear in the activation scale, so
 *    the producer hands over q8_1(x o g) and per-32 partial sums of x^2, and
 *    each warp multiplies its dot by rsqrt(sum/n + eps) at the end;
 *  - q8_1 epilogue of a store/accumulate matvec: blocks of exactly 32
 *    outputs, each writing its group's q8_1 block (and, accumulating into
 *    the residual, y o g_next and the partial sum of y^2 for the next
 *    layer's folded norm); the GLU's q8_1 is a separate many-block launch,
 *    which measured faster than the in-kernel forms;
 *  - in-block input quantization (in_q8, template flag IQ): each block
 *    quantizes the f32 input into shared memory after the wait, while its
 *    first weights are in flight, so the producer needs no q8_1 at all;
 *    the engine uses it where it measured faster (tlc_mv_in_q8_use).
 * Measurements of each layout and fusion: docs/PERFORMANCE.md (CUDA).
 * The per-type unit traits and the epilogue helpers are in cuda_mv.cuh.
 * Calls: CUDA. */
#include <cooperative_groups.h>

#include "backend/cuda/cuda_mv.cuh"

#define MV_WARPS 4
/* types whose rows share one guard per unit (rows past the matrix clamped;
 * see lrows in matvec_body); a RoPE pair never straddles the end, n_out being
 * a multiple of the head size */
#define MV_UG(T) ((T) != TL_TYPE_Q4_K && (T) != TL_TYPE_Q6_K)
#define MV_SS_N 4 /* the folded norm's partial sums per lane held over the loop (n_in <= 4096) */

/* U units of each of the R rows per lane, from unit base on (weights only;
 * rows: inside the matrix, see lrows in matvec_body) */
template <typename M, int U, int R, bool UG>
__device__ __forceinline__ void mv_load(typename M::W (&v)[U][R], const tlc_weight &w, const int64_t (&rows)[R],
                                        int64_t base, int64_t nu, int lane) {
#pragma unroll
    for (int k = 0; k < U; k++) {
        int64_t u = base + k * 32 + lane;
#pragma unroll
        for (int r = 0; r < R; r++)
            if (u < nu && (UG || rows[r] < w.n_out)) v[k][r] = M::load(w, rows[r], u);
    }
}

/* q8_1 of x [n] (n % 32 == 0) by the block's nw warps into q [n] and ds
 * [n/32]: 8 lanes per 32-value group, 4 values each, KB float4 loads per
 * lane in flight (2 in 1024-thread blocks, whose 64 registers the weights
 * share: 4 spilled there); the same arithmetic as act_prep_k, so the same bytes. */
template <int KB>
__device__ __forceinline__ void mv_block_q8(const float *x, int64_t n, int8_t *q, float2 *ds, int nw) {
    const int lane = threadIdx.x & 31;
    const int64_t n4 = n / 4, stride = (int64_t)nw * 32;
    for (int64_t i0 = (int64_t)(threadIdx.x >> 5) * 32; i0 < n4; i0 += KB * stride) { /* warp-uniform */
        float4 v[KB];
#pragma unroll
        for (int k = 0; k < KB; k++) {
            const int64_t i = i0 + k * stride + lane;
            v[k] = i < n4 ? ldx((const float4 *)x + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int k = 0; k < KB; k++) {
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

/* the folded input norm's scale, rsqrt(mean(x^2) + eps): s (this lane's
 * sum so far) plus the partial sums f.in_ss[i0 + lane], [i0 + lane + 32], ... */
__device__ __forceinline__ float mv_in_scale(const mv_fuse_d &f, int64_t n_in, float s, int64_t i0, int lane) {
    for (int64_t i = i0 + lane; i < n_in / 32; i += 32) s += f.in_ss[i];
    return rsqrtf(warp_sum(s) / (float)n_in + f.eps);
}

/* W warps per block, R weight rows per warp (GLU: R/2 outputs, each a gate
 * row and an up row), U units per lane in flight.
 * q8_1 epilogue (f.out_q): launched only in blocks of exactly 32 outputs,
 * which write their group's q8_1 block themselves. The counted form at the
 * end (blocks of fewer outputs count themselves in cnt[group] and the last
 * one writes the block) is launched no more, as it measured slower; it
 * stays compiled because taking it out changes the code of every instance,
 * those the defaults run included, which would want measuring. */
/* The body of one block: bx is its index within this weight's blocks, and
 * row_off the index of w's first row in the whole output (the RoPE
 * epilogue's row numbering; y already points at w's first output). */
template <int T, int R, int U, int W, bool IQ, int KS, bool AM = false>
__device__ __forceinline__ void matvec_body(const tlc_weight &w, const float *xf, const int8_t *xq,
                                            const float2 *xds, float *y, int mode, int64_t n_rows_out,
                                            const mv_fuse_d &f, int *cnt, int64_t bx, int64_t row_off) {
    typedef mv<T> M;
    constexpr int K = R / 2; /* GLU outputs per warp */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    pdl_trigger();
    /* KS > 1: a cluster of KS blocks shares the block's rows, rank r taking
     * the r-th slice of every row's units (whole passes of 32 lanes) */
    const int rank = KS > 1 ? (int)(bx % KS) : 0;
    const int64_t blk = bx / KS;
    const int64_t wid = blk * W + warp;
    const bool glu = mode == TLC_MV_GLU;
    int64_t rows[R];
#pragma unroll
    for (int r = 0; r < R; r++) rows[r] = glu ? (r < K ? wid * K + r : wid * K + (r - K) + n_rows_out) : wid * R + r;
    /* the rows loaded: a warp's rows past the matrix (the last warp's)
     * load its last row instead, their sums never stored, so that every
     * load of a unit has the same guard (u < nu) and the activation of a
     * unit is loaded once for all R rows rather than once per row (with a
     * guard per row the compiler kept one load per row, each behind a
     * branch, so after the wait a warp waited on them one after another).
     * Q4_K and Q6_K keep the per-row guard (MV_UG): with the clamp their
     * GLU spilled. */
    int64_t lrows[R];
#pragma unroll
    for (int r = 0; r < R; r++) lrows[r] = MV_UG(T) ? min(rows[r], w.n_out - 1) : rows[r];
    const int64_t first_out = glu ? wid * K : wid * R;
    const bool live = first_out < n_rows_out;
    /* Q8_0's 16 x 2 accumulate layout and Q4_0's lean one split over a
     * cluster: the residual rows are read right after the wait and the
     * epilogue's gamma before it, so neither load waits at the end, where
     * the block's last microseconds decide when the next kernel may
     * start; in the other accumulate layouts the kernels' code came out
     * slower with it */
    constexpr bool YP = R <= 2 && W >= 16 && (T == TL_TYPE_Q8_0 || (T == TL_TYPE_Q4_0 && KS > 1 && !IQ));
    float yp[R], gp = 1.0f;
    if constexpr (YP)
        if (warp == 0 && !glu && f.out_q && f.out_norm && blk * 32 + lane < n_rows_out) gp = f.out_norm[blk * 32 + lane];
    if (!live && !f.out_q && !IQ && !AM) {
        pdl_wait();
        return;
    }
    /* the QKV epilogue's rotation, before the wait (mv_rope_prep), in the
     * instances a QKV runs in: the store layouts of 4 warps x 2 rows */
    constexpr bool RP = R == 2 && W == MV_WARPS && !IQ && KS == 1 && !AM;
    mv_rope_t rp = {};
    if constexpr (RP)
        if (f.rope_on && lane == 0) rp = mv_rope_prep(f, rows[0] + row_off);
    const int64_t nu_all = live ? M::units(w.n_in) : 0;
    const int64_t per = KS > 1 ? (nu_all + 32 * KS - 1) / (32 * KS) * 32 : nu_all;
    /* F16 keeps the clamped (run-time) form even unsplit: it compiles to
     * more registers and runs faster (why is not established); the other
     * types the constant form, which needs fewer registers there */
    constexpr bool RT = KS > 1 || T == TL_TYPE_F16;
    const int64_t u0 = RT ? min(nu_all, rank * per) : 0;
    const int64_t nu = RT ? min(nu_all, u0 + per) : nu_all; /* this rank's units [u0, nu) */
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    float sc = 1.0f, ss[MV_SS_N];
    /* every warp passes once (base u0: the wait, and the block-wide input
     * quantization, which needs all of them), live ones until nu */
    for (int64_t base = u0; base == u0 || base < nu; base += 32 * U) {
        typename M::W v[U][R];
        mv_load<M, U, R, MV_UG(T)>(v, w, lrows, base, nu, lane);
        if (base == u0) {
            /* the first loads (weights only) are in flight; now wait for
             * the kernels that produce x (and y, when accumulating), and
             * fold the input's RMSNorm: W (x o g) * rsqrt(mean(x^2) + eps) */
            pdl_wait();
            if constexpr (YP)
                if (mode == TLC_MV_ACCUM && lane == 0 && live)
#pragma unroll
                    for (int r = 0; r < R; r++) yp[r] = y[min(rows[r], w.n_out - 1)];
            /* the norm's partial sums are requested now and added after
             * the loop, so their load and the activation's overlap */
            if (f.in_ss) {
                if constexpr (MV_UG(T)) {
#pragma unroll
                    for (int j = 0; j < MV_SS_N; j++) {
                        const int64_t i = j * 32 + lane;
                        ss[j] = i < w.n_in / 32 ? f.in_ss[i] : 0.0f;
                    }
                } else {
                    sc = mv_in_scale(f, w.n_in, 0.0f, 0, lane);
                }
            }
            if (IQ) {
                /* q8_1 of the f32 input into shared memory, while the weights fly */
                extern __shared__ __align__(16) uint8_t mv_sm[];
                mv_block_q8<W >= 32 ? 2 : 8>(xf, w.n_in, (int8_t *)mv_sm, (float2 *)(mv_sm + w.n_in), W);
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
                if (u < nu && (MV_UG(T) || rows[r] < w.n_out)) acc[r] += M::dot(v[k][r], w, lrows[r], u, xf, xq, xds);
        }
    }
    if (MV_UG(T) && f.in_ss) {
        float s = 0;
#pragma unroll
        for (int j = 0; j < MV_SS_N; j++) s += ss[j];
        sc = mv_in_scale(f, w.n_in, s, MV_SS_N * 32, lane);
    }
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = warp_sum(acc[r]) * sc;
    if constexpr (KS > 1) {
        /* rank 0 adds the other ranks' partial sums (fixed order) and goes
         * on alone; the second barrier keeps their shared memory alive
         * until it has read them */
        namespace cg = cooperative_groups;
        cg::cluster_group cl = cg::this_cluster();
        __shared__ float kpart[W * R];
        if (lane == 0)
#pragma unroll
            for (int r = 0; r < R; r++) kpart[warp * R + r] = acc[r];
        cl.sync();
        if (rank == 0)
#pragma unroll
            for (int k = 1; k < KS; k++)
#pragma unroll
                for (int r = 0; r < R; r++) acc[r] += cl.map_shared_rank(kpart, k)[warp * R + r];
        cl.sync();
        if (rank != 0) return;
    }
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
            if (R == 2 && f.rope_on) {
                /* (the other R == 2 instances keep the whole epilogue here:
                 * never run there, but taking it out moves their register
                 * allocation) */
                if constexpr (RP) mv_rope_apply(f, rows[0] + row_off, rp, acc[0], acc[1]);
                else mv_rope_pair(f, rows[0] + row_off, acc[0], acc[1]);
            }
#pragma unroll
            for (int r = 0; r < R; r++) {
                int64_t row = rows[r];
                if (row >= w.n_out) break;
                if (mode == TLC_MV_ACCUM) y[row] = (YP ? yp[r] : y[row]) + acc[r];
                else y[row] = acc[r];
            }
        }
    }
    if constexpr (AM) {
        /* greedy decode's argmax (f.amax; its own instances, AM: compiled
         * into every store kernel it changed their code and slowed them):
         * the block's best row, one atomic (none when the key there is
         * already higher) */
        __shared__ unsigned long long bk[W];
        unsigned long long k = 0;
        if (live)
#pragma unroll
            for (int r = 0; r < R; r++)
                if (rows[r] < w.n_out) k = max(k, mv_amax_key(acc[r], rows[r]));
        if (lane == 0) bk[warp] = k;
        __syncthreads();
        if (threadIdx.x == 0) {
#pragma unroll
            for (int i = 1; i < W; i++) k = max(k, bk[i]);
            if (k > *(volatile unsigned long long *)f.amax) atomicMax(f.amax, k);
        }
        return;
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
        grp = blk;
        o = sv[lane];
    } else {
        /* the counted form (not launched: see above): is this block the last of its group? */
        __shared__ int last;
        if (lane == 0) __threadfence();
        __syncthreads();
        grp = blk * per_block / 32;
        if (threadIdx.x == 0) last = atomicAdd(&cnt[grp], 1) == 32 / per_block - 1;
        __syncthreads();
        if (!last || warp != 0) return;
        __threadfence();
        o = __ldcg(y + grp * 32 + lane);
    }
    mv_q8_group(f, grp, o, lane, n_rows_out, YP && per_block == 32 && f.out_norm ? &gp : NULL);
    if (lane == 0 && per_block != 32) cnt[grp] = 0;
}

template <int T, int R, int U, int W, bool IQ = false, int KS = 1, bool AM = false>
__global__ void __launch_bounds__(W * 32)
matvec_k(const tlc_weight w, const float *xf, const int8_t *xq, const float2 *xds, float *y, int mode,
         int64_t n_rows_out, const mv_fuse_d f, int *cnt) {
    matvec_body<T, R, U, W, IQ, KS, AM>(w, xf, xq, xds, y, mode, n_rows_out, f, cnt, blockIdx.x, 0);
}

/* Two weights of different types stacked into one output, y = [w1 x; w2 x],
 * in one launch (store mode, no q8_1 epilogue): the first nb1 blocks run
 * w1's rows, the others w2's. For a QKV whose V has another type than Q|K
 * (the Q4_K_M mix gives attn_v Q6_K on half the layers), which otherwise
 * takes three matvec launches and a RoPE/KV launch. */
template <int T1, int U1, int T2, int U2>
__global__ void __launch_bounds__(MV_WARPS * 32)
matvec2_k(const tlc_weight w1, const tlc_weight w2, int64_t nb1, const float *xf, const int8_t *xq,
          const float2 *xds, float *y, const mv_fuse_d f) {
    if ((int64_t)blockIdx.x < nb1)
        matvec_body<T1, 2, U1, MV_WARPS, false, 1>(w1, xf, xq, xds, y, TLC_MV_STORE, w1.n_out, f, NULL, blockIdx.x, 0);
    else
        matvec_body<T2, 2, U2, MV_WARPS, false, 1>(w2, xf, xq, xds, y + w1.n_out, TLC_MV_STORE, w2.n_out, f, NULL,
                                                   blockIdx.x - nb1, w1.n_out);
}

/* the blocks per 32-row group of a lean accumulate matvec (below): a
 * cluster of up to c->mv_ks where the groups alone would leave SMs idle */
static int mv_lean_ks(const tlc_ctx *c, int64_t n_out) {
    int ks = 1;
    while (ks < c->mv_ks && (int64_t)tlc_div_up(n_out, 32) * ks * 2 <= c->n_sm) ks *= 2;
    return ks;
}

/* The launch of a store/accumulate/GLU matvec. With the q8_1 epilogue
 * (store/accumulate: the GLU's is a separate launch, tlc_matvec_fused) in
 * blocks of exactly 32 outputs: 32 warps x 1 row of 4 units per lane (the
 * lean layout, 64 registers), or for Q8_0, which is faster so, 16 warps x
 * 2 rows. */
template <int T, bool IQ>
static cudaError_t mv_launch_iq(tlc_ctx *c, const tlc_weight *w, const float *xf, const int8_t *xq,
                                const float2 *xds, float *y, int mode, const mv_fuse_d &f) {
    const int64_t n_out = mode == TLC_MV_GLU ? w->n_out / 2 : w->n_out;
    const size_t sm = IQ ? (size_t)w->n_in + (size_t)w->n_in / 32 * sizeof(float2) : 0;
    if (f.out_q) {
        const dim3 g(tlc_div_up(n_out, 32));
        if constexpr (T != TL_TYPE_Q8_0) {
            /* fewer groups than SMs (1B: 64 groups of 2048 rows): a cluster
             * of 2 or 4 blocks per group, each a slice of the rows, so
             * twice or four times the SMs stream the matrix */
            const int ks = mv_lean_ks(c, n_out);
            auto k = ks == 4 ? matvec_k<T, 1, 4, 32, IQ, 4> : ks == 2 ? matvec_k<T, 1, 4, 32, IQ, 2>
                                                                      : matvec_k<T, 1, 4, 32, IQ, 1>;
            return tlc_launch_cl(c, dim3(ks), k, dim3(g.x * ks), dim3(1024), sm, *w, xf, xq, xds, y, mode, n_out, f,
                                 c->mv_cnt);
        } else {
            return tlc_launch(c, matvec_k<T, 2, 4, 16, IQ>, g, dim3(512), sm, *w, xf, xq, xds, y, mode, n_out, f,
                              c->mv_cnt);
        }
    }
    if (!IQ && mode != TLC_MV_ACCUM) {
        /* units per lane per pass (tuning; 0: by type): 2 for quantized
         * weights and for every GLU (fewer registers, more warps resident:
         * the 8B Q4_0 QKV's blocks fit one wave), 8 for 16-bit float rows
         * that fit one pass so (n_in <= 2048), else 4 */
        const bool glu = mode == TLC_MV_GLU;
        constexpr bool f16 = T == TL_TYPE_F16 || T == TL_TYPE_BF16;
        int u = glu ? c->mv_glu_u : c->mv_store_u;
        if (!u) u = glu || !(f16 || T == TL_TYPE_F32) ? 2 : f16 && mv<T>::units(w->n_in) <= 32 * 8 ? 8 : 4;
        const int64_t warps = glu ? n_out : (n_out + 1) / 2;
        auto k = f.amax ? (u == 1   ? matvec_k<T, 2, 1, MV_WARPS, false, 1, true>
                           : u == 2 ? matvec_k<T, 2, 2, MV_WARPS, false, 1, true>
                           : u == 4 ? matvec_k<T, 2, 4, MV_WARPS, false, 1, true>
                                    : matvec_k<T, 2, 8, MV_WARPS, false, 1, true>)
                        : (u == 1   ? matvec_k<T, 2, 1, MV_WARPS>
                           : u == 2 ? matvec_k<T, 2, 2, MV_WARPS>
                           : u == 4 ? matvec_k<T, 2, 4, MV_WARPS>
                                    : matvec_k<T, 2, 8, MV_WARPS>);
        return tlc_launch(c, k, dim3(tlc_div_up(warps, MV_WARPS)), dim3(MV_WARPS * 32), 0, *w, xf, xq, xds, y, mode,
                          n_out, f, c->mv_cnt);
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
    if (!tlc_mv_in_q8_ok(w)) return false;
    /* Q8_0, and Q4_0 (lean layout) where each warp's slice of a row takes
     * more than two passes of 4 units, so the prologue hides behind the
     * passes after it (8B's down); slower for the other types and shapes */
    if (w->type == TL_TYPE_Q4_0 && mv<TL_TYPE_Q4_0>::units(w->n_in) / mv_lean_ks(c, w->n_out) > 2 * 32 * 4)
        return true;
    return w->type == TL_TYPE_Q8_0;
}

tl_status tlc_matvec(tlc_ctx *c, const tlc_weight *w, const float *xf, const void *xq, float *y,
                     int mode) {
    return tlc_matvec_fused(c, w, xf, xq, y, mode, NULL);
}

/* the device form of fz for a matvec over w whose output has n_all rows
 * (w's own, or with a second weight stacked under it: tlc_matvec2), after
 * checking what the fusions need */
static tl_status mv_fuse_make(const tlc_weight *w, int64_t n_all, const float *xf, const void *xq, int mode,
                              const tlc_mv_fuse *fz, mv_fuse_d *f) {
    const bool quant = !tlc_weight_is_float(w);
    const bool in_q = fz && fz->in_q8;
    if (in_q && (!tlc_mv_in_q8_ok(w) || !xf || mode == TLC_MV_GLU))
        return tl_err(TL_ERR_INVALID, "cuda: matvec: in-block quantization needs a quantized weight, the f32 input, "
                      "a store/accumulate mode and n_in %% 32 == 0 with n_in <= %d (%s, n_in %lld)", TLC_MV_INQ_MAX, tl_type_name(w->type),
                      (long long)w->n_in);
    if (quant && !xq && !in_q) return tl_err(TL_ERR_INVALID, "cuda: matvec %s needs the q8_1 activation", tl_type_name(w->type));
    if (!quant && !xf) return tl_err(TL_ERR_INVALID, "cuda: matvec %s needs the f32 activation", tl_type_name(w->type));
    if (mode == TLC_MV_GLU && (w->n_out & 1)) return tl_err(TL_ERR_INVALID, "cuda: GLU matvec with odd row count");
    *f = mv_fuse_d{};
    f->in_q = in_q;
    if (fz) {
        f->in_ss = fz->in_ss;
        f->eps = fz->eps;
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
            f->out_norm = fz->out_norm;
            f->out_f = fz->out_f;
            f->out_q = (int8_t *)fz->out_q;
            f->out_ss = fz->out_ss;
        }
    }
    if (fz && fz->argmax) {
        if (mode != TLC_MV_STORE || fz->out_q || fz->rope || fz->in_q8)
            return tl_err(TL_ERR_INVALID, "cuda: matvec: the argmax epilogue is for a plain store matvec");
        if ((uintptr_t)fz->argmax % sizeof *fz->argmax)
            return tl_err(TL_ERR_INVALID, "cuda: matvec: the argmax key must be 8-byte aligned (64-bit atomics)");
        f->amax = fz->argmax;
    }
    if (fz && fz->rope) {
        const tlc_rope_kv_args *ra = fz->rope;
        const int hd = ra->head_dim;
        if (mode != TLC_MV_STORE || fz->out_q || ra->p.neox || ra->p.n_rot != hd || (hd & 1) || w->n_out % hd ||
            n_all != (int64_t)(ra->n_head + 2 * ra->n_kv_head) * hd)
            return tl_err(TL_ERR_INVALID, "cuda: matvec: the RoPE+KV epilogue needs a stored [q|k|v] matvec with "
                          "adjacent-pair rotation of whole heads (rows %lld, head_dim %d, n_rot %d)",
                          (long long)n_all, hd, ra->p.n_rot);
        f->rope_on = 1;
        f->nh = ra->n_head;
        f->nkv = ra->n_kv_head;
        f->hd = hd;
        f->base = ra->p.base;
        f->scale = ra->p.scale > 0 ? ra->p.scale : 1.0f;
        f->fdiv = ra->p.freq_div;
        f->kc = (__half *)ra->kc;
        f->vc = (__half *)ra->vc;
        f->n_ctx = ra->n_ctx;
        f->d_pos = ra->d_pos;
    }
    if (!tlc_type_supported(w->type))
        return tl_err(TL_ERR_UNSUPPORTED, "cuda: matvec: type %s not supported", tl_type_name(w->type));
    return TL_OK;
}

tl_status tlc_matvec_fused(tlc_ctx *c, const tlc_weight *w, const float *xf, const void *xq, float *y, int mode,
                           const tlc_mv_fuse *fz) {
    const int8_t *q8 = (const int8_t *)xq;
    const float2 *ds = xq ? (const float2 *)((const uint8_t *)xq + w->n_in) : NULL;
    mv_fuse_d f;
    tl_status s = mv_fuse_make(w, w->n_out, xf, xq, mode, fz, &f);
    if (s) return s;
    /* the GLU's q8_1: the plain kernel, then a separate quantize launch */
    const bool split = f.out_q && mode == TLC_MV_GLU;
    mv_fuse_d fq = f;
    if (split) f.out_q = NULL;
    cudaError_t e = mv_dispatch(w->type, [&](auto t) { return mv_launch<decltype(t)::value>(c, w, xf, q8, ds, y, mode, f); });
    TLC_TRY(e, "matvec");
    if (split)
        return tlc_act_prep_ss(c, y, fq.out_norm, mode == TLC_MV_GLU ? w->n_out / 2 : w->n_out, 1, fq.out_f,
                               fq.out_q, fq.out_ss);
    return TL_OK;
}

/* the type pairs matvec2_k is compiled for, and its launch */
bool tlc_matvec2_ok(const tlc_ctx *c, const tlc_weight *w1, const tlc_weight *w2) {
    return w1->type == TL_TYPE_Q4_K && w2->type == TL_TYPE_Q6_K && w1->n_in == w2->n_in;
}

tl_status tlc_matvec2_fused(tlc_ctx *c, const tlc_weight *w1, const tlc_weight *w2, const float *xf, const void *xq,
                            float *y, const tlc_mv_fuse *fz) {
    if (!tlc_matvec2_ok(c, w1, w2))
        return tl_err(TL_ERR_UNSUPPORTED, "cuda: stacked matvec of %s over %s (n_in %lld, %lld) not supported",
                      tl_type_name(w1->type), tl_type_name(w2->type), (long long)w1->n_in, (long long)w2->n_in);
    if (fz && (fz->out_q || fz->in_q8))
        return tl_err(TL_ERR_INVALID, "cuda: stacked matvec: no q8_1 epilogue or in-block quantization");
    /* one device form serves both weights; w2 is checked the same way */
    mv_fuse_d f, f_w2;
    tl_status s = mv_fuse_make(w1, w1->n_out + w2->n_out, xf, xq, TLC_MV_STORE, fz, &f);
    if (!s) s = mv_fuse_make(w2, w1->n_out + w2->n_out, xf, xq, TLC_MV_STORE, fz, &f_w2);
    if (s) return s;
    const int8_t *q8 = (const int8_t *)xq;
    const float2 *ds = (const float2 *)((const uint8_t *)xq + w1->n_in);
    /* blocks of MV_WARPS warps x 2 rows for each weight */
    const int64_t nb1 = tlc_div_up(tlc_div_up(w1->n_out, 2), MV_WARPS), nb2 = tlc_div_up(tlc_div_up(w2->n_out, 2), MV_WARPS);
    /* units per pass: 2, as the store matvecs of these types (4 when the
     * tuning asks for 4 or more) */
    auto k = c->mv_store_u >= 4 ? matvec2_k<TL_TYPE_Q4_K, 4, TL_TYPE_Q6_K, 4> : matvec2_k<TL_TYPE_Q4_K, 2, TL_TYPE_Q6_K, 2>;
    TLC_TRY(tlc_launch(c, k, dim3(nb1 + nb2), dim3(MV_WARPS * 32), 0, *w1, *w2, nb1, xf, q8, ds, y, f),
            "matvec (stacked)");
    return TL_OK;
}
