/* backend/cuda/cuda_attn: attention over the KV cache.
 *
 * One warp walks a range of cache positions for all G query heads that share
 * a KV head (GQA: K and V are read once for the G heads), keeping an online
 * softmax (running max m, running sum l, weighted V sum) per head in
 * registers; a lane holds D/32 consecutive dims, so a warp-wide K or V read
 * is one contiguous row.
 *  - decode: split-K "flash decoding" in one launch: grid (kv head, split);
 *    the 8 warps of a block interleave positions of the split, merge in
 *    shared memory and write (m, l, acc) partials; the last block of a KV
 *    head to finish (an atomic count) merges the splits and writes the
 *    output and its q8_1 (the Wo matvec's input). The split size (>=
 *    c->att_chunk positions, <= 32 splits) is chosen on the device from the
 *    length at *d_pos, so a captured graph stays valid as the context
 *    grows; splits past the end exit at once. Every block requests its
 *    first K/V rows below *d_pos before the wait on the kernel before it.
 *    Short contexts (up to 8 splits of att_chunk, tlc_attn_cluster_len),
 *    launched in clusters of 8 blocks along the splits: the 8 blocks of a
 *    KV head split the context evenly and merge through distributed shared
 *    memory instead (no partials, fence or count), and the graph for them
 *    launches only those 8 splits per KV head (the others would only hold
 *    SMs the next matvec's blocks could load on; the split size follows
 *    gridDim.y, so a longer context stays right). Longer contexts launch
 *    without clusters, which slow the split path down (tlc_attn_plan).
 *    The cluster merge gathers: each output has an owner rank (outputs in
 *    chunks of one per thread: rank 0 alone where a KV head has at most as
 *    many outputs as a block has threads, ranks 0-1 for 8B's 4 x 128);
 *    every rank writes its sums into the owners' shared memory (the barrier
 *    phase that makes that legal, every block started, is arrived at on
 *    entry and waited for after the walk), one release/acquire barrier, and
 *    each owner merges its chunk from local memory and writes the outputs
 *    and their q8_1 from registers; the others leave. (Where a KV head has
 *    more outputs than the cluster's threads, none of today's shapes, every
 *    rank reads all ranks' sums instead, between two cluster barriers.)
 *    With the decode prologue (PRO instances, tlc_attn_decode_pro; Qwen)
 *    the kernel reads the raw [q | k | v] row and applies the bias, the
 *    per-head q/k RMSNorm and the rotation itself (rotation angles before
 *    the wait), the warp that walks the current position storing its k and
 *    v: one launch fewer per layer.
 *  - prefill: one warp per (query token, kv head), causal range: the path
 *    for f32 caches and head sizes other than 64/128; f16 caches with those
 *    go to the tensor-core flash attention of cuda_flash.cu.
 * Measurements of these choices: docs/PERFORMANCE.md (CUDA).
 * Calls: CUDA. */
#include <cooperative_groups.h>

#include "backend/cuda/cuda_common.cuh"

#define ATT_SPLITS 32
#define ATT_WARPS 4 /* prefill walk */
#define ATT_DWARPS 8 /* decode */
#define ATT_CS 8 /* blocks per cluster: the splits of one KV head at short context */
enum { ATT_MODE_CLUSTER = 1, ATT_MODE_EARLY = 2, ATT_MODE_GATHER = 4 };

template <typename KT> __device__ __forceinline__ float kv_f(KT v);
template <> __device__ __forceinline__ float kv_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float kv_f<__half>(__half v) { return __half2float(v); }

/* dims per lane: D / 32, or 1 for D < 32 (lanes >= D then hold nothing) */
template <int D> struct att_dims {
    static constexpr int E = D >= 32 ? D / 32 : 1;
};

template <int D, int GMAX> struct att_state {
    static constexpr int E = att_dims<D>::E;
    float q[GMAX][E];
    float acc[GMAX][E];
    float m[GMAX], l[GMAX];
};

constexpr int ATT_P = 4; /* positions loaded before any is used: memory-level parallelism */

/* K and V rows of positions p + j*step (j < ATT_P) that are below lim into
 * k, v (lanes past D and positions at or past lim: left alone) */
template <int D, typename KT>
__device__ __forceinline__ void att_load(float (&k)[ATT_P][att_dims<D>::E], float (&v)[ATT_P][att_dims<D>::E],
                                         const KT *kh, const KT *vh, int64_t p, int64_t step, int64_t lim,
                                         int lane) {
    constexpr int E = att_dims<D>::E;
    if (lane * E >= D) return;
#pragma unroll
    for (int j = 0; j < ATT_P; j++) {
        const int64_t pj = p + j * step;
        if (pj >= lim) continue;
        const KT *kr = kh + pj * D + lane * E, *vr = vh + pj * D + lane * E;
#pragma unroll
        for (int e = 0; e < E; e++) {
            k[j][e] = kv_f(kr[e]);
            v[j][e] = kv_f(vr[e]);
        }
    }
}

/* the online-softmax update with the loaded positions below p1, for heads
 * g < G, or (ALL: decode) for all GMAX heads: a head past G has q = 0 and
 * its state is never read, and without a run-time exit per head the
 * heads' warp reductions interleave (with "g < G" nvcc emitted one head
 * after another on decode's critical path, each a dot, five dependent
 * shuffles and two exponentials); the decode launch picks the
 * smallest GMAX that holds G. Prefill (many warps, throughput-bound) keeps
 * the exit, so a small G costs no wasted work there. */
template <int D, int GMAX, bool ALL>
__device__ __forceinline__ void att_consume(att_state<D, GMAX> &st, int G, const float (&k)[ATT_P][att_dims<D>::E],
                                            const float (&v)[ATT_P][att_dims<D>::E], int64_t p, int64_t step,
                                            int64_t p1) {
    constexpr int E = att_dims<D>::E;
    const int ng = ALL ? GMAX : G;
#pragma unroll
    for (int j = 0; j < ATT_P; j++) {
        if (p + j * step >= p1) break;
        float s[GMAX];
#pragma unroll
        for (int g = 0; g < GMAX; g++) {
            s[g] = 0;
            if (g >= ng) break;
#pragma unroll
            for (int e = 0; e < E; e++) s[g] += st.q[g][e] * k[j][e];
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
#pragma unroll
            for (int g = 0; g < GMAX; g++) {
                if (g >= ng) break;
                s[g] += __shfl_xor_sync(0xffffffffu, s[g], o);
            }
#pragma unroll
        for (int g = 0; g < GMAX; g++) {
            if (g >= ng) break;
            float mn = fmaxf(st.m[g], s[g]);
            float corr = __expf(st.m[g] - mn); /* exp(-inf) = 0 on the first position */
            float pw = __expf(s[g] - mn);
            st.l[g] = st.l[g] * corr + pw;
#pragma unroll
            for (int e = 0; e < E; e++) st.acc[g][e] = st.acc[g][e] * corr + pw * v[j][e];
            st.m[g] = mn;
        }
    }
}

template <int D, int GMAX, bool ALL, typename KT>
__device__ __forceinline__ void att_walk(att_state<D, GMAX> &st, int G, const KT *kh, const KT *vh,
                                         int64_t p0, int64_t p1, int64_t step, int lane) {
    constexpr int E = att_dims<D>::E;
    for (int64_t p = p0; p < p1; p += ATT_P * step) {
        float k[ATT_P][E] = {}, v[ATT_P][E] = {};
        att_load<D, KT>(k, v, kh, vh, p, step, p1, lane);
        att_consume<D, GMAX, ALL>(st, G, k, v, p, step, p1);
    }
}

/* the merge of the ATT_CS ranks of a KV head's cluster for one output:
 * sum_r a_r e^(m_r - mx) / sum_r l_r e^(m_r - mx), with ml(r) rank r's
 * (m, l) and a(r) its unnormalized sum (the read and gather merges differ
 * only in where those live) */
template <typename ML, typename A> __device__ __forceinline__ float att_merge_ranks(ML &&ml, A &&a_of) {
    float2 v[ATT_CS];
    float mx = -INFINITY;
#pragma unroll
    for (int r = 0; r < ATT_CS; r++) mx = fmaxf(mx, (v[r] = ml(r)).x);
    float l = 0, a = 0;
#pragma unroll
    for (int r = 0; r < ATT_CS; r++) {
        const float f = v[r].x == -INFINITY ? 0.0f : __expf(v[r].x - mx);
        l += v[r].y * f;
        a += a_of(r) * f;
    }
    return a / l;
}

/* q8_1 of a KV head's n outputs (n % 32 == 0) from shared memory res, by
 * the block's NW warps, at index base of out_q (n_total quants, then the
 * (d, d*sum) pairs) */
template <int NW>
__device__ __forceinline__ void att_out_q8(const float *res, int n, int8_t *out_q, int64_t n_total, int64_t base) {
    const int lane = threadIdx.x & 31;
    for (int b = threadIdx.x >> 5; b < n / 32; b += NW)
        warp_q8_1(res[b * 32 + lane], out_q, (float2 *)(out_q + n_total), base + b * 32 + lane, lane);
}

/* The decode prologue folded into the attention (tlc_attn_decode_pro, for
 * models whose RoPE is not in the QKV epilogue: Qwen2/3's NeoX pairs, the
 * QKV bias, Qwen3's per-head q/k RMSNorm): q points at the token's raw
 * [q | k | v] row; every block makes its G query heads, and the one warp
 * that walks the current position its k and v, in registers with the
 * arithmetic of the separate bias, head-norm and RoPE+KV kernels in the
 * same order (bias, x * rsqrt(mean x^2 + eps) * w, rotation), writes that k
 * and v into the cache and uses their cache-rounded values. on == 0: off (the kernel's PRO instances take it). */
struct att_pro_d {
    int on, neox, nh, nkv;
    const float *bias, *qn, *kn, *fdiv;
    float eps, base, pscale; /* pscale: the position scale (angle = pos / pscale * inv) */
};

template <typename KT> __device__ __forceinline__ KT kv_t(float v);
template <> __device__ __forceinline__ float kv_t<float>(float v) { return v; }
template <> __device__ __forceinline__ __half kv_t<__half>(float v) { return __float2half(v); }

/* heads h0 .. h0 + N - 1's D values, E per lane (x[n][lane * E + e]), made
 * ready in place: bias (pro.bias row h), RMSNorm with w (NULL: none),
 * rotation by (co, sn) (rot: q and k heads). Heads n >= nv are zeros and
 * stay zero (no bias read past the rows). The N heads go through each
 * step together so their warp reductions interleave; every lane of the
 * warp calls it. */
template <int D, int N>
__device__ __forceinline__ void att_pro_heads(const att_pro_d &pro, float (&x)[N][att_dims<D>::E], int h0, int nv,
                                              const float *w, bool rot, const float (&co)[att_dims<D>::E],
                                              const float (&sn)[att_dims<D>::E], int lane) {
    constexpr int E = att_dims<D>::E;
    const bool act = lane * E < D;
#pragma unroll
    for (int n = 0; n < N; n++)
#pragma unroll
        for (int e = 0; e < E; e++)
            if (pro.bias && act && n < nv) x[n][e] += pro.bias[(int64_t)(h0 + n) * D + lane * E + e];
    if (w) {
        float ss[N];
#pragma unroll
        for (int n = 0; n < N; n++) {
            ss[n] = 0;
#pragma unroll
            for (int e = 0; e < E; e++) ss[n] += x[n][e] * x[n][e];
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
#pragma unroll
            for (int n = 0; n < N; n++) ss[n] += __shfl_xor_sync(0xffffffffu, ss[n], o);
#pragma unroll
        for (int n = 0; n < N; n++) {
            const float sc = n < nv ? rsqrtf(ss[n] / (float)D + pro.eps) : 0.0f; /* eps 0: no inf * 0 */
#pragma unroll
            for (int e = 0; e < E; e++)
                if (act) x[n][e] = x[n][e] * sc * w[lane * E + e];
        }
    }
    if (!rot) return;
    if (pro.neox || E == 1) {
        /* the pair's other value is in another lane: NeoX (d, d + D/2) is
         * lane ^ 16 (lane ^ D/2 when D < 32), adjacent (d, d + 1) lane ^ 1 */
        const int off = !pro.neox ? 1 : D >= 32 ? 16 : D / 2;
        const bool first = pro.neox ? (lane * E) < D / 2 : !(lane & 1);
#pragma unroll
        for (int n = 0; n < N; n++)
#pragma unroll
            for (int e = 0; e < E; e++) {
                const float o = __shfl_xor_sync(0xffffffffu, x[n][e], off);
                x[n][e] = first ? x[n][e] * co[e] - o * sn[e] : o * sn[e] + x[n][e] * co[e];
            }
    } else {
#pragma unroll
        for (int n = 0; n < N; n++)
#pragma unroll
            for (int e = 0; e + 1 < E; e += 2) {
                const float x0 = x[n][e], x1 = x[n][e + 1];
                x[n][e] = x0 * co[e] - x1 * sn[e];
                x[n][e + 1] = x0 * sn[e] + x1 * co[e];
            }
    }
}

/* mode: ATT_MODE_CLUSTER (contexts of at most ATT_CS splits merge inside
 * the KV head's cluster) | ATT_MODE_EARLY (the first positions' K/V are
 * requested before the wait) | ATT_MODE_GATHER (the cluster merge
 * gathered into owner ranks: file header). The cluster path: the ATT_CS
 * blocks of cluster 0 of a KV head split the context evenly (no minimum chunk: their
 * merge costs no global round trip), each leaves its (m, l, acc) in shared
 * memory and the gather merge (or, without it, after a cluster barrier
 * block r merges output groups r, r + ATT_CS, ... from all ranks' shared
 * memory, and a second barrier keeps every block's shared memory alive
 * until read) writes the outputs and their q8_1. Longer contexts: up to
 * ATT_SPLITS splits with global partials merged by the last block (an
 * atomic count). The launch always sets ATT_MODE_EARLY; the walk without
 * it stays compiled because taking it out changes the code of every
 * instance, which would want measuring. */
template <int D, int GMAX, typename KT, int NW, bool PRO = false>
__global__ void __launch_bounds__(NW * 32)
attn_decode_k(const float *q, const KT *kc, const KT *vc, int G, int64_t n_ctx, const int32_t *d_pos,
              float scale, float *part, float *out, int8_t *out_q, int64_t n_total, int *cnt, int min_chunk,
              int mode, const att_pro_d pro) {
    constexpr int E = att_dims<D>::E;
    pdl_trigger();
    const int kvh = blockIdx.x, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const bool act = lane * E < D;
    extern __shared__ __align__(16) uint8_t att_sm[]; /* the gather merge's buffer (owner ranks) */
    /* *d_pos is written by the copy that starts the step, the cache below
     * it by earlier steps: no kernel in flight writes either, so both may
     * be read before the wait (the current position's K/V may not) */
    const int64_t kv_len = (int64_t)__ldcg(d_pos) + 1;
    const int64_t n_grid = gridDim.y; /* ATT_SPLITS, or ATT_CS for short contexts */
    int64_t chunk = (kv_len + n_grid - 1) / n_grid;
    if (chunk < min_chunk) chunk = min_chunk;
    int n_split = (int)((kv_len + chunk - 1) / chunk); /* the same in every block */
    const bool clus = (mode & ATT_MODE_CLUSTER) && n_split <= ATT_CS;
    const bool gather = clus && (mode & ATT_MODE_GATHER);
    if (clus) {
        if (blockIdx.y >= ATT_CS) {
            pdl_wait();
            return; /* whole clusters: no barrier is left waiting */
        }
        n_split = ATT_CS;
        chunk = (kv_len + ATT_CS - 1) / ATT_CS;
        /* gather: the first barrier phase (every block of the cluster has
         * started) arrives now and is waited for after the walk */
        if (gather) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
    } else if ((int)blockIdx.y >= n_split) {
        pdl_wait();
        return;
    }
    const int split = blockIdx.y;
    const int64_t p0 = min(kv_len, split * chunk);
    const int64_t p1 = min(kv_len, p0 + chunk);
    const KT *kh = kc + (int64_t)kvh * n_ctx * D, *vh = vc + (int64_t)kvh * n_ctx * D;
    float k0[ATT_P][E] = {}, v0[ATT_P][E] = {};
    const int64_t pw0 = p0 + w;
    if (mode & ATT_MODE_EARLY) att_load<D, KT>(k0, v0, kh, vh, pw0, NW, min(p1, kv_len - 1), lane);
    /* the prologue's rotation angles of this lane's dims at the current
     * position (constant inputs: before the wait, off the critical path) */
    float co[E], sn[E];
    if constexpr (PRO) {
#pragma unroll
        for (int e = 0; e < E; e++) {
            const int d = lane * E + e, pi = pro.neox ? d % (D / 2) : d / 2;
            rope_sincos((float)(kv_len - 1) / pro.pscale, pi, D, pro.base, pro.fdiv, &sn[e], &co[e]);
        }
    }
    pdl_wait();
    att_state<D, GMAX> st;
    if constexpr (PRO) {
        /* the G query heads from the raw row (heads past G: zeros) */
        float x[GMAX][E];
#pragma unroll
        for (int g = 0; g < GMAX; g++)
#pragma unroll
            for (int e = 0; e < E; e++) x[g][e] = g < G && act ? q[((int64_t)kvh * G + g) * D + lane * E + e] : 0.0f;
        att_pro_heads<D, GMAX>(pro, x, kvh * G, G, pro.qn, true, co, sn, lane);
#pragma unroll
        for (int g = 0; g < GMAX; g++)
#pragma unroll
            for (int e = 0; e < E; e++) st.q[g][e] = x[g][e] * scale;
    } else {
#pragma unroll
        for (int g = 0; g < GMAX; g++)
#pragma unroll
            for (int e = 0; e < E; e++)
                st.q[g][e] = g < G && act ? q[((int64_t)kvh * G + g) * D + lane * E + e] * scale : 0.0f;
    }
#pragma unroll
    for (int g = 0; g < GMAX; g++) {
        st.m[g] = -INFINITY;
        st.l[g] = 0;
#pragma unroll
        for (int e = 0; e < E; e++) st.acc[g][e] = 0;
    }
    if (mode & ATT_MODE_EARLY) {
        /* the current position, written by the kernel before, if this batch
         * holds it (pro: made here from the raw row, and stored) */
        const int64_t cur = kv_len - 1, j = (cur - pw0) / NW;
        const bool mine = cur >= pw0 && cur < p1 && (cur - pw0) % NW == 0; /* warp-uniform */
        if constexpr (PRO) {
            if (mine) {
                float xk[1][E], xv[1][E];
                const float *kr = q + (int64_t)(pro.nh + kvh) * D, *vr = q + (int64_t)(pro.nh + pro.nkv + kvh) * D;
#pragma unroll
                for (int e = 0; e < E; e++) {
                    xk[0][e] = act ? kr[lane * E + e] : 0.0f;
                    xv[0][e] = act ? vr[lane * E + e] : 0.0f;
                }
                att_pro_heads<D, 1>(pro, xk, pro.nh + kvh, 1, pro.kn, true, co, sn, lane);
                att_pro_heads<D, 1>(pro, xv, pro.nh + pro.nkv + kvh, 1, NULL, false, co, sn, lane);
#pragma unroll
                for (int e = 0; e < E; e++) {
                    if (!act) break;
                    /* a later batch of this warp reads it back from the cache (same thread) */
                    const KT kq = kv_t<KT>(xk[0][e]), vq = kv_t<KT>(xv[0][e]);
                    ((KT *)kh)[cur * D + lane * E + e] = kq;
                    ((KT *)vh)[cur * D + lane * E + e] = vq;
#pragma unroll
                    for (int jj = 0; jj < ATT_P; jj++)
                        if (jj == j) {
                            k0[jj][e] = kv_f(kq);
                            v0[jj][e] = kv_f(vq);
                        }
                }
            }
        } else {
            if (mine && j < ATT_P && act)
#pragma unroll
                for (int jj = 0; jj < ATT_P; jj++)
                    if (jj == j)
#pragma unroll
                        for (int e = 0; e < E; e++) {
                            k0[jj][e] = kv_f(kh[cur * D + lane * E + e]);
                            v0[jj][e] = kv_f(vh[cur * D + lane * E + e]);
                        }
        }
        att_consume<D, GMAX, true>(st, G, k0, v0, pw0, NW, p1);
        att_walk<D, GMAX, true, KT>(st, G, kh, vh, pw0 + ATT_P * NW, p1, NW, lane);
    } else {
        att_walk<D, GMAX, true, KT>(st, G, kh, vh, pw0, p1, NW, lane);
    }
    /* merge the block's warps */
    __shared__ float sm[NW][GMAX][2];
    __shared__ float sacc[NW][GMAX][D];
#pragma unroll
    for (int g = 0; g < GMAX; g++) {
        if (lane == 0) { sm[w][g][0] = st.m[g]; sm[w][g][1] = st.l[g]; }
#pragma unroll
        for (int e = 0; e < E; e++)
            if (act) sacc[w][g][lane * E + e] = st.acc[g][e];
    }
    __syncthreads();
    const int64_t stride = D + 2;
    __shared__ float res[GMAX * D]; /* [G][D] the final output (for its q8_1) */
    __shared__ float cml[GMAX][2];  /* cluster path: this block's (m, l) per head */
    /* gather: output i is merged by rank i / C (C: the block's threads, or
     * G*D where that is less, so one output per thread; the owners are the
     * first ceil(G*D / C) ranks), into whose dynamic shared memory every
     * rank writes its sums [ATT_CS][C] and (m, l) pairs [ATT_CS][G] */
    const int C = G * D < NW * 32 ? G * D : NW * 32; /* the launch sizes the buffer by the same C */
    int rank = 0;
    if (gather) {
        namespace cg = cooperative_groups;
        cg::cluster_group cl = cg::this_cluster();
        rank = (int)cl.block_rank();
        asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
    }
    for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
        int g = i / D, d = i % D;
        float mx = -INFINITY;
        for (int w2 = 0; w2 < NW; w2++) mx = fmaxf(mx, sm[w2][g][0]);
        float l = 0, a = 0;
        for (int w2 = 0; w2 < NW; w2++) {
            float f = sm[w2][g][0] == -INFINITY ? 0.0f : __expf(sm[w2][g][0] - mx);
            l += sm[w2][g][1] * f;
            a += sacc[w2][g][d] * f;
        }
        if (gather) {
            namespace cg = cooperative_groups;
            float *go = cg::this_cluster().map_shared_rank((float *)att_sm, i / C);
            go[rank * C + i % C] = a; /* unnormalized, relative to mx */
            /* (m, l) of head g where the owner's outputs of head g start */
            if (d == 0 || i % C == 0) ((float2 *)(go + ATT_CS * C))[rank * G + g] = make_float2(mx, l);
        } else if (clus) {
            res[i] = a; /* unnormalized, relative to mx */
            if (d == 0) { cml[g][0] = mx; cml[g][1] = l; }
        } else if (n_split == 1) {
            /* short context: no partials, no count; the output straight away */
            out[(int64_t)kvh * G * D + i] = res[i] = a / l;
        } else {
            float *o = part + (((int64_t)kvh * G + g) * ATT_SPLITS + split) * stride;
            if (d == 0) { o[0] = mx; o[1] = l; }
            o[2 + d] = a;
        }
    }
    if (gather) {
        /* the second phase: every rank's sums are in their owners, which
         * merge them from their own shared memory; the other ranks leave
         * (nobody reads their shared memory) */
        asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
        asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
        const int i0 = rank * C, n = min(C, G * D - i0); /* this owner's outputs */
        if (n <= 0) return;
        const float *ps = (const float *)att_sm;
        const float2 *pm = (const float2 *)(ps + ATT_CS * C);
        /* one output per thread; with out_q, n is a multiple of 32 (C and
         * G*D are), so a warp holds whole q8_1 groups and quantizes them
         * from its registers (no shared-memory round trip, no block barrier) */
        if ((int)threadIdx.x >= n) return; /* whole warps */
        const int il = threadIdx.x, g = (i0 + il) / D;
        const float o =
            att_merge_ranks([&](int r) { return pm[r * G + g]; }, [&](int r) { return ps[r * C + il]; });
        const int64_t oi = (int64_t)kvh * G * D + i0 + il;
        out[oi] = o;
        if (out_q) warp_q8_1(o, out_q, (float2 *)(out_q + n_total), oi, lane);
        return;
    }
    if (clus) {
        namespace cg = cooperative_groups;
        cg::cluster_group cl = cg::this_cluster();
        cl.sync(); /* every rank's res / cml written */
        const int rank = (int)cl.block_rank();
        for (int b = rank + ATT_CS * w; b * 32 < G * D; b += ATT_CS * NW) { /* warp-uniform */
            const int64_t i = (int64_t)b * 32 + lane;
            const bool ok = i < G * D;
            const int g = ok ? (int)(i / D) : 0;
            const float o = att_merge_ranks(
                [&](int r) { /* rank r's (m, l) */
                    const float *ml = cl.map_shared_rank(&cml[g][0], r);
                    return make_float2(ml[0], ml[1]);
                },
                [&](int r) { return ok ? cl.map_shared_rank(res, r)[i] : 0.0f; });
            if (ok) out[(int64_t)kvh * G * D + i] = o;
            if (out_q) warp_q8_1(o, out_q, (float2 *)(out_q + n_total), (int64_t)kvh * G * D + i, lane);
        }
        cl.sync(); /* no block leaves while another reads its shared memory */
        return;
    }
    if (n_split > 1) {
        /* the last split block of this KV head merges all splits (no second
         * launch): partials made visible, then counted */
        __shared__ int last;
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) last = atomicAdd(&cnt[kvh], 1) == n_split - 1;
        __syncthreads();
        if (!last) return;
        __threadfence();
        for (int i = threadIdx.x; i < G * D; i += blockDim.x) {
            int g = i / D, d = i % D;
            const float *ph = part + ((int64_t)kvh * G + g) * ATT_SPLITS * stride;
            /* one pass, online rescaling; 4 splits' loads in flight */
            float mx = -INFINITY, l = 0, a = 0;
            for (int sp0 = 0; sp0 < n_split; sp0 += 4) {
                float ms[4], ls[4], as[4];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float *pp = ph + (sp0 + j) * stride;
                    bool ok = sp0 + j < n_split;
                    ms[j] = ok ? __ldcg(pp) : -INFINITY;
                    ls[j] = ok ? __ldcg(pp + 1) : 0.0f;
                    as[j] = ok ? __ldcg(pp + 2 + d) : 0.0f;
                }
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    if (ms[j] == -INFINITY) continue;
                    float mn = fmaxf(mx, ms[j]);
                    float c0 = __expf(mx - mn), c1 = __expf(ms[j] - mn); /* exp(-inf) = 0 */
                    l = l * c0 + ls[j] * c1;
                    a = a * c0 + as[j] * c1;
                    mx = mn;
                }
            }
            float r = a / l;
            out[(int64_t)kvh * G * D + i] = r;
            res[i] = r;
        }
    }
    if (threadIdx.x == 0 && n_split > 1) cnt[kvh] = 0;
    if (!out_q) return;
    /* q8_1 of the G*D outputs (G*D % 32 == 0: checked by the caller) */
    __syncthreads();
    att_out_q8<NW>(res, G * D, out_q, n_total, (int64_t)kvh * G * D);
}

int64_t tlc_attn_cluster_len(const tlc_ctx *c) {
    return (int64_t)ATT_CS * c->att_chunk;
}

void tlc_attn_plan(tlc_ctx *c, int64_t max_len) { c->att_max_len = max_len > 0 ? max_len : 0; }

size_t tlc_attn_decode_scratch(int n_head, int head_dim) {
    return (size_t)n_head * ATT_SPLITS * (head_dim + 2);
}

template <int D, int GMAX, typename KT>
static cudaError_t attn_decode_launch(tlc_ctx *c, const float *q, const void *kc, const void *vc, int n_head,
                                      int n_kv_head, int64_t n_ctx, const int32_t *d_pos, float scale,
                                      float *scratch, float *out, void *out_q, const att_pro_d &pro) {
    const int G = n_head / n_kv_head;
    /* a q8_1 block must not straddle KV-head groups; otherwise the caller quantizes */
    int8_t *oq = (G * D) % 32 == 0 ? (int8_t *)out_q : (int8_t *)NULL;
    auto k = pro.on ? attn_decode_k<D, GMAX, KT, ATT_DWARPS, true> : attn_decode_k<D, GMAX, KT, ATT_DWARPS>;
    /* clusters only where the cluster merge may run; only the cluster's
     * splits where it serves every context of the plan (tlc_attn_plan) */
    const int64_t len = c->att_max_len, cl_len = tlc_attn_cluster_len(c);
    int mode = ATT_MODE_CLUSTER | ATT_MODE_EARLY | ATT_MODE_GATHER;
    if (len > cl_len) mode &= ~ATT_MODE_CLUSTER;
    /* the gather merge: one output per thread, over as many owner ranks
     * as that takes (file header; the owners' chunks are whole q8_1
     * groups, threads being a multiple of 32) */
    const int threads = ATT_DWARPS * 32;
    if (G * D > ATT_CS * threads) mode &= ~ATT_MODE_GATHER;
    const dim3 cl(1, mode & ATT_MODE_CLUSTER ? ATT_CS : 1);
    const dim3 grid(n_kv_head, len > 0 && len <= cl_len ? ATT_CS : ATT_SPLITS);
    /* the gather merge's buffer in each owner rank (ATT_MODE_GATHER) */
    size_t smem = 0;
    if ((mode & ATT_MODE_CLUSTER) && (mode & ATT_MODE_GATHER)) {
        /* [ATT_CS][C] sums + [ATT_CS][G] (m, l), C as in the kernel */
        smem = (size_t)ATT_CS * ((size_t)(G * D < threads ? G * D : threads) + 2 * (size_t)G) * sizeof(float);
        cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
    }
    return tlc_launch_cl(c, cl, k, grid, dim3(threads), smem, q, (const KT *)kc, (const KT *)vc, G, n_ctx,
                      d_pos, scale, scratch, out, oq, (int64_t)n_head * D, c->mv_cnt + TLC_MV_GROUPS - TLC_ATT_MAX_KV,
                      c->att_chunk, mode, pro);
}

template <int D, int GMAX, typename KT>
__global__ void __launch_bounds__(ATT_WARPS * 32)
attn_prefill_k(const float *q, int64_t qs, const KT *kc, const KT *vc, int n_head, int G, int64_t n_ctx,
               int64_t n_tok, const int32_t *d_pos, float scale, float *out) {
    constexpr int E = att_dims<D>::E;
    const int lane = threadIdx.x & 31;
    const bool act = lane * E < D;
    const int64_t t = (int64_t)blockIdx.x * ATT_WARPS + (threadIdx.x >> 5);
    const int kvh = blockIdx.y;
    if (t >= n_tok) return;
    const int64_t kv_len = (int64_t)*d_pos + t + 1;
    att_state<D, GMAX> st;
    const float *qt = q + t * qs;
#pragma unroll
    for (int g = 0; g < GMAX; g++) {
        st.m[g] = -INFINITY;
        st.l[g] = 0;
#pragma unroll
        for (int e = 0; e < E; e++) {
            st.acc[g][e] = 0;
            st.q[g][e] = g < G && act ? qt[((int64_t)kvh * G + g) * D + lane * E + e] * scale : 0.0f;
        }
    }
    const KT *kh = kc + (int64_t)kvh * n_ctx * D, *vh = vc + (int64_t)kvh * n_ctx * D;
    att_walk<D, GMAX, false, KT>(st, G, kh, vh, 0, kv_len, 1, lane);
    float *ot = out + t * n_head * D;
#pragma unroll
    for (int g = 0; g < GMAX; g++) {
        if (g >= G) break;
#pragma unroll
        for (int e = 0; e < E; e++)
            if (act) ot[((int64_t)kvh * G + g) * D + lane * E + e] = st.acc[g][e] / st.l[g];
    }
}

template <int D, int GMAX, typename KT>
static cudaError_t attn_prefill_launch(tlc_ctx *c, const float *q, int64_t qs, const void *kc, const void *vc, int n_head,
                                int n_kv_head, int64_t n_ctx, int64_t n_tok, const int32_t *d_pos,
                                float scale, float *out) {
    dim3 grid(tlc_div_up(n_tok, ATT_WARPS), n_kv_head);
    attn_prefill_k<D, GMAX, KT><<<grid, ATT_WARPS * 32, 0, c->stream>>>(
        q, qs, (const KT *)kc, (const KT *)vc, n_head, n_head / n_kv_head, n_ctx, n_tok, d_pos, scale, out);
    return cudaGetLastError();
}

#define ATT_DISPATCH(FN, ...)                                                                     \
    do {                                                                                          \
        bool f16 = kv_type == TL_TYPE_F16;                                                        \
        if (kv_type != TL_TYPE_F16 && kv_type != TL_TYPE_F32)                                     \
            return tl_err(TL_ERR_UNSUPPORTED, "cuda: attention over a %s KV cache", tl_type_name(kv_type)); \
        int G = n_kv_head > 0 ? n_head / n_kv_head : 0;                                           \
        if (G <= 0 || n_head % n_kv_head)                                                         \
            return tl_err(TL_ERR_INVALID, "cuda: attention: %d heads over %d KV heads", n_head, n_kv_head); \
        if (head_dim == 64 && G <= 4) {                                                           \
            e = f16 ? FN<64, 4, __half>(__VA_ARGS__) : FN<64, 4, float>(__VA_ARGS__);            \
        } else if (head_dim == 128 && G <= 4) {                                                   \
            e = f16 ? FN<128, 4, __half>(__VA_ARGS__) : FN<128, 4, float>(__VA_ARGS__);          \
        } else if (head_dim == 64 && G <= 8) {                                                    \
            e = f16 ? FN<64, 8, __half>(__VA_ARGS__) : FN<64, 8, float>(__VA_ARGS__);            \
        } else if (head_dim == 128 && G <= 8) {                                                   \
            e = f16 ? FN<128, 8, __half>(__VA_ARGS__) : FN<128, 8, float>(__VA_ARGS__);          \
        } else if (head_dim == 256 && G <= 4) {                                                   \
            e = f16 ? FN<256, 4, __half>(__VA_ARGS__) : FN<256, 4, float>(__VA_ARGS__);          \
        } else if (head_dim == 32 && G <= 8) {                                                    \
            e = f16 ? FN<32, 8, __half>(__VA_ARGS__) : FN<32, 8, float>(__VA_ARGS__);            \
        } else if (head_dim == 16 && G <= 8) {                                                    \
            e = f16 ? FN<16, 8, __half>(__VA_ARGS__) : FN<16, 8, float>(__VA_ARGS__);            \
        } else {                                                                                  \
            return tl_err(TL_ERR_UNSUPPORTED, "cuda: attention with head_dim %d and %d heads per KV head", \
                          head_dim, G);                                                           \
        }                                                                                         \
    } while (0)

static tl_status attn_decode(tlc_ctx *c, const float *q, const void *kc, const void *vc, tl_type kv_type, int n_head,
                             int n_kv_head, int head_dim, int64_t n_ctx, const int32_t *d_pos, float scale,
                             float *scratch, float *out, void *out_q, const att_pro_d &pro) {
    cudaError_t e = cudaSuccess;
    if (n_kv_head > TLC_ATT_MAX_KV)
        return tl_err(TL_ERR_UNSUPPORTED, "cuda: decode attention over %d KV heads (at most %d)", n_kv_head,
                      TLC_ATT_MAX_KV);
    ATT_DISPATCH(attn_decode_launch, c, q, kc, vc, n_head, n_kv_head, n_ctx, d_pos, scale, scratch, out, out_q, pro);
    TLC_TRY(e, "attention (decode)");
    if (out_q && ((n_head / n_kv_head) * head_dim) % 32)
        return tlc_act_prep_ss(c, out, NULL, (int64_t)n_head * head_dim, 1, NULL, out_q, NULL);
    return TL_OK;
}

tl_status tlc_attn_decode(tlc_ctx *c, const float *q, const void *kc, const void *vc, tl_type kv_type, int n_head,
                          int n_kv_head, int head_dim, int64_t n_ctx, const int32_t *d_pos, float scale,
                          float *scratch, float *out, void *out_q) {
    return attn_decode(c, q, kc, vc, kv_type, n_head, n_kv_head, head_dim, n_ctx, d_pos, scale, scratch, out, out_q,
                       att_pro_d{});
}

bool tlc_attn_pro_ok(const tlc_ctx *c, int head_dim, const tlc_rope_params *p) {
    /* the prologue rotates all of a head's dims */
    return p->n_rot == head_dim;
}

tl_status tlc_attn_decode_pro(tlc_ctx *c, float *qkv, void *kc, void *vc, tl_type kv_type, int n_head, int n_kv_head,
                              int head_dim, int64_t n_ctx, const int32_t *d_pos, float scale, float *scratch,
                              float *out, void *out_q, const tlc_rope_params *p, const float *bias,
                              const float *q_norm, const float *k_norm, float eps) {
    if (!tlc_attn_pro_ok(c, head_dim, p))
        return tl_err(TL_ERR_UNSUPPORTED, "cuda: attention with the decode prologue: needs n_rot == head_dim "
                      "(head_dim %d, n_rot %d)", head_dim, p->n_rot);
    if (!q_norm != !k_norm) return tl_err(TL_ERR_INVALID, "cuda: attention prologue needs both q/k norm weights");
    att_pro_d pro = {};
    pro.on = 1;
    pro.neox = p->neox ? 1 : 0;
    pro.nh = n_head;
    pro.nkv = n_kv_head;
    pro.bias = bias;
    pro.qn = q_norm;
    pro.kn = k_norm;
    pro.fdiv = p->freq_div;
    pro.eps = eps;
    pro.base = p->base;
    pro.pscale = p->scale > 0 ? p->scale : 1.0f;
    return attn_decode(c, qkv, kc, vc, kv_type, n_head, n_kv_head, head_dim, n_ctx, d_pos, scale, scratch, out, out_q,
                       pro);
}

tl_status tlc_attn_prefill(tlc_ctx *c, const float *q, int64_t q_stride, const void *kc, const void *vc,
                           tl_type kv_type, int n_head, int n_kv_head, int head_dim,
                           int64_t n_ctx, int64_t n_tok, const int32_t *d_pos, float scale,
                           float *out) {
    if (n_tok <= 0) return TL_OK;
    if (tlc_flash_prefill_supported(c, kv_type, head_dim))
        return tlc_flash_prefill(c, q, q_stride, kc, vc, n_head, n_kv_head, head_dim, n_ctx, n_tok, d_pos, scale, out);
    if (q_stride == 0) q_stride = (int64_t)n_head * head_dim;
    cudaError_t e = cudaSuccess;
    ATT_DISPATCH(attn_prefill_launch, c, q, q_stride, kc, vc, n_head, n_kv_head, n_ctx, n_tok, d_pos, scale, out);
    TLC_TRY(e, "attention (prefill)");
    return TL_OK;
}
