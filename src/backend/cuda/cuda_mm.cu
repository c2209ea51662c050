/* backend/cuda/cuda_mm: y = W x for a few tokens (2..64: a batched decode
 * step, a short prompt chunk) on the tensor cores, reading each quantized
 * weight once for all of them.
 *
 * A block of 4 or 8 warps owns 16 weight rows per warp; per 64-wide slice of the input it
 * dequantizes its rows' slice to f16 in shared memory (deq8, the values the
 * prefill GEMM's dequantization makes), stages the tokens' f16 activations
 * beside it, and each warp runs mma.sync m16n8k16 over its 16 rows and all
 * the 8-token tiles (NT of them), accumulating in f32 registers. Where the
 * matrix has too few 64-row tiles to fill the card, the input is split over
 * blockIdx.y and the slices' sums are added by a second launch in a fixed
 * order (no atomics: the same inputs give the same bits).
 * Calls: CUDA. */
#include "backend/cuda/cuda_deq.cuh"
#include "backend/cuda/cuda_mma.cuh"

#define MM_BK 64
#define MM_LD (MM_BK + 8) /* padded shared row (halves): ldmatrix rows fall in distinct banks */

__global__ void mm_to_f16_k(const float *x, __half *y, int64_t n) {
    pdl_trigger();
    pdl_wait();
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half(x[i]);
}

/* out (split s: out + s * m * ldo) rows = tokens, columns = weight rows:
 * out[t][r] (= or += per acc) sum over this split's inputs of W[r][k] x[t][k].
 * W warps own 16 rows each; every thread stages 4 groups of 8 weights per
 * slice, and the next slice's bytes are loaded into registers before the
 * current one's products run, so the loads overlap the math. */
template <int T, int NT, int W>
__global__ void __launch_bounds__(W * 32) mm_k(const tlc_weight w, const __half *x, int64_t m, float *out, int64_t ldo,
                                               int64_t k_split, int acc) {
    constexpr int BM = 16 * W, NTH = 32 * W, NB = NT * 8 * (MM_BK / 8);
    constexpr int BI = (NB + NTH - 1) / NTH; /* activation chunks per thread */
    __shared__ __align__(16) __half sa[BM * MM_LD];
    __shared__ __align__(16) __half sb[NT * 8 * MM_LD];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t row0 = (int64_t)blockIdx.x * BM;
    const int64_t k0 = (int64_t)blockIdx.y * k_split, k1 = min(k0 + k_split, w.n_in);
    /* this thread's 4 groups: rows r_i, group column g_i of the slice */
    int gr[4], gc[4];
#pragma unroll
    for (int it = 0; it < 4; it++) {
        const int i = threadIdx.x + it * NTH;
        gr[it] = i / (MM_BK / 8), gc[it] = i % (MM_BK / 8);
    }
    deq_raw<T> ra[4];
    uint4 rb[BI];
    auto load = [&](int64_t kb) {
#pragma unroll
        for (int it = 0; it < 4; it++) {
            const int64_t row = row0 + gr[it];
            ra[it].load(w, row < w.n_out ? row : w.n_out - 1, kb / 8 + gc[it]);
        }
#pragma unroll
        for (int it = 0; it < BI; it++) {
            const int i = threadIdx.x + it * NTH, t = i / (MM_BK / 8), g = i % (MM_BK / 8);
            rb[it] = i < NB && t < m ? *(const uint4 *)(x + t * w.n_in + kb + g * 8) : make_uint4(0, 0, 0, 0);
        }
    };
    float c[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.0f;
    const uint32_t sa0 = (uint32_t)__cvta_generic_to_shared(sa), sb0 = (uint32_t)__cvta_generic_to_shared(sb);
    pdl_trigger();
    pdl_wait();
    if (k0 < k1) load(k0);
    for (int64_t kb = k0; kb < k1; kb += MM_BK) {
#pragma unroll
        for (int it = 0; it < 4; it++) {
            float v[8];
            ra[it].cvt(v);
            uint4 pk;
            pk.x = fa_pack(v[0], v[1]), pk.y = fa_pack(v[2], v[3]);
            pk.z = fa_pack(v[4], v[5]), pk.w = fa_pack(v[6], v[7]);
            *(uint4 *)(sa + gr[it] * MM_LD + gc[it] * 8) = pk; /* rows past n_out: never stored out */
        }
#pragma unroll
        for (int it = 0; it < BI; it++) {
            const int i = threadIdx.x + it * NTH;
            if (i < NB) *(uint4 *)(sb + (i / (MM_BK / 8)) * MM_LD + (i % (MM_BK / 8)) * 8) = rb[it];
        }
        __syncthreads();
        if (kb + MM_BK < k1) load(kb + MM_BK);
#pragma unroll
        for (int ks = 0; ks < MM_BK / 16; ks++) {
            uint32_t a[4];
            fa_ldm4(a, sa0 + (uint32_t)(((warp * 16 + (lane & 15)) * MM_LD + ks * 16 + (lane >> 4) * 8) * 2));
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                uint32_t b[2];
                fa_ldm2(b, sb0 + (uint32_t)(((nt * 8 + (lane & 7)) * MM_LD + ks * 16 + ((lane >> 3) & 1) * 8) * 2));
                fa_mma(c[nt], a, b[0], b[1]);
            }
        }
        __syncthreads();
    }
    /* c[nt][0..1]: row lane/4, tokens 2 (lane%4) + {0, 1}; [2..3]: row lane/4 + 8 */
    float *o = out + (int64_t)blockIdx.y * m * ldo;
    const int64_t r = row0 + warp * 16 + (lane >> 2);
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t t = nt * 8 + 2 * (lane & 3) + (j & 1), rr = r + (j >> 1) * 8;
            if (t >= m || rr >= w.n_out) continue;
            float *p = o + t * ldo + rr;
            *p = acc ? *p + c[nt][j] : c[nt][j];
        }
}

/* y[t][r] (= or +=) sum over the splits of part[s][t][r] */
__global__ void mm_reduce_k(const float *part, int64_t m, int64_t n, int ks, float *y, int64_t ldy, int acc) {
    pdl_trigger();
    pdl_wait();
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= m * n) return;
    const int64_t t = i / n, r = i % n;
    float s = 0.0f;
    for (int k = 0; k < ks; k++) s += part[(int64_t)k * m * n + i];
    float *p = y + t * ldy + r;
    *p = acc ? *p + s : s;
}

bool tlc_mm_small_ok(const tlc_weight *w, int64_t m) {
    if (m < 2 || m > TLC_MM_SMALL_MAX || w->n_in % MM_BK) return false;
    switch (w->type) {
    case TL_TYPE_Q4_0: case TL_TYPE_Q4_1: case TL_TYPE_Q8_0: case TL_TYPE_Q4_K: case TL_TYPE_Q6_K: return true;
    default: return false;
    }
}

/* rows per block: 128 (8 warps) where the tokens fill the products, else 64 */
static int64_t mm_rows(int64_t m) { return m > 16 ? 128 : 64; }

/* splits of the input: enough blocks for 8 per SM, while the partial sums
 * (split x m x n_out floats, written and read once) stay under a quarter of
 * the weight bytes (about n_in / 2 per row) */
static int64_t mm_splits(int64_t m, int64_t n_in, int64_t n_out, int n_sm) {
    const int64_t tiles = (n_out + mm_rows(m) - 1) / mm_rows(m);
    int64_t ks = (8 * (int64_t)n_sm + tiles - 1) / tiles;
    const int64_t by_traffic = n_in / (64 * m);
    if (ks > by_traffic) ks = by_traffic;
    if (ks > n_in / MM_BK) ks = n_in / MM_BK;
    return ks < 1 ? 1 : ks;
}

size_t tlc_mm_small_scratch(int64_t m, int64_t n_in, int64_t n_out, int n_sm) {
    /* the f16 activations, then the splits' partial sums: ks <= n_in / (64 m),
     * so ks m n_out floats <= n_in n_out / 64 */
    (void)n_sm;
    return (size_t)m * (size_t)n_in * 2 + 256 + (size_t)n_in * (size_t)n_out / 64 * 4 + (size_t)m * (size_t)n_out * 4;
}

template <int T, int NT, int W>
static cudaError_t mm_launch(tlc_ctx *c, const tlc_weight *w, const __half *x, int64_t m, float *out, int64_t ldo,
                             int64_t k_split, int ks, int acc) {
    const dim3 grid(tlc_div_up(w->n_out, 16 * W), (unsigned)ks);
    return tlc_launch(c, mm_k<T, NT, W>, grid, dim3(32 * W), 0, *w, x, m, out, ldo, k_split, acc);
}

template <int T>
static cudaError_t mm_launch_nt(tlc_ctx *c, const tlc_weight *w, const __half *x, int64_t m, float *out, int64_t ldo,
                                int64_t k_split, int ks, int acc) {
    if (m <= 8) return mm_launch<T, 1, 4>(c, w, x, m, out, ldo, k_split, ks, acc);
    if (m <= 16) return mm_launch<T, 2, 4>(c, w, x, m, out, ldo, k_split, ks, acc);
    if (m <= 32) return mm_launch<T, 4, 8>(c, w, x, m, out, ldo, k_split, ks, acc);
    return mm_launch<T, 8, 8>(c, w, x, m, out, ldo, k_split, ks, acc);
}

tl_status tlc_mm_small(tlc_ctx *c, const tlc_weight *w, const float *x, int64_t m, float *y, int64_t ldy, int mode,
                       void *scratch) {
    if (!tlc_mm_small_ok(w, m))
        return tl_err(TL_ERR_UNSUPPORTED, "cuda: small-batch matmul of %lld tokens on %s rows of %lld", (long long)m,
                      tl_type_name(w->type), (long long)w->n_in);
    int64_t ks = mm_splits(m, w->n_in, w->n_out, c->n_sm);
    const int64_t k_split = (w->n_in / MM_BK + ks - 1) / ks * MM_BK;
    ks = (w->n_in + k_split - 1) / k_split;
    __half *x16 = (__half *)scratch;
    float *part = (float *)((uint8_t *)scratch + (((size_t)m * (size_t)w->n_in * 2 + 255) & ~(size_t)255));
    TLC_TRY(tlc_launch(c, mm_to_f16_k, dim3(tlc_div_up(m * w->n_in, 256)), dim3(256), 0, x, x16, m * w->n_in),
            "small matmul: activations to f16");
    const int acc = (mode & TLC_MV_ACCUM) ? 1 : 0;
    float *out = ks > 1 ? part : y;
    const int64_t ldo = ks > 1 ? w->n_out : ldy;
    const int acc1 = ks > 1 ? 0 : acc;
    cudaError_t e;
    switch (w->type) {
    case TL_TYPE_Q4_0: e = mm_launch_nt<TL_TYPE_Q4_0>(c, w, x16, m, out, ldo, k_split, (int)ks, acc1); break;
    case TL_TYPE_Q4_1: e = mm_launch_nt<TL_TYPE_Q4_1>(c, w, x16, m, out, ldo, k_split, (int)ks, acc1); break;
    case TL_TYPE_Q8_0: e = mm_launch_nt<TL_TYPE_Q8_0>(c, w, x16, m, out, ldo, k_split, (int)ks, acc1); break;
    case TL_TYPE_Q4_K: e = mm_launch_nt<TL_TYPE_Q4_K>(c, w, x16, m, out, ldo, k_split, (int)ks, acc1); break;
    default: e = mm_launch_nt<TL_TYPE_Q6_K>(c, w, x16, m, out, ldo, k_split, (int)ks, acc1); break;
    }
    TLC_TRY(e, "small matmul");
    if (ks > 1)
        TLC_TRY(tlc_launch(c, mm_reduce_k, dim3(tlc_div_up(m * w->n_out, 256)), dim3(256), 0, (const float *)part, m,
                           w->n_out, (int)ks, y, ldy, acc),
                "small matmul: split sums");
    return TL_OK;
}
