/* backend/cuda/cuda_attn: attention over the KV cache.
 *
 * One warp walks a range of cache positions for all G query heads that share
 * a KV head (GQA: K and V are read once for the G heads), keeping an online
 * softmax (running max m, running sum l, weighted V sum) per head in
 * registers; a lane holds D/32 consecutive dims, so a warp-wide K or V read
 * is one contiguous row.
 *  - decode: split-K "flash decoding" in one launch: grid (kv head, split);
 *    the warps of a block (8; TALLOW_CUDA_ATT_WARPS=4 for the older 4)
 *    interleave positions of the split, merge in
 *    shared memory and write (m, l, acc) partials; the last block of a KV
 *    head to finish (an atomic count) merges the splits and writes the
 *    output and its q8_1 (the Wo matvec's input). The split size (>= 16
 *    positions, <= 32 splits) is chosen on the device from the length at
 *    *d_pos, so a captured graph stays valid as the context grows; splits
 *    past the end exit at once.
 *  - prefill: one warp per (query token, kv head), causal range: the path
 *    for f32 caches and head sizes other than 64/128; f16 caches with those
 *    go to the tensor-core flash attention of cuda_flash.cu.
 * Calls: CUDA. */
#include "backend/cuda/cuda_common.cuh"

#define ATT_SPLITS 32
#define ATT_WARPS 4 /* prefill walk; decode: c->att_warps (8 or 4) */
#define ATT_MIN_CHUNK 16

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

template <int D, int GMAX, typename KT>
__device__ __forceinline__ void att_walk(att_state<D, GMAX> &st, int G, const KT *kh, const KT *vh,
                                         int64_t p0, int64_t p1, int64_t step, int lane) {
    constexpr int E = att_dims<D>::E;
    const bool act = lane * E < D;
    constexpr int P = 4; /* positions loaded before any is used: memory-level parallelism */
    for (int64_t p = p0; p < p1; p += P * step) {
        float k[P][E], v[P][E];
#pragma unroll
        for (int j = 0; j < P; j++) {
            int64_t pj = p + j * step;
            const KT *kr = kh + pj * D + lane * E, *vr = vh + pj * D + lane * E;
#pragma unroll
            for (int e = 0; e < E; e++) {
                k[j][e] = pj < p1 && act ? kv_f(kr[e]) : 0.0f;
                v[j][e] = pj < p1 && act ? kv_f(vr[e]) : 0.0f;
            }
        }
#pragma unroll
        for (int j = 0; j < P; j++) {
            if (p + j * step >= p1) break;
#pragma unroll
            for (int g = 0; g < GMAX; g++) {
                if (g >= G) break;
                float s = 0;
#pragma unroll
                for (int e = 0; e < E; e++) s += st.q[g][e] * k[j][e];
                for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
                float mn = fmaxf(st.m[g], s);
                float corr = __expf(st.m[g] - mn); /* exp(-inf) = 0 on the first position */
                float pw = __expf(s - mn);
                st.l[g] = st.l[g] * corr + pw;
#pragma unroll
                for (int e = 0; e < E; e++) st.acc[g][e] = st.acc[g][e] * corr + pw * v[j][e];
                st.m[g] = mn;
            }
        }
    }
}

template <int D, int GMAX, typename KT, int NW>
__global__ void __launch_bounds__(NW * 32)
attn_decode_k(const float *q, const KT *kc, const KT *vc, int G, int64_t n_ctx, const int32_t *d_pos,
              float scale, float *part, float *out, int8_t *out_q, int64_t n_total, int *cnt, int min_chunk) {
    constexpr int E = att_dims<D>::E;
    pdl_trigger();
    pdl_wait();
    const int kvh = blockIdx.x, split = blockIdx.y, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const bool act = lane * E < D;
    const int64_t kv_len = (int64_t)*d_pos + 1;
    int64_t chunk = (kv_len + ATT_SPLITS - 1) / ATT_SPLITS;
    if (chunk < min_chunk) chunk = min_chunk;
    const int n_split = (int)((kv_len + chunk - 1) / chunk); /* the same in every block */
    if (split >= n_split) return;
    const int64_t p0 = split * chunk;
    const int64_t p1 = min(kv_len, p0 + chunk);
    att_state<D, GMAX> st;
#pragma unroll
    for (int g = 0; g < GMAX; g++) {
        st.m[g] = -INFINITY;
        st.l[g] = 0;
#pragma unroll
        for (int e = 0; e < E; e++) {
            st.acc[g][e] = 0;
            st.q[g][e] = g < G && act ? q[((int64_t)kvh * G + g) * D + lane * E + e] * scale : 0.0f;
        }
    }
    const KT *kh = kc + (int64_t)kvh * n_ctx * D, *vh = vc + (int64_t)kvh * n_ctx * D;
    att_walk<D, GMAX, KT>(st, G, kh, vh, p0 + w, p1, NW, lane);
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
        if (n_split == 1) {
            /* short context: no partials, no count; the output straight away */
            out[(int64_t)kvh * G * D + i] = res[i] = a / l;
        } else {
            float *o = part + (((int64_t)kvh * G + g) * ATT_SPLITS + split) * stride;
            if (d == 0) { o[0] = mx; o[1] = l; }
            o[2 + d] = a;
        }
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
    for (int b = w; b < G * D / 32; b += NW) {
        float r = res[b * 32 + lane];
        float dq = fabsf(r);
        for (int o = 16; o > 0; o >>= 1) dq = fmaxf(dq, __shfl_xor_sync(0xffffffffu, dq, o));
        dq /= 127.0f;
        int qi = dq > 0.0f ? __float2int_rn(r / dq) : 0;
        int64_t i = (int64_t)kvh * G * D + b * 32 + lane;
        out_q[i] = (int8_t)qi;
        float sq = (float)qi;
        for (int o = 16; o > 0; o >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, o);
        if (lane == 0) ((float2 *)(out_q + n_total))[i / 32] = make_float2(dq, dq * sq);
    }
}

size_t tlc_attn_decode_scratch(int n_head, int head_dim) {
    return (size_t)n_head * ATT_SPLITS * (head_dim + 2);
}

template <int D, int GMAX, typename KT>
static cudaError_t attn_decode_launch(tlc_ctx *c, const float *q, const void *kc, const void *vc, int n_head,
                                      int n_kv_head, int64_t n_ctx, const int32_t *d_pos, float scale,
                                      float *scratch, float *out, void *out_q) {
    dim3 grid(n_kv_head, ATT_SPLITS);
    const int G = n_head / n_kv_head;
    /* a q8_1 block must not straddle KV-head groups; otherwise the caller quantizes */
    int8_t *oq = (G * D) % 32 == 0 ? (int8_t *)out_q : (int8_t *)NULL;
    /* the two block sizes are two instances of one kernel signature */
    const bool w8 = c->att_warps == 8;
    auto k = w8 ? attn_decode_k<D, GMAX, KT, 8> : attn_decode_k<D, GMAX, KT, ATT_WARPS>;
    return tlc_launch(c, k, grid, dim3((w8 ? 8 : ATT_WARPS) * 32), 0, q, (const KT *)kc, (const KT *)vc, G, n_ctx,
                      d_pos, scale, scratch, out, oq, (int64_t)n_head * D, c->mv_cnt + TLC_MV_GROUPS - TLC_ATT_MAX_KV,
                      c->att_chunk);
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
    att_walk<D, GMAX, KT>(st, G, kh, vh, 0, kv_len, 1, lane);
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
        if (head_dim == 64 && G <= 8) {                                                           \
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

tl_status tlc_attn_decode(tlc_ctx *c, const float *q, const void *kc, const void *vc,
                          tl_type kv_type, int n_head, int n_kv_head, int head_dim, int64_t n_ctx,
                          const int32_t *d_pos, float scale, float *scratch, float *out, void *out_q) {
    cudaError_t e = cudaSuccess;
    if (n_kv_head > TLC_ATT_MAX_KV)
        return tl_err(TL_ERR_UNSUPPORTED, "cuda: decode attention over %d KV heads (at most %d)", n_kv_head,
                      TLC_ATT_MAX_KV);
    ATT_DISPATCH(attn_decode_launch, c, q, kc, vc, n_head, n_kv_head, n_ctx, d_pos, scale, scratch, out, out_q);
    TLC_TRY(e, "attention (decode)");
    if (out_q && ((n_head / n_kv_head) * head_dim) % 32)
        return tlc_act_prep_ss(c, out, NULL, (int64_t)n_head * head_dim, 1, NULL, out_q, NULL);
    return TL_OK;
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
