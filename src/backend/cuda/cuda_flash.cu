/* backend/cuda/cuda_flash: prompt attention on the tensor cores (flash
 * attention, causal, over the f16 KV cache).
 *
 * A block of 4 warps owns 64 query tokens of one query head; each warp 16 of
 * them. K and V tiles of 64 positions of that head's KV head stream through
 * shared memory (cp.async, two stages: the next tile loads while this one is
 * used). Per tile a warp computes S = Q K^T (16 x 64) with mma.sync
 * m16n8k16 (f16 operands, f32 accumulation), keeps the online softmax in the
 * log2 domain (the scale times log2(e) is folded into Q), and adds P V with
 * P rounded to f16 in registers: the S accumulator fragment of two adjacent
 * 8-column tiles is exactly the A fragment of one k16 step, so P never goes
 * through shared memory. K fragments come from ldmatrix, V fragments from
 * ldmatrix.trans (V is stored [position][dim], the B operand needs
 * [dim][position] pairs). Rows are padded by 16 bytes so the 8 row addresses
 * of an ldmatrix hit 8 different bank groups.
 * Precision: Q and P are rounded to f16 (K and V are f16 in the cache), so
 * the result is within ~1e-3 relative of the f32 walk of cuda_attn.cu, which
 * stays the path for f32 caches and other head sizes.
 * The CUDA-core walk (one warp per token and KV head, every position in
 * turn) took 21.7 ms per 512-token batch of Llama-3-8B Q4_0 on an H200
 * (pp512 12,107 t/s); this kernel takes 0.94 ms (23,799 t/s in the same
 * call; docs/PERFORMANCE.md).
 * Calls: CUDA (sm_80+ instructions: mma.sync, ldmatrix, cp.async). */
#include "backend/cuda/cuda_common.cuh"

#include <math.h>

#include "backend/cuda/cuda_mma.cuh"

#define FA_BQ 64 /* query tokens per block (4 warps x 16) */
#define FA_BK 64 /* KV positions per tile */
#define FA_WARPS 4

template <int D> struct fa_cfg {
    static constexpr int LD = D + 8;                      /* padded row, in halves */
    static constexpr int TILE = FA_BK * LD;               /* halves per K (or V) tile */
    static constexpr size_t SMEM = (size_t)4 * TILE * 2;  /* K, V x 2 stages, bytes */
};

/* q: [n_tok] rows q_stride floats apart, head h at h*D; kc/vc: [n_kv][n_ctx][D]
 * f16; out: [n_tok][n_head*D] f32. Query token t sits at position pos0 + t
 * and sees positions [0, pos0 + t]. */
template <int D>
__global__ void __launch_bounds__(FA_WARPS * 32)
flash_prefill_k(const float *q, int64_t q_stride, const __half *kc, const __half *vc, int n_head, int G,
                int64_t n_ctx, int64_t n_tok, const int32_t *d_pos, float scale_log2, float *out,
                const int32_t *table, int shift) {
    typedef fa_cfg<D> C;
    extern __shared__ __align__(16) unsigned char fa_smem[];
    __half *sk = (__half *)fa_smem; /* [2][BK][LD] */
    __half *sv = sk + 2 * C::TILE;  /* [2][BK][LD] */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    /* the longest (last) query tiles first: they have the most KV tiles */
    const int64_t qt = (int64_t)gridDim.x - 1 - blockIdx.x;
    const int h = blockIdx.y, kvh = h / G;
    const int64_t pos0 = *d_pos;
    const int64_t t0 = qt * FA_BQ;
    const int64_t t_last = min(n_tok, t0 + FA_BQ) - 1;
    const int64_t kv_end = pos0 + t_last + 1; /* positions [0, kv_end) are needed by some row */
    const int n_tiles = (int)((kv_end + FA_BK - 1) / FA_BK);
    const __half *kh = kc + (int64_t)kvh * n_ctx * D, *vh = vc + (int64_t)kvh * n_ctx * D;
    const uint32_t sk0 = (uint32_t)__cvta_generic_to_shared(sk), sv0 = (uint32_t)__cvta_generic_to_shared(sv);

    /* one tile of K and V: BK rows x D halves = BK*D/8 chunks of 16 bytes */
    auto load_tile = [&](int j, int stage) {
        const int64_t p0 = (int64_t)j * FA_BK;
        constexpr int CH = D / 8; /* chunks per row */
        for (int i = threadIdx.x; i < FA_BK * CH; i += FA_WARPS * 32) {
            const int r = i / CH, cc = i % CH;
            const int64_t p = p0 + r;
            const bool ok = p < kv_end;
            const int64_t pc = ok ? p : 0;
            /* through the page table when the sequence's blocks are not in order */
            const int64_t ps = table ? ((int64_t)table[pc >> shift] << shift) | (pc & (((int64_t)1 << shift) - 1)) : pc;
            const uint32_t off = (uint32_t)((stage * C::TILE + r * C::LD + cc * 8) * 2);
            /* positions past the last valid one are zero-filled: they may
             * hold anything, and 0 * NaN would poison P V */
            cp_async16(sk0 + off, kh + ps * D + cc * 8, ok ? 16 : 0);
            cp_async16(sv0 + off, vh + ps * D + cc * 8, ok ? 16 : 0);
        }
        cp_async_commit();
    };
    load_tile(0, 0);

    /* Q fragments (A operand, row-major 16 x D per warp), scaled, in f16 */
    const int r_lo = lane >> 2, cq = 2 * (lane & 3);
    const int64_t tq0 = t0 + warp * 16 + r_lo, tq1 = tq0 + 8; /* this thread's two rows */
    uint32_t qa[D / 16][4];
    {
        const float *q0 = q + tq0 * q_stride + (int64_t)h * D, *q1 = q + tq1 * q_stride + (int64_t)h * D;
        const bool v0 = tq0 < n_tok, v1 = tq1 < n_tok;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            const int c = kk * 16 + cq;
            float2 a = v0 ? *(const float2 *)(q0 + c) : make_float2(0.f, 0.f);
            float2 b = v1 ? *(const float2 *)(q1 + c) : make_float2(0.f, 0.f);
            float2 a8 = v0 ? *(const float2 *)(q0 + c + 8) : make_float2(0.f, 0.f);
            float2 b8 = v1 ? *(const float2 *)(q1 + c + 8) : make_float2(0.f, 0.f);
            qa[kk][0] = fa_pack(a.x * scale_log2, a.y * scale_log2);
            qa[kk][1] = fa_pack(b.x * scale_log2, b.y * scale_log2);
            qa[kk][2] = fa_pack(a8.x * scale_log2, a8.y * scale_log2);
            qa[kk][3] = fa_pack(b8.x * scale_log2, b8.y * scale_log2);
        }
    }
    const int64_t qp0 = pos0 + tq0, qp1 = pos0 + tq1; /* the rows' positions: last key each may see */

    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

    /* ldmatrix row addresses: K (non-trans, x4 = 4 k8 slices of one n8 tile):
     * thread t -> row (t & 7), column 8 * (t >> 3); V (trans, x4 = k16 x two
     * n8 tiles): thread t -> row (t & 15), column 8 * (t >> 4) */
    const uint32_t k_off = (uint32_t)(((lane & 7) * C::LD + 8 * (lane >> 3)) * 2);
    const uint32_t v_off = (uint32_t)(((lane & 15) * C::LD + 8 * (lane >> 4)) * 2);

    for (int j = 0; j < n_tiles; j++) {
        const int stage = j & 1;
        cp_async_wait<0>();
        __syncthreads(); /* tile j visible to all; every warp is done with tile j-1 */
        if (j + 1 < n_tiles) load_tile(j + 1, stage ^ 1);
        const uint32_t skt = sk0 + (uint32_t)(stage * C::TILE * 2), svt = sv0 + (uint32_t)(stage * C::TILE * 2);
        const int64_t p0 = (int64_t)j * FA_BK;
        /* tiles wholly after this warp's last row: skipped (warp-uniform, as
         * ldmatrix and mma must be) */
        if (p0 > pos0 + t0 + warp * 16 + 15) continue;

        /* S = Q K^T: 8 n-tiles of 8 positions */
        float s[FA_BK / 8][4];
#pragma unroll
        for (int nt = 0; nt < FA_BK / 8; nt++) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < D / 16; kk += 2) {
                uint32_t b[4];
                fa_ldm4(b, skt + k_off + (uint32_t)((nt * 8 * C::LD + kk * 16) * 2));
                fa_mma(s[nt], qa[kk], b[0], b[1]);
                fa_mma(s[nt], qa[kk + 1], b[2], b[3]);
            }
        }
        /* causal mask where the tile reaches past a row's position */
        if (p0 + FA_BK - 1 > qp0) {
#pragma unroll
            for (int nt = 0; nt < FA_BK / 8; nt++) {
                const int64_t p = p0 + nt * 8 + cq;
                if (p > qp0) s[nt][0] = -INFINITY;
                if (p + 1 > qp0) s[nt][1] = -INFINITY;
                if (p > qp1) s[nt][2] = -INFINITY;
                if (p + 1 > qp1) s[nt][3] = -INFINITY;
            }
        }
        /* online softmax per row (a row's 64 values sit in the 4 lanes of a quad) */
        float mx0 = m0, mx1 = m1;
#pragma unroll
        for (int nt = 0; nt < FA_BK / 8; nt++) {
            mx0 = fmaxf(mx0, fmaxf(s[nt][0], s[nt][1]));
            mx1 = fmaxf(mx1, fmaxf(s[nt][2], s[nt][3]));
        }
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        /* a row with no visible key yet (only rows past n_tok... never: key 0
         * is visible to every row) would keep -inf: guard the subtraction */
        const float b0 = mx0 == -INFINITY ? 0.0f : mx0, b1 = mx1 == -INFINITY ? 0.0f : mx1;
        const float c0 = exp2f(m0 - b0), c1 = exp2f(m1 - b1); /* exp2(-inf) = 0 on the first tile */
        m0 = mx0;
        m1 = mx1;
        uint32_t pa[FA_BK / 16][4];
        float ls0 = 0.0f, ls1 = 0.0f;
#pragma unroll
        for (int nt = 0; nt < FA_BK / 8; nt++) {
            const float e0 = exp2f(s[nt][0] - b0), e1 = exp2f(s[nt][1] - b0);
            const float e2 = exp2f(s[nt][2] - b1), e3 = exp2f(s[nt][3] - b1);
            ls0 += e0 + e1;
            ls1 += e2 + e3;
            /* C fragment of n-tiles 2k, 2k+1 = A fragment of k-step k */
            pa[nt / 2][(nt & 1) * 2 + 0] = fa_pack(e0, e1);
            pa[nt / 2][(nt & 1) * 2 + 1] = fa_pack(e2, e3);
        }
        l0 = l0 * c0 + ls0;
        l1 = l1 * c1 + ls1;
#pragma unroll
        for (int i = 0; i < D / 8; i++) {
            o[i][0] *= c0;
            o[i][1] *= c0;
            o[i][2] *= c1;
            o[i][3] *= c1;
        }
        /* O += P V: k-steps of 16 positions, two 8-dim n-tiles per ldmatrix */
#pragma unroll
        for (int ks = 0; ks < FA_BK / 16; ks++) {
#pragma unroll
            for (int nd = 0; nd < D / 8; nd += 2) {
                uint32_t b[4];
                fa_ldm4t(b, svt + v_off + (uint32_t)((ks * 16 * C::LD + nd * 8) * 2));
                fa_mma(o[nd], pa[ks], b[0], b[1]);
                fa_mma(o[nd + 1], pa[ks], b[2], b[3]);
            }
        }
    }
    /* the row sums: each lane of a quad holds a quarter */
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float i0 = 1.0f / l0, i1 = 1.0f / l1;
    const int64_t ostride = (int64_t)n_head * D;
#pragma unroll
    for (int nd = 0; nd < D / 8; nd++) {
        const int c = nd * 8 + cq;
        if (tq0 < n_tok) *(float2 *)(out + tq0 * ostride + (int64_t)h * D + c) = make_float2(o[nd][0] * i0, o[nd][1] * i0);
        if (tq1 < n_tok) *(float2 *)(out + tq1 * ostride + (int64_t)h * D + c) = make_float2(o[nd][2] * i1, o[nd][3] * i1);
    }
}

template <int D>
static cudaError_t fa_launch(tlc_ctx *c, const float *q, int64_t q_stride, const __half *kc, const __half *vc,
                             int n_head, int G, int64_t n_ctx, int64_t n_tok, const int32_t *d_pos, float scale,
                             float *out, const int32_t *table, int shift) {
    /* more than 48 KB of dynamic shared memory must be allowed per kernel;
     * setting it each call is a cheap host-side attribute write */
    cudaError_t e = cudaFuncSetAttribute(flash_prefill_k<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)fa_cfg<D>::SMEM);
    if (e != cudaSuccess) return e;
    dim3 grid(tlc_div_up(n_tok, FA_BQ), n_head);
    flash_prefill_k<D><<<grid, FA_WARPS * 32, fa_cfg<D>::SMEM, c->stream>>>(
        q, q_stride, kc, vc, n_head, G, n_ctx, n_tok, d_pos, scale * 1.4426950408889634f, out, table, shift);
    return cudaGetLastError();
}

bool tlc_flash_prefill_supported(const tlc_ctx *c, tl_type kv_type, int head_dim) {
    return c->flash && kv_type == TL_TYPE_F16 && (head_dim == 64 || head_dim == 128);
}

tl_status tlc_flash_prefill(tlc_ctx *c, const float *q, int64_t q_stride, const void *kc, const void *vc,
                            int n_head, int n_kv_head, int head_dim, int64_t n_ctx, int64_t n_tok,
                            const int32_t *d_pos, float scale, float *out) {
    return tlc_flash_prefill_paged(c, q, q_stride, kc, vc, n_head, n_kv_head, head_dim, n_ctx, n_tok, d_pos, scale,
                                   out, NULL, 0);
}

tl_status tlc_flash_prefill_paged(tlc_ctx *c, const float *q, int64_t q_stride, const void *kc, const void *vc,
                                  int n_head, int n_kv_head, int head_dim, int64_t n_ctx, int64_t n_tok,
                                  const int32_t *d_pos, float scale, float *out, const int32_t *d_table,
                                  int block_shift) {
    if (n_tok <= 0) return TL_OK;
    if (n_kv_head <= 0 || n_head % n_kv_head)
        return tl_err(TL_ERR_INVALID, "cuda: flash attention: %d heads over %d KV heads", n_head, n_kv_head);
    if (q_stride == 0) q_stride = (int64_t)n_head * head_dim;
    const int G = n_head / n_kv_head;
    cudaError_t e;
    if (head_dim == 128)
        e = fa_launch<128>(c, q, q_stride, (const __half *)kc, (const __half *)vc, n_head, G, n_ctx, n_tok, d_pos,
                           scale, out, d_table, block_shift);
    else if (head_dim == 64)
        e = fa_launch<64>(c, q, q_stride, (const __half *)kc, (const __half *)vc, n_head, G, n_ctx, n_tok, d_pos,
                          scale, out, d_table, block_shift);
    else
        return tl_err(TL_ERR_UNSUPPORTED, "cuda: flash attention with head_dim %d", head_dim);
    TLC_TRY(e, "flash attention (prefill)");
    return TL_OK;
}
